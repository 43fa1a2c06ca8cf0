"""One task of task leadership: what a worker knows about it, and the steps that change it.

Each task has a small loop of its own (`TaskSlot.run`): it builds a
`TaskState`, asks `_choice.next_step` what to do and does it, then sleeps
until something it depends on changes (`TaskSlot.poke`).  The steps:

- acquire: create ``<root>/leaders/<task>`` (ephemeral, our id and version).
  If it exists, read it: our own node (the create's answer was lost) is
  adopted, our node from an ended session is deleted, anyone else's means
  wait for the next event on the path.
- grant / revoke: let ``lead()`` bodies run, or cancel them and wait for them
  to finish (drain).
- delete: hand the task over, after the drain.  If someone wrote to our node
  meanwhile (its version moved), it is deleted only if its czxid is ours.
- verify: a deletion was seen on the path while we held it; our node is
  still ours only if a node with our czxid is there (an event about an older
  node can arrive after our create's answer).
- drop stale: delete our node from an ended session if the server still has
  it, so the task need not wait for the server to expire that session.

The steps of a hand-over (acquire, grant, revoke, delete) have one executor
each (`TaskSlot._take`), started by the loop or, without waking it, by the
callback that learns the step is due (`TaskSlot.advance`): a notification
that frees a task queues its create and the create's answer grants
leadership; when the settle delay ends, bodies are cancelled in one pass and
each delete is queued as the task's last body exits.  Waking a loop per task
and step cost more than the steps themselves when hundreds of tasks move at
once.  A step that waits (for a write's answer, for bodies to drain) leaves
the task `busy`: nothing else runs for it until the step ends.

One error policy, whoever started the step: a write's expected answers are
handled where it is answered (a create that finds the node taken goes on to
read it, a delete that finds the node gone is done, one that finds its
version moved goes on to check the czxid); anything else fails the step in
the loop.  A request that fails with connection loss is decided again after
`RETRY_DELAY` or the next change, nothing being assumed about its outcome;
any other error ends the loop, and with it the recipe's task group.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from typing import Protocol

import anyio

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
from .._tenure import Tenure
from ._choice import Action, TaskState, next_step
from ._records import Worker, decode_leader
from ._writes import Write, WriteBatcher

__all__ = ("Engine", "TaskSlot", "TaskTerm")

log = logging.getLogger("aiocoord.recipes.task_leadership")

RETRY_DELAY = 0.2  # after a request failed while the connection looked fine
# The loop's own settle timer fires this much after the engine's pass that hands
# over every task whose delay ends at once; it only matters if that pass is late
# or missing.  Well after the pass, so that a hand-over's tasks do not all wake
# their loops (to find their step under way) while their deletes are going out.
_TIMER_SLACK = 0.05

FollowUp = tuple[str, Callable[[], Awaitable[None]]]
"""The part of a step that goes on in the task's loop: (step name, what to await)."""


def clock() -> float:
    """The event loop's clock (what its timers follow); the monotonic clock outside a loop.

    Asked for several times per task and step, so straight from the asyncio
    loop (what `anyio.current_time()` returns there, after two lookups).
    """
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:  # no event loop running (a recipe built before entering one)
        return time.monotonic()


def _raising(error: BaseException) -> Callable[[], Awaitable[None]]:
    """A follow-up that fails the step in the loop with `error` (see the module docs)."""

    async def fail() -> None:
        raise error

    return fail


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


