"""One acquisition's place in the lock queue: create our node, wait for our turn, withdraw.

`Ticket` is the I/O loop of `Mutex.acquire`, Curator's ``LockInternals`` loop:
it creates our protected node, lists the children, asks `next_move` what to do,
and waits on the predecessor's data watch alone; when the predecessor changes,
it lists the children again (sent from the watch's callback, as the
notification is read) and decides again.  The lock is taken only on a listing
that has our node first, made after the last node ahead of it went.
"""

from __future__ import annotations

import contextlib
import logging
import math
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final

import anyio
import anyio.lowlevel

from ...errors import ConnectionLostError, CoordError, CoordinatorClosedError, NoNodeError
from ...session import Coordinator
from ...zk import EventType, Watch, WatchedEvent
from ...zk.paths import join
from ...zk.states import ConnectionState
from .._sequential import (
    CreatedNode,
    Follow,
    Lead,
    Missing,
    Ordering,
    created_node,
    curator_sorted,
    may_take,
    next_move,
    sweep_protected,
)

__all__ = ("LOCK", "LockNames", "Ticket")

log = logging.getLogger("aiocoord.recipes.mutex")

USABLE: Final = (ConnectionState.CONNECTED, ConnectionState.RECONNECTED)


@dataclass(frozen=True, slots=True)
class LockNames:
    """Curator's ``InterProcessMutex`` names: ``_c_<uuid>-lock-<seq>``, sorted after ``lock-``."""

    marker: str = "lock-"

    def sort(self, names: Sequence[str]) -> list[str]:
        return curator_sorted(names, self.marker)


LOCK: Final = LockNames()


class _Listing:
    """A listing sent from a watch callback, the moment the predecessor's deletion is read."""

    __slots__ = ("result",)

    def __init__(self) -> None:
        self.result: Callable[[], Awaitable[list[str]]] | None = None


def _ignore(_names: list[str]) -> None:
    pass


