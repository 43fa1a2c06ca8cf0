"""One task of task leadership: what a worker knows about it, its ``lead()`` bodies, its loop.

Each task has a small loop of its own: it builds a `TaskState`, asks
`_choice.decide` for the next step and performs it, then sleeps until
something it depends on changes (`TaskSlot.poke`).  The steps:

- acquire: create ``<root>/leaders/<task>`` (ephemeral, our id and version).
  If it exists, read it: our own node (the create's answer was lost) is
  adopted, our node from an ended session is deleted, anyone else's means
  wait for the next event on the path.
- grant / revoke: let ``lead()`` bodies run, or cancel them and wait for them
  to finish (drain).
- delete: hand the task over, after the drain.
- verify: a deletion was seen on the path while we held it; our node is
  still ours only if a node with our czxid is there (an event about an older
  node can arrive after our create's answer).
- drop stale: delete our node from an ended session if the server still has
  it, so the task need not wait for the server to expire that session.

A request that fails with connection loss is decided again once the
connection settles; nothing is assumed about its outcome.

The steps of a hand-over run without the loop (`TaskSlot.advance`): when a
notification frees a task, the create is queued from the notification's
callback and leadership granted from the create's answer; when the settle
delay ends, bodies are cancelled in one pass and each delete is queued as the
task's last body exits.  Waking a loop per task and step cost more than the
steps themselves when hundreds of tasks move at once.  `decide` still names
every step; a step the callbacks do not take, or any error, goes back to the
loop, and nothing runs in the loop while a callback's write is out (`busy`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol

import anyio
import anyio.lowlevel

from aiocoord.errors import (
    BadVersionError,
    ConnectionLostError,
    CoordinatorClosedError,
    LeadershipLost,
    NodeDataError,
    NodeExistsError,
    NoNodeError,
)
from aiocoord.zk import EventType, ZkClient

from .._signal import Signal
from .._tenure import Body, Tenure
from ._choice import Action, TaskState, decide
from ._records import Worker, decode_leader
from ._writes import Write, WriteBatcher

__all__ = ("Hold", "SlotHost", "TaskSlot", "TaskTerm")

log = logging.getLogger("aiocoord.recipes.task_leadership")

RETRY_DELAY = 0.2  # after a request failed while the connection looked fine
# The loop's own settle timer fires this much after the engine's pass that hands
# over every task whose delay ends at once; it only matters if that pass is late
# or missing.  Well after the pass, so that a hand-over's tasks do not all wake
# their loops (to find their step under way) while their deletes are going out.
_TIMER_SLACK = 0.05


def clock() -> float:
    """The event loop's clock (what its timers follow); the monotonic clock outside a loop.

    Asked for several times per task and step, so straight from the asyncio
    loop (what `anyio.current_time()` returns there, after two lookups).
    """
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:  # no event loop running (a recipe built before entering one)
        return time.monotonic()


@dataclass(frozen=True, slots=True)
class TaskTerm:
    """One term of leadership of `task` by this worker; `token` is the fencing token.

    The token is the czxid of the leader node: a later leader of the same
    task always has a larger one, so a store that remembers the largest token
    it saw can refuse writes from an earlier leader.
    """

    task: str
    token: int
    worker_id: str
    version: str


@dataclass(frozen=True, slots=True)
class _Held:
    """Our leader node: its czxid (the token), owning session and data version."""

    czxid: int
    session: int
    version: int


class Hold:
    """``lead()``: wait for leadership, then run the block as a body of the term's tenure.

    A class rather than a generator-based context manager: a hand-over enters
    and leaves hundreds of these at once, and each generator layer costs as
    much as the rest of the work.
    """

    __slots__ = ("_body", "_closing", "_slot")

    def __init__(self, slot: TaskSlot, closing: Callable[[], bool]) -> None:
        self._slot = slot
        self._closing = closing
        self._body: Body | None = None

    async def __aenter__(self) -> TaskTerm:
        slot = self._slot
        waited = False
        while True:
            changed = slot._granted_changed.event()
            if self._closing():
                raise LeadershipLost(slot.path, "closed")
            if slot.stopping is not None:
                raise LeadershipLost(slot.path, slot.stopping)
            if slot.granted and slot.term is not None and slot.tenure is not None:
                term, tenure = slot.term, slot.tenure
                break
            await changed.wait()
            waited = True
        if not waited:
            # Leader already: still a checkpoint, so that a loop around lead() whose
            # block never awaits cannot starve the event loop.
            await anyio.lowlevel.checkpoint()
            if not slot.granted or slot.term is not term:
                return await self.__aenter__()  # lost meanwhile: wait again
        body = tenure.body()
        await body.__aenter__()
        self._body = body
        return term

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        body = self._body
        assert body is not None
        self._body = None
        return await body.__aexit__(exc_type, exc, tb)


class SlotHost(Protocol):
    """What a task's loop needs from the recipe that runs it."""

    @property
    def client(self) -> ZkClient: ...
    @property
    def writes(self) -> WriteBatcher: ...
    @property
    def worker(self) -> Worker: ...
    @property
    def leader_record(self) -> bytes: ...
    @property
    def settle(self) -> float: ...
    @property
    def closing(self) -> bool: ...
    @property
    def session_id(self) -> int | None: ...
    def usable(self) -> bool: ...
    def view_current(self) -> bool: ...
    def watching(self) -> bool: ...
    def review_watch(self) -> None: ...


