// The aiocoord dashboard: renders the documents the server pushes over server-sent events.
//
// Every name and datum comes from ZooKeeper nodes and is untrusted: it only ever reaches the
// page as text (text nodes, textContent, attribute values), never as markup.
"use strict";

(() => {
  const VIEWS = [
    ["all", "All"],
    ["latch", "Latches"],
    ["lock", "Locks"],
    ["tasks", "Tasks"],
    ["cron", "Cron"],
    ["scheduler", "Scheduler"],
    ["other", "Other"],
    ["tree", "Tree"],
  ];
  const GROUP = {
    leader_latch: "latch",
    cas_lock: "lock",
    mutex: "lock",
    task_leadership: "tasks",
    cron: "cron",
    scheduler: "scheduler",
  };
  const LABEL = {
    leader_latch: "leader latch",
    cas_lock: "lock",
    mutex: "mutex",
    task_leadership: "task leadership",
    cron: "cron",
    scheduler: "scheduler",
  };
  const BANNER = {
    CONNECTING: "Connecting to ZooKeeper…",
    SUSPENDED:
      "SUSPENDED: the connection to ZooKeeper is lost; the session may still be alive. " +
      "What is shown may be out of date.",
    LOST:
      "LOST: the ZooKeeper session is gone (expired, or suspended past its timeout). " +
      "What is shown is out of date until a new session is established.",
    READ_ONLY: "READ-ONLY: connected to a read-only server, which may lag behind the ensemble.",
    OFFLINE: "The dashboard server is unreachable: reconnecting… What is shown may be out of date.",
  };
  const LIVE = new Set(["CONNECTED", "RECONNECTED"]);

  let doc = null; // the latest document
  let offset = 0; // server clock minus ours, seconds
  let online = false; // the event stream is open
  let previous = new Map(); // value shown per key at the last render, to mark what changed
  let current = new Map();

  // --- building elements: text only ---------------------------------------------------------

  function el(tag, cls, ...children) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  // A value that is marked while it is new: `key` names it across renders.
  function val(key, text, cls) {
    const shown = text === null || text === undefined ? "–" : String(text);
    const span = el("span", cls || "value");
    span.textContent = shown;
    span.dataset.key = key;
    if (previous.has(key) && previous.get(key) !== shown) span.classList.add("changed");
    current.set(key, shown);
    return span;
  }

  function hex(n) {
    return typeof n === "number" ? "0x" + n.toString(16) : "–";
  }

  function when(iso) {
    return iso ? String(iso).replace("T", " ").replace("+00:00", " UTC") : "–";
  }

  function clock(seconds) {
    return new Date(seconds * 1000).toLocaleTimeString();
  }

  function table(headings, rows) {
    const head = el("tr", null, ...headings.map((h) => el("th", null, h)));
    const body = rows.map((cells) => {
      const row = el("tr", null, ...cells.map((c) => el("td", null, c)));
      if (cells.leader) row.classList.add("leader");
      return row;
    });
    // Wide tables (long names) scroll inside their card rather than squeezing every column.
    return el("div", "scroll", el("table", null, el("thead", null, head), el("tbody", null, ...body)));
  }

  // A long node name, shortened to its end (the sequence number); whole on hover.
  function nodeName(name) {
    const text = String(name);
    const shown = el("code", null, text.length > 14 ? "…" + text.slice(-10) : text);
    shown.title = text;
    return shown;
  }

  function line(label, ...content) {
    return el("p", "line", el("span", "label", label), " ", ...content);
  }

  // --- one card per recipe ------------------------------------------------------------------

  function card(info) {
    const kind = String(info.kind);
    const group = GROUP[kind] || "other";
    const box = el(
      "section",
      "card",
      el("h2", null, el("span", "kind", LABEL[kind] || kind.replace(/_/g, " ")), " ", el("code", "path", info.path)),
    );
    box.dataset.path = info.path;
    box.dataset.kind = kind;
    box.dataset.group = group;
    const k = info.path + "|";
    if (info.error !== undefined) {
      box.append(line("unreadable", val(k + "error", info.error, "value bad")));
      return box;
    }
    const render = { leader_latch: latch, cas_lock: lock, mutex, task_leadership: tasks, cron, scheduler }[kind] || other;
    render(box, info, k);
    return box;
  }

  function latch(box, info, k) {
    const parts = info.participants || [];
    box.append(
      line("leader", val(k + "leader", info.leader === null ? "nobody" : info.leader, "value strong"),
        " ", el("span", "label", "token"), " ", val(k + "token", parts.length ? hex(parts[0].token) : null)),
      line("layout", info.layout, " · ", String(parts.length), " participant(s)"),
    );
    const rows = parts.map((p, i) => {
      const row = [i === 0 ? "leader" : "#" + i, val(k + "p" + i, p.id), hex(p.token), p.session, nodeName(p.node)];
      row.leader = i === 0;
      return row;
    });
    if (rows.length) box.append(table(["order", "participant", "token", "session", "node"], rows));
  }

  function lock(box, info, k) {
    let state;
    if (info.held) state = "held by " + info.owner;
    else if (info.owner !== null && info.owner !== undefined) state = "free (last held by " + info.owner + ")";
    else state = "free, never held";
    box.append(line("state", val(k + "state", state, info.held ? "value strong" : "value")));
    box.append(line("token", val(k + "token", hex(info.token))));
    if (info.held && info.lease_expires) {
      const left = el("span", "value lease");
      left.dataset.expires = String(Date.parse(info.lease_expires) / 1000);
      tickLease(left);
      box.append(line("lease", left, " ", el("span", "muted", "(expires " + when(info.lease_expires) + ")")));
    }
    if (info.last_run) {
      const r = info.last_run;
      box.append(line("last run", "window " + when(r.window) + ", ended " + when(r.at) + " by " + r.owner));
    }
    if (info.last_failure) {
      const f = info.last_failure;
      box.append(line("last failure", el("span", "bad", when(f.at) + " by " + f.owner + ": " + f.error)));
    }
  }

  function mutex(box, info, k) {
    const queue = info.contenders || [];
    const holder = queue.length ? (queue[0].error !== undefined ? "(invalid id)" : queue[0].id) : "nobody (free)";
    box.append(
      line("holder", val(k + "holder", holder, queue.length ? "value strong" : "value"),
        " ", el("span", "label", "token"), " ", val(k + "token", hex(info.token))),
      line("", String(Math.max(0, queue.length - 1)) + " waiting"),
    );
    const rows = queue.map((c, i) => {
      let who = val(k + "c" + i, c.id);
      if (c.error !== undefined) {
        who = el("span", "bad", "invalid id");
        who.title = c.error; // the reason on hover: the queue's columns stay in view
      }
      const row = [i === 0 ? "holder" : "#" + i, who, hex(c.token), c.session, nodeName(c.node)];
      row.leader = i === 0;
      return row;
    });
    if (rows.length) box.append(table(["order", "participant", "token", "session", "node"], rows));
  }

  // A long reason, shortened so that the table's other columns stay in view; whole on hover.
  function reason(prefix, text) {
    const whole = prefix + text;
    const span = el("span", "bad", whole.length > 60 ? whole.slice(0, 59) + "…" : whole);
    span.title = whole;
    return span;
  }

  function cron(box, info, k) {
    const jobs = info.jobs || {};
    box.append(line("", String(info.workers.length) + " worker(s), " + Object.keys(jobs).length + " job(s)"));
    const workers = info.workers.map((w) =>
      w.error !== undefined ? [w.id, reason("invalid record: ", w.error), "", ""] : [w.id, w.version, w.host, String(w.pid)],
    );
    if (workers.length) box.append(table(["worker", "version", "host", "pid"], workers));
    const names = Object.keys(jobs);
    const rows = names.filter((name) => jobs[name].error === undefined).map((name) => {
      const job = jobs[name];
      const lead = job.leader;
      let leader = "nobody";
      if (lead && lead.error !== undefined) leader = reason("invalid leader record: ", lead.error);
      else if (lead) leader = val(k + "job|" + name, lead.worker + " (" + lead.version + ")", "value strong");
      let last = "–";
      if (job.running) last = val(k + "last|" + name, "running since " + when(job.running.started));
      else if (job.last) {
        const l = job.last;
        const text = l.status === "missed" ? "missed ×" + l.count : l.status + (l.duration !== null ? " in " + l.duration.toFixed(3) + " s" : "");
        last = val(k + "last|" + name, text, l.status === "ok" ? "value" : "value bad");
        if (l.error) last.title = l.error;
      }
      const schedule = job.schedule === null ? "(no record yet)" : job.schedule + (job.timezone ? " [" + job.timezone + "]" : "");
      return [name, leader, last, when(job.next), schedule];
    });
    if (rows.length) box.append(table(["job", "leader", "last", "next firing", "schedule"], rows));
    // Unreadable records under the table, wrapped: their reasons may be long.
    for (const name of names.filter((n) => jobs[n].error !== undefined)) {
      box.append(line(name, val(k + "job|" + name, "invalid record: " + jobs[name].error, "value bad")));
    }
  }

  function tasks(box, info, k) {
    const leaders = info.leaders || {};
    const count = {};
    for (const lead of Object.values(leaders)) count[lead.leader] = (count[lead.leader] || 0) + 1;
    box.append(line("", String(info.workers.length) + " worker(s), " + Object.keys(leaders).length + " task(s) led"));
    const workers = info.workers.map((w) =>
      w.error !== undefined
        ? [w.id, el("span", "bad", "invalid record: " + w.error), "", "", ""]
        : [w.id, w.version, w.host, String(w.pid), String(count[w.id] || 0)],
    );
    if (workers.length) box.append(table(["worker", "version", "host", "pid", "leads"], workers));
    const rows = Object.keys(leaders).map((task) => {
      const lead = leaders[task];
      if (lead.error !== undefined) return [task, el("span", "bad", "invalid record: " + lead.error), "", ""];
      return [task, val(k + "task|" + task, lead.leader, "value strong"), lead.version, hex(lead.token)];
    });
    if (rows.length) box.append(table(["task", "leader", "version", "token"], rows));
  }

  function scheduler(box, info, k) {
    const assigned = info.assigned || {};
    const results = info.results || {};
    box.append(line("assigner", val(k + "assigner", info.assigner === null ? "none elected" : info.assigner, "value strong")));
    const workers = info.workers.map((w) => {
      if (w.error !== undefined) return [w.node, el("span", "bad", "invalid record: " + w.error), "", "", ""];
      const queue = assigned[w.node] || [];
      return [w.id, String(w.capacity), val(k + "run|" + w.node, String(queue.length)), w.draining ? "draining" : "", el("span", "wrap", (w.jobs || []).join(", "))];
    });
    if (workers.length) box.append(table(["worker", "capacity", "running", "", "jobs"], workers));
    const pending = info.pending || [];
    const shown = pending.slice(0, 8).map((j) => j.id + (j.name ? " (" + j.name + ")" : j.error ? " (invalid)" : ""));
    box.append(line("pending", val(k + "pending", String(pending.length)), " ", el("span", "muted", shown.join(", ") + (pending.length > 8 ? ", …" : ""))));
    const failed = results.failed || 0;
    box.append(
      line("results", String(results.done || 0) + " done, ", val(k + "failed", String(failed) + " failed", failed ? "value bad" : "value"),
        results.unreadable ? ", " + results.unreadable + " unreadable" : "", " ", el("span", "muted", "(of " + (results.count || 0) + ")")),
    );
  }

  function other(box, info, k) {
    for (const [key, value] of Object.entries(info)) {
      if (key === "path" || key === "kind") continue;
      const text = typeof value === "string" ? value : JSON.stringify(value);
      box.append(line(key, val(k + key, text)));
    }
  }

  // --- the plain node tree ------------------------------------------------------------------

  function treeItem(info, depth) {
    const name = depth === 0 ? info.path : String(info.path).split("/").pop();
    const item = el("li", null, el("code", null, name));
    item.dataset.path = info.path;
    if (info.kind !== "node") {
      item.append(" ", el("span", "kind", LABEL[info.kind] || String(info.kind)));
      return item;
    }
    if (info.ephemeral) item.append(" ", el("span", "tag", "ephemeral"));
    if (info.error) item.append(" ", el("span", "bad", info.error));
    if (info.data) item.append(" ", el("span", "data", info.data));
    const children = (info.children || []).map((c) => treeItem(c, depth + 1));
    if (info.more) children.push(el("li", "muted", "… " + info.more + " more"));
    if (children.length) item.append(el("ul", null, ...children));
    return item;
  }

  function recipes(info, out) {
    if (info.kind !== "node") out.push(info);
    else for (const child of info.children || []) recipes(child, out);
    return out;
  }

  // --- rendering the document ---------------------------------------------------------------

  function view() {
    const name = location.hash.slice(1);
    return VIEWS.some(([v]) => v === name) ? name : "all";
  }

  function render() {
    const state = !online ? "OFFLINE" : doc ? doc.state : "CONNECTING";
    const stateBox = document.getElementById("state");
    stateBox.textContent = state;
    stateBox.dataset.state = state;
    const banner = document.getElementById("banner");
    banner.textContent = BANNER[state] || "";
    banner.dataset.state = state;
    banner.hidden = LIVE.has(state);
    document.body.classList.toggle("stale", !LIVE.has(state));
    document.body.dataset.view = view();
    if (!doc) return;
    document.getElementById("path").textContent = doc.path;
    document.getElementById("hosts").textContent = doc.hosts;
    document.getElementById("session").textContent = doc.session_id || "–";
    const error = document.getElementById("error");
    error.textContent = doc.error || "";
    error.hidden = !doc.error;
    document.getElementById("read-at").textContent = doc.read_at ? "read at " + clock(doc.read_at) : "not read yet";

    current = new Map();
    const found = doc.tree ? recipes(doc.tree, []) : [];
    const cards = found.map(card);
    const counts = {};
    for (const c of cards) counts[c.dataset.group] = (counts[c.dataset.group] || 0) + 1;
    const chosen = view();
    const main = document.getElementById("cards");
    if (chosen === "tree") {
      main.replaceChildren(doc.tree ? el("ul", "tree", treeItem(doc.tree, 0)) : el("p", "empty", "Nothing to show."));
    } else {
      const shown = cards.filter((c) => chosen === "all" || c.dataset.group === chosen);
      main.replaceChildren(...(shown.length ? shown : [el("p", "empty", doc.tree ? "No recipe of this kind under this path." : "Nothing to show.")]));
    }
    previous = current;
    renderViews(counts, cards.length);
    renderChanges();
  }

  function renderViews(counts, total) {
    const nav = document.getElementById("views");
    const chosen = view();
    const links = VIEWS.filter(([v]) => v !== "other" || counts.other).map(([v, label]) => {
      const n = v === "all" ? total : counts[v];
      const link = el("a", v === chosen ? "active" : null, label, n ? el("span", "count", String(n)) : null);
      link.href = "#" + v;
      link.dataset.view = v;
      return link;
    });
    nav.replaceChildren(...links);
  }

  function renderChanges() {
    const list = document.getElementById("changes");
    const items = doc.changes.slice().reverse().map((c) => {
      const item = el("li", c.kind === "session" ? "session" : null, el("time", null, clock(c.at)), " ");
      if (c.path) item.append(el("code", null, c.path), " ");
      item.append(el("span", "text", c.text));
      return item;
    });
    list.replaceChildren(...(items.length ? items : [el("li", "muted", "None yet.")]));
  }

  function tickLease(span) {
    const left = Number(span.dataset.expires) - (Date.now() / 1000 + offset);
    span.textContent = left > 0 ? Math.ceil(left) + " s left" : "expired";
    span.classList.toggle("bad", left <= 0);
  }

  // --- the event stream ---------------------------------------------------------------------

  function connect() {
    const source = new EventSource("events");
    source.onopen = () => {
      online = true;
      render();
    };
    source.onmessage = (event) => {
      doc = JSON.parse(event.data);
      offset = doc.server_time - Date.now() / 1000;
      online = true;
      render();
    };
    source.onerror = () => {
      online = false; // the browser reconnects by itself
      render();
    };
  }

  window.addEventListener("hashchange", render);
  setInterval(() => document.querySelectorAll(".lease").forEach(tickLease), 1000);
  connect();
  render();
})();
