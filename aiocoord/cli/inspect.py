"""``aiocoord inspect PATH`` as text: `render` draws an `aiocoord.inspection.inspect_path` result.

What is recognised, and how, is `aiocoord.inspection`'s business (the
``--json`` output is its dict as is); here each kind is drawn, a node it may
not read as "no access" next to its name.
"""

from __future__ import annotations

from ..inspection import Info
from ._render_cron import render_cron, worker_lines
from .jobs import render_scheduler

__all__ = ("render",)


def render(info: Info, indent: int = 0) -> list[str]:
    """Human-readable lines for an `inspect_path` result."""
    pad = "  " * indent
    kind = info["kind"]
    name = info["path"] if indent == 0 else info["path"].rsplit("/", 1)[-1]
    if "error" in info:
        error = info["error"]
        label = "no access" if error.startswith("no access") else "unreadable"
        return [f"{pad}{name}  [{kind}] {label}: {error.removeprefix('no access ')}"]
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
            lines.append(_row(pad, role, p))
        return lines
    if kind == "mutex":
        return _render_mutex(info, pad, name)
    if kind == "read_write_lock":
        return _render_rwlock(info, pad, name)
    if kind == "semaphore":
        return _render_semaphore(info, pad, name)
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
        lines.append(_row(pad, role, c))
    return lines


def _who(c: Info) -> str:
    return f"invalid id: {c['error']}" if "error" in c else str(c["id"])


def _row(pad: str, role: str, c: Info) -> str:
    """One line of a queue (a latch's, a lock's, a semaphore's): role, id, token, node."""
    return f"{pad}  {role} {_who(c):<28} token 0x{c['token']:x}  {c['node']}"


def _render_rwlock(info: Info, pad: str, name: str) -> list[str]:
    queue = info["contenders"]
    holders = [c for c in queue if c["holds"]]
    if not holders:
        return [f"{pad}{name}  [read/write lock] free"]
    mode = "write" if holders[0]["mode"] == "write" else f"read by {len(holders)}"
    waiting = len(queue) - len(holders)
    lines = [f"{pad}{name}  [read/write lock] held for {mode}, {waiting} waiting"]
    for c in queue:
        role = ("holds " if c["holds"] else "waits ") + c["mode"]
        lines.append(_row(pad, f"{role:<11}", c))
    return lines


def _render_semaphore(info: Info, pad: str, name: str) -> list[str]:
    leases, waiting = info["leases"], info["waiting"]
    lines = [f"{pad}{name}  [semaphore] {len(leases)} lease nodes, {len(waiting)} waiting"]
    for c in leases:
        lines.append(_row(pad, "lease   ", c))
    for i, c in enumerate(waiting):
        lines.append(f"{pad}  #{i + 1:<7} {_who(c):<28} (inner mutex)  {c['node']}")
    return lines