class Ticket:
    """Our lock node under `path`, from its create to its delete.

    `wait_turn` returns once our node is first (or False when the deadline
    passes first); the caller withdraws the node (`withdraw`) after a release,
    a timeout, an error or a cancellation.
    """

    def __init__(self, coord: Coordinator, path: str, data: bytes) -> None:
        self.coord = coord
        self.client = coord.client
        self.path = path
        self.data = data
        self.node: CreatedNode | None = None
        self.predecessor: str | None = None  # the node we wait behind
        self._pending: str | None = None  # the uuid of a create whose outcome we may not know

    # --- waiting for our turn ----------------------------------------------------------------

    async def wait_turn(self, deadline: float | None) -> bool:
        """Join (again, if our node was lost) until our node is first; False past `deadline`.

        `deadline` (anyio's clock) bounds the waits, not the requests: a create
        or a listing already sent is seen through, within its own deadline.
        Connection losses are ridden out; a new session joins again at the tail.
        """
        while True:
            try:
                outcome = await self._pass(deadline)
            except (ConnectionLostError, TimeoutError):
                outcome = await self._until_connected(deadline)
            if outcome is not None:
                return outcome

    async def _pass(self, deadline: float | None) -> bool | None:
        """One pass: a node of this session, a listing, then act on it until told otherwise.

        True: ours is first; False: out of time; None: start a pass again.
        """
        node = self.node
        if node is None or node.owner != self.coord.session_id:
            if node is not None:  # an earlier session's: the server may not have expired it yet
                await self._delete(node)
            node = await self._create()
        try:
            names = await self.client.children(self.path)
            while True:
                order = Ordering(names, LOCK)
                sid = self.coord.session_id
                decision = next_move(order, node.name, owner=node.owner, session_id=sid)
                if isinstance(decision, Lead):
                    return True if self._grantable(node) else await self._until_usable(deadline)
                if not isinstance(decision, Follow):
                    if isinstance(decision, Missing):  # someone deleted it: join again
                        self.node = None
                    return None  # Stale: the next pass joins again on the current session
                after = await self._follow(decision, deadline)
                if not isinstance(after, list):
                    return after
                names = after
        except NoNodeError:  # the parent went, and our node with it
            self.node = None
            return None

    async def _follow(self, follow: Follow, deadline: float | None) -> list[str] | bool:
        """Wait behind the node just ahead of ours; the children listed once it went.

        Curator's order again: the listing is sent from the watch's callback,
        the moment the deletion is read, and decided on by the next round of
        `_pass`.  A waiter holds no watch on its own node, so that a release
        notifies the next in line alone; the listing is what tells it that
        its own node is still there.  False: out of time.
        """
        self.predecessor = follow.predecessor
        try:
            _, watch = await self.client.get_watch(join(self.path, follow.predecessor))
        except NoNodeError:  # gone since the listing
            return await self.client.children(self.path)
        early = _Listing()
        watch.add_callback(lambda event: self._list_early(event, early))
        try:
            if not await self._until(watch, deadline):
                return False
        finally:
            self.client.remove_watch(watch)  # a wait given up: no notification comes later
        if early.result is not None:
            return await early.result()
        return await self.client.children(self.path)  # a data change, a lost session

    def _list_early(self, event: WatchedEvent, early: _Listing) -> None:
        """The predecessor's watch fired (a callback: no await): list at once if it went."""
        if event.type is EventType.DELETED:
            with contextlib.suppress(CoordError):  # not connected: the task lists once it is
                early.result = self.client.children_now(self.path, _ignore)

    def _grantable(self, node: CreatedNode) -> bool:
        """Synchronous, so that nothing changes between this check and taking the lock."""
        connected = self.coord.state in USABLE
        sid = self.coord.session_id
        if may_take(owner=node.owner, session_id=sid, connected=connected, node_gone=False):
            self.predecessor = None
            return True
        return False

    async def _until(self, watch: Watch, deadline: float | None) -> bool:
        """Wait for `watch` to fire; False if `deadline` passed first."""
        if deadline is None:
            await watch.wait()
            return True
        with anyio.CancelScope(deadline=deadline):
            await watch.wait()
            return True
        return False

    async def _until_usable(self, deadline: float | None) -> bool | None:
        """First, but not connected for writing (SUSPENDED, READ_ONLY): wait for that to change."""
        with anyio.CancelScope(deadline=math.inf if deadline is None else deadline):
            events = self.coord.connection_events()
            try:
                async for event in events:  # the current state first
                    if event.state in USABLE:
                        return None
            finally:
                aclose: Callable[[], Awaitable[None]] | None = getattr(events, "aclose", None)
                if aclose is not None:
                    with anyio.CancelScope(shield=True):
                        await aclose()
            raise CoordinatorClosedError(f"the coordinator of mutex {self.path} closed")
        return False

    async def _until_connected(self, deadline: float | None) -> bool | None:
        with anyio.CancelScope(deadline=math.inf if deadline is None else deadline):
            await self.coord.wait_connected()
            await anyio.lowlevel.checkpoint()  # never a busy loop, whatever the requests do
            return None
        return False

    # --- our node ----------------------------------------------------------------------------

    async def _create(self) -> CreatedNode:
        """Create our node at the tail (after deleting what an interrupted create left)."""
        if self._pending is not None:
            await self._sweep()
        self._pending = node_id = str(uuid.uuid4())
        created = await self.client.create_protected(
            join(self.path, LOCK.marker), self.data, node_id=node_id
        )
        self._pending = None
        self.node = node = created_node(created)
        log.debug("mutex %s: queued as %s", self.path, node.name)
        return node

    async def _delete(self, node: CreatedNode) -> None:
        with contextlib.suppress(NoNodeError):
            await self.client.delete(node.path)
        self.node = None

    async def _sweep(self) -> None:
        assert self._pending is not None
        await sweep_protected(self.client, self.path, self._pending)
        self._pending = None

    async def withdraw(self) -> None:
        """Delete our node and whatever an interrupted create left, across reconnects.

        The caller bounds it (and shields it).  A closed coordinator has nothing
        left to delete: closing its session removed our node.
        """
        while self.node is not None or self._pending is not None:
            try:
                if self.node is not None:
                    await self._delete(self.node)
                if self._pending is not None:
                    await self._sweep()
            except CoordinatorClosedError:
                return
            except (ConnectionLostError, TimeoutError) as exc:
                log.debug("mutex %s: withdrawing after a connection loss (%s)", self.path, exc)
                try:
                    await self.coord.wait_connected()
                except CoordinatorClosedError:
                    return
                await anyio.lowlevel.checkpoint()
            except CoordError as exc:
                log.warning("mutex %s: could not delete our node: %s", self.path, exc)
                return

    def withdraw_later(self) -> bool:
        """A withdraw that ran out of time: finish it in a chore of the session.

        The chore deletes our node once the connection is back, so that it does
        not block the queue for as long as the session lives.  False if there
        is nothing to do: nothing left, or the coordinator closed (closing its
        session removed our node).
        """
        if (self.node is None and self._pending is None) or self.client._session.closed:
            return False
        what = self.node.path if self.node is not None else f"a node under {self.path}"
        log.warning(
            "mutex %s: %s not deleted yet; deleting it once the connection is back", self.path, what
        )
        return self.client._session.start_chore(self.withdraw, f"mutex {self.path}: delete {what}")
