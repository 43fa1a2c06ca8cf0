"""`SharedCount` and `shared_count()`: an int every process sees, changed by compare-and-set.

Curator's ``SharedCount``.  Node layout: the node at `path` holds the count as
a 4-byte big-endian signed int (Java's ``ByteBuffer.putInt``), so a Java
``SharedCount`` on the same path shares it.  Entering creates the node with
`initial` if it is missing (parents as containers), as Curator's ``start()``.

`value` and `version` come from a `NodeCache` (one persistent watch) and from
this process's own writes, whichever is newer.  `try_set` is one versioned
write; `add` retries it, each attempt a write pipelined with a read, so a lost
compare-and-set learns the winner's value in the same round trip, and waits
a random while before the next (a window that doubles with each loss in a
row), so that contenders spread out rather than collide again.

Failure handling: while SUSPENDED or LOST, `value` is the last one seen
(`stale` says so) and writes raise `ConnectionLostError` (outcome unknown) or
wait for the connection within the request timeout; after a reconnect the
cache reads the node again and `changes()` goes on.  A node without data
reads as `initial` (kazoo's ``Counter(support_curator=True)`` makes one before
its first write); a node that holds anything else but 4 bytes is not a
count: `value` and the writes raise `NodeDataError`, and `changes()` skips it
with a log line.

``layout="kazoo"``: kazoo 2.x's ``Counter(path)`` shares the count: the node
holds ``repr(value)`` in ASCII (any size of int), a node without data reads
as `initial` (kazoo reads it as its ``default``), and entering creates the
node with ``repr(initial)`` (parents persistent, as kazoo's ``ensure_path``).
kazoo's ``Counter(path, support_curator=True)`` writes Curator's 4-byte int:
it shares the default layout instead.  A float counter's text is not a count
(`NodeDataError`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator

import anyio.abc

from ..._backoff import Backoff
from ..._checks import check_coordinator, check_int, check_layout
from ..._lifecycle import Lifecycle, Service
from ...errors import ConnectionLostError, NodeDataError, NodeExistsError, NoNodeError
from ...session import Coordinator
from ...zk import CreateMode, Node, Stat
from ...zk.paths import validate_path
from ..cache import NodeCache, node_cache
from ._codec import INT32, decode, decode_text, encode, encode_text

__all__ = ("SharedCount", "shared_count")

_LONGEST_WAIT = 0.05  # seconds after a lost compare-and-set: past this the counter would idle

log = logging.getLogger("aiocoord.recipes.values")


class SharedCount(Service):
    """A shared 32-bit count at `path` (Curator's ``SharedCount``).

    Entering creates the node with `initial` if it is missing and blocks until
    it has been read (waiting for a connection if need be: bound it with
    `anyio.fail_after`); leaving stops watching it (the node stays).
    ``layout="kazoo"`` shares the count with kazoo's ``Counter`` instead (the
    value as ASCII text, see the module docstring).  Raises
    `InvalidPathError`, `TypeError` or `ConfigError` for bad arguments.
    """

    def __init__(
        self, coord: Coordinator, path: str, *, initial: int = 0, layout: str = "curator"
    ) -> None:
        self._coord = check_coordinator(coord)
        self._path = validate_path(path)
        self._layout = check_layout(layout)
        self._empty = check_int("initial", initial)
        self._initial = self._encode(self._empty, "initial")
        self._cache: NodeCache = node_cache(coord, path)
        self._mine: Node | None = None  # the node as our last write left it
        self._backoff = Backoff(0.0, _LONGEST_WAIT, limit=6)  # `first` from each round trip
        self.retries = 0
        """Compare-and-set attempts `add()` lost to another writer so far."""
        self._life = Lifecycle(f"shared count {path}", self._setup, stopped=self._cache.aclose)

    async def start(self) -> None:
        """Create the node if missing and read it; see the class docstring."""
        await self._life.start()

    async def aclose(self) -> None:
        """Stop watching the node; from any task, idempotent."""
        await self._life.aclose()

    async def _setup(self, tg: anyio.abc.TaskGroup) -> None:
        client = self._coord.client
        while True:
            await client.session.wait_connected()
            try:
                if self._layout == "kazoo":
                    await client.create(
                        self._path,
                        self._initial,
                        make_parents=True,
                        parent_mode=CreateMode.PERSISTENT,
                    )
                else:
                    await client.create(self._path, self._initial, make_parents=True)
            except NodeExistsError:
                pass
            except ConnectionLostError:
                continue  # created or not: the next try says which
            break
        await self._cache.start()

    # --- reading -----------------------------------------------------------------------------

    def _node(self) -> tuple[int, bytes]:
        """(version, data): the newer of the cache's node and what our writes saw (-1: none).

        Ours is newer when the watch has not told of our own write yet, or when
        the cache is behind a re-creation of the node that a lost write saw.
        """
        node, mine = self._cache.current, self._mine
        if mine is not None and (node is None or _newer(mine.stat, node.stat)):
            node = mine
        if node is None:
            return (-1, b"")
        return node.stat.version, node.data

    @property
    def path(self) -> str:
        return self._path

    @property
    def value(self) -> int:
        """The count as last seen; `NodeDataError` if the node holds something else.

        `NoNodeError` if the node was deleted (and not created again).
        """
        version, data = self._node()
        if version < 0:
            raise NoNodeError("the shared count's node is gone", path=self._path)
        return self._decode(data)

    def _encode(self, value: int, name: str = "value") -> bytes:
        """`value` as this layout writes it; `ConfigError` naming `name` if it does not fit."""
        return encode_text(value) if self._layout == "kazoo" else encode(value, INT32, name)

    def _decode(self, data: bytes) -> int:
        """The count in `data` as this layout reads it; `NodeDataError` if it is not one."""
        if self._layout == "kazoo":
            return decode_text(data, self._path, empty=self._empty)
        if not data:
            # kazoo's Counter(support_curator=True) makes the node without data before
            # its first write, and reads that as its default: so do we, as `initial`.
            return self._empty
        return decode(data, INT32, self._path)

    @property
    def layout(self) -> str:
        """The node layout: ``"curator"`` or ``"kazoo"``."""
        return self._layout

    @property
    def version(self) -> int:
        """The node's version as last seen, for `try_set` (-1 if it is gone)."""
        return self._node()[0]

    @property
    def stale(self) -> bool:
        """Whether `value` may be behind the server (no connection, or a re-read under way)."""
        return self._cache.stale

    # --- writing -----------------------------------------------------------------------------

    async def try_set(self, value: int, *, version: int) -> bool:
        """Set the count to `value` if the node is still at `version`; whether it was.

        One write.  Raises `ConnectionLostError` (outcome unknown),
        `NoNodeError` if the node is gone, `ConfigError` if `value` does not
        fit in 32 bits (the default layout).
        """
        data = self._encode(check_int("value", value))
        check_int("version", version)
        stat, node, _ = await self._coord.client.set_and_get(self._path, data, version)
        self._learn(stat, data, node)
        return stat is not None

    async def add(self, delta: int) -> int:
        """Add `delta` (may be negative) by compare-and-set, retrying until it wins; the new count.

        Each attempt is one round trip.  Raises `ConnectionLostError` (the
        last attempt's outcome unknown), `NodeDataError`, `NoNodeError`, and
        `ConfigError` if the sum leaves the 32-bit range (the default layout).
        """
        check_int("delta", delta)
        version, data = self._node()
        while True:
            if version < 0:
                raise NoNodeError("the shared count's node is gone", path=self._path)
            new = self._decode(data) + delta
            raw = self._encode(new, "delta")
            began = time.monotonic()
            stat, node, _ = await self._coord.client.set_and_get(self._path, raw, version)
            self._learn(stat, raw, node)
            if stat is not None:
                self._backoff.ease()
                return new
            self.retries += 1
            # Up to 4, 8, 16, ... round trips of the lost attempt, as Ethernet backs off.
            await self._backoff.failed(first=4 * (time.monotonic() - began))
            # What beat us (kept by `_learn`) or what the watch read while we waited,
            # whichever is newer: retrying on the older one would lose again for certain.
            version, data = self._node() if node is not None else (-1, b"")

    def _learn(self, written: Stat | None, data: bytes, node: Node | None) -> None:
        """Keep the newest node our writes saw: what we wrote, or what beat us."""
        seen = Node(data, written) if written is not None else node
        mine = self._mine
        if seen is None:
            self._mine = None  # the node is gone: nothing our writes saw holds any more
            return
        if (
            mine is None
            or mine.stat.czxid != seen.stat.czxid
            or seen.stat.version > mine.stat.version
        ):
            self._mine = seen

    # --- following ---------------------------------------------------------------------------

    def changes(self) -> AsyncIterator[int]:
        """Your own stream of the count after each change from now on.

        Changes may coalesce (each read shows the latest count).  Data that
        is not a count is skipped with a log line; a deleted node yields
        nothing until it is back.  Ends when the count is left.
        """
        return self._changes(self._cache.changes())  # subscribed now, not at the first read

    async def _changes(self, nodes: AsyncIterator[Node | None]) -> AsyncIterator[int]:
        try:
            async for node in nodes:
                if node is None:
                    continue
                try:
                    yield self._decode(node.data)
                except NodeDataError as exc:
                    log.warning("shared count: skipped a change: %s", exc)
        finally:
            await nodes.aclose()  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        try:
            shown = f"value={self.value} version={self.version}"
        except (NodeDataError, NoNodeError) as exc:
            shown = type(exc).__name__
        return f"<SharedCount {self._path} {shown}{' STALE' if self.stale else ''}>"


def shared_count(
    coord: Coordinator, path: str, *, initial: int = 0, layout: str = "curator"
) -> SharedCount:
    """A `SharedCount` at `path`, to use as ``async with``; created with `initial` if missing.

    ``layout="kazoo"`` shares it with kazoo's ``Counter(path)`` (ASCII text).
    """
    return SharedCount(coord, path, initial=initial, layout=layout)


def _newer(a: Stat, b: Stat) -> bool:
    """Whether `a` is a later state than `b`: a later creation, or a later version of it."""
    return a.czxid > b.czxid or (a.czxid == b.czxid and a.version > b.version)
