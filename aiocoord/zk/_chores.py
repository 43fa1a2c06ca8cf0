"""`Chores`: background cleanup owned by the session loop rather than by whoever asked.

A latch or mutex left while disconnected still has a node to delete once the
connection is back; the caller is gone by then.  The session loop lends its
task group for such work: it outlives every recipe and is cancelled when the
session is closed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio.abc

__all__ = ("Chores",)

log = logging.getLogger("aiocoord.session")


class Chores:
    """Runs chores in the session loop's task group while the loop runs (`tg`)."""

    __slots__ = ("running", "tg")

    def __init__(self) -> None:
        self.tg: anyio.abc.TaskGroup | None = None
        self.running = 0  # chores running now

    def start(self, chore: Callable[[], Awaitable[None]], name: str) -> bool:
        """Start `chore()`; its exception is logged, never raised.  False if the loop is not running."""
        if self.tg is None:
            return False
        self.tg.start_soon(self._run, chore, name, name=f"aiocoord: {name}")
        return True

    async def _run(self, chore: Callable[[], Awaitable[None]], name: str) -> None:
        self.running += 1
        try:
            await chore()
        except Exception:
            log.exception("%s failed", name)
        finally:
            self.running -= 1