class TaskSlot:
    """Everything one worker knows and runs for one task."""

    def __init__(self, task: str, path: str) -> None:
        self.task = task
        self.path = path
        self.desired: str | None = None  # the worker the choice names
        self.desired_at = clock()  # when that last changed (event loop clock)
        self.held: _Held | None = None  # our leader node in the current session
        self.stale: int | None = None  # czxid of our node from an ended session
        self.granted = False  # lead() bodies may run
        self.term: TaskTerm | None = None
        self.verify = False
        self.deleting = False
        self.events = 0  # leader-node events seen on the path
        self.deletions = 0
        self.blocked_at: int | None = None  # `events` when a create found the node taken
        self.holder: str | None = None  # last known leader id
        self.stopping: str | None = None  # why the task is being removed
        self.bad_czxid: int | None = None  # last invalid leader node reported
        self.bodies = 0  # lead() bodies running, of this term or earlier ones
        self.tenure: Tenure | None = None  # what lead() bodies run under while granted
        self.busy = False  # a step is under way (the loop's or a callback's): nothing else runs
        self._inspect_at: int | None = None  # a queued create found the node taken: read it
        self._when_drained: Callable[[], None] | None = None
        self.done = anyio.Event()
        self._wake = Signal()
        self._granted_changed = Signal()
        self._body_exited = Signal()

    def __repr__(self) -> str:
        state = "LEADING" if self.granted else ("held" if self.held else "not held")
        token = f" token=0x{self.held.czxid:x}" if self.held else ""
        return (
            f"<TaskSlot {self.task} {state}{token} leader={self.holder} "
            f"chosen={self.desired} bodies={self.bodies}>"
        )

    # --- signals ---------------------------------------------------------------------------

    def poke(self) -> None:
        """Wake the task's loop: something it decides on changed."""
        self._wake.fire()

    def notify_grant(self) -> None:
        """Wake ``lead()`` calls waiting for leadership (or for a reason to give up)."""
        self._granted_changed.fire()

    async def drained(self) -> None:
        """Wait until no ``lead()`` body of this task runs."""
        while self.bodies:
            await self._body_exited.event().wait()

    def on_event(self, type_: EventType, host: SlotHost) -> None:
        """A watch event on the leader node's path (called in the order they arrive)."""
        self.events += 1
        if type_ is EventType.DELETED:
            self.deletions += 1
            if self.held is not None and not self.deleting:
                self.verify = True  # maybe our node, maybe an older one: check its czxid
        elif self.held is not None:
            return  # our node's creation (or a write to it): nothing to decide
        if (
            self.held
            or self.granted
            or self.desired == host.worker.id
            or self.stale
            or self.stopping
        ):
            self.advance(host)  # the other workers' tasks have nothing to do about it

    def forget_session(self, session: int | None) -> None:
        """Our node of an ended session is not ours to lead with: delete it if it lingers."""
        held = self.held
        if held is not None and held.session != session:
            self.held = None
            self.stale = held.czxid
            self.verify = False

    def after_reconnect(self, session: int | None) -> None:
        """Events may have been missed while disconnected: check our node, retry blocked creates."""
        self.forget_session(session)
        self.verify = self.held is not None
        self.blocked_at = None
        self.poke()

    # --- leadership ------------------------------------------------------------------------

    def grant(self, worker: Worker) -> None:
        assert self.held is not None
        self.granted = True
        self.holder = worker.id
        self.term = TaskTerm(self.task, self.held.czxid, worker.id, worker.version)
        self.tenure = Tenure(self.path, LeadershipLost, on_body=self._count_body)
        self.notify_grant()
        log.info("worker %s leads task %s (token 0x%x)", worker.id, self.task, self.held.czxid)

    def revoke(self, reason: str, worker_id: str) -> None:
        """Stop leading now: end the tenure (its bodies are cancelled, then raise `LeadershipLost`)."""
        if not self.granted:
            return
        self.granted = False
        self.term = None
        tenure, self.tenure = self.tenure, None
        if tenure is not None:
            tenure.end(reason, soon=True)
        self.notify_grant()
        log.info("worker %s stopped leading task %s: %s", worker_id, self.task, reason)

    def _count_body(self, delta: int) -> None:
        self.bodies += delta
        if delta > 0:
            return
        self._body_exited.fire()
        if not self.bodies and self._when_drained is not None:
            when_drained, self._when_drained = self._when_drained, None
            when_drained()

    # --- steps taken from callbacks ---------------------------------------------------------

    def advance(self, host: SlotHost) -> None:
        """Take the next step here if a callback can take it; otherwise wake the loop.

        Callbacks take the steps of a plain hand-over: acquire (create the
        node, grant from the answer), and revoke-then-delete (the delete queued
        when the last body exits).  Everything else is the loop's; nothing
        happens while a step is under way (whoever runs it decides again after).
        """
        if self.busy:
            # Whoever runs the step decides again when it ends (the loop at its next
            # pass, a callback in `_settled`); waking the loop now would only show it
            # the step.  (A new leader hears of its own creations before the answer.)
            return
        if self.stopping is not None or host.closing:
            self.poke()
            return
        action = decide(self.state(host), settle=host.settle).action
        if action is Action.ACQUIRE and not self.bodies:
            self._queue_create(host)
        elif action is Action.REVOKE and self.held is not None:
            self.revoke("handed over", host.worker.id)
            host.review_watch()  # maybe the last task we led: the leader watch may go
            self._delete_when_drained(host)
        elif action is Action.DELETE and self.held is not None:
            self._delete_when_drained(host)
        else:
            self.poke()

    def _delete_when_drained(self, host: SlotHost) -> None:
        """Queue the delete now, or when the last body exits (nothing else runs until then)."""
        if not self.bodies:
            self._queue_delete(host)
            return
        self.busy = True

        def drained() -> None:
            self.busy = False
            self.advance(host)  # decided again: the choice may have come back to us

        self._when_drained = drained

    def _settled(self, host: SlotHost) -> None:
        """A callback's step ended: wake the loop only if it has something to do."""
        self.busy = False
        if decide(self.state(host), settle=host.settle).action is not Action.IDLE:
            self.poke()

    def _queue_create(self, host: SlotHost) -> None:
        """`_acquire` with the create queued: grant from its answer, read the node if taken."""
        events, deletions = self.events, self.deletions
        self.busy = True

        def done(write: Write) -> None:
            error = write.error
            if error is None and write.created is not None:
                self._created(host, write.created, deletions)
                if self.granted:  # leading now: nothing for the loop to do
                    self.busy = False
                    return
            elif isinstance(error, NodeExistsError):
                self._inspect_at = events  # the loop reads whose it is
            elif error is not None:
                log.debug("task %s: acquire failed: %s", self.task, error)
            self._settled(host)

        host.writes.queue_create(self.path, host.leader_record, done)

    def _queue_delete(self, host: SlotHost) -> None:
        """`_delete` with the delete queued; anything but success or "gone" goes to the loop."""
        held = self.held
        assert held is not None
        self.busy = True
        self.deleting = True

        def done(write: Write) -> None:
            self.deleting = False
            if write.error is None or isinstance(write.error, NoNodeError):
                self._released(host, held)
            else:
                log.debug("task %s: delete failed: %s", self.task, write.error)
            self._settled(host)

        host.writes.queue_delete(self.path, held.version, done)

    def _created(self, host: SlotHost, created: tuple[int, int], deletions: int) -> None:
        """Our create succeeded: hold the node; lead at once if nothing stands in the way."""
        czxid, owner = created
        self.held = _Held(czxid, owner, 0)
        self.holder = host.worker.id
        self.verify = self.deletions != deletions  # a deletion seen meanwhile: of which node?
        self.forget_session(host.session_id)
        if not self.bodies and decide(self.state(host), settle=host.settle).action is Action.GRANT:
            self.grant(host.worker)  # what the next pass would do, one pass sooner

    def _released(self, host: SlotHost, held: _Held) -> None:
        if self.held is held:
            self.held = None
            self.verify = False
            log.info("worker %s released task %s", host.worker.id, self.task)

    # --- the loop --------------------------------------------------------------------------

    def state(self, host: SlotHost) -> TaskState:
        # Built twice per task in a hand-over, so positionally (keywords cost three
        # times as much), and without the clock where `decide` does not look at it.
        desired = self.desired == host.worker.id
        return TaskState(
            host.usable(),  # usable
            host.view_current(),  # view_current
            host.watching(),  # watching
            desired,
            0.0 if desired else clock() - self.desired_at,  # desired_for
            self.held is not None,  # held
            self.granted,  # granted
            self.stale is not None,  # stale
            self.verify,  # verify
            self.blocked_at == self.events,  # blocked
            self.stopping is not None or host.closing,  # stopping
        )

    async def run(self, host: SlotHost) -> None:
        """Decide and act until the task is removed (or the recipe closes and cancels it)."""
        try:
            while True:
                wake = self._wake.event()
                if self.busy:  # a callback's step is under way; it wakes us if needed
                    await wake.wait()
                    continue
                self.forget_session(host.session_id)
                if self._inspect_at is not None:
                    events, self._inspect_at = self._inspect_at, None
                    await self._step(wake, "inspect", self._inspect(host, events))
                    continue
                decision = decide(self.state(host), settle=host.settle)
                action = decision.action
                if action is Action.EXIT:
                    return
                if action is Action.IDLE:
                    await wake.wait()
                    continue
                if action is Action.WAIT:
                    delay = decision.delay if decision.delay is not None else math.inf
                    with anyio.move_on_after(delay + _TIMER_SLACK):
                        await wake.wait()
                    continue
                await self._step(wake, action.value, self._perform(host, action))
        except CoordinatorClosedError:
            return
        finally:
            self.done.set()

    async def _step(self, wake: asyncio.Event, name: str, perform: Awaitable[None]) -> None:
        """Run one of the loop's steps; nothing else runs for the task meanwhile."""
        self.busy = True
        try:
            await perform
        except ConnectionLostError as exc:  # outcome unknown: decide again later
            log.debug("task %s: %s failed: %s", self.task, name, exc)
            self.busy = False
            # A callback may start a step meanwhile (and own `busy` until it ends).
            with anyio.move_on_after(RETRY_DELAY):
                await wake.wait()
            return
        except BaseException:
            self.busy = False
            raise
        self.busy = False

    async def _perform(self, host: SlotHost, action: Action) -> None:
        if action is Action.ACQUIRE:
            await self._acquire(host)
        elif action is Action.GRANT:
            await self.drained()  # the bodies of an earlier term finish first
            if (
                self.held is not None
                and not self.granted
                and self.desired == host.worker.id
                and host.watching()
            ):
                self.grant(host.worker)
        elif action is Action.REVOKE:
            reason = self.stopping or ("closed" if host.closing else None)
            self.revoke(reason or ("handed over" if self.held else "node deleted"), host.worker.id)
            host.review_watch()  # maybe the last task we led: the leader watch may go
            await self.drained()
        elif action is Action.DELETE:
            await self._delete(host)
        elif action is Action.VERIFY:
            await self._verify(host.client)
        elif action is Action.DROP_STALE:
            await self._drop_stale(host.client)

    async def _acquire(self, host: SlotHost) -> None:
        events, deletions = self.events, self.deletions
        try:
            czxid, owner = await host.writes.create(self.path, host.leader_record)
        except NodeExistsError:
            await self._inspect(host, events)
            return
        self._created(host, (czxid, owner), deletions)

    async def _inspect(self, host: SlotHost, events: int) -> None:
        """The node exists: learn whose it is; adopt ours, delete our stale one, or wait."""
        try:
            node = await host.client.get(self.path)
        except NoNodeError:
            return  # gone already: try again
        try:
            holder, _version = decode_leader(self.path, node.data)
        except NodeDataError as exc:
            if self.bad_czxid != node.stat.czxid:
                self.bad_czxid = node.stat.czxid
                log.warning("task %s is blocked: %s", self.task, exc)
            self.holder = None
            self.blocked_at = events
            return
        if holder == host.worker.id:
            if node.stat.ephemeral_owner == host.session_id:
                # Our create went through although its answer was lost.
                self.held = _Held(node.stat.czxid, node.stat.ephemeral_owner, node.stat.version)
                return
            with suppress(NoNodeError, BadVersionError):  # ours, from an ended session
                await host.client.delete(self.path, version=node.stat.version)
            return
        self.holder = holder
        self.blocked_at = events

    async def _delete(self, host: SlotHost) -> None:
        """Hand the task over: the bodies have drained; delete our node (the only way to free it)."""
        await self.drained()
        held = self.held
        if held is None or self.granted:
            return
        self.deleting = True
        try:
            try:
                await host.writes.delete(self.path, held.version)
            except BadVersionError:  # someone wrote to our node: delete it if it is still ours
                stat = await host.client.exists(self.path)
                if stat is not None and stat.czxid == held.czxid:
                    await host.client.delete(self.path, version=stat.version)
        except NoNodeError:
            pass
        finally:
            self.deleting = False
        self._released(host, held)

    async def _verify(self, client: ZkClient) -> None:
        held = self.held
        if held is None:
            return
        self.verify = False
        stat = await client.exists(self.path)
        if self.held is held and (stat is None or stat.czxid != held.czxid):
            log.warning("the leader node of task %s was deleted by someone else", self.task)
            self.held = None

    async def _drop_stale(self, client: ZkClient) -> None:
        czxid = self.stale
        stat = await client.exists(self.path)
        if stat is not None and stat.czxid == czxid:
            with suppress(NoNodeError, BadVersionError):
                await client.delete(self.path, version=stat.version)
            log.info("deleted the leader node of task %s left by an ended session", self.task)
        if self.stale == czxid:
            self.stale = None
