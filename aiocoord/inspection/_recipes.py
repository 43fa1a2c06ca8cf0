"""The plain dicts for a CAS lock, task leadership, a leader latch and a mutex.

Each is read through the recipe's describe API; a record that does not decode
is reported with its reason, never raised.
"""

from __future__ import annotations

from datetime import datetime

from ..errors import NodeDataError
from ..recipes.cas_lock import LockRun, lock_view
from ..recipes.leader_latch import describe_latch
from ..recipes.mutex import (
    MutexContender,
    describe_mutex,
    describe_read_write_lock,
    describe_semaphore,
)
from ..recipes.task_leadership import describe_task_leadership
from ..session import Coordinator
from ._cron import workers_info
from ._info import Info

__all__ = (
    "iso",
    "latch_info",
    "lock_info",
    "mutex_info",
    "rwlock_info",
    "semaphore_info",
    "task_info",
)


def iso(when: datetime | None) -> str | None:
    """A UTC time as ISO 8601 to the second, as the JSON output shows times."""
    return None if when is None else when.isoformat(timespec="seconds")


def _run_info(run: LockRun) -> Info:
    return {"window": iso(run.window), "at": iso(run.at), "owner": run.owner, "token": run.token}


def lock_info(path: str, data: bytes, mzxid: int) -> Info:
    """A CAS lock, from its node's `data` (read at modification zxid `mzxid`)."""
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


async def task_info(coord: Coordinator, path: str) -> Info:
    """Task leadership at `path`: its workers and who leads each task."""
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


async def latch_info(coord: Coordinator, path: str) -> Info:
    """A leader latch at `path`: its participants in election order."""
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


def _contender(c: MutexContender) -> Info:
    entry: Info = {"id": c.id, "node": c.node, "token": c.token, "session": f"0x{c.session:x}"}
    if c.invalid is not None:
        entry["error"] = c.invalid
    return entry


async def mutex_info(coord: Coordinator, path: str) -> Info:
    """A mutex at `path`: its holder and the contenders in line."""
    view = await describe_mutex(coord, path)
    return {
        "kind": "mutex",
        "holder": view.holder.id if view.holder else None,
        "token": view.holder_token,
        "contenders": [_contender(c) for c in view.contenders],
    }


async def rwlock_info(coord: Coordinator, path: str) -> Info:
    """A read/write lock at `path`: readers and writers in line, each saying if it holds."""
    view = await describe_read_write_lock(coord, path)
    contenders = [
        _contender(c) | {"mode": "write" if "__WRIT__" in c.node else "read", "holds": h}
        for c, h in zip(view.contenders, view.holding, strict=True)
    ]
    return {"kind": "read_write_lock", "contenders": contenders}


async def semaphore_info(coord: Coordinator, path: str) -> Info:
    """A semaphore at `path`: its lease nodes and the contenders waiting for a lease."""
    view = await describe_semaphore(coord, path)
    return {
        "kind": "semaphore",
        "leases": [_contender(c) for c in view.leases],
        "waiting": [_contender(c) for c in view.waiting],
    }
