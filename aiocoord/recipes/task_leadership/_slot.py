"""One task of task leadership: the steps that act on what a worker knows about it.

What a worker knows about a task is a `_state.SlotState`; `TaskSlot` adds
the steps.  Each task has a small loop of its own (`TaskSlot.run`): it builds a
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
from collections.abc import Awaitable, Callable
from contextlib import suppress
from functools import partial
from typing import Protocol

import anyio

from aiocoord.errors import (
    BadVersionError,
    ConnectionLostError,
    CoordinatorClosedError,
    NodeDataError,
    NodeExistsError,
    NoNodeError,
)
from aiocoord.zk import EventType, ZkClient

from ._choice import Action, TaskState, next_step
from ._records import Worker, decode_leader
from ._state import FollowUp, Held, SlotState, clock
from ._writes import Write, WriteBatcher

__all__ = ("RETRY_DELAY", "Engine", "TaskSlot")

log = logging.getLogger("aiocoord.recipes.task_leadership")

RETRY_DELAY = 0.2  # after a request failed while the connection looked fine
# The loop's own settle timer fires this much after the engine's pass that hands
# over every task whose delay ends at once; it only matters if that pass is late
# or missing.  Well after the pass, so that a hand-over's tasks do not all wake
# their loops (to find their step under way) while their deletes are going out.
_TIMER_SLACK = 0.05


def _raising(error: BaseException) -> Callable[[], Awaitable[None]]:
    """A follow-up that fails the step in the loop with `error` (see the module docs)."""

    async def fail() -> None:
        raise error

    return fail


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


class TaskSlot(SlotState):
    """Everything one worker knows and runs for one task; only its own methods change it."""

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
            self._revoke_step(engine)
        elif action is Action.DELETE:
            self._delete_step(engine)
        elif action is Action.GRANT:
            if self.bodies:  # the bodies of an earlier term finish first
                self._after_drain(engine)
            else:
                self.grant(engine.worker)
        else:
            raise AssertionError(f"not a hand-over step: {action}")

    def _revoke_step(self, engine: Engine) -> None:
        """Revoke: end the term (bodies cancelled); a hand-over goes on to its delete."""
        reason = self.stopping or ("closed" if engine.closing else None)
        reason = reason or ("handed over" if self.held else "node deleted")
        self.revoke(reason, engine.worker.id)
        engine.review_watch()  # maybe the last task we led: the leader watch may go
        if reason == "handed over":
            self._delete_step(engine)  # the hand-over's second half, once drained
        else:
            self._after_drain(engine)

    def _delete_step(self, engine: Engine) -> None:
        """Delete, once the bodies have drained (deciding again then: the choice may be back)."""
        if self.bodies:
            self._after_drain(engine)
        else:
            self._delete(engine)

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
        self.held = Held(czxid, owner, 0)
        self.holder = engine.worker.id
        self.verify = self.deletions != deletions  # a deletion seen meanwhile: of which node?
        self.forget_session(engine.session_id)
        if (
            not self.bodies
            and next_step(self.state(engine), settle=engine.settle).action is Action.GRANT
        ):
            self.grant(engine.worker)  # what the next pass would do, one pass sooner

    def _released(self, engine: Engine, held: Held) -> None:
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
        # `_make` takes the fields in order (and checks their count) without the
        # keyword-capable constructor: this is built for every task at each step.
        return TaskState._make(
            (
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
                self.held = Held(node.stat.czxid, node.stat.ephemeral_owner, node.stat.version)
                return
            with suppress(NoNodeError, BadVersionError):  # ours, from an ended session
                await engine.client.delete(self.path, version=node.stat.version)
            return
        self.holder = holder
        self.blocked_at = events

    async def _delete_if_ours(self, engine: Engine, held: Held) -> None:
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
