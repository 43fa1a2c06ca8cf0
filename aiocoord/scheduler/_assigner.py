"""The elected assigner: one term of it, from reconciliation to the loss of leadership.

Persistent recursive watches on ``jobs/``, ``workers/`` and ``assignments/``
tell the assigner of every pending job, worker and assignment as it appears
or goes, in the order the server applied them (one session delivers its
notifications in that order, and each is handed on where it is read, into one
stream), so it never lists a directory per job; the decisions are
`AssignerState`'s, the requests are made here.  Results, run slots and the
election send it nothing: it does not use them.  A persistent watch (not
recursive) on ``results/`` itself tells it when a flat outcome of before
buckets appears, with a listing of that folder then (see `_upgrade`).

Per job: one read of the pending node, then one transaction that moves it::

    check  <root>/workers/<w>            (version -1: the worker is alive)
    create <root>/assignments/<w>/<id>   (the job's bytes, unchanged)
    delete <root>/jobs/<p>.<hh>/<id>     (the version read: nobody changed it)

so a job is never both pending and assigned, never in neither place, and two
assigners (a deposed one still finishing a request) can never both move it.
The jobs ready in one step of the event loop (reads and events that
completed together are planned once, in the step after) are moved in one
transaction of those triples, up to 256 KB of job bytes; a batch refused
as a whole is retried one job at a time, to learn which job failed and
why.  Under load this saves requests and writes; a lone job costs what it
did.

A term starts with reconciliation: the watch is set first, then the queues,
the workers and the pending jobs are listed, bucket by bucket, so no reply
grows with the backlog (queues before workers: a queue
whose worker is absent from the later listing belongs to a dead worker, since
a worker creates both at once), events that arrived meanwhile are applied,
and only then is anything assigned.  Dead workers' assignments go back to the
pending jobs (`reclaim`).  Events missed while disconnected are not replayed
by the server for persistent watches, which is why a term ends on SUSPENDED
(the latch's default) and the next one reconciles again.

Jobs not due yet (``run_at`` ahead: a delay or a retry's backoff) wait in
the state's heap of due times; one timer task sleeps until the earliest and
hands them back to be read and assigned.  Due times are wall-clock times
written by the submitter (or the worker that scheduled a retry): clocks far
apart shift them by the difference.

Errors on one job (a corrupt node, a refused request) are logged and handled
for that job; they never end the term.  A pending job whose node is not a
scheduler job record is failed: its result says ``NodeDataError``.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream

from ..errors import (
    ConnectionLostError,
    CoordError,
    CoordinatorClosedError,
    NodeDataError,
    NodeExistsError,
    NoNodeError,
    ReplyTooLargeError,
    TransactionFailed,
    ZooKeeperError,
)
from ..session import Coordinator
from ..zk.types import CheckOp, CreateOp, DeleteOp, EventType, Op, WatchedEvent
from ._layout import job_bucket_priority
from ._lookup import under_each
from ._ops import Retention, ensure_all_buckets, ensure_layout, fail_job, probe_ttl, reclaim
from ._records import JobsLayout, decode_job, decode_worker
from ._state import Assign, AssignerState, Fetch, Fetched, Outcome, Resolve
from ._strategies import Strategy
from ._sweep import sweep_results
from ._upgrade import is_flat, move_flat, move_flat_job, move_flat_result

__all__ = ("Assigner",)

log = logging.getLogger(__name__)

_BATCH_BYTES = 256 * 1024  # job bytes per assignment transaction (a request is at most 1 MB)


class Assigner:
    """One term of the assigner; `run` until cancelled (leadership lost or worker leaving)."""

    def __init__(
        self, coord: Coordinator, layout: JobsLayout, strategy: Strategy, retention: Retention
    ) -> None:
        self._coord = coord
        self._client = coord.client
        self._layout = layout
        self._retention = retention
        self.state = AssignerState(strategy)
        self._tg: anyio.abc.TaskGroup | None = None
        # The read of each live worker's record that counts (a later event reads again);
        # numbered across the term, so a read begun before a worker went never counts
        # after it came back.  Entries go with their worker: node names carry the
        # session, so a long term sees many.
        self._worker_gen: dict[str, int] = {}
        self._reads = itertools.count(1)
        self._reclaiming: set[str] = set()
        self._root_parts = len(layout.root.rstrip("/").split("/"))
        self._wake = anyio.Event()  # set when the earliest due time changes
        self._armed: float | None = None  # the due time the timer sleeps until
        self._kick = anyio.Event()  # set when reads completed: plan once for them all
        self._listing_results = False  # a listing of results/ for flat outcomes in flight
        self._flat_results_again = False  # results/ changed since that listing began

    async def run(self) -> None:
        """Reconcile, then assign as events come, until cancelled (or the coordinator closes)."""
        await ensure_layout(self._client, self._layout)
        await ensure_all_buckets(self._client, self._layout)  # a few transactions, once
        async with self._watch() as events, anyio.create_task_group() as tg:
            self._tg = tg
            # Once watching: a flat job submitted while the others move is an event.
            tg.start_soon(self._move_all_flat)
            await self._reconcile()
            self._apply_buffered(events)
            if not await probe_ttl(self._client, self._layout, self._retention):
                tg.start_soon(sweep_results, self._client, self._layout, self._retention)
            tg.start_soon(self._timer)
            tg.start_soon(self._pumper)
            self._pump()
            log.info("assigner of %s reconciled: %r", self._layout.root, self.state)
            async for event in events:
                self._on_event(event)
                self._apply_buffered(events)
                self._pump_soon()

    @contextlib.asynccontextmanager
    async def _watch(self) -> AsyncIterator[MemoryObjectReceiveStream[WatchedEvent]]:
        """The watches of a term, their events in one stream in the order they were read.

        Each watch hands its events on where its notification is read (its
        callback), so events of different watches keep the server's order.
        Entering blocks until the server holds them all; leaving removes them.
        """
        layout = self._layout
        send, receive = anyio.create_memory_object_stream[WatchedEvent](math.inf)
        with send, receive:  # closed once the watches are gone: nothing is sent after
            async with contextlib.AsyncExitStack() as stack:
                for path in (layout.jobs, layout.workers, layout.assignments):
                    watch = await stack.enter_async_context(
                        self._client.watch(path, recursive=True)
                    )
                    watch.set_callback(send.send_nowait)
                # Not recursive: the children of results/ change only with a bucket or a
                # flat outcome, never with a result in its bucket.
                watch = await stack.enter_async_context(self._client.watch(layout.results))
                watch.set_callback(send.send_nowait)
                yield receive

    async def _timer(self) -> None:
        """Release scheduled jobs when they are due: one sleep until the earliest, no polling."""
        while True:
            self._wake = anyio.Event()
            self._armed = when = self.state.next_due()
            if when is None:
                await self._wake.wait()
            else:
                with anyio.move_on_after(max(0.0, when - time.time())):
                    await self._wake.wait()
            self._pump_soon()

    # --- reconciliation ------------------------------------------------------------------------

    async def _reconcile(self) -> None:
        client, layout, state = self._client, self._layout, self.state
        queues = await client.children(layout.assignments)
        held = await under_each(client, layout.assignments, queues)
        for worker, job_ids in held.items():
            for job_id in job_ids:
                state.assignment_created(worker, job_id)
        live = set(await client.children(layout.workers))
        for worker in live:
            self._load_worker(worker)
        for worker in held:
            if worker not in live:
                self._reclaim(worker)
        buckets = {
            b: p
            for b in await client.children(layout.jobs)
            if (p := job_bucket_priority(b)) is not None
        }
        listed = await under_each(client, layout.jobs, buckets)
        pending = [(job_id, buckets[bucket]) for bucket, ids in listed.items() for job_id in ids]
        # Generated ids start with the time: sorted, each priority's backlog runs in order.
        for job_id, priority in sorted(pending):
            state.job_created(job_id, priority)

    def _apply_buffered(self, events: Any) -> None:
        while True:
            try:
                event = events.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream):
                return
            self._on_event(event)

    # --- events --------------------------------------------------------------------------------

    def _on_event(self, event: WatchedEvent) -> None:
        parts = event.path.split("/")[self._root_parts :]
        kind, created = event.type, event.type is EventType.CREATED
        state = self.state
        if len(parts) == 3 and parts[0] == "jobs":
            priority = job_bucket_priority(parts[1])
            if priority is None:
                return  # not a bucket of ours
            if created:
                state.job_created(parts[2], priority)
            elif kind is EventType.DELETED:
                state.job_deleted(parts[2])
            elif kind is EventType.DATA_CHANGED:  # rewritten by a move-back: read it again
                state.job_deleted(parts[2])
                state.job_created(parts[2], priority)
        elif len(parts) == 2 and parts[0] == "jobs" and created:
            self._move_flat("jobs", parts[1])  # submitted by a client of before buckets
        elif parts == ["results"] and kind is EventType.CHILDREN_CHANGED:
            self._look_for_flat_results()  # written by a worker of before buckets, perhaps
        elif len(parts) == 2 and parts[0] == "workers":
            if created or kind is EventType.DATA_CHANGED:
                self._load_worker(parts[1])
            elif kind is EventType.DELETED:
                self._worker_gen.pop(parts[1], None)  # a read in flight no longer counts
                state.worker_down(parts[1])
                log.info("worker %s is gone", parts[1])
                self._reclaim(parts[1])
        elif len(parts) == 3 and parts[0] == "assignments":
            if created:
                state.assignment_created(parts[1], parts[2])
            elif kind is EventType.DELETED:
                state.assignment_deleted(parts[1], parts[2])

    # --- requests ------------------------------------------------------------------------------

    def _spawn(self, func: Any, *args: Any) -> None:
        assert self._tg is not None
        self._tg.start_soon(func, *args)

    def _pump(self) -> None:
        state = self.state
        actions = state.plan(now=time.time())
        if state.next_due() != self._armed:
            self._wake.set()  # the timer sleeps until another time now
        batch: list[Assign] = []
        size = 0
        for action in actions:
            if isinstance(action, Fetch):
                self._spawn(self._fetch, action.job_id)
            elif isinstance(action, Assign):
                if batch and size + len(action.job.data) > _BATCH_BYTES:
                    self._spawn(self._assign_batch, batch)
                    batch, size = [], 0
                batch.append(action)
                size += len(action.job.data)
            elif isinstance(action, Resolve):
                self._spawn(self._resolve, action.job_id)
        if batch:
            self._spawn(self._assign_batch, batch)

    async def _pumper(self) -> None:
        """Plan once for all that happened in one step of the event loop.

        Replies and watch events that arrive together (one read from the
        socket) resume their tasks in the same step; each asks for a plan
        (`_pump_soon`), and the plan made once after them all moves every job
        ready by then in one transaction, rather than each alone.
        """
        while True:
            await self._kick.wait()
            self._kick = anyio.Event()
            self._pump()

    def _pump_soon(self) -> None:
        self._kick.set()

    def _load_worker(self, worker: str) -> None:
        gen = self._worker_gen[worker] = next(self._reads)
        self.state.worker_loading(worker)
        self._spawn(self._read_worker, worker, gen)

    async def _read_worker(self, worker: str, gen: int) -> None:
        path = self._layout.worker(worker)
        try:
            node = await self._client.get(path)
            record = decode_worker(path, node.data)
        except NoNodeError:
            record = None
            gone = True
        except NodeDataError as exc:
            log.error("worker %s ignored: %s", worker, exc)
            record, gone = None, False
        except (ConnectionLostError, ZooKeeperError) as exc:
            log.warning("could not read worker %s: %s", worker, exc)
            record, gone = None, False
        else:
            gone = False
        if self._worker_gen.get(worker) != gen:
            return  # a later event reads it again
        if gone:
            del self._worker_gen[worker]
            self.state.worker_down(worker)
        else:
            if record is not None and record.id != worker:
                log.error("worker %s ignored: %s", worker, NodeDataError(path, "id mismatch"))
                record = None
            self.state.worker_up(worker, record)
        self._pump_soon()

    async def _fetch(self, job_id: str) -> None:
        path = self._layout.job(job_id, self.state.priority.get(job_id, 0))
        fetched: Fetched | None = None
        try:
            node = await self._client.get(path)
            try:
                record = decode_job(path, node.data)
                fetched = Fetched(record, node.data, node.stat.version, path)
            except NodeDataError as exc:
                log.error("pending job %s failed: %s", job_id, exc)
                version, why = node.stat.version, str(exc)
                await fail_job(
                    self._client, self._layout, self._retention, path, job_id, version, why
                )
        except NoNodeError:
            pass
        except CoordinatorClosedError:
            raise
        except CoordError as exc:
            log.warning("could not read pending job %s: %s (will retry)", job_id, exc)
            self.state.fetched(job_id, None)
            self.state.job_created(job_id)
            self._pump_soon()
            return
        self.state.fetched(job_id, fetched, now=time.time())
        self._pump_soon()

    def _ops(self, action: Assign) -> list[Op]:
        layout, w, job_id = self._layout, action.worker, action.job_id
        return [
            CheckOp(layout.worker(w), -1),
            CreateOp(layout.assignment(w, job_id), action.job.data),
            DeleteOp(action.job.path, action.job.version),
        ]

    async def _assign_batch(self, actions: list[Assign]) -> None:
        """Assign several jobs in one transaction; if it is refused, each on its own."""
        if len(actions) == 1:
            await self._assign(actions[0])
            return
        try:
            await self._client.multi([op for action in actions for op in self._ops(action)])
            outcome = Outcome.ASSIGNED
        except TransactionFailed as exc:
            log.debug("a batch of %d assignments was refused: %s", len(actions), exc)
            async with anyio.create_task_group() as tg:  # each one to learn which and why
                for action in actions:
                    tg.start_soon(self._assign, action)
            return
        except CoordinatorClosedError:
            raise
        except CoordError as exc:  # the outcome is unknown: read the jobs again
            log.debug("assigning a batch of %d: %s", len(actions), exc)
            outcome = Outcome.REFETCH
        for action in actions:
            self.state.assign_finished(action, outcome)
        self._pump_soon()

    async def _assign(self, action: Assign) -> None:
        w, job_id = action.worker, action.job_id
        ops = self._ops(action)
        try:
            await self._client.multi(ops)
            outcome = Outcome.ASSIGNED
        except TransactionFailed as exc:
            outcome = await self._failed(action, exc)
        except CoordinatorClosedError:
            raise
        except CoordError as exc:  # the outcome is unknown: read the job again
            log.debug("assigning %s to %s: %s", job_id, w, exc)
            outcome = Outcome.REFETCH
        if outcome is Outcome.ASSIGNED:
            log.debug("assigned %s to %s", job_id, w)
        self.state.assign_finished(action, outcome)
        self._pump_soon()

    async def _failed(self, action: Assign, exc: TransactionFailed) -> Outcome:
        index, cause = exc.failed_index, exc.cause
        if index == 0:
            return Outcome.WORKER_GONE
        if index == 1 and isinstance(cause, NodeExistsError):
            return Outcome.DUPLICATE
        if index == 1 and isinstance(cause, NoNodeError):
            # The worker is alive but its queue node is missing: put it back.
            try:
                await self._client.create(self._layout.queue(action.worker))
            except NodeExistsError:
                pass
            except CoordError as err:
                log.warning("could not restore the queue of %s: %s", action.worker, err)
                return Outcome.REFETCH
            return Outcome.RETRY
        if index == 2 and isinstance(cause, NoNodeError):
            return Outcome.GONE
        return Outcome.REFETCH

    async def _resolve(self, job_id: str) -> None:
        """A second submit of an id whose assignment went: drop it if the job has a result."""
        run = True
        try:
            if await self._client.exists(self._layout.result(job_id)) is not None:
                run = False
                with contextlib.suppress(NoNodeError):
                    priority = self.state.priority.get(job_id, 0)
                    await self._client.delete(self._layout.job(job_id, priority))
                log.debug("dropped the second submit of %s: it already ran", job_id)
        except CoordinatorClosedError:
            raise
        except CoordError as exc:
            log.warning("could not check job %s for a result: %s (will run it)", job_id, exc)
            run = True
        self.state.resolved(job_id, run=run)
        self._pump_soon()

    async def _move_all_flat(self) -> None:
        """Move what the flat layout of before buckets holds; a failure is logged, not raised."""
        try:
            await move_flat(self._client, self._layout, self._retention)
        except CoordinatorClosedError:
            raise
        except ReplyTooLargeError as exc:
            log.error(
                "could not list the jobs of %s written before buckets (%s): run one worker "
                "with AIOCOORD_MAX_PACKET above that size until they are moved",
                self._layout.root,
                exc,
            )
        except CoordError as exc:
            log.warning("could not move the jobs of %s into buckets: %s", self._layout.root, exc)

    def _look_for_flat_results(self) -> None:
        """List ``results/`` (its buckets and any flat outcome) once more, soon; one at a time."""
        self._flat_results_again = True
        if not self._listing_results:
            self._listing_results = True
            self._spawn(self._list_flat_results)

    async def _list_flat_results(self) -> None:
        try:
            while self._flat_results_again:
                self._flat_results_again = False
                for name in await self._client.children(self._layout.results):
                    self._move_flat("results", name)
        except CoordinatorClosedError:
            raise
        except CoordError as exc:
            log.warning("could not list %s for flat outcomes: %s", self._layout.results, exc)
        finally:
            self._listing_results = False

    def _move_flat(self, folder: str, name: str) -> None:
        if is_flat(folder, name):
            self._spawn(self._move_flat_task, folder, name)

    async def _move_flat_task(self, folder: str, name: str) -> None:
        client, layout = self._client, self._layout
        try:
            if folder == "jobs":
                await move_flat_job(client, layout, name)
            else:
                await move_flat_result(client, layout, self._retention, name)
        except CoordinatorClosedError:
            raise
        except CoordError as exc:
            log.warning("could not move %s/%s into its bucket: %s", folder, name, exc)

    def _reclaim(self, worker: str) -> None:
        if worker not in self._reclaiming:
            self._reclaiming.add(worker)
            self._spawn(self._reclaim_task, worker)

    async def _reclaim_task(self, worker: str) -> None:
        try:
            await reclaim(self._client, self._layout, worker, self._retention)
        except CoordinatorClosedError:
            raise
        except CoordError as exc:
            log.warning("could not return the jobs of worker %s: %s", worker, exc)
        finally:
            self._reclaiming.discard(worker)

    def __repr__(self) -> str:
        return f"<Assigner {self._layout.root} {self.state!r}>"
