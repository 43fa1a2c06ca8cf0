"""`TreeCache` and `tree_cache()`: the I/O half; see the package docstring."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator
from functools import partial
from typing import Any, Final

import anyio
import anyio.abc

from ..._broadcast import SUBSCRIBER_BACKLOG, Broadcast
from ..._checks import check_int
from ..._lifecycle import Lifecycle, Phase, Service
from ..._status_view import StatusView
from ...errors import ConnectionLostError, CoordError, ZooKeeperError
from ...session import Coordinator
from ...zk import EventType, Node, WatchedEvent
from ...zk.paths import validate_path
from ...zk.states import ConnectionEvent
from .._change_signal import ChangeSignal
from ._tree import CacheEvent, CacheEventType, Read, Step, TreeState

__all__ = ("DEFAULT_MAX_NODES", "TreeCache", "tree_cache")

log = logging.getLogger("aiocoord.recipes.cache")

DEFAULT_MAX_NODES: Final = 100_000
"""Nodes a cache holds at most unless told otherwise (``max_nodes=``)."""


class TreeCache(Service):
    """A live copy of the subtree at `path`, kept by one persistent recursive watch.

    ``async with`` blocks until the first full read is held (waiting for a
    connection if need be; bound it with `anyio.fail_after`), and raises
    `CacheOverflowError` if the subtree has more than `max_nodes` nodes.
    Leaving removes the watch and ends every `events()` stream.  It may be left
    from another task than the one that entered it.  The reads (`get`,
    `children`, `nodes`) never block and serve the last state read, also while
    `stale`.  `max_depth` bounds the levels kept below `path` (0: the node
    alone; None: all); `backlog` the events each `events()` subscriber may
    have unread (the differences after a reconnect come at once).  Raises
    `InvalidPathError`, `ConfigError` or `TypeError` for bad arguments.
    """

    def __init__(
        self,
        coord: Coordinator,
        path: str,
        *,
        max_depth: int | None = None,
        max_nodes: int = DEFAULT_MAX_NODES,
        backlog: int = SUBSCRIBER_BACKLOG,
    ) -> None:
        if not isinstance(coord, Coordinator):
            raise TypeError(f"coord must be an aiocoord.Coordinator, not {type(coord).__name__}")
        validate_path(path)
        if max_depth is not None:
            max_depth = check_int("max_depth", max_depth, least=0)
        self._coord = coord
        self._client = coord.client
        self._path = path
        self._state = TreeState(
            path, max_depth=max_depth, max_nodes=check_int("max_nodes", max_nodes, least=1)
        )
        self._events: Broadcast[CacheEvent] = Broadcast(
            replay_last=False, backlog=check_int("backlog", backlog, least=1)
        )
        self._life = Lifecycle(f"cache {path}", self._setup, stopped=self._stopped)
        self._wake = ChangeSignal()
        self._connected = False
        self._drops = 0  # connections lost so far: a re-read started on an older one is void
        self._resync = True  # a full re-read is due (the first one, or after a lost connection)
        self._stale = True
        self._closed = False
        self._failure: CoordError | None = None
        self._failure_to_raise: CoordError | None = None  # by the next `aclose()`

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Add the watch and read the whole subtree; return once it is held.

        Raises `CacheOverflowError` (the subtree is too large),
        `ConnectionLostError` (the watch could not be added within the request
        timeout), `CoordinatorClosedError` (the coordinator closed meanwhile).
        Cancelled, it removes what it set up.
        """
        await self._life.start()

    async def aclose(self) -> None:
        """Remove the watch and end every `events()` stream; from any task, idempotent.

        Raises, once, what stopped the cache while it ran (`CacheOverflowError`).
        """
        await self._life.aclose()
        failure, self._failure_to_raise = self._failure_to_raise, None
        if failure is not None:
            raise failure

    async def _setup(self, tg: anyio.abc.TaskGroup) -> None:
        await tg.start(self._run)

    async def _stopped(self) -> None:
        self._closed = True
        self._state.abort()
        self._events.close()

    async def _run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        client = self._client
        async with client.watch(self._path, recursive=self._state.max_depth != 0) as pwatch:
            pwatch.set_callback(self._on_watch)
            stop = client.session.follow_states(self._on_state, self._on_close)
            try:
                await self._keep(task_status)
            finally:
                stop()

    async def _keep(self, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Start a full re-read whenever one is due and a connection is there; report readiness."""
        ready = False
        while True:
            woken = self._wake.event()
            if self._failure is not None:
                if not ready:
                    raise self._failure  # entering raises it
                log.error("cache of %s stopped: %s", self._path, self._failure)
                self._events.close()  # each stream raises it
                return
            if self._closed:
                return
            if not ready and not self._stale:
                ready = True
                task_status.started()
            if self._resync and self._connected and self._state.building is None:
                drops = self._drops
                try:
                    # On another server (a new session says nothing of what we saw) the
                    # next reads must not be older than what we served: catch up first.
                    # The first read has served nothing yet (and the session reads its
                    # own writes): it goes at once.
                    if self._state.generation:
                        await self._client.sync("/")
                except ConnectionLostError:
                    continue
                if drops == self._drops and self._connected:
                    self._resync = False
                    self._send(self._state.begin())
                continue
            await woken.wait()

    # --- what the connection brings (callbacks, in its order) --------------------------------

    def _on_state(self, event: ConnectionEvent) -> None:
        if event.state.is_connected:
            self._connected = True
        elif self._connected or not self._stale:
            self._connected = False
            self._drops += 1
            self._went_stale()
        self._wake.fire()

    def _went_stale(self) -> None:
        self._resync = True
        self._state.abort()
        if not self._stale:
            self._stale = True
            log.info("cache of %s: connection lost; stale until read again", self._path)
            self._events.publish(CacheEvent(CacheEventType.STALE, self._path))

    def _on_close(self) -> None:
        self._closed = True
        self._events.close()  # the coordinator closed: no more changes will be seen
        self._wake.fire()

    def _on_watch(self, event: WatchedEvent) -> None:
        if event.type is EventType.SESSION_LOST:
            return
        if self._resync and self._state.building is None:
            return  # the full re-read to come is later in the connection's order
        self._apply(self._state.on_event(event.type, event.path))

    def _on_answer(self, read: Read, answer: Node | list[str] | ZooKeeperError) -> None:
        try:
            step = self._state.on_answer(read, answer)
        except CoordError as exc:
            self._failure = self._failure_to_raise = exc
            self._state.abort()
            self._wake.fire()
            return
        self._apply(step)

    def _apply(self, step: Step) -> None:
        for event in step.events:
            self._events.publish(event)
        self._send(step.reads)
        if step.fresh:
            self._stale = False
            log.debug("cache of %s: %d nodes read", self._path, len(self._state.served.nodes))
            self._events.publish(CacheEvent(CacheEventType.FRESH, self._path))
            self._wake.fire()

    def _send(self, reads: list[Read]) -> None:
        client = self._client
        try:
            for read in reads:
                client.read_now(read.path, partial(self._on_answer, read), children=read.children)
        except ConnectionLostError:
            # No connection: the states' callback follows; what was not sent is re-read then.
            self._went_stale()
            self._wake.fire()

    # --- reading the cache -------------------------------------------------------------------

    @property
    def path(self) -> str:
        return self._path

    @property
    def stale(self) -> bool:
        """Whether the cache may be behind the server: no connection, or a re-read under way."""
        return self._stale

    @property
    def unreadable(self) -> frozenset[str]:
        """Paths the session may not read (ACL): left out of the cache, each logged once."""
        return frozenset(self._state.unreadable)

    def get(self, path: str) -> Node | None:
        """The node at `path` as last read, or None (absolute paths; the root included)."""
        return self._state.served.nodes.get(validate_path(path, allow_reserved=True))

    def children(self, path: str) -> list[str]:
        """Sorted names of the cached children of `path` ([] if none or unknown)."""
        return sorted(self._state.served.kids.get(validate_path(path, allow_reserved=True), ()))

    def nodes(self) -> dict[str, Node]:
        """Every cached node by path: a copy, as one state of the cache."""
        return dict(self._state.served.nodes)

    def __len__(self) -> int:
        return len(self._state.served.nodes)

    def events(self) -> AsyncIterator[CacheEvent]:
        """Your own stream of every `CacheEvent` from now on, in order.

        Subscribes at the call, so ``stream = cache.events()`` then
        ``cache.nodes()`` misses nothing between them.  Each subscriber has its
        own buffer of `backlog` events; one that falls further behind gets those
        it had, then `SubscriberLagged` (call `nodes()` and subscribe again).
        The stream ends when the cache is left, or raises what stopped it
        (`CacheOverflowError`).  Leaving the ``async for`` unsubscribes.
        """
        return self._subscribe()

    def _subscribe(self) -> AsyncGenerator[CacheEvent, None]:
        send, receive = self._events.open()

        async def iterate() -> AsyncGenerator[CacheEvent, None]:
            try:
                with receive:
                    async for event in receive:
                        yield event
                self._events.check(send)
                if self._failure is not None:
                    raise self._failure
            finally:
                self._events.unsubscribe(send)

        return iterate()

    def _state_word(self) -> str:
        if self._closed or self._failure is not None or self._life.phase is Phase.CLOSED:
            return "CLOSED"
        return "STALE" if self._stale else "FRESH"

    def status_view(self) -> StatusView:
        """This cache for a status page, from memory: FRESH, STALE or CLOSED, its node count."""
        facts: dict[str, Any] = {"nodes": len(self)}
        if self._state.unreadable:
            facts["unreadable"] = len(self._state.unreadable)
        return StatusView("tree_cache", self._path, self._state_word(), facts)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._path} nodes={len(self)} {self._state_word()}>"


def tree_cache(
    coord: Coordinator,
    path: str,
    *,
    max_depth: int | None = None,
    max_nodes: int = DEFAULT_MAX_NODES,
    backlog: int = SUBSCRIBER_BACKLOG,
) -> TreeCache:
    """A `TreeCache` of the subtree at `path`, to use as ``async with``."""
    return TreeCache(coord, path, max_depth=max_depth, max_nodes=max_nodes, backlog=backlog)
