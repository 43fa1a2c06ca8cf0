"""A worker: runs the jobs assigned to it, across sessions, and stands for the assigner.

`JobWorker` keeps one `WorkerSession` (registration, queue watch, job runs;
see `_worker_session`) per ZooKeeper session, and a leader selector
(`aiocoord.leader_selector`, on the leader latch's nodes: ``layout="latch"``)
on ``<root>/assigner`` whose leader runs the `Assigner`, one new term
(reconciled afresh) per leadership.

Failure handling:

- SUSPENDED: jobs keep running; their writes wait for the connection.  On
  RECONNECTED (same session) the queue is listed again, since a persistent
  watch does not replay what happened while disconnected.  The assigner term
  ends (the latch drops leadership on SUSPENDED) and the next one reconciles.
- LOST: every job of that session is cancelled (its assignments are being
  returned to the pending jobs by the assigner); on the new session the
  worker registers again under a new id.
- The coordinator closed: the jobs are cancelled; nothing more is done.
- A corrupt assignment is failed with a ``NodeDataError`` result; a handler
  that raises (or runs past its timeout) is retried if its job allows, else
  gives a failed result (`JobFailed` for the client), and so does a result
  that cannot be stored (not UTF-8-encodable, or over the node limit): that
  job fails, the worker and its other jobs go on.
- An assignment deleted under a running job (cancelled, or taken back)
  cancels that job's run only.

Leaving: drain, then hand back what is left (see `JobWorker`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import socket
import uuid
from collections.abc import Mapping

import anyio
import anyio.abc

from .._backoff import Backoff
from .._checks import check_int, check_seconds
from .._lifecycle import Lifecycle, Phase, Service
from .._status_view import StatusView
from ..errors import (
    ConnectionLostError,
    CoordError,
    CoordinatorClosedError,
    NoNodeError,
    NotEmptyError,
    TransactionFailed,
)
from ..recipes.leader_latch import LeadershipTerm, leader_selector
from ..session import Coordinator
from ..zk.states import ConnectionState
from ..zk.types import DeleteOp
from ._assigner import Assigner
from ._jobs import JobType
from ._ops import Retention, ensure_layout, move_back
from ._records import (
    MAX_CAPACITY,
    JobsLayout,
    check_job_name,
    encode_worker,
)
from ._strategies import Strategy
from ._worker_session import Hooks, WorkerSession

__all__ = ("DRAIN_TIMEOUT", "JobWorker")

log = logging.getLogger(__name__)

DRAIN_TIMEOUT = 20.0  # seconds: below Kubernetes' default grace period (30 s), with room to leave


class JobWorker(Service):
    """This process as a worker of a `Scheduler`; made by ``scheduler.worker(capacity=N)``.

    Use it as ``async with``: entering blocks until the worker is registered
    (bound it with ``anyio.fail_after``); the worker then runs up to
    `capacity` jobs at once and takes part in the assigner election in the
    background.  Leaving blocks while it drains: the worker marks itself
    draining (the assigner sends it nothing more), lets running jobs finish
    for up to `drain_timeout` seconds, cancels the rest and hands them back to
    the pending jobs, deletes its nodes and leaves the election.  Leaving with
    an exception (or cancelled) skips the drain and hands back at once.
    ``await w.start()`` / ``await w.aclose()`` do the same without ``async
    with``; it may be left from another task than the one that entered it.
    """

    def __init__(
        self,
        coord: Coordinator,
        layout: JobsLayout,
        handlers: Mapping[str, JobType],
        strategy: Strategy,
        retention: Retention,
        *,
        capacity: int,
        worker_id: str | None,
        drain_timeout: float,
        id_name: str = "worker_id",
    ) -> None:
        check_int("capacity", capacity, least=1, most=MAX_CAPACITY)  # what a worker record holds
        drain_timeout = check_seconds("drain_timeout", drain_timeout, most=math.inf)
        if worker_id is None:
            self._base = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        else:
            self._base = check_job_name(worker_id, id_name)
        self._coord = coord
        self._client = coord.client
        self._layout = layout
        self._handlers = handlers
        self._strategy = strategy
        self._retention = retention
        self.capacity = capacity
        self.drain_timeout = float(drain_timeout)
        self._slots = anyio.Semaphore(capacity)
        self._current: WorkerSession | None = None
        self._life = Lifecycle(
            f"job worker {self._base} of {layout.root}",
            self._run,
            stopping=self._leave_cleanly,
            hurry=self._hurry,
        )
        self._drain_wanted = True
        self._draining: anyio.CancelScope | None = None  # made when leaving: no loop may run yet
        self._entered = False
        self._closing = False
        self._assigning = False
        self._idle = anyio.Event()
        self._hooks = Hooks()

    # --- state -------------------------------------------------------------------------------

    @property
    def id(self) -> str | None:
        """This worker's node name on the current session (None while not registered)."""
        sess = self._current
        return sess.worker if sess is not None and sess.registered else None

    @property
    def participant_id(self) -> str:
        """The id given (``participant_id=``), or the default: what node names start with."""
        return self._base

    @property
    def is_assigner(self) -> bool:
        """True while this worker is the elected assigner."""
        return self._assigning

    @property
    def running(self) -> int:
        """Jobs of the current session being run (or waiting for a free slot)."""
        return len(self._current.running) if self._current is not None else 0

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Register this worker: block until registered (bound it with ``anyio.fail_after``).

        Raises `CoordinatorClosedError` if the coordinator is not open (or
        closes first) or this worker was started before.
        """
        if self._life.started:
            raise CoordinatorClosedError("a JobWorker can be entered only once; make a new one")
        if self._coord.state is None:
            raise CoordinatorClosedError("the coordinator is not open")
        self._entered = True
        await self._life.start()

    async def _run(self, tg: anyio.abc.TaskGroup) -> None:
        await ensure_layout(self._client, self._layout)
        await tg.start(self._follow_connection)
        await tg.start(self._serve)
        tg.start_soon(self._assign_loop)

    async def aclose(self) -> None:
        """Leave: drain, hand back what is left, delete our nodes; from any task.

        Blocks while it drains (up to `drain_timeout`); cancelling the caller
        skips the rest of the drain, as leaving with an exception does.  Safe
        to call twice.
        """
        await self._life.aclose()

    def _hurry(self) -> None:
        """Skip the drain (leaving with an exception, or cancelled)."""
        self._drain_wanted = False
        if self._draining is not None:
            self._draining.cancel()

    async def _leave_cleanly(self) -> None:
        """Leaving, while the session's tasks still run: drain, then hand back and delete."""
        self._closing = True
        self._standing_changed()
        if self._drain_wanted:
            self._draining = anyio.CancelScope()
            with self._draining:
                await self._drain()
        await self._leave()

    async def _drain(self) -> None:
        sess = self._current
        if sess is None or not sess.registered or self._coord.client.session.closed:
            return
        with anyio.move_on_after(self._client.session.timing.request_timeout):
            try:
                data = encode_worker(sess.record(draining=True))
                await self._client.set(self._layout.worker(sess.worker), data)
            except CoordError as exc:
                log.debug("worker %s: could not mark itself draining: %s", sess.worker, exc)
        if sess.running:  # what a stop signal is waiting for, and for how long at most
            log.info(
                "worker %s: draining: waiting up to %gs for %d running job(s) (%s)",
                sess.worker,
                self.drain_timeout,
                len(sess.running),
                ", ".join(sorted(sess.running)[:10]),
            )
        with anyio.move_on_after(self.drain_timeout):
            while sess.running:
                await self._idle.wait()
        if sess.running:
            log.warning(
                "worker %s: drain timeout (%gs) passed: handing back %d running job(s)",
                sess.worker,
                self.drain_timeout,
                len(sess.running),
            )

    async def _leave(self) -> None:
        """Stop the session's jobs, return the assignments left, delete our nodes."""
        sess = self._current
        if sess is None:
            return
        sess.scope.cancel()
        with anyio.move_on_after(self._coord.session_timeout):
            await sess.ended.wait()
        if self._coord.client.session.closed or self._coord.client.session.session_id != sess.sid:
            return  # the session is gone: its node went with it and the assigner reclaims
        # Also when the registration was not confirmed: its request may have reached the
        # server (the nodes are named after this session: any found are ours).
        queue, node = self._layout.queue(sess.worker), self._layout.worker(sess.worker)
        with anyio.move_on_after(self._client.session.timing.retry_window):
            try:
                for _ in range(3):
                    try:
                        held = await self._client.children(queue)
                    except NoNodeError:  # never registered
                        held = []
                    for job_id in held:
                        await move_back(self._client, self._layout, sess.worker, job_id)
                    try:
                        await self._client.multi([DeleteOp(queue), DeleteOp(node)])
                        return
                    except TransactionFailed as exc:
                        if isinstance(exc.cause, NoNodeError):  # one of the two never made
                            for path in (node, queue):
                                with contextlib.suppress(NoNodeError, NotEmptyError):
                                    await self._client.delete(path)
                            return
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
            sess = self._current
            if sess is None:
                continue
            if event.state is ConnectionState.LOST and event.session_id == sess.sid:
                log.info("worker %s: session lost, cancelling its jobs", sess.worker)
                sess.scope.cancel()
            elif (
                event.state is ConnectionState.RECONNECTED
                and not event.new_session
                and sess.sid == event.session_id
            ):
                sess.relist_soon()
        if not started:
            task_status.started()
        if self._current is not None:  # the coordinator closed: nothing can be recorded now
            self._current.scope.cancel()

    async def _serve(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """One registration per session, until the worker leaves."""
        started = False
        backoff = Backoff(0.04, 1.0, jitter=0.0)  # 0.04 s doubling to 1 s
        while not self._closing:
            try:
                await self._coord.client.session.wait_connected()
            except CoordinatorClosedError:
                break
            sid = self._coord.client.session.session_id
            if sid is None:
                await anyio.sleep(0.01)  # between a LOST and the next session
                continue
            sess = WorkerSession(
                sid,
                f"{self._base}-{sid:x}",
                coord=self._coord,
                layout=self._layout,
                handlers=self._handlers,
                retention=self._retention,
                capacity=self.capacity,
                slots=self._slots,
                changed=self._notify,
                hooks=self._hooks,
                may_claim=self._may_claim,
            )
            self._current = sess
            try:
                with sess.scope:
                    await sess.serve(task_status if not started else None)
                    started = True
            except CoordinatorClosedError:
                break
            except CoordError as exc:
                log.warning("worker %s: %s (registering again)", sess.worker, exc)
                await backoff.failed()
            finally:
                sess.ended.set()
                self._notify()
                started = started or sess.registered  # (a `break` above skips what follows)
        if not started:
            raise CoordinatorClosedError("the coordinator closed before the worker registered")

    def _may_claim(self) -> bool:
        """Claim jobs unassigned too long (`_claimer`) unless assigning or leaving ourselves."""
        return not self._assigning and not self._closing

    def _standing_changed(self) -> None:
        """Assigning or leaving began or ended: the claimer looks again at its watch."""
        if self._current is not None:
            self._current.claimer.standing_changed()

    def _notify(self) -> None:
        self._idle.set()
        self._idle = anyio.Event()

    # --- the assigner election ---------------------------------------------------------------

    async def _assign_loop(self) -> None:
        """Stand for the assigner while the worker lives: each term runs `_lead`.

        Joining the election needs ZooKeeper within the request timeout; a
        join that cannot complete (`ConnectionLostError`) is tried again once
        connected, while the worker goes on serving its queue.  Ends only by
        cancellation (the worker leaving) or the coordinator closing.
        """
        backoff = Backoff(0.1, 2.0, jitter=0.0)  # 0.1 s after a term, doubling to 2 s
        while True:
            selector = leader_selector(
                self._coord,
                self._layout.assigner,
                self._lead,
                participant_id=self._base,
                backoff=0.1,
                max_backoff=2.0,
                layout="latch",  # the assigner election's nodes since it began (see scheduler.md)
            )
            joined = False
            try:
                async with selector:
                    joined = True
                    await anyio.sleep_forever()
            except CoordinatorClosedError:
                return  # closed as it joined the election: nothing to stand for
            except ConnectionLostError as exc:
                log.info("worker %s: standing for the assigner again: %s", self._base, exc)
            if joined:
                backoff.reset()
            try:
                await self._coord.client.session.wait_connected()
            except CoordinatorClosedError:
                return
            await backoff.failed()

    async def _lead(self, term: LeadershipTerm) -> None:
        """One assigner term: a new `Assigner` reconciles (queues, workers, due times) and runs.

        It runs until leadership is lost (the selector cancels it); an error
        ends the term and the selector gives the node back and stands again
        after a backoff.
        """
        self._assigning = True
        self._standing_changed()
        root = self._layout.root
        log.info("assigner of %s: %s (token 0x%x)", root, self._base, term.token)
        why = "returned"
        try:
            await Assigner(self._coord, self._layout, self._strategy, self._retention).run()
        except BaseException as exc:
            why = "cancelled" if isinstance(exc, anyio.get_cancelled_exc_class()) else repr(exc)
            raise
        finally:
            self._assigning = False
            self._standing_changed()
            # Once the term's work has stopped: operators (and the fault campaign) see its end.
            log.info("assigner of %s: %s stopped (%s)", root, self._base, why)

    def status_view(self) -> StatusView:
        """This worker for a status page, from memory (no request).

        State: NEW, REGISTERED, DRAINING (leaving) or CLOSED; facts: capacity,
        jobs running, whether it is the assigner, the job names it serves and
        their fleet-wide ``concurrency`` caps; with detail, its id and node name.
        """
        if self._life.phase is Phase.CLOSED:
            state = "CLOSED"
        elif self._closing:
            state = "DRAINING"
        else:
            state = "REGISTERED" if self.id else "NEW"
        limits = {
            name: job.options.concurrency
            for name, job in sorted(self._handlers.items())
            if job.options.concurrency is not None
        }
        facts = {
            "capacity": self.capacity,
            "running": self.running,
            "assigner": self._assigning,
            "jobs": sorted(self._handlers),
            "concurrency": limits,
        }
        private = {"participant_id": self._base, "worker": self.id}
        return StatusView("job_worker", self._layout.root, state, facts, private)

    def __repr__(self) -> str:
        role = " assigner" if self._assigning else ""
        state = "CLOSED" if self._closing else ("REGISTERED" if self.id else "NEW")
        return (
            f"<JobWorker {self.id or self._base} {state}{role} "
            f"running={self.running}/{self.capacity}>"
        )
