"""The one queue loop: our node's place in a queue, from its create to its delete.

`Waiter` is Curator's ``LockInternals`` loop (see the package docstring), run
two ways.  An acquisition (mutex, read/write lock, semaphore) calls
`wait_turn`, which returns once the rule lets our node go, decided in the
waiting task with no await after the last check; the caller holds the right
and withdraws the node (`leave`).  A participant (the leader latch, and the
selector through it) calls `participate`, which keeps a node of this session
in the queue until cancelled and tells its `Host` what happens.  It also
watches its own node, so the grant is made where the notification is read:
at once when the node just ahead was the only one, else when the listing
sent from that callback comes back (a hand-off costs no task and no request
beyond the notification and, when more than one node was ahead, one
listing).  Granted, it holds until its node or a connection state changes
(`poke`), then looks again: same session, same node; a node of an earlier
session is deleted and it joins again at the tail, after `Host.held` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import anyio
import anyio.abc
import anyio.lowlevel

from ..._backoff import grown
from ..._records import load_text
from ...errors import (
    ConnectionLostError,
    CoordinatorClosedError,
    NodeDataError,
    NoNodeError,
    ZooKeeperError,
)
from ...session import Coordinator
from ...zk import EventType, Watch, WatchedEvent
from ...zk.paths import join
from ...zk.states import ConnectionState
from .._change_signal import ChangeSignal
from ._kazoo import KazooNames
from ._nodes import CreatedNode, EarlyListing, OurNode
from ._table import CuratorNames, Gone, Granted, Ordering, Rule, Sorts, Wait, decide, may_take

__all__ = ("USABLE", "Host", "Waiter", "fired_by", "grantable", "connected_by")

USABLE: Final = (ConnectionState.CONNECTED, ConnectionState.RECONNECTED)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Host:
    """What a participant's `Waiter` tells its recipe (all synchronous, no await).

    `elect(node)`: the right is ours on `node` (a no-op if already held);
    `lose(reason)`: it is ours no more (a no-op if it was not); `joined(node,
    started)`: our node was created (the create began at `started`);
    `following(node, predecessor, started)`: we wait behind `predecessor`
    (the look that decided it began at `started`); `failed(error)`: an
    unexpected error, retried; `closed()`: the coordinator closed;
    `held()`: how long to wait before joining again after our node went (0:
    at once; the selector's requeue).
    """

    elect: Callable[[CreatedNode], None]
    lose: Callable[[str], None]
    joined: Callable[[CreatedNode, float], None]
    following: Callable[[CreatedNode, str, float], None]
    failed: Callable[[Exception], None]
    closed: Callable[[], None]
    held: Callable[[], float]


class Waiter(OurNode):
    """Our node under `path`, from its create to its delete, and the wait for our turn.

    `names` is the recipe's layout: Curator's, a kazoo one (`KazooNames`: our
    node named and found as kazoo does, see `OurNode`), or another `Sorts`
    given a `name` (our node is created as its first marker unless `name`
    says otherwise), `rule` its "may I go" rule, `recipe` its
    name in log lines and errors.  See the module docstring for the two ways
    it runs (`wait_turn`, `participate`).
    """

    def __init__(
        self,
        coord: Coordinator,
        path: str,
        data: bytes,
        names: Sorts,
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
        if name is None:
            assert isinstance(names, CuratorNames | KazooNames), (
                "a layout without markers needs a `name`"
            )
            name = names.marker
        self.name = name
        self.predecessor: str | None = None  # the node we wait behind
        # A participant's (`participate`): its host, and what interrupts its waits.
        self.host: Host | None = None
        self.closing = False  # leaving: no more writes, no more grants
        self.writing = False  # a create or delete of ours is in flight
        # When the current determination (a listing, or a predecessor's deletion) began.
        self.determining = time.monotonic()
        self._wake = ChangeSignal()  # fired by `poke`
        self._waiting: anyio.CancelScope | None = None
        self._own: Watch | None = None  # our own node's data watch (participants)
        # The leader's participant id, read with the watch on it when it is the node just
        # ahead of ours; good while that watch has not fired.
        self._leader: tuple[Watch, str | None] | None = None

    # --- an acquisition ------------------------------------------------------------------------

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

    # --- a participant -------------------------------------------------------------------------

    async def participate(self, host: Host, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Join, report the node, then take part until cancelled (the recipe withdraws).

        Joining the first time rides out connection trouble within one request
        timeout, then raises `ConnectionLostError` saying how long it waited
        and why; other errors are raised at once.  Later errors are reported
        to `Host.failed` and retried with a short backoff.
        """
        self.host = host
        session = self.client.session
        deadline = session.deadline()
        with anyio.CancelScope(deadline=deadline.at):
            while True:
                try:
                    await session.wait_connected()
                    await self._join()
                    break
                except (ConnectionLostError, TimeoutError):
                    await anyio.lowlevel.checkpoint()  # connection trouble: try again
        if self.node is None:
            session.ensure_open()
            raise session.unreachable(deadline, f"{self.recipe} {self.path}: could not join")
        task_status.started()
        failures = 0
        while not self.closing:
            wake = self._wake.event()
            try:
                await self.coord.client.session.wait_connected()
                if self.coord.state is ConnectionState.READ_ONLY:
                    await wake.wait()  # no quorum: nothing to decide until the state changes
                    continue
                await self._pass(None, wake)
                failures = 0
            except CoordinatorClosedError:
                host.lose("closed")
                host.closed()
                break
            except (ConnectionLostError, TimeoutError):
                await anyio.lowlevel.checkpoint()  # the next pass waits for a connection
            except (ZooKeeperError, NodeDataError) as exc:
                failures += 1
                self.log.warning("%s %s: %s (retrying)", self.recipe, self.path, exc)
                host.failed(exc)
                with anyio.move_on_after(grown(0.05, failures, 2.0)):
                    await wake.wait()
        await anyio.sleep_forever()  # leaving: the recipe owns the node now

    def poke(self) -> None:
        """A connection state changed: look again (interrupts the current wait)."""
        self._wake.fire()
        self._interrupt()

    def unwatch(self) -> None:
        """Leaving: forget our node's watch, so that deleting the node wakes nothing of ours."""
        own, self._own = self._own, None
        if own is not None:
            self.client.forget_watch(own)

    @property
    def known_leader(self) -> str | None:
        """The first node's data if it is just ahead of ours and still there (participants)."""
        found = self._leader
        if found is None or found[0].fired:
            return None
        return found[1]

    # --- the loop ------------------------------------------------------------------------------

    async def _pass(self, deadline: float | None, wake: asyncio.Event | None = None) -> bool | None:
        """One pass: a node of this session, a listing, then act on it until told otherwise.

        True: ours may go (an acquisition); False: out of time; None: start a
        pass again (a participant's grant ends in None too, once it is over).
        """
        node = self.node
        listed: Ordering | None = None
        if node is None or node.owner != self.coord.client.session.session_id:
            if node is not None:  # an earlier session's: the server may not have expired it yet
                self._lose("session lost")
                await self._write(self.delete())
            held = self.host.held() if self.host is not None else 0.0
            if held > 0 and wake is not None:  # released: join again later, or when poked
                with anyio.move_on_after(held):
                    await wake.wait()
                return None
            node = await self._join()
            listed = self._listing()
        own: Watch | None = None
        if self.host is not None:
            own = await self._watch_own(node)
            if own is None:
                return None
        self.determining = time.monotonic()
        try:
            order: Ordering | None = listed if listed is not None else await self._ordered()
            while order is not None:
                sid = self.coord.client.session.session_id
                move = decide(order, node.name, self.rule, owner=node.owner, session_id=sid)
                if isinstance(move, Granted):
                    return await self._granted(node, own, deadline, wake)
                if isinstance(move, Gone):  # someone deleted it: join again
                    self._node_lost()
                if not isinstance(move, Wait):
                    return None  # Stale: the next pass joins again on the current session
                # The listing is not kept while we wait: a thousand waiters would each hold one.
                order = None
                after = await self._follow(node, own, move, deadline, wake)
                if not isinstance(after, Ordering):
                    return after
                order = after
        except NoNodeError:  # the parent went, and our node with it
            self._node_lost()
        return None

    async def _follow(
        self,
        node: CreatedNode,
        own: Watch | None,
        wait: Wait,
        deadline: float | None,
        wake: asyncio.Event | None,
    ) -> Ordering | bool | None:
        """Wait on the node the rule names; the listing made once it went, to decide on.

        Curator's order again: the listing is sent from the watch's callback,
        the moment the deletion is read (`_predecessor_gone`).  A participant,
        which watches its own node, needs none when the node ahead was the
        only one: nodes created since sort after ours.  An acquisition holds
        no watch on its own node, so its listing is what tells it that its
        node is still there.  False: out of time; None: start the pass again.
        """
        predecessor = wait.node
        self._lose("handed over")  # someone sorts ahead of us now (a no-op unless held)
        self._leader = None
        try:
            ahead, watch = await self.client.get_watch(join(self.path, predecessor))
        except NoNodeError:  # gone since the listing
            if own is not None and wait.last:
                return await self._granted(node, own, deadline, wake)
            return await self._ordered()
        if own is not None and wait.last:  # the first: its id costs nothing more (`known_leader`)
            with contextlib.suppress(NodeDataError):
                self._leader = (watch, load_text(watch.path, ahead.data, "participant id"))
        if self.predecessor != predecessor:
            self.predecessor = predecessor
            if self.host is not None:
                self.host.following(node, predecessor, self.determining)
        # Act the moment the notification is read, before this task (or any other woken
        # by it) runs; the task then finds it done.
        early = EarlyListing()
        watch.add_callback(
            lambda event: self._predecessor_gone(event, wait, early, node, own, wake)
        )
        try:
            event = await self._until(watch, own, wake, deadline)
        finally:
            if self.host is None:
                self.client.remove_watch(watch)  # a wait given up: no notification comes later
            elif not watch.fired:
                # A participant's pass given up (a state changed, our node changed, leaving):
                # its callback would keep the watch in the registry until the predecessor
                # goes, and the next pass sets another on the same node, so a follower whose
                # leader stays would gather one per pass (two per cut), each restored on every
                # reconnect.  Nothing is sent: the server keeps one watch per path, the next
                # pass's.  A forgotten watch never fires, so it no longer tells `known_leader`.
                self.client.forget_watch(watch)
                if self._leader is not None and self._leader[0] is watch:
                    self._leader = None
        if not isinstance(event, WatchedEvent):
            return event  # out of time (False), or interrupted (None)
        if event.type is not EventType.DELETED or self.closing:
            return None  # a data change, a lost session: look again
        if own is not None and wait.last:
            return await self._granted(node, own, deadline, wake)
        if early.result is not None:
            await early.result()
            if early.order is not None:
                return early.order
        return await self._ordered()

    def _predecessor_gone(
        self,
        event: WatchedEvent,
        wait: Wait,
        early: EarlyListing,
        node: CreatedNode,
        own: Watch | None,
        wake: asyncio.Event | None,
    ) -> None:
        """The node we wait behind changed (a watch callback: no await)."""
        if event.type is not EventType.DELETED or self.predecessor != wait.node:
            return
        self.determining = time.monotonic()
        if own is not None and wait.last:
            self._take(node, own, wake)  # it was the only one ahead
            return
        if self.closing or (wake is not None and wake.is_set()):
            return
        early.send(
            self.client, self.path, lambda names: self._listed(names, early, node, own, wake)
        )

    def _listed(
        self,
        names: list[str],
        early: EarlyListing,
        node: CreatedNode,
        own: Watch | None,
        wake: asyncio.Event | None,
    ) -> None:
        """The listing sent by `_predecessor_gone` came back; a participant takes the right
        now if the rule grants it."""
        order = early.order = Ordering(names, self.names)
        if own is None:
            return  # an acquisition decides in its task
        sid = self.coord.client.session.session_id
        if isinstance(
            decide(order, node.name, self.rule, owner=node.owner, session_id=sid), Granted
        ):
            self._take(node, own, wake)

    async def _granted(
        self,
        node: CreatedNode,
        own: Watch | None,
        deadline: float | None,
        wake: asyncio.Event | None,
    ) -> bool | None:
        """The rule lets our node go: take the right if we may (a participant then holds
        it until its node or a connection state changes)."""
        if self.host is None:
            return True if self._take(node) else await self._until_usable(deadline)
        if self._take(node, own, wake):
            assert own is not None
            await self._until(own, own, wake, None)
        return None

    def _take(
        self, node: CreatedNode, own: Watch | None = None, wake: asyncio.Event | None = None
    ) -> bool:
        """Take the right on `node` if allowed (a participant's host is told).

        Synchronous, so that nothing changes between this check and taking the right.
        """
        if self.closing or (wake is not None and wake.is_set()) or (own is not None and own.fired):
            return False
        if not grantable(self.coord, node):
            return False
        self.predecessor = None
        if self.host is not None:
            self.host.elect(node)
        return True

    async def _until(
        self, watch: Watch, own: Watch | None, wake: asyncio.Event | None, deadline: float | None
    ) -> WatchedEvent | bool | None:
        """`watch`'s event; None if interrupted first (a connection state or our own node
        changed: `_interrupt`), False if `deadline` passed first."""
        if (wake is not None and wake.is_set()) or (
            own is not None and own.fired and watch is not own
        ):
            return None
        with anyio.CancelScope(deadline=math.inf if deadline is None else deadline) as scope:
            self._waiting = scope
            try:
                return await watch.wait()
            finally:
                self._waiting = None
        return False if deadline is not None and anyio.current_time() >= deadline else None

    def _interrupt(self, _event: WatchedEvent | None = None) -> None:
        if self._waiting is not None:
            self._waiting.cancel()

    async def _watch_own(self, node: CreatedNode) -> Watch | None:
        """Our node's data watch (armed again after a data change); None if the node is gone.

        Its callback interrupts whatever the participant waits for when it
        fires, so that each wait is a single await (no task per wait).
        """
        own = self._own
        if own is not None and own.event is None:
            return own
        if own is not None and own.event is not None and own.event.type is EventType.DELETED:
            self._node_lost()
            return None
        try:
            current, own = await self.client.get_watch(node.path)
        except NoNodeError:
            self._node_lost()
            return None
        if current.stat.czxid != node.czxid:  # another node under our old name
            self._node_lost()
            return None
        self._own = own
        own.add_callback(self._interrupt)
        return own

    # --- our node ------------------------------------------------------------------------------

    async def _join(self) -> CreatedNode:
        """Create our node at the tail (after deleting what an interrupted create left)."""
        self._own = None
        self.predecessor = None
        self._leader = None
        started = time.monotonic()
        node = await self._write(self._create())
        self.log.debug("%s %s: queued as %s", self.recipe, self.path, node.path)
        if self.host is not None:
            self.host.joined(node, started)
        return node

    async def _create(self) -> CreatedNode:
        # The listing goes right behind the create: one round trip for both.
        return await self.create(self.name, self.data, list_parent=True)

    async def _ordered(self) -> Ordering:
        """The children, in queue order."""
        return Ordering(await self.client.children(self.path), self.names)

    def _listing(self) -> Ordering | None:
        """The children listed right behind our node's create, in queue order (taken once:
        None if that listing did not come with the create, or was taken)."""
        listed, self.listed = self.listed, None
        return Ordering(listed, self.names) if listed is not None else None

    def forget(self) -> None:
        """Our node is gone (or was never ours): drop it without a request."""
        self.node = None

    def _node_lost(self) -> None:
        """Our node is gone (or not ours): the right with it; the next pass joins again."""
        self._lose("node deleted")
        self.forget()
        self._own = None
        self.predecessor = None
        self._leader = None

    def _lose(self, reason: str) -> None:
        if self.host is not None:
            self.host.lose(reason)

    async def _write(self, write: Coroutine[Any, Any, T]) -> T:
        """Run one of our node's writes; a participant leaving starts none."""
        if self.closing:
            write.close()  # never started
            await anyio.sleep_forever()  # leaving: no new node, no delete
        self.writing = True
        try:
            return await write
        finally:
            self.writing = False

    # --- waiting for the connection ------------------------------------------------------------

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


def grantable(coord: Coordinator, node: CreatedNode) -> bool:
    """May a right be taken on `node` now: connected for writing, `node` of this session.

    Synchronous, so that nothing changes between this check and taking the right.
    """
    connected = coord.state in USABLE
    sid = coord.client.session.session_id
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
        await coord.client.session.wait_connected()
        await anyio.lowlevel.checkpoint()  # never a busy loop, whatever the requests do
        return True
    return False
