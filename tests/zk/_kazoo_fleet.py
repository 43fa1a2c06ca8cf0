"""Mixed fleets for the ``layout="kazoo"`` tests: real kazoo contenders in threads.

Each kazoo contender runs in a worker thread with its own ``KazooClient``
(always stopped and closed); aiocoord contenders run in the test's event loop.
`Holders` counts who is inside a critical section on one clock
(``time.monotonic`` in both), from any thread, and keeps the intervals.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from kazoo.client import KazooClient

import aiocoord
from aiocoord import Coordinator

Interval = tuple[float, float, str]


@contextmanager
def kazoo_client(hosts: str, timeout: float = 10.0) -> Iterator[Any]:
    """A started kazoo client that is always stopped and closed."""
    client = KazooClient(hosts=hosts, timeout=timeout)
    client.start(timeout=timeout)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@asynccontextmanager
async def coordinator(hosts: str, session_timeout: float = 4.0) -> AsyncIterator[Coordinator]:
    """A coordinator without a namespace: the tests use whole paths, as kazoo sees them."""
    async with aiocoord.connect(hosts, session_timeout=session_timeout) as coord:
        yield coord


class Holders:
    """Who holds a right now, from any thread: the most seen at once, and the intervals."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inside: dict[str, float] = {}
        self.most = 0
        self.intervals: list[Interval] = []
        self.kinds: list[str] = []  # "kazoo" / "aiocoord" of each hold, in order of entry

    def enter(self, who: str) -> None:
        with self._lock:
            self._inside[who] = time.monotonic()
            self.most = max(self.most, len(self._inside))
            self.kinds.append(who.split("-", 1)[0])

    def leave(self, who: str) -> None:
        with self._lock:
            start = self._inside.pop(who)
            self.intervals.append((start, time.monotonic(), who))

    def inside(self) -> list[str]:
        with self._lock:
            return sorted(self._inside)

    def overlaps(self) -> list[tuple[Interval, Interval]]:
        """Pairs of intervals that overlap in time (none for an exclusive right)."""
        ordered = sorted(self.intervals)
        return [(a, b) for a, b in itertools.pairwise(ordered) if b[0] < a[1]]

    def handovers(self) -> int:
        """How often the right went from one kind of process to the other."""
        ordered = [who.split("-", 1)[0] for _, _, who in sorted(self.intervals)]
        return sum(1 for a, b in itertools.pairwise(ordered) if a != b)
