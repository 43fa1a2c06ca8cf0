"""`ZkClient`: the low-level ZooKeeper client the recipes (and users) call.

Typed operations over the session core: create (persistent, ephemeral,
sequential, container, TTL; Curator-style protected creates), get/set/delete
with versions, children, exists, multi with per-operation results, one-shot
watches as awaitables and persistent watches as async iterators.  Paths are
validated on the way in and the chroot applied; reads are retried across a
reconnect within the request deadline, writes never are (their outcome is
unknown after a connection loss: `ConnectionLostError`).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Any, TypeVar

import anyio
import anyio.lowlevel

from ..errors import (
    BadVersionError,
    ConnectionLostError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    TransactionFailed,
    ZooKeeperError,
)
from . import _wire
from ._connection import _Pending, wait_reply
from ._session import SessionCore
from ._watches import PersistentWatch, Watch, WatchKind
from .paths import basename, join, parent, validate_path
from .types import (
    ACL,
    CheckOp,
    Created,
    CreateMode,
    CreateOp,
    DeleteOp,
    ErrorResult,
    Node,
    Op,
    OpResult,
    SetDataOp,
    Stat,
)

__all__ = ("MAX_DATA", "PROTECTED_PREFIX", "MultiResults", "SentMulti", "ZkClient")

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_DATA = 0xFFFFF  # jute.maxbuffer's default: the server refuses larger packets
PROTECTED_PREFIX = "_c_"  # Curator's ProtectedUtils prefix


def _node(body: bytes) -> Node:
    """The `Node` in a getData reply."""
    resp = _wire.parse_body(4, body)
    return Node(resp.data or b"", Stat._from_wire(resp.stat))


def _check_data(data: object, name: str = "data") -> bytes:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"{name} must be bytes, not {type(data).__name__}")
    raw = bytes(data)
    if len(raw) > MAX_DATA:
        raise ValueError(f"{name} is {len(raw)} bytes; ZooKeeper accepts at most {MAX_DATA}")
    return raw


def _check_version(version: object) -> int:
    if not isinstance(version, int) or isinstance(version, bool) or not -1 <= version <= 0x7FFFFFFF:
        raise ValueError(f"version must be an int >= -1, not {version!r}")
    return version


def _check_mode(mode: object, ttl: object) -> CreateMode:
    if not isinstance(mode, CreateMode):
        raise TypeError(f"mode must be a CreateMode, not {mode!r}")
    if mode.ttl:
        if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl <= 0:
            raise ValueError(
                f"ttl must be a positive number of milliseconds for {mode.name}, not {ttl!r}"
            )
    elif ttl is not None:
        raise ValueError(f"ttl is only valid with a *_WITH_TTL mode, not {mode.name}")
    return mode


class MultiResults(list[OpResult]):
    """The per-operation results of a `multi`, plus the transaction's `zxid`.

    Every node the transaction created has that zxid as its czxid, and every
    node it changed as its mzxid (ZooKeeper 3.8 returns creates without a stat).
    """

    zxid: int = 0


class SentMulti:
    """A `multi` already written (`ZkClient.send_multi`): its outcome once the reply is in."""

    def __init__(self, pending: _Pending, parse: Callable[[int, bytes], MultiResults]) -> None:
        self._pending = pending
        self._parse = parse

    def done(self) -> bool:
        return self._pending.done.done()

    def add_done_callback(self, callback: Callable[[SentMulti], None]) -> None:
        """Call `callback(self)` from the event loop once the reply (or the connection's end) is in."""
        self._pending.done.add_done_callback(lambda _future: callback(self))

    def result(self) -> MultiResults:
        """What `multi` would have returned or raised; only once `done()`."""
        if not self.done():
            raise RuntimeError("the multi has no reply yet")
        pending = self._pending
        if pending.error is not None:
            raise pending.error
        return self._parse(pending.header[1], pending.body)


def _check_acl(acl: object) -> tuple[ACL, ...] | None:
    if acl is None:
        return None
    if isinstance(acl, ACL):
        acl = (acl,)
    if not isinstance(acl, Sequence) or not acl or not all(isinstance(a, ACL) for a in acl):
        raise TypeError("acl must be a non-empty sequence of aiocoord.zk.ACL")
    return tuple(acl)


def protected_name(name: str, node_id: str | None = None) -> tuple[str, str]:
    """Curator's protected node name ``_c_<uuid>-<name>`` and the uuid used."""
    node_id = node_id or str(uuid.uuid4())
    return f"{PROTECTED_PREFIX}{node_id}-{name}", node_id


class ZkClient(SessionCore):
    """The ZooKeeper client of one `Coordinator`; see the module docstring."""

    # --- helpers ---------------------------------------------------------------------------

    async def _retrying(self, op: Callable[[], Awaitable[T]]) -> T:
        """Run an idempotent read, again after a connection loss, within one deadline."""
        deadline = time.monotonic() + self.request_timeout() * 2
        while True:
            try:
                return await op()
            except SessionExpiredError:
                raise
            except ConnectionLostError:
                self._ensure_open()
                if time.monotonic() >= deadline:
                    raise
                await anyio.lowlevel.checkpoint()

    def _watch_registrar(
        self, watch: Watch, server_path: str, kinds: dict[int, WatchKind]
    ) -> Callable[[int, int, bytes], None]:
        def on_reply(err: int, _zxid: int, _body: bytes) -> None:
            kind = kinds.get(err)
            if kind is not None:
                watch.kind = kind
                self._registry.add(watch, server_path)

        return on_reply

    # --- create ----------------------------------------------------------------------------

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        mode: CreateMode = CreateMode.PERSISTENT,
        ttl: int | None = None,
        make_parents: bool = False,
        acl: Sequence[ACL] | None = None,
    ) -> Created:
        """Create a node; returns its real path (sequence number included) and stat.

        `make_parents` creates missing ancestors as container nodes (persistent
        for TTL and persistent modes would also do; containers clean themselves
        up once empty, as Curator's recipe parents do).  Raises `NodeExistsError`,
        `NoNodeError` (parent missing), `ConnectionLostError` (outcome unknown).
        """
        validate_path(path, sequential=isinstance(mode, CreateMode) and mode.sequential)
        raw = _check_data(data)
        mode = _check_mode(mode, ttl)
        server_path = self.server_path(path)
        request = _wire.create_request(
            server_path, raw, mode, ttl, _check_acl(acl) or self.default_acl
        )
        for _ in range(5):
            try:
                _zxid, body = await self.call(request, path=path)
            except NoNodeError:
                if not make_parents or parent(path) == "/":
                    raise
                await self.ensure_path(parent(path))
                continue
            resp = _wire.parse_body(request.opcode, body)
            return Created(self.client_path(resp.path), Stat._from_wire(resp.stat))
        raise NoNodeError("parent keeps vanishing", path=parent(path))

    async def ensure_path(self, path: str, *, mode: CreateMode = CreateMode.CONTAINER) -> None:
        """Create `path` and its missing ancestors (containers by default); existing ones are kept."""
        validate_path(path)
        if path == "/":
            return
        node = ""
        for part in path.strip("/").split("/"):
            node += "/" + part
            try:
                if await self.exists(node) is not None:
                    continue
                await self.create(node, mode=mode)
            except NodeExistsError:
                pass

    async def create_protected(
        self,
        path: str,
        data: bytes = b"",
        *,
        mode: CreateMode = CreateMode.EPHEMERAL_SEQUENTIAL,
        make_parents: bool = True,
        node_id: str | None = None,
    ) -> Created:
        """Curator's protected create: ``<parent>/_c_<uuid>-<name>[seq]``.

        If the connection drops during the create, the outcome is unknown; rather
        than create a second node (an orphan that would block an election until
        its session dies), look for our uuid among the parent's children after
        reconnecting.  A found node owned by an older session is deleted and the
        create tried again on the current one (Curator's CURATOR-498 fix).
        """
        validate_path(path, sequential=mode.sequential)
        name, node_id = protected_name(basename(path), node_id)
        full = join(parent(path), name) if parent(path) != "/" else "/" + name
        marker = f"{PROTECTED_PREFIX}{node_id}-"
        deadline = time.monotonic() + self.request_timeout() * 4
        while True:
            try:
                return await self.create(full, data, mode=mode, make_parents=make_parents)
            except ConnectionLostError as exc:  # includes SessionExpiredError
                log.debug("protected create of %s interrupted: %s", full, exc)
                if time.monotonic() >= deadline:
                    raise
            found = await self._find_protected(parent(path), marker)
            if found is not None:
                return found

    async def _find_protected(self, parent_path: str, marker: str) -> Created | None:
        while True:
            try:
                names = await self.children(parent_path)
            except NoNodeError:
                return None
            except ConnectionLostError:
                self._ensure_open()
                continue
            for name in names:
                if not name.startswith(marker):
                    continue
                child = join(parent_path, name)
                stat = await self.exists(child)
                if stat is None:
                    return None
                if stat.ephemeral_owner and stat.ephemeral_owner != self._session_id:
                    with suppress(NoNodeError):
                        await self.delete(child, version=stat.version)
                    return None
                return Created(child, stat)
            return None

    # --- read ------------------------------------------------------------------------------

    async def get(self, path: str) -> Node:
        """A node's data and stat; `NoNodeError` if it does not exist."""
        validate_path(path, allow_reserved=True)
        req = _wire.proto.GetDataRequest(path=self.server_path(path), watch=False)

        async def op() -> Node:
            _zxid, body = await self.call(req, path=path)
            return _node(body)

        return await self._retrying(op)

    async def get_watch(self, path: str) -> tuple[Node, Watch]:
        """`get` plus a one-shot data watch (fires on change or deletion)."""
        validate_path(path, allow_reserved=True)
        sp = self.server_path(path)

        async def op() -> tuple[Node, Watch]:
            watch = Watch(WatchKind.DATA, path)
            on_reply = self._watch_registrar(watch, sp, {0: WatchKind.DATA})
            _zxid, body = await self.call(
                _wire.proto.GetDataRequest(path=sp, watch=True), path=path, on_reply=on_reply
            )
            return _node(body), watch

        return await self._retrying(op)

    async def exists(self, path: str) -> Stat | None:
        """The node's stat, or None."""
        validate_path(path, allow_reserved=True)
        req = _wire.proto.ExistsRequest(path=self.server_path(path), watch=False)

        async def op() -> Stat | None:
            try:
                _zxid, body = await self.call(req, path=path)
            except NoNodeError:
                return None
            return Stat._from_wire(_wire.parse_body(3, body).stat)

        return await self._retrying(op)

    async def exists_watch(self, path: str) -> tuple[Stat | None, Watch]:
        """`exists` plus a one-shot watch: creation if absent; change or deletion if present."""
        validate_path(path, allow_reserved=True)
        sp = self.server_path(path)

        async def op() -> tuple[Stat | None, Watch]:
            watch = Watch(WatchKind.EXIST, path)
            on_reply = self._watch_registrar(
                watch, sp, {0: WatchKind.DATA, NoNodeError.code: WatchKind.EXIST}
            )
            try:
                _zxid, body = await self.call(
                    _wire.proto.ExistsRequest(path=sp, watch=True), path=path, on_reply=on_reply
                )
            except NoNodeError:
                return None, watch
            return Stat._from_wire(_wire.parse_body(3, body).stat), watch

        return await self._retrying(op)

    async def children(self, path: str) -> list[str]:
        """Names of a node's children (unsorted, as the server returns them)."""
        validate_path(path, allow_reserved=True)
        req = _wire.proto.GetChildrenRequest(path=self.server_path(path), watch=False)

        async def op() -> list[str]:
            _zxid, body = await self.call(req, path=path)
            return list(_wire.parse_body(8, body).children)

        return await self._retrying(op)

    def children_now(
        self, path: str, on_reply: Callable[[list[str]], None]
    ) -> Callable[[], Awaitable[list[str]]]:
        """`children`, sent at once from synchronous code (a watch callback, say).

        `on_reply(names)` runs where the reply is read, before any task wakes,
        so it must be quick and must not await (what it raises is logged and
        dropped); an error reply does not call it.  The returned function
        awaits the same reply: the names, or the error `children` raises.  No
        retry across a reconnect.  Raises `ConnectionLostError` at once when
        there is no connection.
        """
        validate_path(path, allow_reserved=True)
        conn = self.connection_now()
        names: list[str] = []

        def on_packet(err: int, _zxid: int, body: bytes) -> None:
            if err:
                return
            try:
                names.extend(_wire.parse_body(8, body).children)
                on_reply(list(names))
            except Exception:
                log.exception("children of %s: the reply's callback failed", path)

        request = _wire.proto.GetChildrenRequest(path=self.server_path(path), watch=False)
        pending = conn.submit(request, on_reply=on_packet)

        async def result() -> list[str]:
            err, _zxid, body = await wait_reply(pending)
            self._check(err, path)
            return list(names) if names else list(_wire.parse_body(8, body).children)

        return result

    async def children_watch(self, path: str) -> tuple[list[str], Watch]:
        """`children` plus a one-shot child watch (fires on a child added/removed or deletion)."""
        validate_path(path, allow_reserved=True)
        sp = self.server_path(path)

        async def op() -> tuple[list[str], Watch]:
            watch = Watch(WatchKind.CHILD, path)
            on_reply = self._watch_registrar(watch, sp, {0: WatchKind.CHILD})
            req = _wire.proto.GetChildrenRequest(path=sp, watch=True)
            _zxid, body = await self.call(req, path=path, on_reply=on_reply)
            return list(_wire.parse_body(8, body).children), watch

        return await self._retrying(op)

    # --- write -----------------------------------------------------------------------------

    async def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        """Set a node's data if its version matches (-1: any); returns the new stat.

        `BadVersionError` when someone else changed it first: the CAS lost.
        """
        validate_path(path)
        raw = _check_data(data)
        version = _check_version(version)
        req = _wire.proto.SetDataRequest(path=self.server_path(path), data=raw, version=version)
        _zxid, body = await self.call(req, path=path)
        return Stat._from_wire(_wire.parse_body(5, body).stat)

    async def set_and_get(
        self, path: str, data: bytes, version: int, *, watch: bool = False
    ) -> tuple[Stat | None, Node | None, Watch | None]:
        """`set` conditional on `version`, pipelined with `get` (or `get_watch`): one round trip.

        Returns the write's new stat, or None when the CAS lost (another
        version, or no node); then the node as it is right after the write and,
        with `watch`, a data watch on it (both None if the node does not exist).
        A CAS that lost thus learns what won, and can wait for its next change,
        at no extra round trip.  `ConnectionLostError` leaves the write's
        outcome unknown.
        """
        validate_path(path)
        raw = _check_data(data)
        version = _check_version(version)
        sp = self.server_path(path)
        watcher = Watch(WatchKind.DATA, path) if watch else None
        on_reply = self._watch_registrar(watcher, sp, {0: WatchKind.DATA}) if watcher else None
        (set_err, _, set_body), (get_err, _, get_body) = await self.call_pipelined(
            [
                (_wire.proto.SetDataRequest(path=sp, data=raw, version=version), None),
                (_wire.proto.GetDataRequest(path=sp, watch=watch), on_reply),
            ],
            path=path,
        )
        stat: Stat | None = None
        if set_err == 0:
            stat = Stat._from_wire(_wire.parse_body(5, set_body).stat)
        elif set_err not in (BadVersionError.code, NoNodeError.code):
            self._check(set_err, path)
        if get_err == NoNodeError.code:
            return stat, None, None
        self._check(get_err, path)
        return stat, _node(get_body), watcher

    async def delete(self, path: str, version: int = -1) -> None:
        """Delete a node if its version matches (-1: any)."""
        validate_path(path)
        version = _check_version(version)
        await self.call(
            _wire.proto.DeleteRequest(path=self.server_path(path), version=version), path=path
        )

    async def delete_all(self, path: str) -> None:
        """Delete a node and everything below it; a missing node is fine."""
        validate_path(path)
        while True:
            try:
                for child in await self.children(path):
                    await self.delete_all(join(path, child))
                await self.delete(path)
                return
            except NoNodeError:
                return
            except NotEmptyError:
                continue

    async def multi(self, ops: Sequence[Op]) -> MultiResults:
        """Run operations atomically; all apply or none.

        Returns one result per operation, with the transaction's zxid as `.zxid`.  On failure raises `TransactionFailed`
        whose `results` carry each operation's error (the failing one's real
        error, the others "rolled back").
        """
        pairs = self._multi_pairs(ops)
        if not pairs:
            return MultiResults()
        err, body = await self.call_packet(
            lambda xid: _wire.multi_packet(xid, pairs, self.default_acl), 14
        )
        return self._multi_results(ops, err, body)

    def send_multi(self, ops: Sequence[Op]) -> SentMulti:
        """Write `multi(ops)` to the connection now; the `SentMulti` gives its outcome.

        For callers that gather writes in a loop callback: the request leaves
        in that step, not when a task gets to run.  Raises `ConnectionLostError`
        at once when there is no connection (`multi` waits for one), and what
        `multi` raises for bad operations.
        """
        pairs = self._multi_pairs(ops)
        if not pairs:
            raise ValueError("ops must not be empty")
        pending = self.queue_packet(
            lambda xid: _wire.multi_packet(xid, pairs, self.default_acl), 14
        )
        return SentMulti(pending, lambda err, body: self._multi_results(ops, err, body))

    def _multi_pairs(self, ops: Sequence[Op]) -> list[tuple[Op, str]]:
        """Validated operations with their server paths."""
        if isinstance(ops, str | bytes) or not isinstance(ops, Sequence):
            raise TypeError("ops must be a sequence of CreateOp/DeleteOp/SetDataOp/CheckOp")
        pairs: list[tuple[Op, str]] = []
        for op in ops:
            if isinstance(op, CreateOp):
                validate_path(op.path, sequential=op.mode.sequential)
                _check_data(op.data, "CreateOp.data")
                _check_mode(op.mode, op.ttl)
            elif isinstance(op, SetDataOp):
                validate_path(op.path)
                _check_data(op.data, "SetDataOp.data")
                _check_version(op.version)
            elif isinstance(op, DeleteOp | CheckOp):
                validate_path(op.path)
                _check_version(op.version)
            else:
                raise TypeError(f"not a multi operation: {op!r}")
            pairs.append((op, self.server_path(op.path)))
        return pairs

    def _multi_results(self, ops: Sequence[Op], err: int, body: bytes) -> MultiResults:
        """The results of a multi reply, or the error it stands for."""
        if err:
            # A whole-request error (connection, session) rather than an operation's.
            self._check(err, None)
        results = MultiResults(_wire.multi_results(_wire.parse_multi(body), self.client_path))
        results.zxid = _wire.reply_header(body)[1]
        for i, result in enumerate(results):
            if isinstance(result, ErrorResult) and result.code not in (0, -2):
                cause = result.error
                cause.path = ops[i].path
                raise TransactionFailed(list(results), i, cause)
        return results

    # --- watches and misc -------------------------------------------------------------------

    @asynccontextmanager
    async def watch(self, path: str, *, recursive: bool = False) -> AsyncIterator[PersistentWatch]:
        """A persistent (or recursive) watch; iterate `.events` for `WatchedEvent`s.

        It survives reconnects (restored with the session) and is added again on
        a new session after a `SESSION_LOST` event, which tells the reader to
        re-read what it watches.  Leaving the block removes it from the server;
        while disconnected there is nothing to remove (the server's watches went
        with the connection, and it is no longer restored), so leaving is immediate.
        """
        validate_path(path, allow_reserved=True)
        sp = self.server_path(path)
        pwatch = PersistentWatch(path, recursive)
        if self._registry.add_persistent(pwatch, sp):
            try:
                await self.call(
                    _wire.AddWatchRequest(path=sp, mode=1 if recursive else 0), path=path
                )
            except BaseException:
                self._registry.remove_persistent(pwatch, sp)
                raise
        try:
            yield pwatch
        finally:
            conn = self._conn
            connected = conn is not None and not conn.closed
            # Waiting for a connection to remove a watch the server no longer has would hold
            # up the caller (a leader's body leaving on SUSPENDED) for a request timeout.
            last = self._registry.remove_persistent(pwatch, sp)
            # ZooKeeper 3.8 knows no persistent WatcherType in removeWatches, only Any,
            # which would also drop our one-shot watches on the path: send it only when
            # nothing else of ours watches there (otherwise the watch goes with the session).
            if last and connected and not self.closed and not self._registry.watched(sp):
                with anyio.CancelScope(shield=True), anyio.move_on_after(self.request_timeout()):
                    with suppress(ZooKeeperError, ConnectionLostError):
                        await self.call(
                            _wire.proto.RemoveWatchesRequest(path=sp, type=_wire.WATCHER_ANY),
                            path=path,
                        )

    def forget_watch(self, watch: Watch) -> None:
        """Stop tracking a one-shot watch that is no longer wanted: it will not fire.

        Nothing is sent (no round trip, nothing in front of the caller's next
        request): the server keeps its side until the node changes, and that
        notification is then ignored, or until the session ends.  A recipe
        about to delete a node it watches calls this first, so that the delete
        wakes nothing of its own.
        """
        if not watch.fired:
            self._registry.discard(watch, self.server_path(watch.path))

    async def sync(self, path: str = "/") -> None:
        """Let the server this client is on catch up with the leader before the next read."""
        validate_path(path, allow_reserved=True)
        await self._retrying(
            lambda: self.call(_wire.proto.SyncRequest(path=self.server_path(path)), path=path)
        )

    async def whoami(self) -> list[tuple[str, str]]:
        """The (scheme, id) pairs the server authenticated this session as."""
        _zxid, body = await self._retrying(lambda: self.call(_wire.WhoAmIRequest()))
        info: list[Any] = _wire.parse_body(107, body).client_info
        return [(str(i.auth_scheme), str(i.user)) for i in info]

    async def ephemerals(self, prefix: str = "/") -> list[str]:
        """Paths of this session's ephemeral nodes under `prefix`."""
        validate_path(prefix, allow_reserved=True)
        req = _wire.GetEphemeralsRequest(prefix_path=self.server_path(prefix))
        _zxid, body = await self._retrying(lambda: self.call(req, path=prefix))
        return [self.client_path(p) for p in _wire.parse_body(103, body).ephemerals]
