"""The safety checker: pure functions over a campaign's events (see `records`), no I/O.

`check(records)` rebuilds every term (who believed it held what, from when
to when, with which fencing token), every fenced write, every fault and
every process pause, and returns a `Report`.  Violations (each must be 0):

- **overlaps outside pauses**: two terms of one resource (latch, lock,
  mutex, once_per, task, assigner, cron) whose bodies ran at the same time;
  for the semaphore (resource ``sem``) more than ``sem_leases`` at once; for
  the read/write lock (``rw``) a ``write`` term beside any other.  A term
  ends when its body was cancelled or returned; a term of a process that
  was SIGKILLed ends at the kill.  An overlap is excused only while one
  of the two holders is actually frozen, plus a bounded time after it wakes:
  every instant of the overlap must lie in ``[s1 - STOP_SLACK, s2 +
  wake_bound]`` for a freeze ``[s1, s2]`` of one of the two holders (SIGSTOP
  to SIGCONT, or a stall: the process logged that it ran nothing for a while,
  a loaded machine descheduled it).  A frozen process can wake up believing
  it still leads, which no client library can prevent.  ``wake_bound`` is a
  third of the session timeout (`Params.wake_bound`): a holder frozen long
  enough to lose its session finds, on waking, that its read timeout (2/3
  of the session timeout) has long passed and goes SUSPENDED at its first
  timer tick; the third of the session timeout between SUSPENDED and the
  server's expiry is the margin the library itself relies on for a holder to
  let go before anyone else may take over, so it is what a woken holder gets
  too.  A freeze that ended more than that before the overlap excuses
  nothing, however short the overlap; an overlap longer than the freeze plus
  the bound is never excused.  Stalls are reported apart from SIGSTOPs (a
  SIGSTOPped process also logs a stall when it wakes: those are not counted
  as descheduling).
  It is also excused, and counted apart, when either holder's session
  was expired by force on the server (``expire``: a third party took the
  session over and closed it) while it held the term, and the holder ended
  the term within `Params.expiry_bound` of that: the server tells the old
  holder (by closing its socket) and the next one (by a watch event) at
  the same moment, and nothing orders the two clients' reads.  The old
  holder's term can even begin after the next one's: re-elected on a read
  its member served just before applying the close.  A natural
  expiry (a partition or a pause past the session timeout) gets no excuse:
  the holder must have let go at SUSPENDED, before the server expired it.
- **stale writes accepted**: replaying the store's log in its own order, a
  write accepted with a token lower than one already accepted for the same
  resource (the store is re-checked, not trusted).
- **token order**: by start time, each term's token must be larger than
  every earlier term's of the resource; equal only for the same process
  (a latch or a task re-granted on the same node after SUSPENDED).  Shared
  terms (semaphore leases, reads) are not ordered among themselves: only a
  ``write`` term must outrank every earlier ``rw`` term.  A term
  begun by a holder just woken from a freeze, or while its session was
  being expired by force, is excused, as above.
- **double windows**: a once_per window with more than one recorded
  (successful) run.
- **double firings**: a cron scheduled time whose function began more than
  once (the cron job is not ``retry_interrupted``, so every scheduled time is
  claimed once, by a CAS on the job's record, and runs at most once).
- **missed windows**: a window that had to run and did not: no fault whose
  effects could reach it (see `_blocked`), no run of an earlier window held
  the lock during it (`once_per` never waits: its callers skip a window a
  late run of the previous one holds), and some participant connected
  throughout it.
- **lost jobs**: a submitted job with neither a result seen by its client nor
  a final status DONE/FAILED.
- **errors**: exceptions that are not `CoordError` (a recipe bug); processes
  that crashed or had to be killed at the end (a hang).
- **caches**: each `tree_cache` of the ``cache`` role logs its view when
  entered and each event after; per path, an event must follow from what
  that cache served before: CREATED only for a path it does not hold and
  with a newer czxid than any it deleted there, CHANGED and DELETED only of
  the version it holds, CHANGED to a later mzxid of the same czxid (no
  version goes backwards).  And each cache's view when its participant
  stops (a calm phase after the last write) must be fresh and equal, path
  by path (czxid, mzxid), to the server's (``cache_server``, read node by
  node by the orchestrator).
- **liveness**: at the end of the calm phase every leader resource has a
  leader and the lock has been taken during it; and throughout the
  campaign, no resource that is always contended (latch, tasks, assigner,
  lock, mutex, cron job) goes without a holder for longer than
  `Params.gap_bound` (see there).

- **membership, counters, double barriers**: see `recipe_checks` (live
  members listed by every settled watcher, dead ones gone within the session
  timeout and a grace; no counter increment lost or doubled, no value going
  back; nobody through a barrier before its members are in, nor out before
  all have left).

Figures: faults by kind, terms by role, the longest leaderless gap, writes
accepted and refused, excused overlaps and the longest of them.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from .recipe_checks import check_recipes
from .records import Record
from .report import Overlap, Params, Report, Term

__all__ = ("Overlap", "Params", "Report", "Term", "check")

LEADER_ROLES = ("latch", "task", "assigner")
CONTENDED_ROLES = (
    *LEADER_ROLES,
    "lock",
    "mutex",
    "selector",
    "cron",
)  # always wanted by someone: gaps are bounded
STOP_SLACK = 0.05  # a stall may have begun one tick of the stall watcher before its t0
USABLE = ("CONNECTED", "RECONNECTED")


# --- rebuilding the campaign from its events ----------------------------------------------


class _Campaign:
    def __init__(self, records: Iterable[Record]) -> None:
        self.by_kind: dict[str, list[Record]] = defaultdict(list)
        self.store: list[Record] = []
        last = 0.0
        for r in records:
            self.by_kind[r["k"]].append(r)
            if r["k"] == "w":
                self.store.append(r)
            last = max(last, float(r["t"]))
        self.last = last
        for rs in self.by_kind.values():
            rs.sort(key=lambda r: float(r["t"]))
        self.store.sort(key=lambda r: int(r["n"]))  # the store's own order
        self.config: dict[str, Any] = (
            dict(self.by_kind["config"][0]) if self.by_kind["config"] else {}
        )
        self.phases = {r["name"]: float(r["t"]) for r in self.by_kind["phase"]}
        self.deaths: dict[tuple[str, int], float] = {}
        self.stops: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
        self.starts: dict[tuple[str, int], float] = {}
        self.java: set[tuple[str, int]] = set()  # Java participants (`java`): one recipe each
        self._processes()

    def _processes(self) -> None:
        for r in self.by_kind["start"]:
            self.starts.setdefault((r["p"], int(r["inc"])), float(r["t"]))
            if r.get("lang") == "java":
                self.java.add((r["p"], int(r["inc"])))
        open_stop: dict[tuple[str, int], float] = {}
        for r in self.by_kind["proc"]:
            key = (r["p"], int(r["inc"]))
            t, ev = float(r["t"]), r["ev"]
            if ev == "sigstop":
                open_stop[key] = t
            elif ev == "sigcont" and key in open_stop:
                self.stops[key].append((open_stop.pop(key), t))
            elif ev in ("sigkill", "exit", "crash"):
                self.deaths[key] = min(self.deaths.get(key, math.inf), t)
        for r in self.by_kind["exit"]:
            key = (r["p"], int(r["inc"]))
            self.deaths[key] = min(self.deaths.get(key, math.inf), float(r["t"]))
        for key, t in open_stop.items():
            self.stops[key].append((t, self.deaths.get(key, math.inf)))
        self.stalls = [
            (float(r["t0"]), float(r["t1"]), (r["p"], int(r["inc"]))) for r in self.by_kind["stall"]
        ]
        sigstops = {key: list(spans) for key, spans in self.stops.items()}
        # A SIGSTOPped process logs a stall when it wakes: that is the SIGSTOP, not descheduling.
        self.descheduled = [
            (t0, t1, key)
            for t0, t1, key in self.stalls
            if not any(s1 - 0.5 <= t1 and t0 <= s2 + 0.5 for s1, s2 in sigstops.get(key, []))
        ]
        for t0, t1, key in self.stalls:
            self.stops[key].append((t0, t1))

    @property
    def end(self) -> float:
        """When the participants were told to stop (or the last event)."""
        return self.phases.get("stop", self.last)

    def terms(self) -> list[Term]:
        ends = {r["id"]: r for r in self.by_kind["end"]}
        outcomes = {r["id"]: r["res"] for r in self.by_kind["outcome"]}
        terms = []
        for r in self.by_kind["term"]:
            key = (r["p"], int(r["inc"]))
            end = ends.get(r["id"])
            if end is not None:
                stop, closed, why = float(end["t"]), "end", end.get("why")
            elif key in self.deaths:
                stop, closed, why = self.deaths[key], "death", None
            else:
                stop, closed, why = self.last, "open", None
            terms.append(
                Term(
                    r["id"],
                    r["p"],
                    int(r["inc"]),
                    r["role"],
                    r["res"],
                    int(r["tok"]),
                    float(r["t"]),
                    max(stop, float(r["t"])),
                    closed,
                    why,
                    r.get("win"),
                    outcomes.get(r["id"]),
                    r.get("asked"),
                )
            )
        terms.sort(key=lambda t: (t.start, t.id))
        return terms

    def frozen_cover(self, procs: Iterable[tuple[str, int]], wake: float) -> list[list[float]]:
        """The merged times when one of `procs` was frozen or had woken less than `wake` ago."""
        spans = sorted(
            (s1 - STOP_SLACK, s2 + wake) for proc in set(procs) for s1, s2 in self.stops[proc]
        )
        merged: list[list[float]] = []
        for a, b in spans:
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        return merged

    def frozen_during(
        self, procs: Iterable[tuple[str, int]], t0: float, t1: float, wake: float
    ) -> bool:
        """Whether every instant of [t0, t1] finds one of `procs` frozen or woken < `wake` ago."""
        return any(a <= t0 and t1 <= b for a, b in self.frozen_cover(procs, wake))

    def expired_under(self, term: Term, until: float, bound: float) -> bool:
        """Whether `term`'s session was expired by force while held, before `until`,
        and the term ended within `bound` of that expiry."""
        for r in self.by_kind["fault"]:
            if r["kind"] != "expire" or (r.get("p"), r.get("inc")) != term.proc:
                continue
            t0, t1 = float(r["t0"]), float(r["t1"])
            if term.start <= t1 and t0 <= until and term.end <= t1 + bound:
                return True
        return False

    def blocked(self, params: Params) -> list[tuple[float, float]]:
        stalls = [{"kind": "stop", "t0": t0, "t1": t1} for t0, t1, _ in self.stalls]
        return [_blocked(r, params) for r in [*self.by_kind["fault"], *stalls]]


def _blocked(fault: Record, params: Params) -> tuple[float, float]:
    """When `fault` may keep a once_per window from running.

    A holder cut off from ZooKeeper keeps the lease it last wrote for up to
    lease + skew: after the start of a freeze or a kill (it wrote nothing
    since), after the end of anything else (a write held in a paused proxy or
    a connection still open may land then; an election delays renewals).
    """
    t0, t1 = float(fault["t0"]), float(fault["t1"])
    tail = params.lease + params.skew + params.quiet_margin
    if str(fault["kind"]).startswith("stop") or fault["kind"] == "kill":
        return t0 - 0.5, max(t0 + tail, t1 + params.quiet_margin)
    return t0 - 0.5, t1 + tail


def check(records: Iterable[Record], params: Params | None = None) -> Report:
    """Check a campaign's events (from every log, in any order; see the module docstring)."""
    camp = _Campaign(records)
    cfg = camp.config
    if params is None:
        default = Params()
        timeout = float(cfg.get("session_timeout", 3.0))
        params = Params(
            wake_bound=timeout / 3,
            gap_bound=4 * timeout,
            lease=float(cfg.get("lease", default.lease)),
            skew=float(cfg.get("skew", default.skew)),
            once_interval=float(cfg.get("once_interval", default.once_interval)),
        )
    report = Report(seed=cfg.get("seed"), config=cfg)
    report.wake_bound = params.wake_bound
    report.gap_bound = params.gap_bound
    report.stalls = len(camp.descheduled)
    report.longest_stall = max((t1 - t0 for t0, t1, _ in camp.descheduled), default=0.0)
    for r in camp.by_kind["fault"]:
        report.faults[r["kind"]] += 1
        aim = str(r.get("aim") or "")
        if aim.endswith(" holder"):
            report.aimed[aim.split()[0]] += 1
    terms = camp.terms()
    for t in terms:
        report.terms[t.role] += 1
    by_res: dict[str, list[Term]] = defaultdict(list)
    for t in terms:
        by_res[t.res].append(t)
    _java(camp, by_res, report)
    for res, ts in sorted(by_res.items()):
        _overlaps(camp, res, ts, params, report)
        _token_order(camp, res, ts, params, report)
    _store(camp, report)
    _windows(camp, [t for t in terms if t.role == "once"], params, report)
    _firings([t for t in terms if t.role == "cron"], report)
    _jobs(camp, report)
    _errors(camp, report)
    _gaps_and_liveness(camp, by_res, params, report)
    _caches(camp, report)
    check_recipes(camp, report.recipes)
    return report