class Engine(Protocol):
    """What a task's slot needs from the `TaskEngine` that runs it."""

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
    """Everything one worker knows and runs for one task; only its own methods change it."""

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
        self._follow_up: FollowUp | None = None  # the rest of a busy step, for the loop
        self._when_drained: Callable[[], None] | None = None
        self.done = anyio.Event()  # the loop has ended (or the recipe closed)
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

    def grant_changed(self) -> asyncio.Event:
        """The event the next `notify_grant` sets (take it before looking at `granted`)."""
        return self._granted_changed.event()

    async def drained(self) -> None:
        """Wait until no ``lead()`` body of this task runs."""
        while self.bodies:
            await self._body_exited.event().wait()

    # --- what the engine tells the task ----------------------------------------------------

    def choose(self, desired: str | None, now: float) -> bool:
        """The choice names `desired` (a worker id, or None) since `now` if that is new.

        Returns whether it changed (the settle delay starts again); wakes the loop.
        """
        moved = desired != self.desired
        if moved:
            self.desired, self.desired_at = desired, now
        self.poke()
        return moved

    def stop(self, reason: str) -> None:
        """The task is being removed: waiting ``lead()`` calls give up, the loop lets it go."""
        if self.stopping is None:
            self.stopping = reason
            self.notify_grant()
            self.poke()

    def close(self) -> None:
        """The recipe has closed: nobody waits for this task's loop any longer."""
        self.done.set()

    def on_event(self, type_: EventType, engine: Engine) -> None:
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
            or self.desired == engine.worker.id
            or self.stale
            or self.stopping
        ):
            self.advance(engine)  # the other workers' tasks have nothing to do about it

    def forget_session(self, session: int | None) -> None:
        """Our node of an ended session is not ours to lead with: delete it if it lingers."""
        held = self.held
        if held is not None and held.session != session:
            self.held = None
            self.stale = held.czxid
            self.verify = False

    def look_again(self, session: int | None, *, taken: bool, seen: int | None) -> None:
        """Leader events may have been missed (reconnected, or the leader watch was away).

        Our node of another session is forgotten and our node of this one
        checked (by czxid) before it is led again.  A task whose node exists
        (`taken`, read after its event count was `seen`) waits for the next
        event on it unless one came meanwhile; the others try a create.
        """
        self.forget_session(session)
        self.verify = self.held is not None and not self.deleting
        blocked = taken and self.held is None and self.stale is None
        self.blocked_at = seen if blocked else None
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

    # --- the steps of a hand-over ----------------------------------------------------------

    def advance(self, engine: Engine) -> None:
        """Take the next step here if a callback may take it; otherwise wake the loop.

        Callbacks take the steps of a plain hand-over: acquire when no body of
        an earlier term runs (create the node, grant from the answer), and
        revoke-then-delete of a node we hold.  A task being removed, or a
        recipe closing, is the loop's.  Nothing happens while a step is under
        way (whoever ends it decides again).
        """
        if self.busy:
            # Whoever runs the step decides again when it ends; waking the loop now
            # would only show it the step.  (A new leader hears of its own creations
            # before the answer.)
            return
        if self.stopping is not None or engine.closing:
            self.poke()
            return
        action = next_step(self.state(engine), settle=engine.settle).action
        if (action is Action.ACQUIRE and not self.bodies) or (
            (action is Action.REVOKE or action is Action.DELETE) and self.held is not None
        ):
            self._take(action, engine)
        else:
            self.poke()

    def _take(self, action: Action, engine: Engine) -> None:
        """Start hand-over step `action` (acquire, grant, revoke, delete): its one executor.

        A step that waits leaves the task `busy` and is ended by the callback
        that learns it is done, which decides again (`_settled`, `_after_drain`)
        or hands the rest of the step to the loop (`_hand_to_loop`).
        """
        if action is Action.ACQUIRE:
            self._create(engine)
        elif action is Action.REVOKE:
            reason = self.stopping or ("closed" if engine.closing else None)
            self.revoke(
                reason or ("handed over" if self.held else "node deleted"), engine.worker.id
            )
            engine.review_watch()  # maybe the last task we led: the leader watch may go
            self._after_drain(engine)
        elif self.bodies:  # grant, delete: the bodies of an earlier term finish first
            self._after_drain(engine)
        elif action is Action.GRANT:
            self.grant(engine.worker)
        elif action is Action.DELETE:
            self._delete(engine)
        else:
            raise AssertionError(f"not a hand-over step: {action}")

    def _after_drain(self, engine: Engine) -> None:
        """Decide again once no body runs (now, if none does); nothing else runs until then."""
        if not self.bodies:
            self.advance(engine)
            return
        self.busy = True

        def drained() -> None:
            self.busy = False
            self.advance(engine)  # the choice may have come back to us meanwhile

        self._when_drained = drained

    def _create(self, engine: Engine) -> None:
        """Acquire: queue the create of our node; leadership is granted from its answer."""
        events, deletions = self.events, self.deletions
        self.busy = True

        def answered(write: Write) -> None:
            error = write.error
            if error is None and write.created is not None:
                self._created(engine, write.created, deletions)
                if self.granted:  # leading now: nothing for the loop to do
                    self.busy = False
                    return
            elif isinstance(error, NodeExistsError):
                self._hand_to_loop(("inspect", partial(self._inspect, engine, events)))
                return
            elif error is not None:
                self._hand_to_loop(("acquire", _raising(error)))
                return
            self._settled(engine)

        engine.writes.queue_create(self.path, engine.leader_record, answered)

    def _delete(self, engine: Engine) -> None:
        """Delete: queue the delete of our node (its bodies have drained), handing the task over."""
        held = self.held
        assert held is not None
        self.busy = True
        self.deleting = True

        def answered(write: Write) -> None:
            self.deleting = False
            error = write.error
            if error is None or isinstance(error, NoNodeError):
                self._released(engine, held)
            elif isinstance(error, BadVersionError):
                self._hand_to_loop(("delete", partial(self._delete_if_ours, engine, held)))
                return
            else:
                self._hand_to_loop(("delete", _raising(error)))
                return
            self._settled(engine)

        engine.writes.queue_delete(self.path, held.version, answered)

    def _created(self, engine: Engine, created: tuple[int, int], deletions: int) -> None:
        """Our create succeeded: hold the node; lead at once if nothing stands in the way."""
        czxid, owner = created
        self.held = _Held(czxid, owner, 0)
        self.holder = engine.worker.id
        self.verify = self.deletions != deletions  # a deletion seen meanwhile: of which node?
        self.forget_session(engine.session_id)
        if (
            not self.bodies
            and next_step(self.state(engine), settle=engine.settle).action is Action.GRANT
        ):
            self.grant(engine.worker)  # what the next pass would do, one pass sooner

    def _released(self, engine: Engine, held: _Held) -> None:
        if self.held is held:
            self.held = None
            self.verify = False
            log.info("worker %s released task %s", engine.worker.id, self.task)

    def _settled(self, engine: Engine) -> None:
        """A step ended from a callback: wake the loop only if it has something to do."""
        self.busy = False
        if next_step(self.state(engine), settle=engine.settle).action is not Action.IDLE:
            self.poke()

    def _hand_to_loop(self, follow_up: FollowUp) -> None:
        """The step goes on in the loop, still `busy` (nothing else runs meanwhile)."""
        self._follow_up = follow_up
        self.poke()

    # --- the loop --------------------------------------------------------------------------

    def state(self, engine: Engine) -> TaskState:
        """What this worker knows about the task now: the input of `next_step`."""
        usable = engine.usable()
        view_current = engine.view_current()
        watching = engine.watching()
        desired = self.desired == engine.worker.id
        desired_for = 0.0 if desired else clock() - self.desired_at  # only looked at if not
        held = self.held is not None
        granted = self.granted
        stale = self.stale is not None
        verify = self.verify
        blocked = self.blocked_at == self.events
        stopping = self.stopping is not None or engine.closing
        # In field order, positionally: built for every task at each step of a hand-over.
        return TaskState(
            usable,
            view_current,
            watching,
            desired,
            desired_for,
            held,
            granted,
            stale,
            verify,
            blocked,
            stopping,
        )

    async def run(self, engine: Engine) -> None:
        """Decide and act until the task is removed (or the recipe closes and cancels it)."""
        try:
            while True:
                wake = self._wake.event()
                if self._follow_up is not None:
                    (name, follow_up), self._follow_up = self._follow_up, None
                    await self._step(wake, name, follow_up())
                    continue
                if self.busy:  # a step is under way; whoever ends it wakes us if needed
                    await wake.wait()
                    continue
                self.forget_session(engine.session_id)
                step = next_step(self.state(engine), settle=engine.settle)
                action = step.action
                if action is Action.EXIT:
                    return
                if action is Action.IDLE:
                    await wake.wait()
                elif action is Action.WAIT:
                    delay = step.delay if step.delay is not None else math.inf
                    with anyio.move_on_after(delay + _TIMER_SLACK):
                        await wake.wait()
                elif action is Action.VERIFY:
                    await self._step(wake, "verify", self._verify(engine.client))
                elif action is Action.DROP_STALE:
                    await self._step(wake, "drop_stale", self._drop_stale(engine.client))
                else:
                    self._take(action, engine)
        except CoordinatorClosedError:
            return
        finally:
            self.done.set()

    async def _step(self, wake: asyncio.Event, name: str, perform: Awaitable[None]) -> None:
        """Run (the rest of) a step in the loop; nothing else runs for the task meanwhile."""
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

    async def _inspect(self, engine: Engine, events: int) -> None:
        """The node exists: learn whose it is; adopt ours, delete our stale one, or wait."""
        try:
            node = await engine.client.get(self.path)
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
        if holder == engine.worker.id:
            if node.stat.ephemeral_owner == engine.session_id:
                # Our create went through although its answer was lost.
                self.held = _Held(node.stat.czxid, node.stat.ephemeral_owner, node.stat.version)
                return
            with suppress(NoNodeError, BadVersionError):  # ours, from an ended session
                await engine.client.delete(self.path, version=node.stat.version)
            return
        self.holder = holder
        self.blocked_at = events

    async def _delete_if_ours(self, engine: Engine, held: _Held) -> None:
        """The delete found our node's version moved (someone wrote to it): delete it if ours."""
        self.deleting = True
        try:
            stat = await engine.client.exists(self.path)
            if stat is not None and stat.czxid == held.czxid:
                await engine.client.delete(self.path, version=stat.version)
        except NoNodeError:
            pass
        finally:
            self.deleting = False
        self._released(engine, held)

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
