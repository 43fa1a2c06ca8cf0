"""A worker: registers, runs the jobs assigned to it, and stands for the assigner election.

Per session the worker has a fresh id, ``<worker_id>-<session id in hex>``,
so a worker that lost its session never gets back the assignments of its
former self: those belong to a dead worker and go back to the pending jobs.
It registers with one transaction (its queue node ``assignments/<id>`` and
its ephemeral ``workers/<id>``), watches its queue with one persistent
recursive watch (no listing per job) and runs each assignment: read it,
validate, call the handler, write the result, then delete the assignment.
Result first: a crash in between re-runs the job (or the assigner sees the
result and just removes the assignment), it never loses it.

Failure handling:

- SUSPENDED: jobs keep running; their writes wait for the connection.  On
  RECONNECTED (same session) the queue is listed again, since a persistent
  watch does not replay what happened while disconnected.
- LOST: every job of that session is cancelled (its assignments are being
  returned to the pending jobs by the assigner); on the new session the
  worker registers again under a new id.
- A corrupt assignment is failed with a ``NodeDataError`` result; a handler
  that raises gives a failed result (`JobFailed` for the client).

Leaving (see `JobWorker`): drain, then hand back what is left.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from types import TracebackType

import anyio
import anyio.abc

from ..errors import (
    ConfigError,
    ConnectionLostError,
    CoordError,
    CoordinatorClosedError,
    LeadershipLost,
    NodeDataError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    TransactionFailed,
)
from ..recipes.leader_latch import LeaderLatch
from ..session import Coordinator
from ..zk.client import MAX_DATA
from ..zk.states import ConnectionState
from ..zk.types import CreateMode, CreateOp, DeleteOp, EventType, WatchedEvent
from ._assigner import Assigner
from ._jobs import JobType, run_job
from ._ops import Retention, ensure_layout, move_back, retry_connection, write_result
from ._records import (
    Layout,
    ResultRecord,
    WorkerRecord,
    check_job_name,
    decode_job,
    encode_result,
    encode_worker,
)
from ._strategies import Strategy

__all__ = ("JobWorker",)

log = logging.getLogger(__name__)


@dataclass(eq=False)
class _Session:
    """What the worker holds on one ZooKeeper session."""

    sid: int
    worker: str
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    tg: anyio.abc.TaskGroup | None = None
    registered: bool = False
    running: dict[str, anyio.CancelScope] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)  # finished, assignment delete not yet seen
    ended: anyio.Event = field(default_factory=anyio.Event)


class JobWorker:
    """This process as a worker of a `Scheduler`; made by ``scheduler.worker(capacity=N)``.

    Use it as ``async with``: entering blocks until the worker is registered
    (bound it with ``anyio.fail_after``); the worker then runs up to
    `capacity` jobs at once and takes part in the assigner election in the
    background.  Leaving blocks while it drains: the worker marks itself
    draining (the assigner sends it nothing more), lets running jobs finish
    for up to `drain_timeout` seconds, cancels the rest and hands them back to
    the pending jobs, deletes its nodes and leaves the election.  Leaving with
    an exception (or cancelled) skips the drain and hands back at once.
    Exit in the task that entered.
    """

    def __init__(
        self,
        coord: Coordinator,
        layout: Layout,
        handlers: Mapping[str, JobType],
        strategy: Strategy,
        retention: Retention,
        *,
        capacity: int,
        worker_id: str | None,
        drain_timeout: float,
    ) -> None:
        if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
            raise ConfigError("capacity", f"must be an int >= 1, not {capacity!r}")
        if isinstance(drain_timeout, bool) or not isinstance(drain_timeout, int | float):
            raise TypeError(f"drain_timeout must be a number, not {type(drain_timeout).__name__}")
        if not drain_timeout >= 0:
            raise ConfigError("drain_timeout", f"must be >= 0, not {drain_timeout!r}")
        if worker_id is None:
            worker_id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        try:
            self._base = check_job_name(worker_id)
        except ValueError as exc:
            raise ConfigError("worker_id", str(exc).replace("name ", "", 1)) from None
        self._coord = coord
        self._client = coord.client
        self._layout = layout
        self._handlers = handlers
        self._strategy = strategy
        self._retention = retention
        self.capacity = capacity
        self.drain_timeout = float(drain_timeout)
        self._slots = anyio.Semaphore(capacity)
        self._session: _Session | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._entered = False
        self._closing = False
        self._assigning = False
        self._idle = anyio.Event()
        self._after_result: Callable[[str], Awaitable[None]] | None = None  # test hook

    # --- state -------------------------------------------------------------------------------

    @property
    def id(self) -> str | None:
        """This worker's node name on the current session (None while not registered)."""
        sess = self._session
        return sess.worker if sess is not None and sess.registered else None

    @property
    def is_assigner(self) -> bool:
        """True while this worker is the elected assigner."""
        return self._assigning

    @property
    def running(self) -> int:
        """Jobs of the current session being run (or waiting for a free slot)."""
        return len(self._session.running) if self._session is not None else 0

    # --- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> JobWorker:
        if self._entered:
            raise CoordinatorClosedError("a JobWorker can be entered only once; make a new one")
        if self._coord.state is None:
            raise CoordinatorClosedError("the coordinator is not open")
        self._entered = True
        await ensure_layout(self._client, self._layout)
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        try:
            await tg.start(self._follow_connection)
            await tg.start(self._serve)
            tg.start_soon(self._assign_loop)
        except BaseException:
            tg.cancel_scope.cancel()
            await tg.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closing = True
        tg, self._tg = self._tg, None
        try:
            with anyio.CancelScope(shield=True):
                if exc_type is None:
                    await self._drain()
                await self._leave()
        finally:
            if tg is not None:
                tg.cancel_scope.cancel()
                await tg.__aexit__(None, None, None)

    async def _drain(self) -> None:
        sess = self._session
        if sess is None or not sess.registered or self._coord.closed:
            return
        record = WorkerRecord.local(sess.worker, self.capacity, frozenset(self._handlers))
        with anyio.move_on_after(self._client.request_timeout()):
            try:
                data = encode_worker(replace(record, draining=True))
                await self._client.set(self._layout.worker(sess.worker), data)
            except CoordError as exc:
                log.debug("worker %s: could not mark itself draining: %s", sess.worker, exc)
        with anyio.move_on_after(self.drain_timeout):
            while sess.running:
                await self._idle.wait()
        if sess.running:
            log.info("worker %s: handing back %d running job(s)", sess.worker, len(sess.running))

    async def _leave(self) -> None:
        """Stop the session's jobs, return the assignments left, delete our nodes."""
        sess = self._session
        if sess is None:
            return
        sess.scope.cancel()
        with anyio.move_on_after(self._coord.session_timeout):
            await sess.ended.wait()
        if not sess.registered or self._coord.closed or self._coord.session_id != sess.sid:
            return  # the session is gone: its node went with it and the assigner reclaims
        queue, node = self._layout.queue(sess.worker), self._layout.worker(sess.worker)
        with anyio.move_on_after(self._client.request_timeout() * 2):
            try:
                for _ in range(3):
                    for job_id in await self._client.children(queue):
                        await move_back(self._client, self._layout, sess.worker, job_id)
                    try:
                        await self._client.multi([DeleteOp(queue), DeleteOp(node)])
                        return
                    except TransactionFailed as exc:
                        if not isinstance(exc.cause, NotEmptyError):
                            break
                await self._client.delete(node)  # leave the queue to the assigner's reclaim
            except CoordError as exc:
                log.warning("worker %s: leaving cleanly failed: %s", sess.worker, exc)

    # --- sessions ----------------------------------------------------------------------------

    async def _follow_connection(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        started = False
        async for event in self._coord.connection_events():
            if not started:
                started = True
                task_status.started()
            sess = self._session
            if sess is None:
                continue
            if event.state is ConnectionState.LOST and event.session_id == sess.sid:
                log.info("worker %s: session lost, cancelling its jobs", sess.worker)
                sess.scope.cancel()
            elif (
                event.state is ConnectionState.RECONNECTED
                and not event.new_session
                and sess.tg is not None
                and sess.sid == event.session_id
            ):
                sess.tg.start_soon(self._relist, sess)  # the watch missed what happened meanwhile
        if not started:
            task_status.started()
        if self._session is not None:  # the coordinator closed: nothing can be recorded now
            self._session.scope.cancel()

    async def _serve(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """One registration per session, until the worker leaves."""
        started = False
        failures = 0
        while not self._closing:
            try:
                await self._coord.wait_connected()
            except CoordinatorClosedError:
                break
            sid = self._coord.session_id
            if sid is None:
                await anyio.sleep(0.01)  # between a LOST and the next session
                continue
            sess = _Session(sid, f"{self._base}-{sid:x}")
            self._session = sess
            try:
                with sess.scope:
                    await self._serve_session(sess, task_status if not started else None)
                    started = True
            except CoordinatorClosedError:
                break
            except CoordError as exc:
                failures += 1
                log.warning("worker %s: %s (registering again)", sess.worker, exc)
                await anyio.sleep(min(1.0, 0.02 * 2**failures))
            finally:
                sess.ended.set()
                self._notify()
            started = started or sess.registered
        if not started:
            raise CoordinatorClosedError("the coordinator closed before the worker registered")

    async def _serve_session(
        self, sess: _Session, task_status: anyio.abc.TaskStatus[None] | None
    ) -> None:
        queue = self._layout.queue(sess.worker)
        async with self._client.watch(queue, recursive=True) as watch:
            await self._register(sess)
            log.info("worker %s registered (capacity %d)", sess.worker, self.capacity)
            try:
                async with anyio.create_task_group() as tg:
                    sess.tg = tg
                    if task_status is not None:
                        task_status.started()
                    await self._relist(sess)
                    async for event in watch.events:
                        self._on_event(sess, queue, event)
            finally:
                sess.tg = None

    def _on_event(self, sess: _Session, queue: str, event: WatchedEvent) -> None:
        if event.path == queue or event.type is EventType.SESSION_LOST:
            return
        job_id = event.path.rsplit("/", 1)[1]
        if event.type is EventType.CREATED:
            self._start(sess, job_id)
        elif event.type is EventType.DELETED:
            sess.done.discard(job_id)
            scope = sess.running.get(job_id)
            if scope is not None:  # taken away from us: stop working on it
                scope.cancel()

    async def _register(self, sess: _Session) -> None:
        layout, client = self._layout, self._client
        record = WorkerRecord.local(sess.worker, self.capacity, frozenset(self._handlers))
        node = layout.worker(sess.worker)
        ops = [
            CreateOp(layout.queue(sess.worker)),
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
                await self._coord.wait_connected()
                if self._coord.session_id != sess.sid:
                    raise
        sess.registered = True

    async def _relist(self, sess: _Session) -> None:
        try:
            names = await self._client.children(self._layout.queue(sess.worker))
        except NoNodeError:
            return
        for job_id in names:
            self._start(sess, job_id)

    # --- jobs --------------------------------------------------------------------------------

    def _start(self, sess: _Session, job_id: str) -> None:
        if job_id in sess.running or job_id in sess.done or sess.tg is None:
            return
        scope = anyio.CancelScope()
        sess.running[job_id] = scope
        sess.tg.start_soon(self._run, sess, job_id, scope)

    async def _run(self, sess: _Session, job_id: str, scope: anyio.CancelScope) -> None:
        try:
            with scope:
                async with self._slots:
                    await self._execute(sess, job_id)
        except CoordinatorClosedError:
            pass
        finally:
            sess.running.pop(job_id, None)
            self._notify()

    async def _execute(self, sess: _Session, job_id: str) -> None:
        client, coord, layout = self._client, self._coord, self._layout
        path = layout.assignment(sess.worker, job_id)
        try:
            node = await retry_connection(coord, lambda: client.get(path))
        except NoNodeError:
            return
        try:
            job = decode_job(path, node.data)
        except NodeDataError as exc:
            log.error("job %s failed: %s", job_id, exc)
            outcome = ResultRecord("", ok=False, type="NodeDataError", message=str(exc))
        else:
            outcome = await run_job(self._handlers.get(job.name), job.name, job.payload)
        data = encode_result(replace(outcome, worker=sess.worker))
        if len(data) > MAX_DATA:
            message = f"the result is {len(data)} bytes as JSON; ZooKeeper nodes hold {MAX_DATA}"
            data = encode_result(
                ResultRecord(outcome.name, False, type="ValueError", message=message)
            )
        await retry_connection(
            coord, lambda: write_result(client, layout, self._retention, job_id, data)
        )
        sess.done.add(job_id)
        if self._after_result is not None:
            await self._after_result(job_id)

        async def delete() -> None:
            with contextlib.suppress(NoNodeError):
                await client.delete(path)

        await retry_connection(coord, delete)

    def _notify(self) -> None:
        self._idle.set()
        self._idle = anyio.Event()

    # --- the assigner election ---------------------------------------------------------------

    async def _assign_loop(self) -> None:
        latch = LeaderLatch(self._coord, self._layout.assigner, participant_id=self._base)
        failures = 0
        async with latch:
            while True:
                try:
                    async with latch.leadership() as term:
                        self._assigning = True
                        log.info(
                            "assigner of %s: %s (token 0x%x)",
                            self._layout.root,
                            self._base,
                            term.token,
                        )
                        assigner = Assigner(
                            self._coord, self._layout, self._strategy, self._retention
                        )
                        try:
                            await assigner.run()
                        finally:
                            self._assigning = False
                    failures = 0
                except LeadershipLost as exc:
                    log.info(
                        "assigner of %s: %s stopped (%s)", self._layout.root, self._base, exc.reason
                    )
                except CoordinatorClosedError:
                    return
                except Exception as exc:
                    if self._coord.closed:
                        return
                    failures += 1
                    log.warning(
                        "assigner of %s: term ended by %r; standing again", self._layout.root, exc
                    )
                    await anyio.sleep(min(2.0, 0.05 * 2**failures))

    def __repr__(self) -> str:
        role = " assigner" if self._assigning else ""
        state = "CLOSED" if self._closing else ("REGISTERED" if self.id else "NEW")
        return (
            f"<JobWorker {self.id or self._base} {state}{role} "
            f"running={self.running}/{self.capacity}>"
        )