def _overlaps(camp: _Campaign, res: str, terms: list[Term], params: Params, report: Report) -> None:
    # How many terms may run at once: the semaphore's leases; else one (readers share).
    limit = int(camp.config.get("sem_leases", 2)) if res == "sem" else 1
    active: list[Term] = []
    for b in terms:  # sorted by start
        active = [a for a in active if a.end > b.start]
        rivals = [a for a in active if res != "rw" or "write" in (a.role, b.role)]
        if limit == 1:
            for a in rivals:  # each one held beside b
                _overlap(camp, res, a, b, params, report)
        elif len(rivals) >= limit:
            # One lease too many: any rival that was frozen or expired by force explains it
            # (its lease node went while it still believed it held); else the oldest is blamed.
            explains = [a for a in rivals if _excuse(camp, a, b, params) is not None]
            _overlap(camp, res, (explains or rivals)[0], b, params, report)
        active.append(b)


def _java(camp: _Campaign, by_res: dict[str, list[Term]], report: Report) -> None:
    """The Java participants' figures: their terms by role, the hand-overs between the
    languages (a term whose predecessor on the resource was held by the other language), and
    the leaderships a Curator 5.4 latch claimed on a node of an earlier session, which the
    participant refused as Curator's CURATOR-696 fix does."""
    report.java = dict(camp.config.get("java") or {})
    report.java_skipped = camp.config.get("java_skipped")
    report.java_stale_leads = len(camp.by_kind["stale_lead"])
    for res, terms in by_res.items():
        langs = [t.proc in camp.java for t in terms]
        report.java_terms[res] += sum(langs)
        if any(langs):
            report.java_handovers[res] = sum(1 for a, b in itertools.pairwise(langs) if a != b)


