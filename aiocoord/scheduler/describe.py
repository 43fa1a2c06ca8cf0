"""A read-only look at a scheduler's queues: workers, pending, assigned per worker, results.

For tools that watch a cluster rather than take part (``aiocoord inspect``,
dashboards): `describe_scheduler` reads the layout under a scheduler's root
(``jobs/``, ``workers/``, ``assignments/<worker>/``, ``results/``,
``assigner/``) and returns a `SchedulerView`.  Nothing here writes or
watches.  A record that does not decode is reported (`NodeDataError`), never
raised.  At most `max_reads` pending jobs and results are read, so a large
backlog costs a bounded number of requests; the totals are still counted.

    view = await describe_scheduler(coord, "/app/jobs")
    view.assigner, len(view.pending), view.assigned, view.running, view.results.failed
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from ..errors import NodeDataError, NoNodeError
from ..recipes.leader_latch import describe_latch
from ..session import Coordinator
from ..zk import ZkClient
from ._lookup import bucketed
from ._records import JobRecord, JobsLayout, decode_job, decode_result, decode_worker
from ._status import JobStatus

__all__ = (
    "MAX_READS",
    "PendingJob",
    "ResultSummary",
    "SchedulerView",
    "SchedulerWorker",
    "describe_scheduler",
    "is_scheduler",
)

MAX_READS = 200

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class SchedulerWorker:
    """A live worker: its `node` name, `id`, `capacity`, the job names it runs, whether
    it is `draining` (leaving: takes no new jobs), and where it runs."""

    node: str
    id: str
    capacity: int
    jobs: tuple[str, ...]
    draining: bool
    host: str
    pid: int


@dataclass(frozen=True, slots=True)
class PendingJob:
    """A job waiting for a worker: its `id`, the handler `name` it was submitted for, and
    its `status`: PENDING, or SCHEDULED while its `run_at` (a delay, a retry's backoff) is ahead."""

    id: str
    name: str
    status: JobStatus = JobStatus.PENDING
    run_at: float | None = None


@dataclass(frozen=True, slots=True)
class ResultSummary:
    """The kept results: `count` nodes, of which `read` were read; their outcomes, and the
    ids of the `failed_jobs` among those read."""

    count: int
    read: int
    done: int
    failed: int
    unreadable: int
    failed_jobs: tuple[str, ...]
    cancelled: int = 0


@dataclass(frozen=True, slots=True)
class SchedulerView:
    """A scheduler under `path`.

    `assigner` is the id of the elected assigner (None: none elected);
    `pending` the first `MAX_READS` pending jobs by id, of `pending_count`;
    `assigned` maps each worker's node name to the job ids in its queue (only
    non-empty queues); `running` holds those of them whose handler has
    started (among the first `MAX_READS` read).  Records that do not decode
    are in `invalid_workers` (by node name) and `invalid_jobs` (by job id).
    """

    path: str
    assigner: str | None
    workers: tuple[SchedulerWorker, ...]
    pending: tuple[PendingJob, ...]
    pending_count: int
    assigned: Mapping[str, tuple[str, ...]]
    results: ResultSummary
    invalid_workers: Mapping[str, NodeDataError]
    invalid_jobs: Mapping[str, NodeDataError]
    running: frozenset[str] = frozenset()


def is_scheduler(children: Iterable[str]) -> bool:
    """Whether a node with these children is the root of a scheduler."""
    return {"jobs", "assignments"} <= set(children)


async def _names(client: ZkClient, path: str) -> list[str]:
    try:
        return sorted(await client.children(path))
    except NoNodeError:
        return []


async def _record(
    client: ZkClient, path: str, decode: Callable[[str, bytes], R]
) -> R | NodeDataError | None:
    """The record at `path`: None if there is no node, its `NodeDataError` if it does not decode."""
    try:
        data = (await client.get(path)).data
    except NoNodeError:
        return None
    try:
        return decode(path, data)
    except NodeDataError as exc:
        return exc


async def _workers(
    client: ZkClient, layout: JobsLayout
) -> tuple[list[SchedulerWorker], dict[str, NodeDataError]]:
    workers: list[SchedulerWorker] = []
    invalid: dict[str, NodeDataError] = {}
    for name in await _names(client, layout.workers):
        w = await _record(client, layout.worker(name), decode_worker)
        if isinstance(w, NodeDataError):
            invalid[name] = w
        elif w is not None:
            jobs = tuple(sorted(w.jobs))
            workers.append(SchedulerWorker(name, w.id, w.capacity, jobs, w.draining, w.host, w.pid))
    return workers, invalid


async def _results(client: ZkClient, layout: JobsLayout, max_reads: int) -> ResultSummary:
    paths = await bucketed(client, layout.results)
    names = sorted(paths)
    done = failed = cancelled = unreadable = 0
    failed_jobs: list[str] = []
    for job_id in names[:max_reads]:
        result = await _record(client, paths[job_id], decode_result)
        if result is None:
            continue
        if isinstance(result, NodeDataError):
            unreadable += 1
        elif result.ok:
            done += 1
        elif result.cancelled:
            cancelled += 1
        else:
            failed += 1
            failed_jobs.append(job_id)
    read = done + failed + cancelled + unreadable
    return ResultSummary(len(names), read, done, failed, unreadable, tuple(failed_jobs), cancelled)


async def describe_scheduler(
    target: Coordinator | ZkClient, root: str, *, max_reads: int = MAX_READS
) -> SchedulerView:
    """The scheduler under `root` as its nodes say (one read per node, in turn)."""
    client = target.client if isinstance(target, Coordinator) else target
    layout = JobsLayout(root)
    now = time.time()
    workers, invalid_workers = await _workers(client, layout)
    job_paths = await bucketed(client, layout.jobs)
    job_ids = sorted(job_paths)
    pending: list[PendingJob] = []
    invalid_jobs: dict[str, NodeDataError] = {}
    for job_id in job_ids[:max_reads]:
        job = await _record(client, job_paths[job_id], decode_job)
        if isinstance(job, NodeDataError):
            invalid_jobs[job_id] = job
        elif job is not None:
            status = JobStatus.PENDING if job.due(now) else JobStatus.SCHEDULED
            pending.append(PendingJob(job_id, job.name, status, job.run_at))
    assigned: dict[str, tuple[str, ...]] = {}
    running: set[str] = set()
    reads = 0
    for queue in await _names(client, layout.assignments):
        jobs = await _names(client, layout.queue(queue))
        if jobs:
            assigned[queue] = tuple(jobs)
        for job_id in jobs[: max(0, max_reads - reads)]:
            reads += 1
            assignment = await _record(client, layout.assignment(queue, job_id), decode_job)
            if isinstance(assignment, JobRecord) and assignment.started is not None:
                running.add(job_id)
    assigner = (await describe_latch(client, layout.assigner, layout="curator")).leader
    return SchedulerView(
        path=root,
        assigner=assigner,
        workers=tuple(workers),
        pending=tuple(pending),
        pending_count=len(job_ids),
        assigned=assigned,
        results=await _results(client, layout, max_reads),
        invalid_workers=invalid_workers,
        invalid_jobs=invalid_jobs,
        running=frozenset(running),
    )
