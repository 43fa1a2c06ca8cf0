"""The leader latch's node keeping: create, find after a loss, delete; shared listings.

`Candidacy` owns one participant's election node.  A create whose outcome is
unknown (connection lost, or cancelled with the request in flight) is never
simply repeated, which would leave an orphan that blocks the election until the
session dies: in the curator layout the node is found again by its
``_c_<uuid>-`` name (Curator's protected create) and deleted; in the zookeeper
layout, whose ``n_<seq>`` names carry no uuid, this session's offers under the
path that no latch of this process claims are deleted, with the other creates
of the session on that path held back meanwhile.

`SharedPath` is what the latches of one session on one path share: that lock,
the claimed nodes, and a coalesced child listing, so that a thousand
participants joining on one session cost a handful of listings, not a thousand.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
import weakref
from collections.abc import Awaitable, Callable
from typing import ClassVar

import anyio

from ..._records import load_text
from ...errors import (
    BadVersionError,
    ConnectionLostError,
    CoordError,
    CoordinatorClosedError,
    NoNodeError,
)
from ...zk.client import ZkClient
from ...zk.paths import basename, join, parent
from ...zk.types import CreateMode
from .._sequential import CreatedNode, created_node, read_all, read_queue, sweep_protected
from ._election import LatchLayout, Ordering, Participant, sort_children

__all__ = ("Candidacy", "CreatedNode", "SharedPath", "leader_of", "participants_of", "read_all")

log = logging.getLogger(__name__)


class _ListingRound:
    __slots__ = ("done", "names", "order")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.names: list[str] | None = None
        self.order: Ordering | None = None  # sorted once, for every latch of the round


class SharedPath:
    """State shared by the latches of one session (`ZkClient`) on one path."""

    _registry: ClassVar[weakref.WeakKeyDictionary[ZkClient, dict[str, SharedPath]]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self, client: ZkClient, path: str) -> None:
        self.client = client
        self.path = path
        self.lock = anyio.Lock()  # zookeeper layout: one create (or sweep) at a time
        self.claimed: set[str] = set()  # nodes held by latches of this process
        self.parent_ready = False  # the path is known to exist (creates need no parents)
        self._ensuring: anyio.Event | None = None
        self._users = 0
        self._next: _ListingRound | None = None
        self._idle = anyio.Event()
        self._idle.set()

    @classmethod
    def acquire(cls, client: ZkClient, path: str) -> SharedPath:
        per_path = cls._registry.setdefault(client, {})
        shared = per_path.get(path)
        if shared is None:
            shared = per_path[path] = cls(client, path)
        shared._users += 1
        return shared

    def retain(self) -> None:
        """One more user of this registered state (a chore that outlives its latch)."""
        self._users += 1

    def release(self) -> None:
        self._users -= 1
        if self._users <= 0:
            per_path = self._registry.get(self.client, {})
            if per_path.get(self.path) is self:
                del per_path[self.path]

    async def ensure_parent(self) -> None:
        """Create the path (containers) once for all the latches that need it now."""
        ensuring = self._ensuring
        if ensuring is not None:
            await ensuring.wait()
            return
        self._ensuring = done = anyio.Event()
        try:
            await self.client.ensure_path(self.path)
            self.parent_ready = True
        finally:
            self._ensuring = None
            done.set()

    async def ordered(self, layout: LatchLayout) -> Ordering:
        """The children in election order, as listed by a request sent after this call began.

        While one listing is in flight, callers gather for the next, sent as soon
        as it returns, and share its sorted result; a caller whose round failed
        lists alone, to get its own error.
        """
        joined = self._next
        if joined is not None:
            await joined.done.wait()
            if joined.names is not None:
                if joined.order is None:
                    joined.order = Ordering(joined.names, layout)
                return joined.order
            return Ordering(await self.client.children(self.path), layout)
        rnd = self._next = _ListingRound()
        try:
            if not self._idle.is_set():
                await self._idle.wait()  # one listing in flight at a time; others gather meanwhile
            self._next = None  # callers from now on need a later listing
            self._idle = idle = anyio.Event()
            try:
                rnd.names = await self.client.children(self.path)
            finally:
                idle.set()
            rnd.order = Ordering(rnd.names, layout)
            return rnd.order
        finally:
            if self._next is rnd:
                self._next = None
            rnd.done.set()


class Candidacy:
    """One participant's election node under `shared.path`."""

    def __init__(self, shared: SharedPath, layout: LatchLayout, data: bytes) -> None:
        self.shared = shared
        self.client = shared.client
        self.path = shared.path
        self.layout = layout
        self.data = data
        self.node: CreatedNode | None = None
        self._pending: str | None = None  # a create whose outcome we may not know

    async def create(self) -> CreatedNode:
        """Create our node at the tail of the election (after cleaning up any earlier try).

        The parent is made once for all the latches of the session (not once per
        create that finds it missing), and again if it was reaped meanwhile.
        """
        for attempt in range(3):
            if not self.shared.parent_ready or attempt:
                await self.shared.ensure_parent()
            try:
                node = await self._create()
            except NoNodeError:
                self.shared.parent_ready = False
                continue
            self.shared.parent_ready = True
            return node
        raise NoNodeError("the latch's parent keeps vanishing", path=self.path)

    async def _create(self) -> CreatedNode:
        prefix = join(self.path, self.layout.prefix)
        if self.layout.protected:
            if self._pending is not None:
                await self._sweep()
            node_id = self._pending = str(uuid.uuid4())
            try:
                created = await self.client.create_protected(
                    prefix, self.data, node_id=node_id, make_parents=False
                )
            except NoNodeError:
                self._pending = None  # no parent, so certainly no node
                raise
            self.shared.claimed.add(created.path)
        else:
            async with self.shared.lock:
                if self._pending is not None:
                    await self._sweep()
                self._pending = "offer"
                try:
                    created = await self.client.create(
                        prefix, self.data, mode=CreateMode.EPHEMERAL_SEQUENTIAL
                    )
                except NoNodeError:
                    self._pending = None
                    raise
                self.shared.claimed.add(created.path)
        self._pending = None
        self.node = created_node(created)
        return self.node

    def forget(self) -> None:
        """Our node is gone (or was never ours): drop it without a request."""
        if self.node is not None:
            self.shared.claimed.discard(self.node.path)
        self.node = None

    async def delete(self, session_id: int | None) -> None:
        """Delete our node.  A zookeeper-layout name can come back after its parent was
        reaped, so a node of an earlier session is deleted only if its czxid is ours."""
        node = self.node
        if node is None:
            return
        try:
            if self.layout.protected or node.owner == session_id:
                await self.client.delete(node.path)
            else:
                stat = await self.client.exists(node.path)
                if stat is not None and stat.czxid == node.czxid:
                    await self.client.delete(node.path, version=stat.version)
        except (NoNodeError, BadVersionError):
            pass
        if self.node is node:
            self.forget()

    def delete_now(self, session_id: int | None) -> Callable[[], Awaitable[None]] | None:
        """Send our node's delete at once (no await); the returned function finishes it.

        None when it cannot go now (no node, no connection, or a node of an
        earlier session that `delete` checks first): `withdraw` then does it all.
        """
        node = self.node
        if node is None or not (self.layout.protected or node.owner == session_id):
            return None
        try:
            sent = self.client.delete_now(node.path)
        except CoordError:
            return None

        async def finish() -> None:
            with contextlib.suppress(NoNodeError, BadVersionError):
                await sent()
            if self.node is node:
                self.forget()

        return finish

    async def withdraw(
        self, session_id: int | None, sent: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """Delete our node (finish `sent`, from `delete_now`, if given) and what a create left.

        What cannot be deleted now (no connection within the request deadline,
        or the caller's deadline passed first) is logged and left to a chore of
        the session, which deletes it once the connection is back: otherwise
        our node would stay first in the election for the rest of the session.
        The chore gives up when the session ends (the node goes with it) or the
        coordinator closes.
        """
        try:
            if sent is not None:
                await sent()
            await self._remove(session_id)
        except CoordinatorClosedError:
            pass  # the session is being closed: its ephemeral nodes go with it
        except CoordError as exc:
            self._remove_later(session_id, str(exc))
        except anyio.get_cancelled_exc_class():
            self._remove_later(session_id, "no answer in time")
            raise

    async def _remove(self, session_id: int | None) -> None:
        await self.delete(session_id)
        if self._pending is not None:
            if self.layout.protected:
                await self._sweep()
            else:
                async with self.shared.lock:
                    await self._sweep()

    def _remove_later(self, session_id: int | None, why: str) -> None:
        if (self.node is None and self._pending is None) or self.client._session.closed:
            return
        what = self.node.path if self.node is not None else f"a node under {self.path}"
        if session_id is None or self.client._session.session_id != session_id:
            log.info("leader latch %s: %s goes with the ended session (%s)", self.path, what, why)
            return
        log.warning(
            "leader latch %s: could not delete %s (%s); deleting it once the connection is back",
            self.path,
            what,
            why,
        )
        self.shared.retain()  # our zookeeper-layout sweep needs the path's claimed nodes

        async def remove() -> None:
            try:
                await self._remove_when_back(session_id, what)
            finally:
                self.shared.release()

        if not self.client._session.start_chore(remove, f"leader latch {self.path}: delete {what}"):
            self.shared.release()

    async def _remove_when_back(self, session_id: int, what: str) -> None:
        failures = 0
        while True:
            try:
                await self.client._session.wait_connected()
            except CoordinatorClosedError:
                return
            if self.client._session.session_id != session_id:
                return  # the session ended: its ephemeral nodes went with it
            try:
                await self._remove(session_id)
            except CoordinatorClosedError:
                return
            except ConnectionLostError:
                failures += 1
                await anyio.sleep(min(1.0, 0.05 * 2**failures))
                continue
            except CoordError as exc:
                log.warning("leader latch %s: gave up deleting %s: %s", self.path, what, exc)
                return
            log.info("leader latch %s: deleted %s now that the connection is back", self.path, what)
            return

    async def _sweep(self) -> None:
        if self.layout.protected:
            assert self._pending is not None
            await sweep_protected(self.client, self.path, self._pending)
            self._pending = None
            return
        doomed = [
            p
            for p in await self.client.ephemerals(self.path)
            if parent(p) == self.path
            and basename(p).startswith(self.layout.prefix)
            and p not in self.shared.claimed
        ]
        for path in doomed:
            with contextlib.suppress(NoNodeError):
                await self.client.delete(path)
        self._pending = None


async def participants_of(client: ZkClient, path: str, layout: LatchLayout) -> list[Participant]:
    """The participants in election order; nodes that vanish while read are skipped."""
    nodes = await read_queue(client, path, layout)
    return [
        Participant(_decode(path, name, data), not i, name) for i, (name, data) in enumerate(nodes)
    ]


async def leader_of(client: ZkClient, path: str, layout: LatchLayout) -> Participant | None:
    """The first participant whose node can still be read, or None."""
    for name in await _ordered_children(client, path, layout):
        try:
            node = await client.get(join(path, name))
        except NoNodeError:
            continue
        return Participant(_decode(path, name, node.data), True, name)
    return None


async def _ordered_children(client: ZkClient, path: str, layout: LatchLayout) -> list[str]:
    try:
        names = await client.children(path)
    except NoNodeError:
        return []
    return sort_children(names, layout)


def _decode(path: str, name: str, data: bytes) -> str:
    """A participant id: the node's raw UTF-8 bytes, as Curator writes them (not JSON)."""
    return load_text(join(path, name), data, "participant id")
