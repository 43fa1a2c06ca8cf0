"""Tracked holds: lock and once_per bodies a `Coordination` shows in status and health.

Each running body is a `Hold` in the coordination's list, with the session it
got its right on: `Coordination.stuck` names a body still running after that
session was lost (its cancellation did not take).  Metrics, when given, count
acquisitions, busy and failed attempts, and how long each lock was held.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import CoordError, LockNotAcquired
from ..recipes.cas_lock import CasLock, Slot, once_per
from ..session import Coordinator

if TYPE_CHECKING:
    from ..metrics import Metrics

__all__ = ("Hold", "tracked_lock", "tracked_once_per")


@dataclass(slots=True)
class Hold:
    """A tracked lock (or once_per run) body while it runs."""

    path: str
    owner: str
    token: int | None
    session: int | None
    since: float = field(default_factory=time.monotonic)


@asynccontextmanager
async def tracked_lock(
    coord: Coordinator,
    holds: list[Hold],
    metrics: Metrics | None,
    path: str,
    *,
    owner: str,
    lease: float,
    skew: float | None,
    blocking: bool,
) -> AsyncIterator[CasLock]:
    """Hold a `CasLock` at `path`, listed in `holds` while the body runs."""
    lock = CasLock(coord, path, owner=owner, lease=lease, skew=skew)
    hold: Hold | None = None
    try:
        async with lock.hold(blocking=blocking):
            hold = Hold(path, lock.owner, lock.token, coord.client.session.session_id)
            holds.append(hold)
            if metrics is not None:
                metrics.observe_lock(path, "acquired")
            try:
                yield lock
            finally:
                holds.remove(hold)
    except LockNotAcquired:
        if metrics is not None:
            metrics.observe_lock(path, "busy")
        raise
    except CoordError:
        if hold is None and metrics is not None:
            metrics.observe_lock(path, "error")
        raise
    finally:
        if hold is not None and metrics is not None:
            metrics.lock_held.labels(path=path).observe(time.monotonic() - hold.since)


@asynccontextmanager
async def tracked_once_per(
    coord: Coordinator,
    holds: list[Hold],
    path: str,
    interval: float,
    *,
    owner: str,
    lease: float,
    skew: float | None,
) -> AsyncIterator[Slot]:
    """Run `once_per` at `path`; a slot this process got is listed in `holds` while it runs."""
    async with once_per(coord, path, interval, owner=owner, lease=lease, skew=skew) as slot:
        if not slot.acquired:
            yield slot
            return
        hold = Hold(path, owner, slot.token, coord.client.session.session_id)
        holds.append(hold)
        try:
            yield slot
        finally:
            holds.remove(hold)
