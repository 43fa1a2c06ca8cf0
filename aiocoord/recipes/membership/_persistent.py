"""`PersistentNode` and `persistent_node()`: a node that stays there while the block runs.

Curator's ``PersistentNode``.  Node layout: the node itself, at `path`
(ephemeral by default), or for ``EPHEMERAL_SEQUENTIAL`` Curator's protected
name ``<parent>/_c_<uuid>-<name><seq>``, holding the caller's data.

Failure handling: the node is created first (Curator's order: create, then
watch), then watched by a `NodeCache` (one persistent watch), and put back
whenever the cache, fresh, shows it missing: after a lost session, or
deleted by someone.  An ephemeral node left by an older session in which
this node sent its create (the client gave the session up before the server
did) is ours: it is deleted (with its version) and created again at once.
An ephemeral node of any other session is waited out.  `set_data()` is
remembered and written once a connection is there, so it survives a
reconnect and a new session.  `stat` and the `on_change` callback tell the
owner which node (czxid, ephemeral owner, version) it holds, each time that
changes.  Leaving deletes the node (shielded and bounded), unless the owner
deletes it itself (``aclose(delete=False)``: a worker deleting its nodes in
one transaction); an ephemeral node the deletion missed goes with the
session.  ``PERSISTENT_WITH_TTL`` is refused (the server would delete the
held node once its TTL passed, and this would make it again): a
`ContainerNode` with a TTL child is `persistent_ttl_node`'s (``_ttl.py``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import ClassVar, Final

import anyio
import anyio.abc

from ..._checks import check_bytes, check_coordinator
from ..._lifecycle import Lifecycle, Phase, Service
from ..._status_view import StatusView
from ...errors import (
    BadVersionError,
    ConfigError,
    ConnectionLostError,
    CoordinatorClosedError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    TransactionFailed,
)
from ...session import Coordinator
from ...zk import CreateMode, CreateOp, Node, Stat
from ...zk.client import SentMulti
from ...zk.paths import validate_path
from .._change_signal import ChangeSignal
from ..cache import NodeCache, node_cache

__all__ = ("MODES", "ContainerNode", "PersistentNode", "persistent_node")

log = logging.getLogger("aiocoord.recipes.membership")

MODES: Final = (
    CreateMode.EPHEMERAL,
    CreateMode.PERSISTENT,
    CreateMode.EPHEMERAL_SEQUENTIAL,
)
"""The modes a `PersistentNode` takes; ``EPHEMERAL_SEQUENTIAL`` is always protected."""

_NO_TTL = (
    "is refused: the server deletes a TTL node under its owner once it was not modified for "
    "ttl ms; use aiocoord.persistent_ttl_node(coord, path, ttl=...) (Curator's PersistentTtlNode)"
)


class PersistentNode(Service):
    """A node kept at `path` while the ``async with`` block runs (Curator's ``PersistentNode``).

    Entering blocks until the node is there (waiting for a connection if
    need be: bound it with `anyio.fail_after`); leaving deletes it, shielded
    and bounded.  In between it is created again whenever it goes: after a
    lost session (an ephemeral node), or deleted by anyone.  `mode` is
    ``CreateMode.EPHEMERAL`` (the default), ``PERSISTENT`` or
    ``EPHEMERAL_SEQUENTIAL`` (Curator's protected name; `actual_path` tells
    the name it got, a new one each time it is created again).
    ``PERSISTENT_WITH_TTL`` (and any `ttl`) raises `ConfigError`: the server
    would delete the held node after its TTL; `persistent_ttl_node` keeps a
    node that outlives its owner by about a TTL.

    While SUSPENDED the holder sees nothing: the node is left as it is (an
    ephemeral one lives as long as the session).  After LOST the node is
    created again on the new session: the old session's node, if the server
    still has it, is deleted first (it is ours: this node created it).
    `on_change`, if given, is called (in the event loop, without awaiting:
    it must be quick and must not raise) each time `stat` changes.  Raises
    `InvalidPathError`, `ConfigError` or `TypeError` for bad arguments.
    """

    _modes: ClassVar[tuple[CreateMode, ...]] = MODES

    def __init__(
        self,
        coord: Coordinator,
        path: str,
        *,
        data: bytes = b"",
        mode: CreateMode = CreateMode.EPHEMERAL,
        ttl: int | None = None,
        on_change: Callable[[], object] | None = None,
    ) -> None:
        self._coord = check_coordinator(coord)
        if on_change is not None and not callable(on_change):
            raise TypeError(f"on_change must be callable, not {type(on_change).__name__}")
        if mode is CreateMode.PERSISTENT_WITH_TTL:
            raise ConfigError("mode", f"CreateMode.PERSISTENT_WITH_TTL {_NO_TTL}")
        if mode not in self._modes or not isinstance(mode, CreateMode):
            shown = ", ".join(f"CreateMode.{m.name}" for m in self._modes)
            raise ConfigError("mode", f"must be one of {shown}, not {mode!r}")
        if ttl is not None:
            raise ConfigError("ttl", _NO_TTL)
        self._path = validate_path(path)
        if self._path == "/":
            raise ConfigError("path", "must not be the root")
        self._mode = mode
        self._data = check_bytes(data)
        self._wanted = 0  # generation of `_data`: each set_data() adds one
        self._written = 0  # the generation the server holds
        self._actual: str | None = None
        self._cache: NodeCache | None = None
        self._wake = ChangeSignal()
        self._on_written = ChangeSignal()
        self._leaving = False
        self._done = anyio.Event()
        self._warned: int | None = None
        self._made = False  # whether our last create succeeded (the cache may lag behind it)
        self._made_in: int | None = None  # the session our last successful create went in
        self._stat: Stat | None = None
        self._on_change = on_change
        # The sessions in which we sent a create (their nodes are ours), each with when a
        # later one was first used (inf: none yet); `_sent_in` forgets the long expired.
        self._sessions: dict[int, float] = {}
        self._delete_on_leave = True
        self._life = Lifecycle(
            f"persistent node {path}", self._setup, stopping=self._stopping, stopped=self._stopped
        )

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Create the node and return once it is there (see the class docstring)."""
        await self._life.start()

    async def aclose(self, *, delete: bool = True) -> None:
        """Delete the node (shielded, bounded) and stop watching it; from any task, idempotent.

        With ``delete=False`` the node is left for the caller to delete (say,
        in one transaction with other nodes); `stat` still tells which node
        it was.
        """
        if not delete:
            self._delete_on_leave = False
        await self._life.aclose()

    async def _setup(self, tg: anyio.abc.TaskGroup) -> None:
        await tg.start(self._run)

    async def _stopping(self) -> None:
        self._leaving = True
        self._wake.fire()
        with anyio.move_on_after(self._timeout() * 2):
            await self._done.wait()

    async def _stopped(self) -> None:
        self._on_written.fire()

    def _timeout(self) -> float:
        return self._coord.client.session.timing.request_timeout

    async def _run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        ready: Callable[[], None] | None = task_status.started
        first = not self._mode.sequential
        try:
            while not self._leaving:
                path = self._path
                if self._mode.sequential:
                    path = await self._create_sequential()
                # Create, then watch (Curator's order), the requests written together: the
                # cache's first read finds the node there, one round trip in all.
                sent = self._send_create() if first else None
                first = False
                async with AsyncExitStack() as stack:
                    cache = await stack.enter_async_context(node_cache(self._coord, path))
                    self._cache = cache
                    if sent is not None:
                        await self._created(sent)
                    tg = await stack.enter_async_context(anyio.create_task_group())
                    tg.start_soon(self._forward, cache)
                    ready = await self._keep(cache, ready)
                    tg.cancel_scope.cancel()
                if self._coord.client.session.closed:
                    if ready is not None:
                        raise CoordinatorClosedError(
                            f"the coordinator closed before {path} was made"
                        )
                    return
        finally:
            self._cache = None
            self._done.set()

    def _send_create(self) -> tuple[SentMulti, int, int] | None:
        """Write the create now, without waiting (None: no connection; the keeper creates)."""
        session = self._coord.client.session.session_id
        if session is None:
            return None
        self._sent_in(session)
        op = CreateOp(self._path, self._data, self._mode)
        try:
            return self._coord.client.send_multi([op]), self._wanted, session  # written now
        except ConnectionLostError:
            return None

    async def _created(self, sent: tuple[SentMulti, int, int]) -> None:
        """The outcome of `_send_create` (in by now: its reply came before the cache's)."""
        multi, wanted, session = sent
        if not multi.done():
            arrived = asyncio.Event()
            multi.add_done_callback(lambda _: arrived.set())
            await arrived.wait()
        try:
            multi.result()
        except (TransactionFailed, ConnectionLostError) as exc:
            # There already, or its parent missing: the keeper sees to it.
            log.debug("persistent node %s: create failed: %s", self._path, exc)
            return
        self._made_it(wanted, session)

    def _made_it(self, wanted: int, session: int) -> None:
        """Our create went through in `session`, holding the data of generation `wanted`."""
        self._made = True
        self._made_in = session
        self._mark_written(wanted)
        log.info("persistent node %s created", self._path)

    async def _forward(self, cache: NodeCache) -> None:
        """Wake the keeper at each change the cache sees (and once its stream ends)."""
        try:
            async for _ in cache.events():
                self._wake.fire()
        finally:
            self._wake.fire()

    async def _create_sequential(self) -> str:
        """Create the protected sequential node; its real path."""
        client = self._coord.client
        while True:
            await client.session.wait_connected()
            self._sent_in(self._coord.client.session.session_id)
            try:
                created = await client.create_protected(
                    self._path, self._data, mode=self._mode, make_parents=True
                )
            except ConnectionLostError:
                continue
            self._actual = created.path
            self._written = self._wanted
            log.info("persistent node %s created as %s", self._path, created.path)
            return created.path

    async def _keep(
        self, cache: NodeCache, ready: Callable[[], None] | None
    ) -> Callable[[], None] | None:
        """Keep the node at the cache's path; return once it needs a new path (or on leaving).

        Returns `ready` until the node was first seen there, then None.
        """
        while True:
            woken = self._wake.event()
            if self._leaving:
                if self._delete_on_leave:
                    # A node we just made may not have reached the cache yet: ours all the same.
                    await self._delete(cache.current, force=cache.current is None and self._made)
                return ready
            if self._coord.client.session.closed:
                return ready
            node = cache.current
            if not cache.stale:
                self._set_stat(node.stat if node is not None and self._ours(node) else None)
                if node is None or (self._mode.sequential and not self._ours(node)):
                    if self._mode.sequential:
                        if node is not None:  # an older session's: ours, and left behind
                            await self._delete(node, force=True)
                        return ready
                    self._made = False
                    await self._create()
                elif self._left_behind(node):
                    log.info(
                        "persistent node %s: deleting the node of our ended session 0x%x",
                        cache.path,
                        node.stat.ephemeral_owner,
                    )
                    await self._delete(node, force=True, version=node.stat.version)
                elif self._ours(node):
                    if ready is not None:
                        ready()
                        ready = None
                    self._actual = cache.path
                    await self._write(node)
                elif self._warned != node.stat.ephemeral_owner:
                    self._warned = node.stat.ephemeral_owner
                    log.warning(
                        "persistent node %s: held by session 0x%x, not ours; waiting for it to go",
                        cache.path,
                        node.stat.ephemeral_owner,
                    )
            await woken.wait()

    def _ours(self, node: Node) -> bool:
        if not self._mode.ephemeral:
            return True
        return node.stat.ephemeral_owner == self._coord.client.session.session_id

    def _left_behind(self, node: Node) -> bool:
        """Whether `node` is ephemeral, of an earlier session of ours in which we created it."""
        owner = node.stat.ephemeral_owner
        return (
            self._mode.ephemeral
            and owner != self._coord.client.session.session_id
            and owner in self._sessions
        )

    def _sent_in(self, session: int | None) -> None:
        """A create is about to go in `session`: a node that session owns there is ours.

        The sessions before it are remembered for twice the session timeout after
        it: the server heard of them last before it began, and expires a session
        (its nodes with it) a timeout after that.  One entry per session for the
        node's whole life would add up over many expiries.
        """
        if session is None or session in self._sessions:
            return
        now = time.monotonic()
        keep = 2 * self._coord.client.session.timing.session_timeout
        for earlier, superseded in list(self._sessions.items()):
            if superseded == math.inf:
                self._sessions[earlier] = now
            elif now - superseded > keep:
                del self._sessions[earlier]
        self._sessions[session] = math.inf

    def _set_stat(self, stat: Stat | None) -> None:
        if stat == self._stat:
            return
        self._stat = stat
        if self._on_change is not None:
            try:
                self._on_change()
            except Exception:
                log.exception("persistent node %s: the on_change callback failed", self._path)

    async def _create(self) -> None:
        wanted = self._wanted
        self._sent_in(self._coord.client.session.session_id)
        try:
            created = await self._coord.client.create(
                self._path, self._data, mode=self._mode, make_parents=True
            )
        except (NodeExistsError, ConnectionLostError) as exc:
            # The cache shows what is there once it has read it, or once connected again.
            log.debug("persistent node %s: create failed: %s", self._path, exc)
            return
        self._made_it(wanted, created.stat.ephemeral_owner)

    async def _write(self, node: Node) -> None:
        if self._written >= self._wanted:
            return
        wanted = self._wanted
        if node.data == self._data:
            self._mark_written(wanted)
            return
        assert self._actual is not None
        try:
            await self._coord.client.set(self._actual, self._data)
        except (NoNodeError, ConnectionLostError) as exc:
            log.debug("persistent node %s: write failed: %s", self._actual, exc)
            return  # the cache says what follows (gone: created again with the data)
        self._mark_written(wanted)

    def _mark_written(self, wanted: int) -> None:
        if wanted > self._written:
            self._written = wanted
            self._on_written.fire()

    async def _delete(self, node: Node | None, *, force: bool = False, version: int = -1) -> None:
        """Delete the node at the cache's path if it is ours (or `force`), shielded and bounded."""
        cache = self._cache
        if cache is None or not (force or (node is not None and self._ours(node))):
            return
        await self._delete_path(cache.path, version)

    async def _delete_path(self, path: str, version: int = -1) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(self._timeout()):
            try:
                await self._coord.client.delete(path, version)
            except (NoNodeError, BadVersionError, NotEmptyError, ConnectionLostError) as exc:
                log.debug("persistent node %s: delete failed: %s", path, exc)

    # --- use ---------------------------------------------------------------------------------

    async def set_data(self, data: bytes) -> None:
        """Set the node's data, now and for every time it is created again.

        Blocks until the server holds `data` (or newer data set since),
        waiting for a connection if need be.  Cancelled, the data is still
        kept and written once connected.  Raises `CoordinatorClosedError` if
        the node is left first, `TypeError` if `data` is not bytes.
        """
        self._data = check_bytes(data)
        self._wanted += 1
        wanted = self._wanted
        self._wake.fire()
        while self._written < wanted:
            event = self._on_written.event()
            if self._life.phase is not Phase.RUNNING:
                raise CoordinatorClosedError(f"persistent node {self._path} is not running")
            await event.wait()

    @property
    def path(self) -> str:
        """The path given (for a sequential node: the prefix of its real name)."""
        return self._path

    @property
    def actual_path(self) -> str | None:
        """The node's real path once created (a protected sequential node's full name)."""
        return self._actual

    @property
    def data(self) -> bytes:
        """The data the node holds or is to hold (the last `set_data()`)."""
        return self._data

    @property
    def mode(self) -> CreateMode:
        return self._mode

    @property
    def stat(self) -> Stat | None:
        """The node's stat as last seen while ours (None: absent, or not ours).

        Kept while the connection is away (it may be behind then); for an
        ephemeral node, ``stat.ephemeral_owner`` is the session it belongs to.
        """
        return self._stat

    @property
    def created_in(self) -> int | None:
        """The session in which our last successful create of the node went (None: none yet).

        Known from the create's reply, before the node's cache shows it (`stat`
        may lag behind it); for a persistent node, 0.
        """
        return self._made_in

    @property
    def present(self) -> bool:
        """Whether the node is there and ours, as last seen (False while stale)."""
        cache = self._cache
        node = None if cache is None or cache.stale else cache.current
        return node is not None and self._ours(node)

    def status_view(self) -> StatusView:
        """This node for a status page, from memory: PRESENT, ABSENT, STALE (no connection,
        or a re-read under way), or the phase outside RUNNING (NEW, CLOSING, CLOSED)."""
        if self._life.phase is not Phase.RUNNING:
            state = self._life.phase.value
        elif self._cache is None or self._cache.stale:
            state = "STALE"
        else:
            state = "PRESENT" if self.present else "ABSENT"
        facts = {"mode": self._mode.name, "actual_path": self._actual}
        made_in = self._made_in
        private = {"session": None if not made_in else f"0x{made_in:x}"}
        return StatusView("persistent_node", self._path, state, facts, private)

    def __repr__(self) -> str:
        state = self._life.phase.value if self._life.phase is not Phase.RUNNING else None
        if state is None:
            state = "PRESENT" if self.present else "ABSENT"
        shown = self._actual or self._path
        return f"<PersistentNode {shown} {self._mode.name} {state}>"


def persistent_node(
    coord: Coordinator,
    path: str,
    *,
    data: bytes = b"",
    mode: CreateMode = CreateMode.EPHEMERAL,
    ttl: int | None = None,
    on_change: Callable[[], object] | None = None,
) -> PersistentNode:
    """A `PersistentNode` at `path`, to use as ``async with``: created on entry, deleted on leaving."""
    return PersistentNode(coord, path, data=data, mode=mode, ttl=ttl, on_change=on_change)


class ContainerNode(PersistentNode):
    """A `PersistentNode` whose node is a CONTAINER: the base of `PersistentTtlNode`.

    The server removes a container once it has had a child and has none left,
    so one is kept this way only beside a child (the TTL node's ``touch``).
    Like Curator's ``PersistentNode``, it writes its data to a node it finds
    already there.  Not for direct use: `persistent_ttl_node` is.
    """

    _modes = (CreateMode.CONTAINER,)

    def __init__(
        self,
        coord: Coordinator,
        path: str,
        *,
        data: bytes = b"",
        on_change: Callable[[], object] | None = None,
    ) -> None:
        super().__init__(coord, path, data=data, mode=CreateMode.CONTAINER, on_change=on_change)
        self._wanted = 1  # a node found there is written with our data, as Curator's setData
