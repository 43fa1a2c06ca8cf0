"""`LeadBlock`: what ``TaskLeadership.lead(task)`` returns; waits for leadership, runs the block.

The block runs as one body of the task's current tenure (`_tenure.Tenure`,
created by the slot when leadership is granted and ended when it is
revoked), so it is cancelled when leadership ends and raises
`LeadershipLost` once it has exited.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType

import anyio.lowlevel

from aiocoord.errors import LeadershipLost

from .._tenure import Body
from ._engine import TaskEngine
from ._slot import TaskSlot
from ._state import TaskTerm

__all__ = ("LeadBlock",)


class LeadBlock:
    """``async with tl.lead(task) as term``: wait to lead `task`, then run the block under its term.

    The task is looked up on entry, where a task this worker does not have
    raises, and so does `check` if the recipe may not lead (not entered, or
    closed).  A class rather than a generator-based context manager: a
    hand-over enters and leaves hundreds of these at once, and each generator
    layer costs as much as the rest of the work.
    """

    __slots__ = ("_body", "_check", "_engine", "_task")

    def __init__(self, engine: TaskEngine, task: str, check: Callable[[], None]) -> None:
        self._engine = engine
        self._task = task
        self._check = check  # raises `RuntimeError` unless the recipe is entered and not closed
        self._body: Body | None = None

    async def _slot(self) -> TaskSlot:
        """The task's slot, checked: the errors `TaskLeadership.lead` documents."""
        task, engine = self._task, self._engine
        if not isinstance(task, str):
            raise TypeError(f"task must be a str, not {type(task).__name__}")
        self._check()
        slot = engine.slots.get(task)
        if slot is None:
            await anyio.lowlevel.checkpoint()
            raise ValueError(f"task {task!r} is not one of this worker's tasks (add_task() it)")
        return slot

    async def __aenter__(self) -> TaskTerm:
        engine = self._engine
        while True:
            slot = await self._slot()
            waited = False
            while True:
                changed = slot.grant_changed()
                if engine.closing:
                    raise LeadershipLost(slot.path, "closed")
                if slot.stopping is not None:
                    raise LeadershipLost(slot.path, slot.stopping)
                term, tenure = slot.term, slot.tenure
                if slot.granted and term is not None and tenure is not None:
                    break
                await changed.wait()
                waited = True
            if not waited:
                # Leader already: still a checkpoint, so that a loop around lead() whose
                # block never awaits cannot starve the event loop.
                await anyio.lowlevel.checkpoint()
                if not slot.granted or slot.term is not term:
                    continue  # lost meanwhile: look again and wait
            body = await tenure.enter()
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
