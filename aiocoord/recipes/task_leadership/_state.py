"""What one worker knows about one task (`SlotState`), and the term it leads it under.

The facts of a task and the transitions that the engine, the connection and
leadership cause; the steps that act on them (the hand-over and the task's
own loop) are `_slot.TaskSlot`'s, a `SlotState` too.  Only the slot's own
methods change its fields.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

from aiocoord.errors import LeadershipLost

from .._change_signal import ChangeSignal
from .._tenure import Tenure
from ._records import Worker

__all__ = ("FollowUp", "Held", "SlotState", "TaskTerm", "clock")

log = logging.getLogger("aiocoord.recipes.task_leadership")

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
class Held:
    """Our leader node: its czxid (the token), owning session and data version."""

    czxid: int
    session: int
    version: int


class SlotState:
    """What one worker knows about one task, and the transitions that are not steps."""

    def __init__(self, task: str, path: str) -> None:
        self.task = task
        self.path = path
        self.desired: str | None = None  # the worker the choice names
        self.desired_at = clock()  # when that last changed (event loop clock)
        self.held: Held | None = None  # our leader node in the current session
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
        self._wake = ChangeSignal()
        self._granted_changed = ChangeSignal()
        self._body_exited = ChangeSignal()

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
