"""`LeaderLatch` and `leader_latch()`: joining, leading and leaving; see the package docstring."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import ClassVar, TypedDict, Unpack, overload

import anyio
import anyio.abc
import anyio.lowlevel

from ..._broadcast import Broadcast
from ..._checks import check_coordinator, check_timeout
from ..._lifecycle import Lifecycle, Phase, Service
from ...errors import CoordinatorClosedError
from ...session import Coordinator
from ...zk.client import ZkClient
from ...zk.states import ConnectionEvent, ConnectionState
from .._change_signal import ChangeSignal
from .._loss import LossPolicy, LossWatch
from .._participant import Participant
from .._queue import MAX_ID_BYTES, USABLE, CreatedNode, Host, default_participant_id
from ._election import (
    LAYOUTS,
    CloseMode,
    ElectionEvent,
    ElectionState,
    LatchLayout,
    LeadershipTerm,
    check_latch_arguments,
)
from ._nodes import Candidacy, SharedPath, leader_of, participants_of

__all__ = (
    "MAX_ID_BYTES",
    "ElectionEvent",
    "ElectionState",
    "LeaderLatch",
    "LatchOptions",
    "LeadershipTerm",
    "Participant",
    "default_participant_id",
    "leader_latch",
)

log = logging.getLogger("aiocoord.recipes.leader_latch")

# The ends of a term that this participant chose (logged at INFO; any other is a loss, a
# WARNING): leaving, a node ahead of ours (handed over), and the selector's hand-backs:
# `lead` returned (released), `step_down`, `interrupt`, and `lead` raised (failed: the
# error itself is logged at ERROR).
GIVEN_BACK = frozenset(
    {"closed", "handed over", "released", "stepped down", "interrupted", "failed"}
)


class LeaderLatch(Service):
    """A participant in the election at `path`; see the module docstring.

    Use it as ``async with`` (or ``await latch.start()`` ... ``await
    latch.aclose()``): entering joins (returns once our node exists, not once
    we lead; `ConnectionLostError` if ZooKeeper stays unreachable for the
    request timeout), leaving withdraws, from any task.  The observers
    (`leader`, `participants`) also work on a latch not entered.
    `close_mode` (Curator's ``CloseMode``): with ``"notify"`` (the default)
    leaving while leader publishes LOST_LEADERSHIP (reason ``"closed"``) to
    `changes()` readers; with ``"silent"`` it does not (the term still ends).
    `layout`: ``"curator"`` (Curator's LeaderLatch, the default),
    ``"zookeeper"`` (ZooKeeper's election recipe) or ``"kazoo"`` (kazoo's
    ``Election``: a participant on kazoo's lock nodes).
    Raises `InvalidPathError`, `ConfigError` or `TypeError` for bad arguments.
    """

    _layouts: ClassVar[Mapping[str, LatchLayout]] = LAYOUTS  # what `layout` may name

    def __init__(
        self,
        coord: Coordinator,
        path: str,
        *,
        participant_id: str | None = None,
        layout: str = "curator",
        lose_on_suspend: bool | None = None,
        close_mode: CloseMode = "notify",
    ) -> None:
        check_coordinator(coord)
        self._layout, self._id = check_latch_arguments(
            path, participant_id, layout, lose_on_suspend, close_mode, self._layouts
        )
        self._close_mode = close_mode
        self._coord = coord
        self._client: ZkClient = coord.client
        self._path = path
        self._data = self._id.encode("utf-8")
        self._policy = LossPolicy.of(lose_on_suspend)
        self._loss: LossWatch | None = None  # the current term's loss rule
        self._offer: Candidacy | None = None  # our place in the election, once entered
        self._term: LeadershipTerm | None = None
        self._events: Broadcast[ElectionEvent] = Broadcast()
        self._changed = ChangeSignal()  # fired by `_signal`
        self._life = Lifecycle(
            f"leader latch {path} ({self._id})",
            self._run,
            stopping=self._withdraw,
            stopped=self._shutdown,
        )
        self._entered = False
        self._closing = False
        self._stopped = False
        # The node given back last by `_release` (never led on again; an earlier one is no
        # longer our candidacy's node, so it cannot be elected) and when to join again.
        self._released: CreatedNode | None = None
        self._hold_until = 0.0
        self._sent_delete: Callable[[], Awaitable[None]] | None = None  # see `_stop_leading`
        self._unfollow: Callable[[], None] = lambda: None  # stops following connection states

    # --- public state ----------------------------------------------------------------------

    @property
    def path(self) -> str:
        return self._path

    @property
    def participant_id(self) -> str:
        return self._id

    @property
    def has_leadership(self) -> bool:
        """True while we lead (cheap: no request)."""
        return self._term is not None

    @property
    def known_leader(self) -> str | None:
        """The leader's id as this process knows it, with no request (`leader()` asks ZooKeeper).

        Ours while we lead; the leader's when our node is just behind it (its
        id came with the watch); else None, and None while not connected.
        """
        if self._term is not None:
            return self._id
        offer = self._offer
        if offer is None or self._stopped or self._coord.state not in USABLE:
            return None
        return offer.known_leader

    @property
    def state(self) -> ElectionState | None:
        """The latest election state (None before entering)."""
        return self._events.last.state if self._events.last is not None else None

    @property
    def node(self) -> str | None:
        """Our node's path while we have one."""
        node = self._offer.node if self._offer is not None else None
        return node.path if node is not None else None

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Join the election: block until our node exists (not until we lead).

        Connection trouble is ridden out within the request timeout; past it,
        `ConnectionLostError` says how long it waited and why.  Cancelled, it
        leaves no node behind.  `CoordinatorClosedError` if the coordinator is
        not open or this latch was started before.
        """
        if self._life.started:
            raise CoordinatorClosedError("a LeaderLatch can be entered only once; make a new one")
        if self._coord.state is None:
            raise CoordinatorClosedError(
                "the coordinator is not open: use `async with aiocoord.connect(...)` first"
            )
        self._entered = True
        shared = SharedPath.acquire(self._client, self._path)
        self._offer = Candidacy(self._coord, shared, self._layout, self._data)
        await self._life.start()

    async def _run(self, tg: anyio.abc.TaskGroup) -> None:
        assert self._offer is not None
        host = Host(
            elect=self._elect,
            lose=lambda reason: self._lose(reason),
            joined=self._joined,
            following=self._following,
            failed=self._failed,
            closed=self._signal,
            held=self._held,
        )
        self._unfollow = self._client.session.follow_states(self._on_connection, self._on_closed)
        await tg.start(self._offer.participate, host)

    async def aclose(self) -> None:
        """Withdraw from any task, blocking until done; safe to call twice.

        Leadership ends first (a `leadership()` body is cancelled), then the
        node is deleted (shielded, bounded by the request timeout).
        """
        if self._life.phase is Phase.RUNNING and not self._closing:
            self._stop_leading()  # here, so the delete leaves before any task switch
        await self._life.aclose()

    def _stop_leading(self) -> None:
        """Leaving: stop leading, then send our node's delete unless a write is in flight."""
        self._closing = True
        offer = self._offer
        if offer is not None:
            offer.closing = True
        term, self._term = self._term, None  # ends before the node goes: no two leaders overlap
        ended = time.monotonic()  # the loss's time: before the delete leaves, not after
        self._drop_loss()
        if term is not None:
            term.tenure.end("closed")
        if offer is not None:
            if not offer.writing:
                self._sent_delete = offer.delete_now()
            # After the delete is written: its notification is read only once we yield.
            offer.unwatch()
        if term is not None:  # reported once the delete is on its way (no reader runs between)
            self._report_loss(term, "closed", publish=self._close_mode == "notify", at=ended)

    async def _withdraw(self) -> None:
        """Leaving, while the tasks still run: stop leading, then delete our node."""
        if not self._closing:
            self._stop_leading()
        offer = self._offer
        # From `closing` on, our `Waiter` starts no write.  Unless one is in flight
        # (then it is cancelled first), our node goes before the tasks unwind, so
        # the next leader need not wait for them.
        tg = self._life.task_group
        if tg is not None and offer is not None and offer.writing:
            tg.cancel_scope.cancel()
        if self._offer is not None:
            sent, self._sent_delete = self._sent_delete, None
            await self._offer.leave(sent)  # bounded; the owner shields it

    async def _shutdown(self) -> None:
        """Left: the tasks have ended."""
        self._unfollow()
        self._stopped = True
        self._publish(ElectionEvent(ElectionState.STOPPED))
        self._events.close()
        self._signal()
        if self._offer is not None:
            self._offer.shared.release()

    # --- waiting for leadership --------------------------------------------------------------

    @overload
    async def wait(self, timeout: None = None) -> LeadershipTerm: ...

    @overload
    async def wait(self, timeout: float) -> bool: ...

    async def wait(self, timeout: float | None = None) -> LeadershipTerm | bool:
        """Wait until we lead (see "Waiting: one contract" in docs/concepts.md).

        Without `timeout` (None), return the current term once we lead.  With
        `timeout` seconds, return True once we lead or False when it passes
        first, as Curator's ``await(timeout)``; ``timeout=0`` only looks.
        Either way it waits through a ZooKeeper outage (leadership comes back
        with the connection), logging at INFO once per outage that it is
        waiting and why (routine: nothing was lost).  Cancelling it only stops
        the wait.  Raises `CoordinatorClosedError` if the latch is not
        entered, is left, or its coordinator closes meanwhile; `TypeError` or
        `ConfigError` (naming `timeout`) for a bad timeout.
        """
        seconds = check_timeout(timeout)
        if seconds is None:
            return await self._wait()
        with anyio.move_on_after(seconds):
            await self._wait()
            return True
        return False

    async def _wait(self) -> LeadershipTerm:
        warned = False
        while True:
            changed = self._changed.event()
            if not self._entered or self._stopped:
                raise CoordinatorClosedError(
                    f"leader latch {self._path} is not open: use `async with leader_latch(...)`"
                )
            if self._coord.client.session.closed:
                raise CoordinatorClosedError(f"the coordinator of leader latch {self._path} closed")
            if self._term is not None:
                return self._term
            state = self._coord.state
            usable = state in USABLE
            if not usable and not warned:
                # Waiting through an outage is what wait() is for; say so, once per outage.
                log.info(
                    "leader latch %s (%s): waiting for leadership while ZooKeeper is "
                    "unreachable (%s); it can lead only once the connection is back",
                    self._path,
                    self._id,
                    state.value if state is not None else "CLOSED",
                )
            warned = not usable
            await changed.wait()

    @asynccontextmanager
    async def leadership(self) -> AsyncIterator[LeadershipTerm]:
        """Wait for leadership, then run the body as leader; yields the `LeadershipTerm`.

        Entering blocks until we lead, through ZooKeeper outages too (see
        `wait`).  The body runs in a cancel scope that is
        cancelled the moment leadership ends (SUSPENDED past the session's
        provable life, or at once with ``lose_on_suspend=True``; LOST, our
        node deleted, the latch left); once
        the body has exited, `LeadershipLost` is raised with the reason.  An
        exception from the body itself propagates unchanged.
        """
        term = await self.wait()
        async with term.tenure.body():
            yield term

    async def step_down(self) -> bool:
        """Give up leadership now and join again at the back of the queue.

        The term ends at once (a `leadership()` body is cancelled, then raises
        `LeadershipLost` with the reason ``"stepped down"``); our node is
        deleted, shielded and bounded by the request timeout (what cannot be
        deleted in time is deleted by a chore of the session, and never led on
        again), so the next in line leads; then a new node joins at the tail.
        Blocks until the node is deleted.  Returns False, doing nothing, if we
        do not lead right now.  Alone in the queue, we lead again at once.
        Raises `CoordinatorClosedError` if the latch is not entered or is left.
        """
        if self._life.phase is not Phase.RUNNING or self._closing:
            raise CoordinatorClosedError(
                f"leader latch {self._path} is not open: use `async with leader_latch(...)`"
            )
        if self._term is None:
            return False
        log.info("leader of %s as %s: stepping down", self._path, self._id)
        await self._release("stepped down", rejoin_after=0.0)
        return True

    # --- observing ---------------------------------------------------------------------------

    async def participants(self) -> list[Participant]:
        """Every participant in election order, the leader first (one read per node, pipelined).

        Nodes that vanish while read are skipped; a path that does not exist has
        none.  `NodeDataError` if a node's data is not a UTF-8 id.
        """
        return await participants_of(self._client, self._path, self._layout)

    async def leader(self) -> Participant | None:
        """The current leader as the nodes say, or None (no participant, or no path)."""
        return await leader_of(self._client, self._path, self._layout)

    def changes(self) -> AsyncIterator[ElectionEvent]:
        """Your own stream of `ElectionEvent`: the latest one first, then each as it happens.

        A slow reader never loses an event and never blocks the others; one that
        falls `SUBSCRIBER_BACKLOG` (4096) events behind has stopped reading: it gets
        what it had buffered, then `SubscriberLagged`.  The stream ends after STOPPED.
        """
        return self._events.subscribe()

    # --- connection states (the session calls these where they happen: no task per latch) --

    def _on_closed(self) -> None:
        """The coordinator closed: nothing more can be done on this session."""
        self._lose("closed")
        self._signal()

    def _on_connection(self, event: ConnectionEvent) -> None:
        if self._loss is not None:
            self._loss.on_event(event)  # the one loss rule, for the current term
        if self._offer is not None:
            self._offer.poke()
        self._signal()  # `wait()` notes an outage it waits through

    # --- leadership and events (the `Waiter`'s host) -------------------------------------

    def _elect(self, node: CreatedNode) -> None:
        """Our `Waiter` found us first, on a node of this session: lead (once per term)."""
        if self._term is None and not self._closing and node != self._released:
            self._term = LeadershipTerm(node.czxid, node.path, self._id, self._path)
            loss = LossWatch(self._policy, node.owner, self._lose, session=self._client.session)
            self._loss = loss
            state = self._coord.state
            if state in (ConnectionState.SUSPENDED, ConnectionState.READ_ONLY):
                # Elected while suspended: a deadline starts now (history to the others).
                loss.on_event(ConnectionEvent(state, node.owner, at=loss.granted_at))
            log.info("leader of %s as %s (token 0x%x)", self._path, self._id, node.czxid)
            started = self._offer.determining if self._offer is not None else None
            event = ElectionEvent(
                ElectionState.ELECTED, node.path, token=node.czxid, started=started
            )
            self._publish(event)
            self._signal()

    def _lose(self, reason: str, *, publish: bool = True) -> None:
        term, self._term = self._term, None
        if term is None:
            return
        ended = time.monotonic()
        self._drop_loss()
        term.tenure.end(reason)
        self._report_loss(term, reason, publish=publish, at=ended)

    def _drop_loss(self) -> None:
        """The term ended: its loss rule's deadline timer goes with it (else, armed while
        SUSPENDED, it would be armed again at every ring once reconnected, for good)."""
        loss, self._loss = self._loss, None
        if loss is not None:
            loss.drop()

    def _report_loss(self, term: LeadershipTerm, reason: str, *, publish: bool, at: float) -> None:
        """Tell the log, `changes()` readers and waiters that `term` ended at `at` (`_lose`).

        `at` is when the term ended, taken before our node's delete was sent: the
        event's time never falls after the next leader's start, however long the
        log takes.
        """
        # Leaving, handing over or giving back is routine; leadership taken away is for an
        # operator to see.
        level = logging.INFO if reason in GIVEN_BACK else logging.WARNING
        log.log(level, "no longer leader of %s as %s: %s", self._path, self._id, reason)
        if publish:
            event = ElectionEvent(
                ElectionState.LOST_LEADERSHIP,
                term.node,
                token=term.token,
                reason=reason,
                at=at,
                started=term.started_at,
            )
            self._publish(event)
        self._signal()

    # --- giving leadership back (the selector's requeue) ----------------------------------

    async def _release(self, reason: str, *, rejoin_after: float) -> None:
        """Give our node back: end the term, delete the node, join again after `rejoin_after` s.

        `rejoin_after` may be ``math.inf`` (join again only on `_rejoin`).  The
        released node is never led on again, even if its delete has to wait for
        the connection (a chore of the session deletes it then, see `OurNode.leave`).
        """
        offer = self._offer
        node = offer.node if offer is not None else None
        self._hold_until = time.monotonic() + rejoin_after
        if node is not None:
            self._released = node
        self._lose(reason)
        if offer is not None and node is not None and not self._closing:
            with anyio.CancelScope(shield=True):
                await offer.leave()
        if offer is not None:
            offer.poke()

    def _rejoin(self) -> None:
        """Join again now (after a `_release`)."""
        self._hold_until = 0.0
        if self._offer is not None:
            self._offer.poke()

    def _held(self) -> float:
        return max(0.0, self._hold_until - time.monotonic())

    def _joined(self, node: CreatedNode, started: float) -> None:
        self._publish(ElectionEvent(ElectionState.OFFERED, node.path, started=started))

    def _following(self, node: CreatedNode, predecessor: str, started: float) -> None:
        event = ElectionEvent(
            ElectionState.FOLLOWING, node.path, predecessor=predecessor, started=started
        )
        self._publish(event)

    def _failed(self, error: Exception) -> None:
        self._publish(ElectionEvent(ElectionState.FAILED, self.node, reason=str(error)))

    def _publish(self, event: ElectionEvent) -> None:
        self._events.publish(event)

    def _signal(self) -> None:
        """Leadership or the latch's life changed: wake `wait()`."""
        self._changed.fire()

    def __repr__(self) -> str:
        if self._stopped:
            state = "CLOSED"
        elif self._term is not None:
            state = f"LEADER token=0x{self._term.token:x}"
        else:
            state = self._events.last.state.value if self._events.last is not None else "NEW"
        return f"<LeaderLatch {self._path} id={self._id} {state}>"


class LatchOptions(TypedDict, total=False):
    """`LeaderLatch`'s keyword arguments, as `leader_latch()` and the blocking façade forward them."""

    participant_id: str | None
    layout: str
    lose_on_suspend: bool | None
    close_mode: CloseMode


def leader_latch(coord: Coordinator, path: str, **options: Unpack[LatchOptions]) -> LeaderLatch:
    """A `LeaderLatch` to use as ``async with leader_latch(coord, path, participant_id=...)``.

    Entering joins the election and returns once our node exists (it does not
    wait for leadership: use ``latch.wait()`` or ``latch.leadership()``), or
    raises `ConnectionLostError` once ZooKeeper has been unreachable for the
    request timeout; leaving deletes the node.  See `LeaderLatch` for the
    arguments.
    """
    return LeaderLatch(coord, path, **options)
