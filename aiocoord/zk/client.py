"""`ZkClient`: the low-level ZooKeeper client the recipes (and users) call.

Typed ZooKeeper requests over one session (`ZkSession`, which it holds, not
is: its owner runs it; the recipes reach what they may use of it through
`session`, typed as `port.SessionPort`):
create (persistent, ephemeral, sequential, container, TTL; Curator-style
protected creates), get/set/delete with versions, children, exists, multi
with per-operation results, one-shot watches as awaitables and persistent
watches as async iterators, sync, whoAmI, getEphemerals, getConfig and
reconfig, and the requests
sent at once from synchronous code (`children_now`, `delete_now`).  Paths
are validated on the way in and the chroot applied; reads are retried across
a reconnect within one request deadline (waiting and retries included),
writes never are (their outcome is unknown after a connection loss:
`ConnectionLostError`).  Packets, xids and opcodes stay inside the session
and `_wire`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext, suppress
from dataclasses import replace
from typing import TYPE_CHECKING

import anyio

from ..errors import (
    AuthFailedError,
    BadVersionError,
    ConnectionLostError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    ZooKeeperError,
)
from . import _config, _errors, _replies, _wire
from ._acl import AclChoice
from ._arguments import MAX_DATA, check_acl, check_data, check_mode, check_version
from ._arming import arming, forget_watch, remove_watch
from ._config import EnsembleConfig, EnsembleServer
from ._multi import MultiResults, SentMulti, multi_packet, outcome, results_parser, validate_ops
from ._protected import PROTECTED_PREFIX, create_found, create_protected, protected_name
from ._sending import Sender
from ._timing import Deadline
from ._watches import PersistentWatch, Watch, WatchKind
from ._wire import OpCode
from .paths import join, parent, validate_path
from .types import ACL, Created, CreateMode, CreateOp, Node, Op, Stat

if TYPE_CHECKING:
    from ._session import ZkSession
    from .port import SessionPort

__all__ = (
    "MAX_DATA",
    "PROTECTED_PREFIX",
    "MultiResults",
    "SentMulti",
    "ZkClient",
    "protected_name",
)

log = logging.getLogger(__name__)


class ZkClient:
    """The ZooKeeper client of one `Coordinator` (`coord.client`); see the module docstring.

    Its public surface is the ZooKeeper requests and watches; the connection
    state and the session's id live on the `Coordinator`.
    """

    def __init__(self, session: ZkSession) -> None:
        self._session = session  # run and closed by its owner, the Coordinator
        self._sender = Sender(session)
        if session.settings.follow_ensemble:
            session.background.append(self._follow_ensemble)

    @property
    def session(self) -> SessionPort:
        """The session this client sends on, as aiocoord's recipes may use it (`SessionPort`).

        For the library's own recipes, scheduler and integrations; an
        application reads the connection state and session id on the `Coordinator`.
        """
        return self._session

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
        parent_mode: CreateMode = CreateMode.CONTAINER,
        list_parent: bool = False,
    ) -> Created:
        """Create a node; returns its real path (sequence number included) and stat.

        `make_parents` creates missing ancestors as container nodes (persistent
        for TTL and persistent modes would also do; containers clean themselves
        up once empty, as Curator's recipe parents do), or as `parent_mode`
        says (kazoo's recipes make them persistent).  `list_parent` sends the
        parent's children listing right behind the create, in the same round
        trip: the server answers a session's requests in order, so the listing
        (`Created.listing`) has the new node; it is None when the listing's
        reply did not come with the create's (ask again).  Raises
        `NodeExistsError`, `NoNodeError` (parent missing), `ConnectionLostError`
        (outcome unknown).
        """
        validate_path(path, sequential=isinstance(mode, CreateMode) and mode.sequential)
        raw = check_data(data)
        mode = check_mode(mode, ttl)
        session = self._session
        server_path = session.server_path(path)
        request = _wire.create_request(
            server_path, raw, mode, ttl, check_acl(acl) or session.acls.for_path(server_path)
        )
        listing = (
            _wire.get_children_request(session.server_path(parent(path)), False)
            if list_parent
            else None
        )
        for _ in range(5):
            names: list[str] | None = None
            try:
                if listing is not None:
                    (created, stat), names = await self._sender.fetch_then(
                        request, _replies.parse_created, listing, _replies.parse_children, path=path
                    )
                else:
                    created, stat = await self._sender.fetch(
                        request, _replies.parse_created, path=path
                    )
            except NoNodeError:
                if not make_parents or parent(path) == "/":
                    raise
                await self.ensure_path(parent(path), mode=parent_mode)
                continue
            return Created(
                session.client_path(created), stat, tuple(names) if names is not None else None
            )
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
        list_parent: bool = False,
    ) -> Created:
        """Curator's protected create: ``<parent>/_c_<uuid>-<name>[seq]``.

        If the connection drops during the create, the outcome is unknown; rather
        than create a second node (an orphan that would block an election until
        its session dies), look for our uuid among the parent's children after
        reconnecting.  A found node owned by an older session is deleted and the
        create tried again on the current one (Curator's CURATOR-498 fix).
        `list_parent`: as in `create` (a node found again comes with the
        listing that found it).
        """
        return await create_protected(
            self,
            self._session,
            path,
            data,
            mode=mode,
            make_parents=make_parents,
            node_id=node_id,
            list_parent=list_parent,
        )

    async def create_findable(
        self,
        path: str,
        data: bytes = b"",
        *,
        prefix: str,
        mode: CreateMode = CreateMode.EPHEMERAL_SEQUENTIAL,
        parent_mode: CreateMode = CreateMode.CONTAINER,
        list_parent: bool = False,
    ) -> Created:
        """The protected create of a node named as the caller says (kazoo's ``<uuid hex>...``).

        `path`'s name starts with `prefix`, unique to this create; after a
        connection loss during the create the node is looked for among the
        parent's children by that prefix, as kazoo's ``Lock._find_node`` does,
        with `create_protected`'s owner check.  Missing parents are created as
        `parent_mode` says; `list_parent` as in `create_protected`.
        """
        return await create_found(
            self,
            self._session,
            path,
            data,
            mode=mode,
            prefix=prefix,
            parent_mode=parent_mode,
            list_parent=list_parent,
        )

    # --- read ------------------------------------------------------------------------------

    async def get(self, path: str) -> Node:
        """A node's data and stat; `NoNodeError` if it does not exist."""
        validate_path(path, allow_reserved=True)
        req = _wire.get_data_request(self._session.server_path(path), False)
        return await self._sender.read(req, _replies.parse_node, path=path)

    async def get_watch(self, path: str) -> tuple[Node, Watch]:
        """`get` plus a one-shot data watch (fires on change or deletion)."""
        validate_path(path, allow_reserved=True)
        session = self._session
        sp = session.server_path(path)
        req = _wire.get_data_request(sp, True)

        async def op(deadline: Deadline) -> tuple[Node, Watch]:
            watch = Watch(WatchKind.DATA, path)
            with arming(session, watch, sp, {0: WatchKind.DATA}) as on_reply:
                node = await self._sender.fetch(
                    req, _replies.parse_node, path=path, on_reply=on_reply, deadline=deadline
                )
                return node, watch

        return await self._sender.retrying(op)

    async def exists(self, path: str) -> Stat | None:
        """The node's stat, or None."""
        validate_path(path, allow_reserved=True)
        req = _wire.exists_request(self._session.server_path(path), False)
        try:
            return await self._sender.read(req, _replies.parse_stat, path=path)
        except NoNodeError:
            return None

    async def exists_watch(self, path: str) -> tuple[Stat | None, Watch]:
        """`exists` plus a one-shot watch: creation if absent; change or deletion if present."""
        validate_path(path, allow_reserved=True)
        session = self._session
        sp = session.server_path(path)
        req = _wire.exists_request(sp, True)

        async def op(deadline: Deadline) -> tuple[Stat | None, Watch]:
            watch = Watch(WatchKind.EXIST, path)
            kinds = {0: WatchKind.DATA, NoNodeError.code: WatchKind.EXIST}
            with arming(session, watch, sp, kinds) as on_reply:
                try:
                    stat = await self._sender.fetch(
                        req, _replies.parse_stat, path=path, on_reply=on_reply, deadline=deadline
                    )
                except NoNodeError:
                    return None, watch
                return stat, watch

        return await self._sender.retrying(op)

    async def children(self, path: str) -> list[str]:
        """Names of a node's children (unsorted, as the server returns them)."""
        validate_path(path, allow_reserved=True)
        req = _wire.get_children_request(self._session.server_path(path), False)
        return await self._sender.read(req, _replies.parse_children, path=path)

    async def children_watch(self, path: str) -> tuple[list[str], Watch]:
        """`children` plus a one-shot child watch (fires on a child added/removed or deletion)."""
        validate_path(path, allow_reserved=True)
        session = self._session
        sp = session.server_path(path)
        req = _wire.get_children_request(sp, True)

        async def op(deadline: Deadline) -> tuple[list[str], Watch]:
            watch = Watch(WatchKind.CHILD, path)
            with arming(session, watch, sp, {0: WatchKind.CHILD}) as on_reply:
                names = await self._sender.fetch(
                    req, _replies.parse_children, path=path, on_reply=on_reply, deadline=deadline
                )
                return names, watch

        return await self._sender.retrying(op)

    # --- write -----------------------------------------------------------------------------

    async def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        """Set a node's data if its version matches (-1: any); returns the new stat.

        `BadVersionError` when someone else changed it first: the CAS lost.
        """
        validate_path(path)
        raw = check_data(data)
        version = check_version(version)
        session = self._session
        req = _wire.set_data_request(session.server_path(path), raw, version)
        return await self._sender.fetch(req, _replies.parse_stat, path=path)

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
        raw = check_data(data)
        version = check_version(version)
        session = self._session
        sp = session.server_path(path)
        watcher = Watch(WatchKind.DATA, path) if watch else None
        armed: AbstractContextManager[Callable[[int, int, bytes], None] | None] = (
            arming(session, watcher, sp, {0: WatchKind.DATA}) if watcher else nullcontext()
        )
        with armed as on_reply:
            (set_err, stat), (get_err, node) = await self._sender.fetch_pipelined(
                [
                    (_wire.set_data_request(sp, raw, version), _replies.parse_stat, None),
                    (_wire.get_data_request(sp, watch), _replies.parse_node, on_reply),
                ]
            )
            if set_err not in (0, BadVersionError.code, NoNodeError.code):
                _errors.check(set_err, path)
            if get_err == NoNodeError.code:
                return stat, None, None
            _errors.check(get_err, path)
            return stat, node, watcher

    async def delete(self, path: str, version: int = -1) -> None:
        """Delete a node if its version matches (-1: any)."""
        validate_path(path)
        version = check_version(version)
        session = self._session
        await self._sender.call(_wire.delete_request(session.server_path(path), version), path=path)

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

        Returns one result per operation, with the transaction's zxid as
        `.zxid`.  On failure raises `TransactionFailed` whose `results` carry
        each operation's error (the failing one's real error, the others
        "rolled back").
        """
        session = self._session
        pairs = with_acls(validate_ops(ops, session.server_path), session.acls)
        if not pairs:
            return MultiResults()
        acl = session.acls.default
        err, results = await self._sender.fetch_packet(
            lambda xid: multi_packet(xid, pairs, acl),
            OpCode.MULTI,
            results_parser(len(pairs), session.client_path),
        )
        return outcome(ops, err, results)

    def send_multi(self, ops: Sequence[Op]) -> SentMulti:
        """Write `multi(ops)` to the connection now; the `SentMulti` gives its outcome.

        For callers that gather writes in a loop callback: the request leaves
        in that step, not when a task gets to run.  Raises `ConnectionLostError`
        at once when there is no connection (`multi` waits for one), and what
        `multi` raises for bad operations.
        """
        session = self._session
        pairs = with_acls(validate_ops(ops, session.server_path), session.acls)
        if not pairs:
            raise ValueError("ops must not be empty")
        acl = session.acls.default
        pending = self._sender.queue_packet(
            lambda xid: multi_packet(xid, pairs, acl),
            OpCode.MULTI,
            results_parser(len(pairs), session.client_path),
        )
        return SentMulti(pending, ops)

    # --- sent at once, from synchronous code -----------------------------------------------
    # A watch callback that lists the children as the notification is read, a latch that
    # sends its node's delete the moment it is left: the request is written before the
    # caller yields, and the returned function awaits its outcome.

    def children_now(
        self, path: str, on_reply: Callable[[list[str]], None]
    ) -> Callable[[], Awaitable[list[str]]]:
        """`children`, sent at once from synchronous code (a watch callback, say).

        `on_reply(names)` runs where the reply is read, before any task wakes,
        so it must be quick and must not await (what it raises is logged and
        dropped); an error reply or a malformed one does not call it.  The
        returned function awaits the same reply: the names, or the error
        `children` raises (`ProtocolError` for a malformed reply).  No retry
        across a reconnect.  Raises `ConnectionLostError` at once when there is
        no connection.
        """
        validate_path(path, allow_reserved=True)

        def parse(body: bytes) -> list[str]:
            names = _replies.parse_children(body)  # a malformed reply stops here
            try:
                on_reply(list(names))
            except Exception:
                log.exception("children of %s: the reply's callback failed", path)
            return names

        req = _wire.get_children_request(self._session.server_path(path), False)
        return self._sender.send_now(req, parse, path=path)

    def read_now(
        self,
        path: str,
        on_reply: Callable[[Node | list[str] | ZooKeeperError], None],
        *,
        children: bool = False,
    ) -> None:
        """`get` (or, with `children`, `children`) sent at once; the answer goes to `on_reply`.

        For a cache that follows a watch's notifications: `on_reply` runs where
        the reply is read, in the connection's order with the notifications and
        every other reply, with the node (or the child names) or the error the
        read met (`NoNodeError`, `NoAuthError` ...), never raised.  It must be
        quick and must not await; what it raises is logged and dropped.  It is
        not called if the connection ends first (follow the connection states to
        learn that).  Raises `ConnectionLostError` at once when there is no
        connection.
        """
        validate_path(path, allow_reserved=True)
        session = self._session
        conn = session.connection_now()
        sp = session.server_path(path)
        parse: Callable[[bytes], Node | list[str]]
        if children:
            request, parse = _wire.get_children_request(sp, False), _replies.parse_children
        else:
            request, parse = _wire.get_data_request(sp, False), _replies.parse_node

        def answered(err: int, _zxid: int, body: bytes) -> None:
            # A malformed body raises here, before the callback: the connection drops.
            answer = parse(body) if err == 0 else _errors.error_for(err, path)
            try:
                on_reply(answer)
            except Exception:
                log.exception("read of %s: the reply's callback failed", path)

        conn.submit(request, on_reply=answered)

    def delete_now(self, path: str, version: int = -1) -> Callable[[], Awaitable[None]]:
        """`delete`, sent at once from synchronous code; the returned function awaits its outcome.

        For a recipe giving a node back: the request leaves before the caller's
        task yields, rather than a task switch later.  The outcome is what
        `delete` raises (`NoNodeError`, `BadVersionError`, `ProtocolError` ...).
        No retry across a reconnect.  Raises `ConnectionLostError` at once when
        there is no connection.
        """
        validate_path(path)
        version = check_version(version)
        req = _wire.delete_request(self._session.server_path(path), version)
        return self._sender.send_now(req, lambda _body: None, path=path)

    # --- watches and misc -------------------------------------------------------------------

    def remove_watch(self, watch: Watch) -> None:
        """Stop a one-shot watch that is no longer wanted, here and on the server.

        For a wait given up (cancelled, timed out) or a watch set with a read
        whose answer made it moot.  It will not fire; the server is asked to
        drop its side (ZooKeeper 3.5+ removeWatches) once no other watch of
        this client is on the path, without waiting for the answer, so it is
        safe in a cancelled task's cleanup.  A fired watch is left alone.
        """
        remove_watch(self._session, watch)

    def watch_counts(self) -> dict[str, int]:
        """The watches this client holds now: ``one_shot`` (live `Watch` objects, any kind),
        ``kept`` (of those, the ones with callbacks, held until they fire), ``persistent``,
        and ``keys`` (one-shot (kind, path) entries).  Never blocks; for tests and soaks."""
        return self._session.watches.counts()

    def session_counts(self) -> dict[str, int]:
        """The other entries this client's session holds now: ``in_flight`` (requests
        awaiting a reply on the current connection), ``timers`` (deadline callbacks armed
        by held rights), ``state_followers`` and ``state_streams`` (who follows the
        connection states, by callback or by `Coordinator.connection_events()`) and
        ``chores`` (cleanup tasks running).  Never blocks; for tests and soaks."""
        return self._session.counts()

    def forget_watch(self, watch: Watch) -> None:
        """Stop tracking a one-shot watch that is no longer wanted: it will not fire.

        Nothing is sent (no round trip, nothing in front of the caller's next
        request): the server keeps its side until the node changes, and that
        notification is then ignored, or until the connection ends
        (`remove_watch` asks the server to drop it as well).  A recipe
        about to delete a node it watches calls this first, so that the delete
        wakes nothing of its own.
        """
        forget_watch(self._session, watch)

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
        session = self._session
        watches = session.watches
        sp = session.server_path(path)
        pwatch = PersistentWatch(path, recursive)
        if watches.add_persistent(pwatch, sp):
            try:
                await self._sender.call(_wire.add_watch_request(sp, recursive), path=path)
            except BaseException:
                watches.remove_persistent(pwatch, sp)
                raise
        try:
            yield pwatch
        finally:
            # Waiting for a connection to remove a watch the server no longer has would hold
            # up the caller (a leader's body leaving on SUSPENDED) for a request timeout.
            connected = session.connection is not None
            last = watches.remove_persistent(pwatch, sp)
            # ZooKeeper 3.8 knows no persistent WatcherType in removeWatches, only Any,
            # which would also drop our one-shot watches on the path: send it only when
            # nothing else of ours watches there (otherwise the watch goes with the session).
            if last and connected and not session.closed and not watches.watched(sp):
                with (
                    anyio.CancelScope(shield=True),
                    anyio.move_on_after(session.timing.request_timeout),
                ):
                    with suppress(ZooKeeperError, ConnectionLostError):
                        await self._sender.call(_wire.remove_watches_request(sp), path=path)

    async def sync(self, path: str = "/") -> None:
        """Let the server this client is on catch up with the leader before the next read."""
        validate_path(path, allow_reserved=True)
        session = self._session
        req = _wire.sync_request(session.server_path(path))
        await self._sender.retrying(
            lambda deadline: self._sender.call(req, path=path, deadline=deadline)
        )

    async def get_config(self, *, watch: bool = False) -> tuple[EnsembleConfig, Watch | None]:
        """The ensemble's dynamic config (ZooKeeper 3.5+ ``/zookeeper/config``), and a watch on it.

        Returns the config (members with ids, roles, quorum and client
        addresses, and its version) and, with `watch`, a one-shot watch that
        fires when a reconfig changes it (else None).  The node is read
        outside any chroot, as the Java client's ``getConfig`` does; a
        standalone server answers an empty config (version 0, no servers).
        Retried across a reconnect like every read; `NodeDataError` if the
        node holds what is not a config.
        """
        if not isinstance(watch, bool):
            raise TypeError(f"watch must be a bool, not {type(watch).__name__}")
        return await _config.get_config(self._sender, self._session, watch=watch)

    async def reconfig(
        self,
        *,
        joining: Sequence[str | EnsembleServer] | str | None = None,
        leaving: Sequence[int | str] | int | str | None = None,
        new_members: Sequence[str | EnsembleServer] | str | None = None,
        from_config: int = -1,
    ) -> EnsembleConfig:
        """Change the ensemble's membership (ZooKeeper 3.5+ dynamic reconfig); returns the new config.

        Incremental: `joining` adds or updates members (``server.N=host:peer:
        election[:role][;[client host:]client port]`` lines, or `EnsembleServer`
        values), `leaving` removes members by id.  Bulk: `new_members` is the
        whole new membership.  `from_config` (a config's `version`) makes it
        conditional: `BadVersionError` if the config changed since (-1: any).
        Blocks until the leader has committed it (a write: not retried, so
        `ConnectionLostError` leaves the outcome unknown; read `get_config`).
        Raises `ReconfigDisabledError` when the servers do not allow it,
        `NoAuthError` without the rights (a super user, or ``skipACL``), a
        `ZooKeeperError` with code -13 when the new config would have no
        quorum of synced members, -14 while another reconfig runs, and
        `ConfigError` naming the argument for bad input.
        """
        return await _config.reconfig(
            self._sender,
            joining=joining,
            leaving=leaving,
            new_members=new_members,
            from_config=from_config,
        )

    async def _follow_ensemble(self) -> None:
        """Curator's EnsembleTracker: the config's client addresses become the host list."""
        session = self._session
        first: list[int] = []  # the version read first, once read

        def apply(config: EnsembleConfig) -> None:
            addresses = _config.followed_hosts(
                config, session.hosts.given, first[0] if first else None
            )
            first[:] = first or [config.version]
            if addresses is not None:
                session.set_hosts(addresses, f"ensemble config version 0x{config.version:x}")

        await _config.follow_ensemble(lambda: self.get_config(watch=True), session, apply)

    async def whoami(self) -> list[tuple[str, str]]:
        """The (scheme, id) pairs the server authenticated this session as."""
        return await self._sender.read(_wire.who_am_i_request(), _replies.parse_who_am_i)

    # --- access control --------------------------------------------------------------------

    async def add_auth(self, scheme: str, credentials: str | bytes) -> None:
        """Add an identity to this session now (``addauth``), and on every later connection.

        ``add_auth("digest", "user:password")`` makes the session ``digest:user:<hash>``
        as well as what it was; the credentials are sent again on each reconnect,
        after any from the settings.  Blocks until the server answers (within the
        request timeout, waiting for a connection included).  Raises
        `AuthFailedError` naming the scheme (never the credentials) when the server
        refuses them, which also drops the connection (it is made again, without
        them).  Adding the same identity twice is harmless, so a connection lost
        meanwhile is retried within the request timeout (then `ConnectionLostError`).
        """
        if not isinstance(scheme, str) or not scheme or scheme != scheme.strip():
            raise ValueError(f"scheme must be a non-empty name such as 'digest', not {scheme!r}")
        if isinstance(credentials, str):
            raw = credentials.encode("utf-8")
        elif isinstance(credentials, bytes | bytearray):
            raw = bytes(credentials)
        else:
            raise TypeError(f"credentials must be str or bytes, not {type(credentials).__name__}")
        if scheme == "digest" and b":" not in raw:
            raise ValueError("credentials for the digest scheme must be 'user:password'")
        session = self._session

        def keep(err: int, _zxid: int, _body: bytes) -> None:
            # Where the reply is read: a connection made after it replays them.
            if err == 0:
                session.remember_auth(scheme, raw)

        req = _wire.auth_request(scheme, raw)
        try:
            await self._sender.retrying(
                lambda deadline: self._sender.call(req, on_reply=keep, deadline=deadline)
            )
        except AuthFailedError:
            raise AuthFailedError(f"the server refused the {scheme!r} credentials") from None

    async def get_acl(self, path: str) -> tuple[list[ACL], Stat]:
        """A node's ACL entries and its stat (``stat.aversion`` is the ACL's version).

        `NoAuthError` without the READ or ADMIN permission on the node, `NoNodeError`
        if it does not exist.  Retried across a reconnect like every read.
        """
        validate_path(path, allow_reserved=True)
        req = _wire.get_acl_request(self._session.server_path(path))
        return await self._sender.read(req, _replies.parse_acl, path=path)

    async def set_acl(self, path: str, acls: Sequence[ACL], version: int = -1) -> Stat:
        """Replace a node's ACL if its ACL version (``stat.aversion``) matches (-1: any).

        Returns the new stat.  `BadVersionError` when the ACL changed since
        `version` was read, `NoAuthError` without the ADMIN permission,
        `NoNodeError`, and ``ZooKeeperError`` "invalid ACL" for entries the server
        refuses (an ``auth`` entry on a session with no identity, say).
        """
        validate_path(path, allow_reserved=True)
        entries = check_acl(acls)
        if entries is None:
            raise TypeError("acls must be a non-empty sequence of aiocoord.zk.ACL")
        version = check_version(version)
        req = _wire.set_acl_request(self._session.server_path(path), entries, version)
        return await self._sender.fetch(req, _replies.parse_stat, path=path)

    async def ephemerals(self, prefix: str = "/") -> list[str]:
        """Paths of this session's ephemeral nodes under `prefix`."""
        validate_path(prefix, allow_reserved=True)
        session = self._session
        req = _wire.get_ephemerals_request(session.server_path(prefix))
        paths = await self._sender.read(req, _replies.parse_ephemerals, path=prefix)
        return [session.client_path(p) for p in paths]


def with_acls(pairs: list[tuple[Op, str]], acls: AclChoice) -> list[tuple[Op, str]]:
    """Each create of a multi with no ACL of its own given the provider's, if there is one."""
    if acls.provider is None:
        return pairs
    return [
        (
            replace(op, acl=acls.for_path(sp))
            if isinstance(op, CreateOp) and op.acl is None
            else op,
            sp,
        )
        for op, sp in pairs
    ]
