"""``/coordination/status``: what a `Coordination` runs, from memory, with a few bounded reads.

What this process knows (its session state, whether it leads, its leader
tasks, the locks it holds, the cron jobs it leads, the recipes it runs) is
answered from memory;
what only ZooKeeper knows (each latch's participants, task leaders, each
cron job's record) is read while connected,
all reads together within one short budget, so the route answers in about
that time whatever the connection does.  An entry that could not be read
says why under ``"error"``.

Redacted unless asked for detail (``lifespan(status_detail=True)``): the
route is often reachable without authentication, so hosts, the session id,
lock owners and tokens, worker ids and exception texts are left out.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Protocol

import anyio

from .._status_view import Reports, view_of
from ..errors import CoordError
from ..recipes.cron import Cron, CronJobView, read_cron_job
from ..recipes.leader_latch import LeaderLatch
from ..recipes.task_leadership import TaskLeadership
from ..session import Coordinator
from ..zk.states import ConnectionState
from ._holds import Hold
from ._leader_tasks import LeaderTask

__all__ = ("Reported", "status_of")

_READABLE = (ConnectionState.CONNECTED, ConnectionState.RECONNECTED)

Read = Callable[[], Awaitable[dict[str, Any]]]


class Reported(Protocol):
    """What the status reads of a `Coordination` (which imports this module, not the reverse)."""

    coord: Coordinator
    participant_id: str
    transitions: dict[str, int]
    latches: dict[str, LeaderLatch]
    tasks: dict[str, LeaderTask]
    task_leaderships: list[TaskLeadership]
    cron: Cron | None
    recipes: list[Reports]

    @property
    def retiring(self) -> bool: ...

    @property
    def holds(self) -> list[Hold]: ...

    def health(self) -> dict[str, Any]: ...


async def status_of(c: Reported, timeout: float, detail: bool) -> dict[str, Any]:
    """The status document of `c`; its ZooKeeper reads take at most `timeout` in all."""
    coord = c.coord
    sid = coord.client.session.session_id
    session: dict[str, Any] = {
        "state": coord.state.value if coord.state else "CLOSED",
        "timeout": coord.session_timeout if sid else None,
        "transitions": dict(c.transitions),
    }
    if detail:
        session |= {"session_id": f"0x{sid:x}" if sid else None, "hosts": coord.hosts}
    out: dict[str, Any] = {
        "participant_id": c.participant_id,
        "detail": detail,
        "retiring": c.retiring,
        "session": session,
        "health": c.health(),
        "latches": [],
        "locks": [_lock(h.path, h.owner, h.token, h.since, detail) for h in c.holds],
        "task_leadership": [],
        "cron": None,
        "recipes": [view_of(r, detail) for r in c.recipes],
    }
    reads: list[tuple[dict[str, Any], Read]] = []
    for path, latch in c.latches.items():
        entry: dict[str, Any] = {
            "path": path,
            "is_leader": latch.has_leadership,
            "leader": latch.known_leader,
        }
        task = c.tasks.get(path)
        if task is not None:
            entry["task"] = {
                "running": task.running,
                "starts": task.starts,
                "losses": task.losses,
                "failures": task.failures,
                "last_loss": task.last_loss,
                "last_error": task.last_error if detail else _type_only(task.last_error),
            }
            if detail:
                entry["task"]["token"] = _hex(task.token) if task.running else None
        out["latches"].append(entry)
        reads.append((entry, _latch_view(latch, detail)))
    for tl in c.task_leaderships:
        entry = {"root": tl.root, "leading": sorted(tl.leading)}
        if detail:
            entry |= {"worker": tl.worker.id, "version": tl.worker.version}
            reads.append((entry, _leaders_view(tl)))
        out["task_leadership"].append(entry)
    if c.cron is not None:
        out["cron"] = _cron(c.cron, detail, reads)
    await _read_all(reads, timeout, coord.state)
    return out


def _lock(path: str, owner: str, token: int | None, since: float, detail: bool) -> dict[str, Any]:
    held = {"path": path, "held_for": round(time.monotonic() - since, 3)}
    return {"path": path, "owner": owner, "token": _hex(token), **held} if detail else held


def _hex(value: int | None) -> str | None:
    return None if value is None else f"0x{value:x}"


def _type_only(error: str | None) -> str | None:
    """``"ValueError: secret"`` -> ``"ValueError"``: the kind of failure, not its text."""
    return None if error is None else error.split(":", 1)[0]


def _latch_view(latch: LeaderLatch, detail: bool) -> Read:
    async def read() -> dict[str, Any]:
        participants = await latch.participants()
        view: dict[str, Any] = {
            "leader": participants[0].id if participants else None,
            "participant_count": len(participants),
        }
        if detail:
            view["participants"] = [p.id for p in participants]
        return view

    return read


def _leaders_view(tl: TaskLeadership) -> Read:
    async def read() -> dict[str, Any]:
        return {"leaders": await tl.leaders()}

    return read


def _cron(cron: Cron, detail: bool, reads: list[tuple[dict[str, Any], Read]]) -> dict[str, Any]:
    """The cron's entry: its jobs, those led here; each job's record is one of the `reads`."""
    leading = cron.leading
    jobs: list[dict[str, Any]] = []
    for name in sorted(cron.jobs):
        job: dict[str, Any] = {"name": name, "leading": name in leading}
        jobs.append(job)
        reads.append((job, _cron_job(cron, name, detail)))
    entry: dict[str, Any] = {"root": cron.root, "leading": sorted(leading), "jobs": jobs}
    if detail:
        entry |= {"worker": cron.worker.id, "version": cron.worker.version}
    return entry


def _cron_job(cron: Cron, name: str, detail: bool) -> Read:
    async def read() -> dict[str, Any]:
        view = await read_cron_job(cron.coord, cron.root, name)
        return {} if view is None else _cron_job_view(view, detail)

    return read


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat(timespec="seconds")


def _cron_job_view(view: CronJobView, detail: bool) -> dict[str, Any]:
    """A job's record: schedule, next time, running firing, last outcome (who: with detail)."""
    out: dict[str, Any] = {"schedule": view.schedule, "next": _iso(view.next_at)}
    run = view.running
    out["running"] = None
    if run is not None:
        out["running"] = {"scheduled_at": _iso(run.scheduled_at), "attempt": run.attempt}
        if detail:
            out["running"] |= {"worker": run.worker, "token": _hex(run.token)}
    last = view.last
    out["last"] = None
    if last is not None:
        out["last"] = {
            "scheduled_at": _iso(last.scheduled_at),
            "status": last.status,
            "duration": last.duration,
            "error": last.error if detail else _type_only(last.error),
        }
        if detail:
            out["last"] |= {"worker": last.worker, "version": last.version}
    return out


async def _read_all(
    reads: list[tuple[dict[str, Any], Read]], timeout: float, state: ConnectionState | None
) -> None:
    """Run `reads` together within `timeout`; each fills its entry, or says why it could not."""
    if not reads:
        return
    if state not in _READABLE:
        why = f"not read: ZooKeeper is unreachable ({state.value if state else 'CLOSED'})"
        for entry, _ in reads:
            entry["error"] = why
        return
    late = f"not read: no answer from ZooKeeper within {timeout:g}s"
    pending = {id(entry) for entry, _ in reads}

    async def one(entry: dict[str, Any], read: Read) -> None:
        try:
            entry |= await read()
        except CoordError as exc:
            entry["error"] = f"not read: {exc}"
        pending.discard(id(entry))

    with anyio.move_on_after(timeout if math.isfinite(timeout) else None):
        async with anyio.create_task_group() as tg:
            for entry, read in reads:
                tg.start_soon(one, entry, read)
    for entry, _ in reads:
        if id(entry) in pending:
            entry["error"] = late
