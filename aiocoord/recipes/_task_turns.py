"""Task turns: the tasks of one process that share one lock object take it one at a time.

A `Mutex` or a `CasLock` may be entered from several tasks at once; each
task waits here for its turn, in the order they asked, before it contends
in ZooKeeper, so that one object never holds two acquisitions at once.  A
turn may be ended from another task than the one that took it: a hold
entered in one task may be left from another.  (The order among processes
is the lock's own: ``_queue``'s nodes, or ``cas_lock/_turns``.)
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import anyio

__all__ = ("TaskTurns",)


class TaskTurns:
    """One turn at a time, first come first served, among the tasks sharing one lock."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._queued = 0  # tasks waiting for their turn
        self._task: asyncio.Task[Any] | None = None

    @property
    def task(self) -> asyncio.Task[Any] | None:
        """The task whose turn it is, if its taker named it."""
        return self._task

    @property
    def busy(self) -> bool:
        """Whether a turn is taken or waited for (cheap: no await)."""
        return self._lock.locked() or self._queued > 0

    async def take(
        self, task: asyncio.Task[Any] | None = None, deadline: float | None = None
    ) -> bool:
        """Wait for a turn (`task`'s, if given); True once taken, False if `deadline` passed first.

        Blocks while another turn lasts or earlier askers wait.  `deadline`
        is on anyio's clock (None: no bound).  Cancelled while waiting, it
        takes no turn.
        """
        self._queued += 1
        try:
            with anyio.CancelScope(deadline=math.inf if deadline is None else deadline):
                await self._lock.acquire()
                self._task = task
                return True
            return False
        finally:
            self._queued -= 1

    async def take_now(self, task: asyncio.Task[Any] | None = None) -> bool:
        """A turn if nobody has or waits for one (True), else False; never waits."""
        if self.busy:
            return False
        await self._lock.acquire()  # free and nobody queued: taken without suspending
        self._task = task
        return True

    def end(self, task: asyncio.Task[Any] | None = None) -> None:
        """End the turn (only `task`'s, if given), if one is taken: the next task may go."""
        if not self._lock.locked() or (task is not None and self._task is not task):
            return
        self._task = None
        self._lock.release()
