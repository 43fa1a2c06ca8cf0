"""One acquisition's place in a queue: create our node, wait until the rule lets it go, withdraw.

`Waiter` is Curator's ``LockInternals`` loop, for the mutex (and the next
queue recipes): list, `decide`, wait on the one node the rule names, list
again from its watch's callback when it goes, decide again.  The right is
taken only on a listing that the rule grants.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Final

import anyio
import anyio.lowlevel

from ...errors import ConnectionLostError, CoordinatorClosedError, NoNodeError
from ...session import Coordinator
from ...zk import EventType, Watch, WatchedEvent
from ...zk.paths import join
from ...zk.states import ConnectionState
from ._kazoo import KazooNames
from ._nodes import CreatedNode, EarlyListing, OurNode
from ._table import CuratorNames, Gone, Granted, Ordering, Rule, Wait, decide, may_take

__all__ = ("USABLE", "Waiter", "fired_by", "grantable", "connected_by")

USABLE: Final = (ConnectionState.CONNECTED, ConnectionState.RECONNECTED)


class Waiter(OurNode):
    """Our node under `path`, from its create to its delete, and the wait for our turn.

    `names` is the recipe's Curator layout, or a kazoo one (`KazooNames`: our
    node named and found as kazoo does, see `OurNode`; our node is created as
    its first marker unless `name` says otherwise), `rule` its "may I go" rule, `recipe`
    its name in log lines and errors.  `wait_turn` returns once the rule lets
    our node go (or False when the deadline passes first); the caller
    withdraws the node (`leave`) after a release, a timeout, an error or a
    cancellation.
    """

    def __init__(
        self,
        coord: Coordinator,
        path: str,
        data: bytes,
        names: CuratorNames | KazooNames,
        rule: Rule,
        *,
        recipe: str,
        name: str | None = None,
    ) -> None:
        super().__init__(coord.client, path, recipe, kazoo=isinstance(names, KazooNames))
        self.coord = coord
        self.data = data
        self.names = names
        self.rule = rule
        self.name = names.marker if name is None else name
        self.predecessor: str | None = None  # the node we wait behind

    # --- waiting for our turn ----------------------------------------------------------------

    async def wait_turn(self, deadline: float | None) -> bool:
        """Join (again, if our node was lost) until the rule lets our node go; False past `deadline`.

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

        True: ours may go; False: out of time; None: start a pass again.
        """
        node = self.node
        if node is None or node.owner != self.coord.session_id:
            if node is not None:  # an earlier session's: the server may not have expired it yet
                await self.delete()
            node = await self._create()
        try:
            names = await self.client.children(self.path)
            while True:
                order = Ordering(names, self.names)
                sid = self.coord.session_id
                move = decide(order, node.name, self.rule, owner=node.owner, session_id=sid)
                if isinstance(move, Granted):
                    return True if self._grantable(node) else await self._until_usable(deadline)
                if not isinstance(move, Wait):
                    if isinstance(move, Gone):  # someone deleted it: join again
                        self.node = None
                    return None  # Stale: the next pass joins again on the current session
                after = await self._wait(move.node, deadline)
                if not isinstance(after, list):
                    return after
                names = after
        except NoNodeError:  # the parent went, and our node with it
            self.node = None
            return None

    async def _wait(self, predecessor: str, deadline: float | None) -> list[str] | bool:
        """Wait on the node the rule names; the children listed once it changed.

        Curator's order again: the listing is sent from the watch's callback,
        the moment the deletion is read, and decided on by the next round of
        `_pass`.  A waiter holds no watch on its own node, so that a release
        notifies the next in line alone; the listing is what tells it that
        its own node is still there.  False: out of time.
        """
        self.predecessor = predecessor
        try:
            _, watch = await self.client.get_watch(join(self.path, predecessor))
        except NoNodeError:  # gone since the listing
            return await self.client.children(self.path)
        early = EarlyListing()
        watch.add_callback(lambda event: self._list_early(event, early))
        try:
            if not await fired_by(watch, deadline):
                return False
        finally:
            self.client.remove_watch(watch)  # a wait given up: no notification comes later
        if early.result is not None:
            return await early.result()
        return await self.client.children(self.path)  # a data change, a lost session

    def _list_early(self, event: WatchedEvent, early: EarlyListing) -> None:
        """The watched node changed (a callback: no await): list at once if it went."""
        if event.type is EventType.DELETED:
            early.send(self.client, self.path)

    def _grantable(self, node: CreatedNode) -> bool:
        """Synchronous, so that nothing changes between this check and taking the right."""
        if grantable(self.coord, node):
            self.predecessor = None
            return True
        return False

    async def _until_usable(self, deadline: float | None) -> bool | None:
        """Granted, but not connected for writing (SUSPENDED, READ_ONLY): wait for that to change."""
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
            raise CoordinatorClosedError(f"the coordinator of {self.recipe} {self.path} closed")
        return False

    async def _until_connected(self, deadline: float | None) -> bool | None:
        return None if await connected_by(self.coord, deadline) else False

    async def _create(self) -> CreatedNode:
        """Create our node at the tail (after deleting what an interrupted create left)."""
        node = await self.create(self.name, self.data)
        self.log.debug("%s %s: queued as %s", self.recipe, self.path, node.name)
        return node


def grantable(coord: Coordinator, node: CreatedNode) -> bool:
    """May a right be taken on `node` now: connected for writing, `node` of this session.

    Synchronous, so that nothing changes between this check and taking the right.
    """
    connected = coord.state in USABLE
    sid = coord.session_id
    return may_take(owner=node.owner, session_id=sid, connected=connected, node_gone=False)


async def fired_by(watch: Watch, deadline: float | None) -> bool:
    """Wait for `watch` to fire; False if `deadline` (anyio's clock) passed first."""
    with anyio.CancelScope(deadline=math.inf if deadline is None else deadline):
        await watch.wait()
        return True
    return False


async def connected_by(coord: Coordinator, deadline: float | None) -> bool:
    """Wait until `coord` is connected; False if `deadline` (anyio's clock) passed first."""
    with anyio.CancelScope(deadline=math.inf if deadline is None else deadline):
        await coord.wait_connected()
        await anyio.lowlevel.checkpoint()  # never a busy loop, whatever the requests do
        return True
    return False