def _excuse(camp: _Campaign, a: Term, b: Term, params: Params) -> str | None:
    """Why terms `a` and `b` of one resource may run at once: "frozen", "expired" or None."""
    if camp.frozen_during((a.proc, b.proc), b.start, min(a.end, b.end), params.wake_bound):
        return "frozen"
    if any(camp.expired_under(t, b.start, params.expiry_bound) for t in (a, b)):
        return "expired"
    return None


def _overlap(camp: _Campaign, res: str, a: Term, b: Term, params: Params, report: Report) -> None:
    length = min(a.end, b.end) - b.start
    why = _excuse(camp, a, b, params)
    if why == "frozen":
        report.excused.append(Overlap(res, a.id, b.id, b.start, length, "frozen"))
    elif why == "expired":
        report.expiry_races.append(Overlap(res, a.id, b.id, b.start, length, "expired"))
    else:
        report.overlaps.append(Overlap(res, a.id, b.id, b.start, length))


def _token_order(
    camp: _Campaign, res: str, terms: list[Term], params: Params, report: Report
) -> None:
    if res == "sem":
        return  # leases run side by side: no order among them
    best: Term | None = None
    for b in terms:  # sorted by start
        if b.role == "read":  # reads share: only a write must outrank what came before
            if best is None or b.tok > best.tok:
                best = b
            continue
        if best is not None and (b.tok < best.tok or (b.tok == best.tok and b.proc != best.proc)):
            if camp.frozen_during(
                (b.proc,), b.start, b.start, params.wake_bound
            ) or camp.expired_under(b, b.start, params.expiry_bound):
                report.token_order_excused += 1
            else:
                report.token_order.append((res, f"{best.id} tok {best.tok}", f"{b.id} tok {b.tok}"))
        if best is None or b.tok > best.tok:
            best = b


