"""``/coordination/status``: what a `Coordination` runs, read from memory and from ZooKeeper."""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

import anyio

from ..errors import CoordError
from ..recipes.leader_latch import LeaderLatch
from ..recipes.task_leadership import TaskLeadership

if TYPE_CHECKING:
    from ._coordination import Coordination

__all__ = ("status_of",)


async def status_of(c: Coordination, timeout: float) -> dict[str, Any]:
    """The status document of `c`; ZooKeeper reads bounded by `timeout` each."""
    coord = c.coord
    sid = coord.session_id
    out: dict[str, Any] = {
        "participant_id": c.participant_id,
        "session": {
            "state": coord.state.value if coord.state else "CLOSED",
            "session_id": f"0x{sid:x}" if sid else None,
            "timeout": coord.session_timeout if sid else None,
            "hosts": coord.settings.hosts,
            "transitions": dict(c.transitions),
        },
        "health": c.health(),
        "latches": [],
        "locks": [
            {
                "path": h.path,
                "owner": h.owner,
                "token": _hex(h.token),
                "held_for": round(time.monotonic() - h.since, 3),
            }
            for h in c.holds
        ],
        "task_leadership": [],
    }
    for path, latch in c.latches.items():
        entry: dict[str, Any] = {"path": path, "is_leader": latch.has_leadership}
        entry |= await _bounded(_latch_view(latch), timeout)
        task = c.tasks.get(path)
        if task is not None:
            entry["task"] = {
                "running": task.running,
                "token": _hex(task.token) if task.running else None,
                "starts": task.starts,
                "losses": task.losses,
                "failures": task.failures,
                "last_loss": task.last_loss,
                "last_error": task.last_error,
            }
        out["latches"].append(entry)
    for tl in c.task_leaderships:
        entry = {
            "root": tl.root,
            "worker": tl.worker.id,
            "version": tl.worker.version,
            "leading": sorted(tl.leading),
        }
        entry |= await _bounded(_leaders_view(tl), timeout)
        out["task_leadership"].append(entry)
    return out


def _hex(value: int | None) -> str | None:
    return None if value is None else f"0x{value:x}"


async def _latch_view(latch: LeaderLatch) -> dict[str, Any]:
    participants = await latch.participants()
    return {
        "leader": participants[0].id if participants else None,
        "participants": [p.id for p in participants],
    }


async def _leaders_view(tl: TaskLeadership) -> dict[str, Any]:
    return {"leaders": await tl.leaders()}


async def _bounded(view: Awaitable[dict[str, Any]], timeout: float) -> dict[str, Any]:
    """A ZooKeeper read for status, within `timeout`; an error is reported, not raised."""
    result: dict[str, Any] = {"error": f"no answer from ZooKeeper within {timeout:g}s"}
    with anyio.move_on_after(timeout if math.isfinite(timeout) else None):
        try:
            result = await view
        except CoordError as exc:
            result = {"error": str(exc)}
    return result
