"""``aiocoord inspect PATH``: what is under a path, recognised by the layout of each recipe.

Recognised, in this order, at a node:

- a CAS lock (also once_per): the node's data is an ``aiocoord.cas-lock/N`` record;
- a cron: children named ``workers``, ``leaders`` and ``jobs``, whose ``jobs`` holds
  cron job records (see `_inspect_cron`);
- task leadership: children named ``workers`` and ``leaders``;
- a job scheduler: children named ``jobs`` and ``assignments`` (see `jobs`);
- a leader latch: every child is an election node (Curator ``_c_<uuid>-latch-<seq>``,
  or ZooKeeper's ``n_<seq>``);
- a mutex: every child is a lock node (Curator ``_c_<uuid>-lock-<seq>``);
- otherwise a plain node, whose children are inspected the same way, down to
  ``--depth`` levels.

Each recipe is read through its public describe API (``describe_latch``,
``lock_view``, ``describe_cron``, ``describe_task_leadership``, ``describe_scheduler``,
``describe_mutex``).
`inspect_path` returns plain dicts (the ``--json`` output); `render` turns them
into text.  Foreign or corrupt data never crashes the command: it is shown as
an error next to the node.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..errors import NoAuthError, NodeDataError, NoNodeError
from ..recipes.cas_lock import LockRun, is_lock_record, lock_view
from ..recipes.cron import describe_cron, is_cron
from ..recipes.leader_latch import describe_latch, latch_layout
from ..recipes.mutex import describe_mutex, is_mutex
from ..recipes.task_leadership import describe_task_leadership, is_task_leadership
from ..scheduler import is_scheduler
from ..session import Coordinator
from ..zk.paths import join
from ._inspect_cron import cron_info, render_cron, worker_lines, workers_info

__all__ = ("inspect_path", "render")

MAX_NODES = 500  # a plain tree stops being walked after this many nodes

Info = dict[str, Any]

_NO_READ = "not readable with these credentials (set AIOCOORD_AUTH to those that created it)"


def iso(when: datetime | None) -> str | None:
    """A UTC time as ISO 8601 to the second, as the JSON output shows times."""
    return None if when is None else when.isoformat(timespec="seconds")


def _text(data: bytes, limit: int = 80) -> str:
    text = data.decode("utf-8", "replace")
    return text if len(text) <= limit else text[: limit - 3] + "..."


async def inspect_path(coord: Coordinator, path: str, *, depth: int = 4) -> Info:
    """Describe `path` and what is below it; raises `NoNodeError` if it does not exist."""
    budget = [MAX_NODES]
    return await _inspect(coord, path, depth, budget)


async def _inspect(coord: Coordinator, path: str, depth: int, budget: list[int]) -> Info:
    client = coord.client
    node = await client.get(path)
    try:
        children = sorted(await client.children(path))
    except NoNodeError:
        children = []
    budget[0] -= 1
    base: Info = {"path": path}
    if is_lock_record(node.data):
        return base | _lock_info(path, node.data, node.stat.mzxid)
    if is_cron(children):
        cron = await describe_cron(coord, path)
        if cron.recognised:
            return base | cron_info(cron)
    if is_task_leadership(children):
        return base | await _task_info(coord, path)
    if is_scheduler(children):
        from .jobs import scheduler_info

        return base | await scheduler_info(coord, path)
    if latch_layout(children) is not None:
        return base | await _latch_info(coord, path)
    if is_mutex(children):
        return base | await _mutex_info(coord, path)
    info: Info = base | {
        "kind": "node",
        "data": _text(node.data) if node.data else None,
        "ephemeral": bool(node.stat.ephemeral_owner),
        "children": [],
    }
    if depth <= 0 or budget[0] <= 0:
        info["more"] = len(children)
        return info
    for child in children:
        if budget[0] <= 0:
            info["more"] = len(children) - len(info["children"])
            break
        child_path = join(path, child)
        try:
            info["children"].append(await _inspect(coord, child_path, depth - 1, budget))
        except NoNodeError:
            continue  # gone while we looked
        except NoAuthError:
            # Created with other credentials (creator-only ACL): say so, show the rest.
            info["children"].append({"path": child_path, "kind": "node", "error": _NO_READ})
    return info


def _run_info(run: LockRun) -> Info:
    return {"window": iso(run.window), "at": iso(run.at), "owner": run.owner, "token": run.token}


def _lock_info(path: str, data: bytes, mzxid: int) -> Info:
    try:
        view = lock_view(path, data, mzxid)
    except NodeDataError as exc:
        return {"kind": "cas_lock", "error": exc.reason}
    fail = view.last_failure
    return {
        "kind": "cas_lock",
        "held": view.held,
        "owner": view.owner,
        "token": view.token,
        "lease_expires": iso(view.lease_expires),
        "last_run": _run_info(view.last_run) if view.last_run else None,
        "last_failure": {"at": iso(fail.at), "owner": fail.owner, "error": fail.error}
        if fail
        else None,
    }


async def _task_info(coord: Coordinator, path: str) -> Info:
    view = await describe_task_leadership(coord, path)
    leaders: dict[str, Info] = {
        task: {"leader": lead.worker, "version": lead.version, "token": lead.token}
        for task, lead in view.leaders.items()
    }
    leaders |= {task: {"error": e.reason} for task, e in view.invalid_leaders.items()}
    return {
        "kind": "task_leadership",
        "workers": workers_info(view),
        "leaders": {task: leaders[task] for task in sorted(leaders)},
    }


async def _latch_info(coord: Coordinator, path: str) -> Info:
    view = await describe_latch(coord, path)
    return {
        "kind": "leader_latch",
        "layout": view.layout,
        "leader": view.leader,
        "participants": [
            {"id": p.id, "node": p.node, "token": p.token, "session": f"0x{p.session:x}"}
            for p in view.participants
        ],
    }


async def _mutex_info(coord: Coordinator, path: str) -> Info:
    view = await describe_mutex(coord, path)
    contenders: list[Info] = []
    for c in view.contenders:
        entry: Info = {"id": c.id, "node": c.node, "token": c.token, "session": f"0x{c.session:x}"}
        if c.invalid is not None:
            entry["error"] = c.invalid
        contenders.append(entry)
    return {
        "kind": "mutex",
        "holder": view.holder.id if view.holder else None,
        "token": view.holder_token,
        "contenders": contenders,
    }


# --- text ------------------------------------------------------------------------------------


def render(info: Info, indent: int = 0) -> list[str]:
    """Human-readable lines for an `inspect_path` result."""
    pad = "  " * indent
    kind = info["kind"]
    name = info["path"] if indent == 0 else info["path"].rsplit("/", 1)[-1]
    if "error" in info:
        return [f"{pad}{name}  [{kind}] unreadable: {info['error']}"]
    if kind == "node":
        extra = " [ephemeral]" if info["ephemeral"] else ""
        data = f"  {info['data']!r}" if info["data"] else ""
        lines = [f"{pad}{name}{extra}{data}"]
        for child in info["children"]:
            lines += render(child, indent + 1)
        if info.get("more"):
            lines.append(f"{pad}  ... {info['more']} more")
        return lines
    if kind == "leader_latch":
        parts = info["participants"]
        lines = [f"{pad}{name}  [leader latch, {info['layout']} layout] leader: {info['leader']}"]
        for i, p in enumerate(parts):
            role = "leader  " if i == 0 else f"#{i:<7}"
            lines.append(f"{pad}  {role} {p['id']:<28} token 0x{p['token']:x}  {p['node']}")
        return lines
    if kind == "mutex":
        return _render_mutex(info, pad, name)
    if kind == "cron":
        return render_cron(info, pad, name)
    if kind == "cas_lock":
        token = f"0x{info['token']:x}" if info["token"] is not None else "-"
        if info["held"]:
            state = f"held, owner {info['owner']}, token {token}"
        elif info["owner"] is not None:  # a free lock's owner is its last holder
            state = f"free, last held by {info['owner']}, token {token}"
        else:
            state = "free, never held"
        lines = [f"{pad}{name}  [CAS lock] {state}"]
        if info["held"]:
            lines.append(f"{pad}  lease expires {info['lease_expires']}")
        if info["last_run"]:
            run = info["last_run"]
            lines.append(
                f"{pad}  last run: window {run['window']}, ended {run['at']} by {run['owner']}"
            )
        if info["last_failure"]:
            fail = info["last_failure"]
            lines.append(f"{pad}  last failure: {fail['at']} by {fail['owner']}: {fail['error']}")
        return lines
    if kind == "task_leadership":
        workers, leaders = info["workers"], info["leaders"]
        lines = [f"{pad}{name}  [task leadership] {len(workers)} workers, {len(leaders)} tasks led"]
        lines += worker_lines(workers, pad)
        for task, lead in leaders.items():
            if "error" in lead:
                lines.append(f"{pad}  task {task}: invalid leader record: {lead['error']}")
            else:
                lines.append(
                    f"{pad}  task {task:<20} -> {lead['leader']} ({lead['version']}), "
                    f"token 0x{lead['token']:x}"
                )
        return lines
    if kind == "scheduler":
        from .jobs import render_scheduler

        return render_scheduler(info, pad, name)
    return [f"{pad}{name}  [{kind}]"]


def _render_mutex(info: Info, pad: str, name: str) -> list[str]:
    queue = info["contenders"]
    if not queue:
        return [f"{pad}{name}  [mutex] free"]
    holder = queue[0]["id"] if queue[0]["id"] is not None else "(invalid id)"
    waiting = len(queue) - 1
    lines = [f"{pad}{name}  [mutex] held by {holder}, token 0x{info['token']:x}, {waiting} waiting"]
    for i, c in enumerate(queue):
        role = "holder  " if i == 0 else f"#{i:<7}"
        who = f"invalid id: {c['error']}" if "error" in c else c["id"]
        lines.append(f"{pad}  {role} {who:<28} token 0x{c['token']:x}  {c['node']}")
    return lines