def _store(camp: _Campaign, report: Report) -> None:
    high: dict[str, int] = {}
    for w in camp.store:
        res, tok = w["res"], int(w["tok"])
        if w["ok"]:
            report.writes_accepted += 1
            if tok < high.get(res, -1):
                report.stale_accepted.append(w)
            high[res] = max(high.get(res, -1), tok)
        else:
            report.writes_refused += 1


def _window_index(win: float, interval: float) -> int:
    return round(win / interval)


def _windows(camp: _Campaign, runs: list[Term], params: Params, report: Report) -> None:
    interval = params.once_interval
    by_window: dict[int, list[Term]] = defaultdict(list)
    for t in runs:
        if t.win is not None:
            by_window[_window_index(float(t.win), interval)].append(t)
    report.windows_run = len(by_window)
    for win, ts in sorted(by_window.items()):
        ok = [t.id for t in ts if t.outcome == "ok"]
        if len(ok) > 1:
            report.double_windows.append((win, ok))
        report.unconfirmed_runs += sum(
            1 for t in ts if t.outcome is not None and t.outcome.startswith("unknown")
        )
    phase = next((r for r in camp.by_kind["phase"] if r["name"] == "faults"), None)
    if phase is None or "once" not in str(camp.config.get("roles", "once")):
        return
    offset = float(phase["wall"]) - float(phase["t"])  # wall = mono + offset, one machine
    first = float(phase["t"]) + 2.0  # participants settle in
    last = camp.end
    blocked = camp.blocked(params)
    # once_per never waits: while a run of an earlier window holds the lock (from its
    # caller's entry, an upper bound of its CAS, to its end), callers skip their window.
    late = [
        (float(t.asked), t.end, _window_index(float(t.win), interval))
        for t in runs
        if t.asked is not None and t.win is not None
    ]
    k = math.ceil((first + offset) / interval)
    while (k + 1) * interval - offset <= last:
        a, b = k * interval - offset, (k + 1) * interval - offset
        quiet = all(end < a or start > b for start, end in blocked) and not any(
            j < k and start <= b and end >= a for start, end, j in late
        )
        if quiet and _someone_connected(camp, a, b):
            report.owed_windows += 1
            ran = [t for t in by_window.get(k, []) if t.outcome == "ok" or t.why == "exit"]
            if not ran:
                report.missed_windows.append(k)
        k += 1


