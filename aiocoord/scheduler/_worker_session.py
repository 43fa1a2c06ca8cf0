"""The worker on one ZooKeeper session: registration, the queue watch, running jobs.

The worker's node name on a session is ``<worker_id>-<session id in hex>``,
so a worker that lost its session never gets back the assignments of its
former self: those belong to a dead worker and go back to the pending jobs.
It registers with one transaction (its queue node ``assignments/<id>`` and
its ephemeral ``workers/<id>``), watches its queue with one persistent
recursive watch (no listing per job; the claims' watches are `_claimer`'s)
and runs each assignment (`_execute`:
read it, mark it RUNNING, call the handler within its timeout, write the
result or schedule a retry, then delete the assignment).  An assignment
deleted under it (cancelled, taken back) cancels that run.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace

import anyio
import anyio.abc

from ..errors import (
    ConnectionLostError,
    CoordError,
    CoordinatorClosedError,
    NodeExistsError,
    NoNodeError,
    TransactionFailed,
)
from ..session import Coordinator
from ..zk.types import CreateMode, CreateOp, EventType, WatchedEvent
from ._claimer import Claimer
from ._coalesce import Coalescer
from ._execute import Execution, Hooks
from ._jobs import JobType
from ._ops import Retention, ensure_layout
from ._records import (
    JobsLayout,
    WorkerRecord,
    encode_worker,
)

__all__ = ("Hooks", "WorkerSession")

log = logging.getLogger(__name__)


class WorkerSession:
    """What a worker does and holds on one session; `serve` runs it until cancelled."""

    def __init__(
        self,
        sid: int,
        worker: str,
        *,
        coord: Coordinator,
        layout: JobsLayout,
        handlers: Mapping[str, JobType],
        retention: Retention,
        capacity: int,
        slots: anyio.Semaphore,
        changed: Callable[[], None],
        hooks: Hooks,
        may_claim: Callable[[], bool],
    ) -> None:
        self.sid = sid
        self.worker = worker
        self.scope = anyio.CancelScope()
        self.ended = anyio.Event()
        self.registered = False
        self.running: dict[str, anyio.CancelScope] = {}
        self.done: set[str] = set()  # finished; the delete of the assignment not seen yet
        self._tg: anyio.abc.TaskGroup | None = None
        self._coord = coord
        self._client = coord.client
        self._layout = layout
        self._handlers = handlers
        self._retention = retention
        self._capacity = capacity
        self._slots = slots
        self._changed = changed
        self.claimer = Claimer(
            coord,
            layout,
            worker,
            frozenset(handlers),
            free=lambda: capacity - len(self.running),
            active=may_claim,
        )
        self._execution = Execution(
            coord, layout, retention, handlers, worker, self.done, hooks, Coalescer(coord.client)
        )

    def record(self, *, draining: bool = False) -> WorkerRecord:
        limits = tuple(
            sorted(
                (name, job.options.concurrency)
                for name, job in self._handlers.items()
                if job.options.concurrency is not None
            )
        )
        record = WorkerRecord.local(self.worker, self._capacity, frozenset(self._handlers), limits)
        return replace(record, draining=draining)

    async def serve(self, task_status: anyio.abc.TaskStatus[None] | None) -> None:
        """Register, report `task_status` started, then run assignments as they come.

        Raises a `CoordError` (bare, not in a group: the worker's loop decides
        on it) when one ends the session's tasks, `CoordinatorClosedError`
        first if the coordinator closed.
        """
        queue = self._layout.queue(self.worker)
        async with self._client.watch(queue, recursive=True) as watch:
            await self._register()
            log.info("worker %s registered (capacity %d)", self.worker, self._capacity)
            try:
                async with anyio.create_task_group() as tg:
                    self._tg = tg
                    if task_status is not None:
                        task_status.started()
                    await self._relist()
                    tg.start_soon(self.claimer.run)
                    async for event in watch.events:
                        self._on_event(queue, event)
            except BaseExceptionGroup as group:
                error = _coord_error(group)
                if error is None:
                    raise
                raise error from None
            finally:
                self._tg = None

    def relist_soon(self) -> None:
        """The connection is back on this session: the watch missed what happened meanwhile."""
        if self._tg is not None:
            self._tg.start_soon(self._relist)
            self.claimer.relist()

    def _on_event(self, queue: str, event: WatchedEvent) -> None:
        if event.path == queue or event.type is EventType.SESSION_LOST:
            return
        job_id = event.path.rsplit("/", 1)[1]
        if event.type is EventType.CREATED:
            self._start(job_id)
        elif event.type is EventType.DELETED:
            self.done.discard(job_id)
            scope = self.running.get(job_id)
            if scope is not None:  # taken away from us: stop working on it
                scope.cancel()

    async def _register(self) -> None:
        layout, client = self._layout, self._client
        record = self.record()
        node = layout.worker(self.worker)
        ops = [
            CreateOp(layout.queue(self.worker)),
            CreateOp(node, encode_worker(record), mode=CreateMode.EPHEMERAL),
        ]
        for _ in range(5):
            try:
                await client.multi(ops)
                break
            except TransactionFailed as exc:
                if isinstance(exc.cause, NoNodeError):
                    await ensure_layout(client, layout)
                    continue
                if exc.failed_index != 0 or not isinstance(exc.cause, NodeExistsError):
                    raise
                # Our queue exists: an earlier attempt whose reply was lost.
                with contextlib.suppress(NodeExistsError):
                    await client.create(node, ops[1].data, mode=CreateMode.EPHEMERAL)
                break
            except ConnectionLostError:
                await self._coord.client.session.wait_connected()
                if self._coord.client.session.session_id != self.sid:
                    raise
        self.registered = True

    async def _relist(self) -> None:
        finished = set(self.done)
        try:
            names = await self._client.children(self._layout.queue(self.worker))
        except NoNodeError:
            return
        # Finished before the listing and no longer queued: their deletes happened while
        # the watch was not looking (disconnected), so no event will clear them.
        self.done -= finished.difference(names)
        for job_id in names:
            self._start(job_id)

    # --- jobs --------------------------------------------------------------------------------

    def _start(self, job_id: str) -> None:
        if job_id in self.running or job_id in self.done or self._tg is None:
            return
        scope = anyio.CancelScope()
        self.running[job_id] = scope
        self.claimer.assignment_arrived(job_id)
        self._tg.start_soon(self._run, job_id, scope)

    async def _run(self, job_id: str, scope: anyio.CancelScope) -> None:
        try:
            with scope:
                async with self._slots:
                    await self._execution.run(job_id)
        except CoordinatorClosedError:
            pass
        finally:
            self.running.pop(job_id, None)
            self.claimer.slot_freed()
            self._changed()


def _coord_error(group: BaseExceptionGroup[BaseException]) -> CoordError | None:
    """The error to raise for `group` if all it holds are `CoordError`s (else None)."""
    match, rest = group.split(CoordError)
    if match is None or rest is not None:
        return None
    leaves: list[CoordError] = []

    def gather(g: BaseExceptionGroup[BaseException]) -> None:
        for exc in g.exceptions:
            if isinstance(exc, BaseExceptionGroup):
                gather(exc)
            elif isinstance(exc, CoordError):
                leaves.append(exc)

    gather(match)
    closed = [e for e in leaves if isinstance(e, CoordinatorClosedError)]
    return (closed or leaves)[0] if leaves else None
