"""`AtomicLong` and `atomic_long()`: a 64-bit counter changed by compare-and-set, no watch.

Curator's ``DistributedAtomicLong`` (optimistic mode).  Node layout: the
node at `path` holds the value as an 8-byte big-endian signed long (Java's
``ByteBuffer.putLong``); a missing or empty node is 0, and the first write
creates it (parents as containers), so a Java ``DistributedAtomicLong`` on
the same path shares it.

Each change is a versioned write pipelined with a read of the node, so an
attempt is one round trip and a lost one learns the winner's value at once
(Curator's reads and writes separately); the first attempt starts from the
state this object's last write left, so an increment nobody raced costs one
round trip.  After a lost attempt the
contender waits a random while, in a window that doubles with each loss in a
row (`aiocoord._backoff`), so that contenders spread out rather than collide
again.  `retries` counts the attempts lost so far.

Failure handling: nothing is held between calls, so SUSPENDED and LOST only
touch a call under way: it waits for the connection within the request
timeout, or raises `ConnectionLostError` (the outcome of its last write
unknown: read the value again).  A node that holds anything but 8 bytes (or
nothing) raises `NodeDataError` naming it.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Self

from ..._backoff import Backoff
from ..._checks import check_coordinator, check_int
from ...errors import NodeExistsError, NoNodeError
from ...session import Coordinator
from ...zk.paths import validate_path
from ._codec import INT64, decode, encode

__all__ = ("AtomicLong", "atomic_long")

_LONGEST_WAIT = 0.05  # seconds after a lost compare-and-set: past this the counter would idle


class AtomicLong:
    """A shared 64-bit counter at `path` (Curator's ``DistributedAtomicLong``).

    Needs no set-up: use it as it is, or as ``async with`` (which does
    nothing) like the other recipes.  Raises `InvalidPathError` or
    `TypeError` for bad arguments.
    """

    def __init__(self, coord: Coordinator, path: str) -> None:
        self._coord = check_coordinator(coord)
        self._path = validate_path(path)
        self.retries = 0
        """Compare-and-set attempts lost to another writer so far."""
        self._backoff = Backoff(0.0, _LONGEST_WAIT, limit=6)  # `first` from each round trip
        self._known: tuple[int, int] | None = None  # (version, value) our last write left

    @property
    def path(self) -> str:
        return self._path

    async def get(self) -> int:
        """The value now (0 if the node is missing); one read."""
        try:
            node = await self._coord.client.get(self._path)
        except NoNodeError:
            return 0
        return decode(node.data, INT64, self._path, empty_is_zero=True)

    async def try_set(self, expected: int, value: int) -> bool:
        """Set `value` if the counter is `expected` now; whether it was (one compare-and-set)."""
        check_int("expected", expected)
        raw = encode(check_int("value", value), INT64)
        version, current = await self._read()
        if current != expected:
            return False
        self._known = None
        won, version, _ = await self._write(version, raw)
        if won:
            self._known = (version, value)
        return won

    async def set(self, value: int) -> None:
        """Set `value` whatever the counter was (Curator's ``forceSet``)."""
        raw = encode(check_int("value", value), INT64)
        self._known = None
        try:
            await self._coord.client.set(self._path, raw)
        except NoNodeError:
            try:
                await self._coord.client.create(self._path, raw, make_parents=True)
            except NodeExistsError:
                await self._coord.client.set(self._path, raw)

    async def add(self, delta: int) -> int:
        """Add `delta` (may be negative), retrying until it wins; the new value.

        Raises `ConnectionLostError` (the last attempt's outcome unknown),
        `NodeDataError`, and `ConfigError` if the sum leaves the 64-bit range.
        """
        check_int("delta", delta)
        # The state our last write left: if nobody wrote since, one round trip does it.
        version, current = self._known if self._known is not None else await self._read()
        self._known = None  # unknown until this call ends (a lost connection leaves it so)
        while True:
            new = current + delta
            began = time.monotonic()
            won, version, current = await self._write(version, encode(new, INT64, "delta"))
            if won:
                self._backoff.ease()
                self._known = (version, new)
                return new
            self.retries += 1
            # Up to 4, 8, 16, ... round trips of the lost attempt, as Ethernet backs off.
            await self._backoff.failed(first=4 * (time.monotonic() - began))

    async def increment(self) -> int:
        """`add(1)`."""
        return await self.add(1)

    async def decrement(self) -> int:
        """`add(-1)`."""
        return await self.add(-1)

    async def _read(self) -> tuple[int, int]:
        """(version, value); version -1 for a missing node."""
        try:
            node = await self._coord.client.get(self._path)
        except NoNodeError:
            return -1, 0
        return node.stat.version, decode(node.data, INT64, self._path, empty_is_zero=True)

    async def _write(self, version: int, raw: bytes) -> tuple[bool, int, int]:
        """Write `raw` over `version` (-1: create): (won, the node's version, its value if lost)."""
        client = self._coord.client
        if version < 0:
            try:
                created = await client.create(self._path, raw, make_parents=True)
            except NodeExistsError:
                return (False, *await self._read())
            return True, created.stat.version, 0
        stat, node, _ = await client.set_and_get(self._path, raw, version)
        if stat is not None:
            return True, stat.version, 0
        if node is None:
            return False, -1, 0
        return False, node.stat.version, decode(node.data, INT64, self._path, empty_is_zero=True)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def __repr__(self) -> str:
        return f"<AtomicLong {self._path} retries={self.retries}>"


def atomic_long(coord: Coordinator, path: str) -> AtomicLong:
    """An `AtomicLong` at `path`: use it as it is, or as ``async with``."""
    return AtomicLong(coord, path)