def _firings(firings: list[Term], report: Report) -> None:
    """A cron scheduled time whose function began more than once (`win`: the scheduled time)."""
    by_time: dict[float, list[Term]] = defaultdict(list)
    for t in firings:
        if t.win is not None:
            by_time[float(t.win)].append(t)
    report.firings = len(firings)
    for at, ts in sorted(by_time.items()):
        if len(ts) > 1:
            report.double_firings.append((at, [t.id for t in ts]))


def _someone_connected(camp: _Campaign, a: float, b: float) -> bool:
    """Whether some process ran once_per and stayed connected from before `a` until `b`."""
    conns: dict[tuple[str, int], list[Record]] = defaultdict(list)
    for r in camp.by_kind["conn"]:
        conns[(r["p"], int(r["inc"]))].append(r)
    for key, start in camp.starts.items():
        if key in camp.java:
            continue  # it runs no once_per
        if start > a - 1.0 or camp.deaths.get(key, math.inf) < b:
            continue
        if any(s1 <= b and s2 >= a - 1.0 for s1, s2 in camp.stops[key]):
            continue
        states = conns.get(key, [])
        before = [r for r in states if float(r["t"]) <= a]
        during = [r for r in states if a < float(r["t"]) <= b]
        if before and before[-1]["state"] in USABLE and not during:
            return True
    return False


def _jobs(camp: _Campaign, report: Report) -> None:
    submitted = [r["job"] for r in camp.by_kind["submit"]]
    report.jobs_enabled = bool(camp.config.get("jobs")) or bool(submitted)
    report.jobs_submitted = len(submitted)
    runs = Counter(str(r.get("tag")) for r in camp.by_kind["run"])
    report.jobs_run = sum(runs.values())
    report.jobs_run_twice = sum(1 for n in runs.values() if n > 1)
    seen = {r["job"]: r["status"] for r in camp.by_kind["result"]}
    final = {r["job"]: r["status"] for r in camp.by_kind["job_final"]}
    for job in submitted:
        status = seen.get(job) or final.get(job)
        if status not in ("DONE", "FAILED"):
            report.jobs_lost.append(job)
        elif status == "FAILED":
            report.jobs_failed += 1


def _errors(camp: _Campaign, report: Report) -> None:
    report.errors.extend(camp.by_kind["error"])
    for r in camp.by_kind["proc"]:
        if r["ev"] in ("crash", "hang"):
            report.crashes.append(r)
    for r in camp.by_kind["coord_error"]:
        report.coord_errors[str(r.get("exc"))] += 1


