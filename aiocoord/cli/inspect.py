"""``aiocoord inspect PATH``: what is under a path, recognised by the layout of each recipe.

Recognised, in this order, at a node:

- a CAS lock (also once_per): the node's data is an ``aiocoord.cas-lock/N`` record;
- task leadership: children named ``workers`` and ``leaders``;
- a job scheduler: children named ``jobs`` and ``assignments`` (see `_cli_scheduler`);
- a leader latch: every child is an election node (Curator ``_c_<uuid>-latch-<seq>``,
  or ZooKeeper's ``n_<seq>``);
- otherwise a plain node, whose children are inspected the same way, down to
  ``--depth`` levels.

`inspect_path` returns plain dicts (the ``--json`` output); `render` turns them
into text.  Foreign or corrupt data never crashes the command: it is shown as
an error next to the node.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Any

from ..errors import NodeDataError, NoNodeError
from ..recipes.cas_lock._record import decode as decode_lock
from ..recipes.cas_lock._record import status_of
from ..recipes.leader_latch._election import LAYOUTS, sort_children
from ..recipes.task_leadership._records import decode_leader, decode_worker
from ..recipes.task_leadership._versions import maven_version_key
from ..session import Coordinator
from ..zk.paths import join

__all__ = ("inspect_path", "render")

_CURATOR_NODE = re.compile(r"_c_[0-9a-fA-F-]{32,36}-latch-\d{10}|.*latch-\d{10}")
_ZK_NODE = re.compile(r"n_\d{10}")
MAX_NODES = 500  # a plain tree stops being walked after this many nodes

Info = dict[str, Any]


def _iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def _text(data: bytes, limit: int = 80) -> str:
    text = data.decode("utf-8", "replace")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def latch_layout(children: list[str]) -> str | None:
    """'curator' or 'zookeeper' when every child is an election node of that layout."""
    if not children:
        return None
    if all(_CURATOR_NODE.fullmatch(c) for c in children):
        return "curator"
    if all(_ZK_NODE.fullmatch(c) for c in children):
        return "zookeeper"
    return None


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
    if node.data.startswith(b"{") and b'"aiocoord.cas-lock/' in node.data:
        return base | _lock_info(path, node.data, node.stat.mzxid)
    names = set(children)
    if {"workers", "leaders"} <= names:
        return base | await _task_info(coord, path)
    if {"jobs", "assignments"} <= names:
        return base | await _scheduler_info(coord, path, children)
    layout = latch_layout(children)
    if layout is not None:
        return base | await _latch_info(coord, path, children, layout)
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
        try:
            info["children"].append(await _inspect(coord, join(path, child), depth - 1, budget))
        except NoNodeError:
            continue  # gone while we looked
    return info


def _lock_info(path: str, data: bytes, mzxid: int) -> Info:
    try:
        record = decode_lock(path, data)
    except NodeDataError as exc:
        return {"kind": "cas_lock", "error": exc.reason}
    status = status_of(record, mzxid, now=time.time(), skew=0.0)
    info: Info = {
        "kind": "cas_lock",
        "held": status.held,
        "owner": status.owner,
        "token": status.token,
        "lease_expires": status.lease_expires.isoformat(timespec="seconds")
        if status.lease_expires
        else None,
        "last_run": None,
        "last_failure": None,
    }
    if record is not None and record.last_run is not None:
        run = record.last_run
        info["last_run"] = {
            "window": _iso(run.window),
            "at": _iso(run.at),
            "owner": run.owner,
            "token": run.token,
        }
    if record is not None and record.last_failure is not None:
        fail = record.last_failure
        info["last_failure"] = {"at": _iso(fail.at), "owner": fail.owner, "error": fail.error}
    return info


async def _task_info(coord: Coordinator, path: str) -> Info:
    client = coord.client
    workers: list[Info] = []
    base = join(path, "workers")
    for name in sorted(await _children(coord, base)):
        try:
            node = await client.get(join(base, name))
        except NoNodeError:
            continue
        try:
            w = decode_worker(join(base, name), name, node.data, maven_version_key)
        except NodeDataError as exc:
            workers.append({"id": name, "error": exc.reason})
            continue
        workers.append(
            {
                "id": w.id,
                "version": w.version,
                "host": w.host,
                "pid": w.pid,
                "started": _iso(w.started),
            }
        )
    leaders: dict[str, Info] = {}
    base = join(path, "leaders")
    for task in sorted(await _children(coord, base)):
        try:
            node = await client.get(join(base, task))
        except NoNodeError:
            continue
        try:
            holder, version = decode_leader(join(base, task), node.data)
        except NodeDataError as exc:
            leaders[task] = {"error": exc.reason}
            continue
        leaders[task] = {"leader": holder, "version": version, "token": node.stat.czxid}
    return {"kind": "task_leadership", "workers": workers, "leaders": leaders}


async def _scheduler_info(coord: Coordinator, path: str, children: list[str]) -> Info:
    from .jobs import scheduler_info

    return await scheduler_info(coord, path, children)


async def _latch_info(coord: Coordinator, path: str, children: list[str], layout: str) -> Info:
    client = coord.client
    participants: list[Info] = []
    for name in sort_children(children, LAYOUTS[layout]):
        try:
            node = await client.get(join(path, name))
        except NoNodeError:
            continue
        participants.append(
            {
                "id": node.data.decode("utf-8", "replace"),
                "node": name,
                "token": node.stat.czxid,
                "session": f"0x{node.stat.ephemeral_owner:x}",
            }
        )
    leader = participants[0]["id"] if participants else None
    return {
        "kind": "leader_latch",
        "layout": layout,
        "leader": leader,
        "participants": participants,
    }


async def _children(coord: Coordinator, path: str) -> list[str]:
    try:
        return await coord.client.children(path)
    except NoNodeError:
        return []


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
    if kind == "cas_lock":
        state = "held" if info["held"] else "free"
        token = f"0x{info['token']:x}" if info["token"] is not None else "-"
        lines = [f"{pad}{name}  [CAS lock] {state}, owner {info['owner']}, token {token}"]
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
        for w in workers:
            if "error" in w:
                lines.append(f"{pad}  worker {w['id']}: invalid record: {w['error']}")
            else:
                lines.append(
                    f"{pad}  worker {w['id']:<20} version {w['version']:<10} {w['host']} pid {w['pid']}"
                )
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
