"""The leader latch's campaign: keep a node of this session in the election, decide, wait.

The I/O loop behind `LeaderLatch`: it joins (through `Candidacy`), lists the children
(shared per session and path), asks the queue's `decide` what to do (the
`first` rule: the first node leads), and waits on one
watch at a time.  It tells its host (the latch) when to lead and when
leadership is lost; the host owns the term, the events and the connection
states, and calls `poke()` when a state changes.  Every wait is a single await
that `poke()` or a change of our own node interrupts (a watch callback), so a
hand-off costs no task and no request beyond the notification, and, when more
than one node was ahead, one listing.  Both are done by callbacks where the
notification and the listing's reply are read (`_predecessor_gone`, `_listed`):
leadership is granted, or the listing sent, before any task wakes, so the next
leader's own waiters are the first to wake; the campaign task then finds it done.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel

from ..._records import load_text
from ...errors import (
    ConnectionLostError,
    CoordinatorClosedError,
    NodeDataError,
    NoNodeError,
    ZooKeeperError,
)
from ...session import Coordinator
from ...zk import Watch, WatchedEvent
from ...zk.client import ZkClient
from ...zk.paths import join
from ...zk.states import ConnectionState
from ...zk.types import EventType
from .._change_signal import ChangeSignal
from .._queue import (
    USABLE,
    CreatedNode,
    EarlyListing,
    Gone,
    Granted,
    Ordering,
    Wait,
    decide,
    first,
    may_take,
)
from ._election import ElectionEvent, ElectionState, LatchLayout
from ._nodes import Candidacy

__all__ = ("Campaign", "Host")

log = logging.getLogger("aiocoord.recipes.leader_latch")


@dataclass(frozen=True, slots=True)
class Host:
    """What the campaign tells its latch, handed over by the latch when it starts one.

    `elect(node)`: we lead on `node` (a no-op if we already do); `lose(reason)`:
    we lead no more (a no-op if we did not); `publish(event)`: an election
    event for `changes()` readers; `wake()`: wake the latch's waiters;
    `node()`: our node's path, if any; `held()`: how long to wait before
    joining again after our node went (0: at once; the selector's requeue).
    """

    elect: Callable[[CreatedNode], None]
    lose: Callable[[str], None]
    publish: Callable[[ElectionEvent], None]
    wake: Callable[[], None]
    node: Callable[[], str | None]
    held: Callable[[], float]


class Campaign:
    """The election loop of one latch; `run` is started in the latch's task group."""

    def __init__(
        self,
        host: Host,
        coord: Coordinator,
        offer: Candidacy,
        layout: LatchLayout,
        tg: anyio.abc.TaskGroup,
    ) -> None:
        self.host = host
        self.coord = coord
        self.client: ZkClient = coord.client
        self.offer = offer
        self.path = offer.path
        self.layout = layout
        self.tg = tg
        self.closing = False  # the latch is leaving: no more writes, no more grants
        self.writing = False  # a create or delete of ours is in flight
        self._wake = ChangeSignal()  # fired by `poke`
        self._waiting: anyio.CancelScope | None = None
        self._own: Watch | None = None
        self._following: str | None = None
        # When the current determination (a listing, or a predecessor's deletion) began:
        # the start of the phase that FOLLOWING and ELECTED complete.
        self.determining = time.monotonic()
        # The leader's participant id, read with the watch on it when it is the node just
        # ahead of ours; good while that watch has not fired.
        self._leader: tuple[Watch, str | None] | None = None

    @property
    def known_leader(self) -> str | None:
        """The leader's id if the node just ahead of ours is the leader's and still there."""
        found = self._leader
        if found is None or found[0].fired:
            return None
        return found[1]

    def unwatch(self) -> None:
        """Leaving: forget our node's watch, so that deleting the node wakes nothing of ours."""
        own, self._own = self._own, None
        if own is not None:
            self.client.forget_watch(own)

    def poke(self) -> None:
        """A connection state changed: look again (interrupts the current wait)."""
        self._wake.fire()
        self._interrupt()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Join, report the node, then campaign until cancelled (the latch withdraws).

        Joining the first time rides out connection trouble within one request
        timeout, then raises `ConnectionLostError` (to `__aenter__`) saying how
        long it waited and why; other errors are raised at once.  Later errors
        are published as FAILED and retried.
        """
        offer = self.offer
        client = self.client
        deadline = client._session.deadline()
        with anyio.CancelScope(deadline=deadline.at):
            while True:
                try:
                    await client._session.wait_connected()
                    await self._join(offer)
                    break
                except (ConnectionLostError, TimeoutError):
                    await anyio.lowlevel.checkpoint()  # connection trouble: try again
        if offer.node is None:
            client._session.ensure_open()
            raise client._session.unreachable(deadline, f"leader latch {self.path}: could not join")
        task_status.started()
        await self._campaign(offer)

    async def _campaign(self, offer: Candidacy) -> None:
        failures = 0
        while not self.closing:
            wake = self._wake.event()
            try:
                await self.coord.wait_connected()
                if self.coord.state is ConnectionState.READ_ONLY:
                    await wake.wait()  # no quorum: nothing to decide until the state changes
                    continue
                await self._step(offer, wake)
                failures = 0
            except CoordinatorClosedError:
                self.host.lose("closed")
                self.host.wake()
                break
            except (ConnectionLostError, TimeoutError):
                await anyio.lowlevel.checkpoint()  # the next pass waits for a connection
            except (ZooKeeperError, NodeDataError) as exc:
                failures += 1
                log.warning("leader latch %s: %s (retrying)", self.path, exc)
                self.host.publish(
                    ElectionEvent(ElectionState.FAILED, self.host.node(), reason=str(exc))
                )
                with anyio.move_on_after(min(2.0, 0.05 * 2**failures)):
                    await wake.wait()
        await anyio.sleep_forever()  # leaving: `_shutdown` owns the node now

    async def _step(self, offer: Candidacy, wake: asyncio.Event) -> None:
        """One pass: a live node of this session, a listing, then act and wait on it."""
        node = offer.node
        if node is None or node.owner != self.coord.session_id:
            if node is not None:
                self.host.lose("session lost")
                await self._write(offer.delete())  # an earlier session's
            held = self.host.held()
            if held > 0:  # released by the selector: join again later, or when poked
                with anyio.move_on_after(held):
                    await wake.wait()
                return
            await self._join(offer)
            return
        own = await self._watch_own(offer, node)
        if own is None:
            return
        self.determining = time.monotonic()
        try:
            order: Ordering | None = await offer.shared.ordered(self.layout)
        except NoNodeError:  # the parent is gone, and our node with it
            self._node_lost(offer)
            return
        while order is not None:
            sid = self.coord.session_id
            move = decide(order, node.name, first, owner=node.owner, session_id=sid)
            if isinstance(move, Granted):
                await self._lead(node, own, wake)
                return
            if isinstance(move, Gone):
                self._node_lost(offer)
            if not isinstance(move, Wait):
                return  # Stale: the next pass joins again on the current session
            # The listing is not kept while we wait: a thousand latches would each hold one.
            order = None
            order = await self._follow(offer, node, own, move, wake)

    async def _write(self, write: Coroutine[Any, Any, object]) -> None:
        """Run one of the campaign's writes; `_shutdown` waits for none it knows of."""
        if self.closing:
            write.close()  # never started
            await anyio.sleep_forever()  # leaving: no new node, no delete
        self.writing = True
        try:
            await write
        finally:
            self.writing = False

    async def _join(self, offer: Candidacy) -> None:
        self._own = None
        self._following = None
        self._leader = None
        started = time.monotonic()
        await self._write(offer.join())
        node = offer.node
        assert node is not None
        log.debug("joined %s as %s", self.path, node.path)
        self.host.publish(ElectionEvent(ElectionState.OFFERED, node.path, started=started))

    def _node_lost(self, offer: Candidacy) -> None:
        """Our node is gone (or not ours): lose leadership; the next pass joins again."""
        self.host.lose("node deleted")
        offer.forget()
        self._own = None
        self._following = None
        self._leader = None

    async def _watch_own(self, offer: Candidacy, node: CreatedNode) -> Watch | None:
        """Our node's data watch (armed again after a data change); None if the node is gone.

        Its callback interrupts whatever the campaign waits for when it fires,
        so that each wait is a single await (no task per wait).
        """
        own = self._own
        if own is not None and own.event is None:
            return own
        if own is not None and own.event is not None and own.event.type is EventType.DELETED:
            self._node_lost(offer)
            return None
        try:
            current, own = await self.client.get_watch(node.path)
        except NoNodeError:
            self._node_lost(offer)
            return None
        if current.stat.czxid != node.czxid:  # another node under our old name
            self._node_lost(offer)
            return None
        self._own = own
        own.add_callback(self._interrupt)
        return own

    def _interrupt(self, _event: WatchedEvent | None = None) -> None:
        if self._waiting is not None:
            self._waiting.cancel()

    async def _until(self, watch: Watch, own: Watch, wake: asyncio.Event) -> WatchedEvent | None:
        """`watch`'s event; None if a connection state or our node changed first."""
        if wake.is_set() or (own.fired and watch is not own):
            return None
        with anyio.CancelScope() as scope:
            self._waiting = scope
            try:
                return await watch.wait()
            finally:
                self._waiting = None
        return None

    def _grant(self, node: CreatedNode, own: Watch, wake: asyncio.Event) -> bool:
        """Lead now if allowed; synchronous, so nothing can change between check and grant."""
        if wake.is_set() or self.closing:
            return False
        connected = self.coord.state in USABLE
        sid = self.coord.session_id
        if not may_take(owner=node.owner, session_id=sid, connected=connected, node_gone=own.fired):
            return False
        self._following = None
        self.host.elect(node)
        return True

    def _predecessor_gone(
        self,
        event: WatchedEvent,
        wait: Wait,
        early: EarlyListing,
        node: CreatedNode,
        own: Watch,
        wake: asyncio.Event,
    ) -> None:
        """The node just ahead of ours changed (a watch callback: no await)."""
        if event.type is not EventType.DELETED or self._following != wait.node:
            return
        self.determining = time.monotonic()
        if wait.last:
            self._grant(node, own, wake)  # it was the only one ahead
            return
        if self.closing or wake.is_set():
            return
        early.send(
            self.client, self.path, lambda names: self._listed(names, early, node, own, wake)
        )

    def _listed(
        self,
        names: list[str],
        early: EarlyListing,
        node: CreatedNode,
        own: Watch,
        wake: asyncio.Event,
    ) -> None:
        """The listing sent by `_predecessor_gone` came back: lead now if we are first."""
        order = early.order = Ordering(names, self.layout)
        sid = self.coord.session_id
        if isinstance(decide(order, node.name, first, owner=node.owner, session_id=sid), Granted):
            self._grant(node, own, wake)

    async def _lead(self, node: CreatedNode, own: Watch, wake: asyncio.Event) -> None:
        if self._grant(node, own, wake):
            await self._until(own, own, wake)  # hold until our node changes or a state does

    async def _follow(
        self,
        offer: Candidacy,
        node: CreatedNode,
        own: Watch,
        wait: Wait,
        wake: asyncio.Event,
    ) -> Ordering | None:
        """Watch the node just ahead of ours until something happens.

        If it was the only node ahead, its deletion makes us lead at once, with
        no listing: nodes created since sort after ours.  Otherwise the children
        are listed again at once, and that listing is decided on;
        None means: start the pass over.
        """
        predecessor = wait.node
        self.host.lose("handed over")  # someone sorts ahead of us now (no-op unless we led)
        self._leader = None
        try:
            ahead_node, watch = await self.client.get_watch(join(self.path, predecessor))
        except NoNodeError:  # gone since the listing
            if wait.last:
                await self._lead(node, own, wake)
            return None
        if wait.last:  # the leader: its id costs nothing more, for `LeaderLatch.known_leader`
            with contextlib.suppress(NodeDataError):
                self._leader = (watch, load_text(watch.path, ahead_node.data, "participant id"))
        if self._following != predecessor:
            self._following = predecessor
            self.host.publish(
                ElectionEvent(
                    ElectionState.FOLLOWING,
                    node.path,
                    predecessor=predecessor,
                    started=self.determining,
                )
            )
        # Act the moment the notification is read, before this task (or any other woken
        # by it) runs: lead if it was the only node ahead, else send the listing, and
        # lead when its reply is read if we are first; the task then finds it done.
        early = EarlyListing()
        watch.add_callback(
            lambda event: self._predecessor_gone(event, wait, early, node, own, wake)
        )
        try:
            event = await self._until(watch, own, wake)
        finally:
            if not watch.fired:
                # A pass given up (a state changed, our node changed, leaving): its callback
                # would keep the watch until the predecessor goes, and the next pass sets
                # another on the same node, so a leader that stays would gather one per pass.
                # Nothing is sent: the server keeps one watch per path, the next pass's.
                self.client.forget_watch(watch)
        if event is None or event.type is not EventType.DELETED or self.closing:
            return None
        if wait.last:
            await self._lead(node, own, wake)
            return None
        try:
            if early.result is not None:
                await early.result()
                if early.order is not None:
                    return early.order
            return await offer.shared.ordered(self.layout)
        except NoNodeError:  # the parent went, and our node with it
            self._node_lost(offer)
            return None
