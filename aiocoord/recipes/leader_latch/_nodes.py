"""The leader latch's node keeping: create, find after a loss, delete; shared listings.

`Candidacy` is one participant's election node, the queue's `Waiter` (see
``recipes/_queue``) on the latch's layout.  In the zookeeper layout, whose ``n_<seq>`` names carry
no uuid, a create whose outcome is unknown is cleaned up by deleting this
session's offers under the path that no latch of this process claims, with
the other creates of the session on that path held back meanwhile.

`SharedPath` is what the latches of one session on one path share: that lock,
the claimed nodes, and a coalesced child listing, so that a thousand
participants joining on one session cost a handful of listings, not a thousand.
"""

from __future__ import annotations

import contextlib
import uuid
import weakref
from collections.abc import Awaitable, Callable
from typing import ClassVar

import anyio

from ..._records import load_text
from ...errors import BadVersionError, CoordError, NoNodeError
from ...session import Coordinator
from ...zk.client import ZkClient
from ...zk.paths import basename, join, parent
from ...zk.types import CreateMode
from .._participant import Participant
from .._queue import CreatedNode, Ordering, Ours, Waiter, created_node, first, read_queue
from ._election import LatchLayout

__all__ = ("Candidacy", "SharedPath", "leader_of", "participants_of")


class _ListingRound:
    __slots__ = ("done", "names", "orders")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.names: list[str] | None = None
        # Sorted once per layout, for every latch of the round (a selector's nodes are
        # not a latch's: each sorts the listing its own way).
        self.orders: dict[LatchLayout, Ordering] = {}

    def order(self, layout: LatchLayout) -> Ordering:
        assert self.names is not None
        order = self.orders.get(layout)
        if order is None:
            order = self.orders[layout] = Ordering(self.names, layout)
        return order


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

    async def ensure_parent(self, mode: CreateMode = CreateMode.CONTAINER) -> None:
        """Create the path (`mode`: containers unless kazoo's layout) once for all the
        latches that need it now."""
        ensuring = self._ensuring
        if ensuring is not None:
            await ensuring.wait()
            return
        self._ensuring = done = anyio.Event()
        try:
            await self.client.ensure_path(self.path, mode=mode)
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
                return joined.order(layout)
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
            return rnd.order(layout)
        finally:
            if self._next is rnd:
                self._next = None
            rnd.done.set()


class Candidacy(Waiter):
    """One participant's election node under `shared.path`: the queue's `Waiter`, taking
    part (`Waiter.participate`) with the latch as its host."""

    def __init__(
        self, coord: Coordinator, shared: SharedPath, layout: LatchLayout, data: bytes
    ) -> None:
        super().__init__(
            coord, shared.path, data, layout, first, recipe="leader latch", name=layout.prefix
        )
        self.kazoo = layout.kazoo is not None  # named and found as kazoo's nodes
        self.shared = shared
        self.layout = layout  # zookeeper layout: `pending` marks a create in doubt, by no name

    async def _ordered(self) -> Ordering:
        return await self.shared.ordered(self.layout)

    async def _create(self) -> CreatedNode:
        """Create our node at the tail of the election (after cleaning up any earlier try).

        The parent is made once for all the latches of the session (not once per
        create that finds it missing), and again if it was reaped meanwhile.
        """
        for attempt in range(3):
            if not self.shared.parent_ready or attempt:
                await self.shared.ensure_parent(self.layout.parent_mode)
            try:
                node = await self._offer()
            except NoNodeError:
                self.shared.parent_ready = False
                continue
            self.shared.parent_ready = True
            return node
        raise NoNodeError("the latch's parent keeps vanishing", path=self.path)

    async def _offer(self) -> CreatedNode:
        if self.layout.protected:
            return await self.create(self.layout.prefix, self.data, make_parents=False)
        async with self.shared.lock:
            await self._sweep_offers()
            self.pending = str(uuid.uuid4())
            try:
                created = await self.client.create(
                    join(self.path, self.layout.prefix),
                    self.data,
                    mode=CreateMode.EPHEMERAL_SEQUENTIAL,
                )
            except NoNodeError:
                self.pending = None  # no parent, so certainly no node
                raise
            self.pending = None
            self.shared.claimed.add(created.path)
            self.node = node = created_node(created)
        return node

    def forget(self) -> None:
        """Our node is gone (or was never ours): drop it without a request."""
        if self.node is not None:
            self.shared.claimed.discard(self.node.path)
        self.node = None

    async def delete(self) -> None:
        """Delete our node.  A zookeeper-layout name can come back after its parent was
        reaped, so a node of an earlier session is deleted only if its czxid is ours."""
        node = self.node
        if node is None:
            return
        try:
            if self.layout.protected or node.owner == self.client.session.session_id:
                await self.client.delete(node.path)
            else:
                stat = await self.client.exists(node.path)
                if stat is not None and stat.czxid == node.czxid:
                    await self.client.delete(node.path, version=stat.version)
        except (NoNodeError, BadVersionError):
            pass
        if self.node is node:
            self.forget()

    def delete_now(self) -> Callable[[], Awaitable[None]] | None:
        """Send our node's delete at once (no await); the returned function finishes it.

        None when it cannot go now (no node, no connection, or a node of an
        earlier session that `delete` checks first): `leave` then does it all.
        """
        node = self.node
        if node is None or not (
            self.layout.protected or node.owner == self.client.session.session_id
        ):
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

    async def sweep(self) -> None:
        if self.layout.protected:
            await super().sweep()
        elif self.pending is not None:
            async with self.shared.lock:
                await self._sweep_offers()

    async def _sweep_offers(self) -> None:
        """Zookeeper layout, under the path's lock: delete this session's offers under the
        path that no latch of this process claims, if a create's outcome is unknown."""
        if self.pending is None:
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
        self.pending = None

    def withdraw_later(self, what: Ours | None = None) -> bool:
        self.shared.retain()  # our zookeeper-layout sweep needs the path's claimed nodes
        if super().withdraw_later(what):
            return True
        self.shared.release()
        return False

    async def withdrawn(self, what: Ours) -> None:
        try:
            await super().withdrawn(what)
        finally:
            self.shared.release()


async def participants_of(client: ZkClient, path: str, layout: LatchLayout) -> list[Participant]:
    """The participants in election order; nodes that vanish while read are skipped."""
    nodes = await read_queue(client, path, layout)
    return [
        Participant(_decode(path, name, node.data), not i, name)
        for i, (name, node) in enumerate(nodes)
    ]


async def leader_of(client: ZkClient, path: str, layout: LatchLayout) -> Participant | None:
    """The first participant whose node can still be read, or None."""
    try:
        names = layout.sort(await client.children(path))
    except NoNodeError:
        return None
    for name in names:
        try:
            node = await client.get(join(path, name))
        except NoNodeError:
            continue
        return Participant(_decode(path, name, node.data), True, name)
    return None


def _decode(path: str, name: str, data: bytes) -> str:
    """A participant id: the node's raw UTF-8 bytes, as Curator writes them (not JSON)."""
    return load_text(join(path, name), data, "participant id")
