"""`TaskLeadership` and `task_leadership()`: the recipe object users hold; see the package docstring."""

from __future__ import annotations

import gc
import math
from collections.abc import AsyncIterator, Iterable
from contextlib import AbstractAsyncContextManager

from aiocoord._lifecycle import Lifecycle, Service
from aiocoord.errors import ConfigError, NodeDataError
from aiocoord.session import Coordinator
from aiocoord.zk.paths import join

from ..._checks import check_coordinator, check_node_name, check_root
from .._loss import check_lose_on_suspend
from ._changes import TaskChange, follow_changes
from ._choice import Prefer, VersionKey
from ._engine import TaskEngine
from ._lead import LeadBlock
from ._records import Worker, decode_leader
from ._state import TaskTerm
from ._versions import maven_version_key

__all__ = ("TaskChange", "TaskLeadership", "TaskTerm", "Worker", "task_leadership")


class TaskLeadership(Service):
    """This worker's part in leading a set of tasks; see the module docs for the protocol.

    Use it as ``async with``: entering blocks until the worker is registered
    and has read the worker list (bound it with `anyio.fail_after`); leaving
    stops leading, waits for ``lead()`` bodies (bounded by the session
    timeout) and deletes this worker's nodes.  Tasks are led in the
    background; ``lead(task)`` runs code only while this worker leads it.
    SUSPENDED past the session's provable life (see `lose_on_suspend`) and LOST stop leading every
    task at once, cancelling the bodies; on the same session leadership comes
    back with the same tokens, on a new one the worker registers again.
    ``await tl.start()`` / ``await tl.aclose()`` do the same without ``async
    with``; it may be left from another task than the one that entered it.
    """

    def __init__(
        self,
        coord: Coordinator,
        root: str,
        *,
        worker: Worker,
        tasks: Iterable[str],
        prefer: Prefer = "newest",
        version_key: VersionKey | None = None,
        settle: float = 1.0,
        lose_on_suspend: bool | None = None,
    ) -> None:
        check_coordinator(coord)
        root = check_root(root)
        if not isinstance(worker, Worker):
            raise TypeError(f"worker must be an aiocoord.Worker, not {type(worker).__name__}")
        if isinstance(tasks, str | bytes) or not isinstance(tasks, Iterable):
            raise TypeError("tasks must be an iterable of task names, not a single string")
        names = list(dict.fromkeys(check_node_name("tasks", task) for task in tasks))
        if prefer not in ("newest", "oldest"):
            raise ConfigError("prefer", f"must be 'newest' or 'oldest', not {prefer!r}")
        if version_key is None:
            version_key = maven_version_key
        elif not callable(version_key):
            raise TypeError(f"version_key must be callable, not {type(version_key).__name__}")
        try:
            version_key(worker.version)
        except Exception as exc:
            raise ConfigError(
                "version", f"{worker.version!r} is refused by version_key: {exc}"
            ) from exc
        if (
            not isinstance(settle, int | float)
            or isinstance(settle, bool)
            or not 0 <= settle < math.inf
        ):
            raise ConfigError("settle", f"must be a finite number of seconds >= 0, not {settle!r}")
        check_lose_on_suspend(lose_on_suspend)
        self.coord = coord
        self._engine = TaskEngine(
            coord,
            root,
            worker,
            names,
            prefer=prefer,
            version_key=version_key,
            settle=float(settle),
            lose_on_suspend=lose_on_suspend,
        )
        self._life = Lifecycle(
            f"task leadership {self._engine.root} ({worker.id})",
            self._engine.start,
            stopping=self._begin_close,
            stopped=self._cleanup,
        )
        self._entered = False
        self._closed = False

    # --- local state (no I/O) --------------------------------------------------------------

    @property
    def worker(self) -> Worker:
        return self._engine.worker

    @property
    def root(self) -> str:
        return self._engine.root

    @property
    def tasks(self) -> tuple[str, ...]:
        """This worker's tasks (not those being removed)."""
        return tuple(t for t, s in self._engine.slots.items() if s.stopping is None)

    @property
    def leading(self) -> frozenset[str]:
        """The tasks this worker leads now."""
        return frozenset(t for t, s in self._engine.slots.items() if s.granted)

    @property
    def invalid_workers(self) -> dict[str, NodeDataError]:
        """Worker nodes ignored for invalid data, by node name, as of the last read."""
        return dict(self._engine.invalid)

    def is_leader(self, task: str) -> bool:
        """True while this worker leads `task` (cheap; False for a task it does not have)."""
        if not isinstance(task, str):
            raise TypeError(f"task must be a str, not {type(task).__name__}")
        slot = self._engine.slots.get(task)
        return slot is not None and slot.granted

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Register this worker: block until registered with the worker list read.

        Bound it with `anyio.fail_after`; cancelled meanwhile, it leaves no
        node behind.  Raises `RuntimeError` if started before.
        """
        if self._life.started:
            raise RuntimeError("a TaskLeadership can be entered only once")
        self._entered = True
        # A fresh process has its first full garbage collection at its first burst
        # of activity: for a worker that has just joined, the hand-over of its tasks,
        # which stay leaderless meanwhile.  One collection now, before it registers,
        # puts the next one far away (docs/task-leadership.md has the figures).
        gc.collect()
        await self._life.start()

    async def aclose(self) -> None:
        """Stop leading, let ``lead()`` bodies drain, delete this worker's nodes; from any task.

        Blocks until done (the drain is bounded by the session timeout, the
        deletes by the request timeout).  Safe to call twice.
        """
        await self._life.aclose()

    async def _begin_close(self) -> None:
        """Leaving, while the tasks still run: bodies cancelled ("closed"), waiters give up."""
        self._closed = True
        self._engine.begin_close()

    async def _cleanup(self) -> None:
        """Left: the tasks have ended; delete our nodes once the bodies drained."""
        await self._engine.cleanup()

    # --- leading ---------------------------------------------------------------------------

    def lead(self, task: str) -> AbstractAsyncContextManager[TaskTerm]:
        """Run the block while this worker leads `task`; yields the `TaskTerm`.

        Entering waits until this worker leads the task (bound it with
        `anyio.fail_after`).  The block runs in a cancel scope that is
        cancelled when leadership ends: hand-over to another worker, SUSPENDED
        (by default) or LOST, the node deleted by someone else, the task
        removed, or the recipe closed.  Once the block has exited, that raises
        ``LeadershipLost(path, reason)`` with `reason` one of ``"handed over"``,
        ``"suspended"``, ``"session lost"``, ``"node deleted"``,
        ``"task removed"``, ``"closed"``; a block that ends by itself while
        still leader raises nothing, and the task stays led.  The next leader
        starts only after every block of this worker for the task has exited
        (drain-then-delete).  Waiting for a task that gets removed, or in a
        recipe that closes, raises `LeadershipLost` too.  Raises `ValueError`
        for a task this worker does not have (or no longer has) and
        `RuntimeError` once the recipe is closed, so a ``while True`` loop
        around ``lead()`` ends.
        """
        return LeadBlock(self._engine, task, self._check_lead)

    def _check_lead(self) -> None:
        if not self._entered or self._closed:
            raise RuntimeError("lead() needs an entered TaskLeadership that is not closed")

    # --- reads -----------------------------------------------------------------------------

    async def leaders(self) -> dict[str, str]:
        """``{task: worker id}`` for every task led now, read from ZooKeeper.

        Covers every leader node under `root`, also of tasks this worker does
        not have; a node with invalid data is left out.
        """
        engine = self._engine
        out: dict[str, str] = {}
        for task, data in sorted((await engine.read_all(engine.leaders_path)).items()):
            try:
                out[task], _version = decode_leader(join(engine.leaders_path, task), data)
            except NodeDataError:
                continue
        return out

    async def workers(self) -> list[Worker]:
        """The live workers with valid records, read from ZooKeeper, by id.

        Invalid records are left out (`invalid_workers` lists those of the last
        worker-list read).
        """
        engine = self._engine
        out: list[Worker] = []
        for name, data in sorted((await engine.read_all(engine.workers_path)).items()):
            try:
                out.append(engine.decode_worker(name, data))
            except NodeDataError:
                continue
        return out

    async def changes(self) -> AsyncIterator[TaskChange]:
        """Who leads each of this worker's tasks: first the current leader of each, then changes.

        An async iterator of `TaskChange`, one per change of a task's leader as
        this worker sees it (a leader that comes and goes between two reads may
        be skipped).  Leader nodes are read only while someone iterates.  Ends
        when the recipe closes.
        """
        if not self._entered or self._closed:
            raise RuntimeError("changes() needs an entered TaskLeadership that is not closed")
        engine = self._engine
        async for change in follow_changes(engine.feed, lambda: engine.slots, engine.read_leader):
            yield change

    # --- tasks at run time -----------------------------------------------------------------

    async def add_task(self, task: str) -> None:
        """Start taking part in leading `task` (no-op if this worker already has it).

        All workers of a version should have the same tasks: the choice does
        not know which tasks a worker has, and a task whose chosen worker lacks
        it stays unled.  A task only older workers have is therefore not led
        while a newer version is present: the newest version decides.
        """
        await self._engine.add_task(check_node_name("task", task))

    async def remove_task(self, task: str) -> None:
        """Stop leading `task`: cancel its bodies (``"task removed"``), let them drain, free it.

        Returns once this worker's leader node of the task is deleted (waiting
        for the connection if need be; bound it with `anyio.fail_after`).
        No-op for a task this worker does not have.
        """
        await self._engine.remove_task(check_node_name("task", task))

    def __repr__(self) -> str:
        engine = self._engine
        state = "closed" if self._closed else ("usable" if engine.usable() else "waiting")
        return (
            f"<TaskLeadership {engine.root} worker={engine.worker.id} "
            f"version={engine.worker.version} leading={len(self.leading)}/{len(engine.slots)} "
            f"{state}>"
        )


def task_leadership(
    coord: Coordinator,
    root: str,
    *,
    worker: Worker,
    tasks: Iterable[str],
    prefer: Prefer = "newest",
    version_key: VersionKey | None = None,
    settle: float = 1.0,
    lose_on_suspend: bool | None = None,
) -> TaskLeadership:
    """A `TaskLeadership` to use as ``async with task_leadership(...) as tl``.

    `worker` says who this process is (`Worker(version=...)`); `tasks` names
    the tasks (node names: no ``/``).  `prefer` picks the newest (default) or
    the oldest version's workers; `version_key` orders versions (default
    `maven_version_key`, Maven's `ComparableVersion`; `packaging.version.Version`
    for PEP 440, say).  `settle` is how long (seconds) a leader waits after the
    choice moved a task away before it hands the task over.
    `lose_on_suspend` not given keeps leading through SUSPENDED while the
    session provably lives (until two thirds of the session timeout after
    the last answered request, or RECONNECTED); ``True`` stops at SUSPENDED
    (Curator's standard policy), ``False`` keeps leading until LOST.  Bad
    arguments raise `TypeError`, `InvalidPathError` (a bad `root`) or
    `ConfigError` (both `ValueError`s) naming them.
    Entering runs one full garbage collection before the worker registers, so
    that a new process does not have its first one in its first hand-over.
    """
    return TaskLeadership(
        coord,
        root,
        worker=worker,
        tasks=tasks,
        prefer=prefer,
        version_key=version_key,
        settle=settle,
        lose_on_suspend=lose_on_suspend,
    )