def _gaps_and_liveness(
    camp: _Campaign, by_res: dict[str, list[Term]], params: Params, report: Report
) -> None:
    end = camp.end
    calm = camp.phases.get("calm")
    for res, terms in sorted(by_res.items()):
        if terms[0].role not in CONTENDED_ROLES:
            continue
        covered = terms[0].start
        gap = 0.0
        for t in terms:  # sorted by start
            if t.start > covered:
                length = min(t.start, end) - covered
                gap = max(gap, length)
                if length > params.gap_bound:
                    report.long_gaps.append((res, covered, length))
            covered = max(covered, t.end)
        if end - covered > params.gap_bound:
            report.long_gaps.append((res, covered, end - covered))
        gap = max(gap, end - covered)
        report.gaps[res] = gap
        if calm is not None and terms[0].role in LEADER_ROLES:
            at = end - params.liveness_at
            if not any(t.start <= at < t.end for t in terms):
                report.liveness.append(f"{res}: no leader {params.liveness_at} s before the end")
    for res in ("lock", "mutex", "selector", "cron"):
        if (
            calm is not None
            and res in by_res
            and not any(calm <= t.start <= end for t in by_res[res])
        ):
            report.liveness.append(f"{res}: not taken during the calm phase")
    for res in camp.config.get("leader_resources", []):
        if res not in by_res:
            report.liveness.append(f"{res}: never led")


def _caches(camp: _Campaign, report: Report) -> None:
    """Replay each cache's events over its first view; compare its final view with the server's."""
    held: dict[str, dict[str, tuple[int, int]]] = {}
    gone: dict[str, dict[str, tuple[int, int]]] = defaultdict(dict)
    stale: set[str] = set()
    report.caches_enabled = "cache" in str(camp.config.get("roles", "")).split(",")
    for r in camp.by_kind["cache_view"]:
        held[r["cid"]] = {path: (int(cz), int(mz)) for path, (cz, mz) in r["nodes"].items()}
        report.cache_views += 1
    for r in camp.by_kind["cache_ev"]:
        cid, path, ev = r["cid"], r["path"], r["ev"]
        if ev == "STALE":
            stale.add(cid)
        elif ev == "FRESH" and cid in stale:
            stale.discard(cid)
            report.cache_resyncs += 1
        if ev not in ("CREATED", "CHANGED", "DELETED") or cid not in held:
            continue
        report.cache_events += 1
        view = held[cid]
        node = tuple(r["node"]) if r.get("node") else None
        prev = tuple(r["prev"]) if r.get("prev") else None
        was = view.get(path)
        why = None
        if ev == "CREATED":
            dead = gone[cid].get(path)
            if was is not None:
                why = f"created while it held {was}"
            elif node is None or (dead is not None and node[0] <= dead[0]):
                why = f"created {node} after it deleted {dead}"
        elif ev == "CHANGED":
            if was is None or prev != was:
                why = f"changed from {prev} while it held {was}"
            elif node is None or node[0] != was[0] or node[1] <= was[1]:
                why = f"changed from {was} to {node}"
        elif was is None or prev != was:
            why = f"deleted {prev} while it held {was}"
        if why is not None:
            report.cache_backwards.append(f"{cid} {path}: {why} (t={float(r['t']):.3f})")
        if ev == "DELETED":
            if was is not None:
                gone[cid][path] = was
            view.pop(path, None)
        elif node is not None:
            view[path] = (int(node[0]), int(node[1]))
    servers = camp.by_kind["cache_server"]
    if not servers:
        return
    server = {path: list(state) for path, state in servers[-1]["nodes"].items()}
    for r in camp.by_kind["cache_final"]:
        who = f"{r['p']}.{r['inc']}"
        report.cache_final_checked += 1
        nodes = r.get("nodes")
        if nodes is None:
            report.cache_final.append(f"{who}: no cache held when it stopped")
            continue
        if not r.get("fresh"):
            report.cache_final.append(f"{r['cid']}: stale when it stopped")
        if nodes != server:
            extra = sorted(set(nodes) - set(server))
            missing = sorted(set(server) - set(nodes))
            other = sorted(p for p in set(nodes) & set(server) if nodes[p] != server[p])
            report.cache_final.append(
                f"{r['cid']}: not the server's: {len(extra)} extra {extra[:3]}, "
                f"{len(missing)} missing {missing[:3]}, {len(other)} other versions {other[:3]}"
            )
