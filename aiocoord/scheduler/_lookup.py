"""Finding jobs for the client side: where one job is now, and a paginated listing.

A job is in exactly one of ``jobs/``, a worker's queue or ``results/`` (a
finished job may still have its assignment for a moment: the result wins).
Its bucket follows from its id (and, pending, its priority): a pending job of
the default priority is one read; of another priority, a listing of the
bucket names (bounded: 256 per priority used) and one read per priority.
`locate` looks in that order and looks again when the job moved between two
reads; a job with a worker costs a listing of the queues and one read per
queue, so this is for monitoring and cancelling, not for polling (use
`Scheduler.result`).  `list_jobs` lists the directories that can hold the
statuses asked for, bucket by bucket (no reply grows with the backlog), and
reads the nodes in id order, in small concurrent batches, so a page of
`limit` jobs costs about `limit` reads and a listing of every bucket.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass

import anyio

from ..errors import CoordError, NodeDataError, NoNodeError
from ..zk.client import ZkClient
from ._layout import bucket_of, job_bucket_priority
from ._records import JobsLayout, decode_job, decode_result
from ._status import JobInfo, JobStatus, assigned_info, pending_info, result_info

__all__ = (
    "at_once",
    "Found",
    "assignments_of",
    "bucketed",
    "find_pending",
    "info_of",
    "list_jobs",
    "locate",
)

log = logging.getLogger(__name__)

_BATCH = 32
_RESULTS = frozenset({JobStatus.DONE, JobStatus.FAILED, JobStatus.CANCELLED})
_PENDING = frozenset({JobStatus.PENDING, JobStatus.SCHEDULED})
_ASSIGNED = frozenset({JobStatus.ASSIGNED, JobStatus.RUNNING})


@dataclass(frozen=True, slots=True)
class Found:
    """One node that holds a job: `where` is ``"result"``, ``"pending"`` or ``"assigned"``."""

    where: str
    path: str
    data: bytes
    version: int
    worker: str | None = None


async def at_once(calls: Iterable[Callable[[], Awaitable[None]]]) -> None:
    """Await `calls` concurrently; the first `CoordError` cancels the rest and is raised alone.

    Alone, not in an exception group: a caller's ``except ConnectionLostError``
    must catch a listing that failed because ZooKeeper is away.
    """
    errors: list[CoordError] = []

    async def run(call: Callable[[], Awaitable[None]], scope: anyio.CancelScope) -> None:
        try:
            await call()
        except CoordError as exc:
            errors.append(exc)
            scope.cancel()

    async with anyio.create_task_group() as tg:
        for call in calls:
            tg.start_soon(run, call, tg.cancel_scope)
    if errors:
        raise errors[0]


async def _get(client: ZkClient, where: str, path: str, worker: str | None = None) -> Found | None:
    try:
        node = await client.get(path)
    except NoNodeError:
        return None
    return Found(where, path, node.data, node.stat.version, worker)


async def _children(client: ZkClient, path: str) -> list[str]:
    try:
        return await client.children(path)
    except NoNodeError:
        return []


async def locate(client: ZkClient, layout: JobsLayout, job_id: str) -> Found | None:
    """The node that holds `job_id` now, or None if nothing is known of it."""
    for _ in range(3):  # a job that moved while we looked is found the next time
        found = await _get(client, "result", layout.result(job_id))
        found = found or await find_pending(client, layout, job_id)
        if found is not None:
            return found
        hits = await assignments_of(client, layout, job_id)
        if hits:
            return hits[0]
    return None


async def find_pending(client: ZkClient, layout: JobsLayout, job_id: str) -> Found | None:
    """The pending node of `job_id`, whatever its priority, or None."""
    found = await _get(client, "pending", layout.job(job_id))
    if found is not None:
        return found
    hh = bucket_of(job_id)
    for bucket in await _children(client, layout.jobs):
        priority = job_bucket_priority(bucket)
        if priority is not None and priority != 0 and bucket.endswith(f".{hh}"):
            found = await _get(client, "pending", layout.job(job_id, priority))
            if found is not None:
                return found
    return None


async def under_each(client: ZkClient, parent: str, names: Iterable[str]) -> dict[str, list[str]]:
    """The children of each of `names` under `parent`, listed at once (32 at a time).

    A name whose node is gone meanwhile is left out; the first `CoordError`
    cancels the rest and is raised alone (`at_once`).
    """
    out: dict[str, list[str]] = {}
    limiter = anyio.CapacityLimiter(_BATCH)

    def one(name: str) -> Callable[[], Awaitable[None]]:
        async def read() -> None:
            async with limiter:
                with contextlib.suppress(NoNodeError):
                    out[name] = await client.children(f"{parent}/{name}")

        return read

    await at_once(one(name) for name in names)
    return out


async def bucketed(client: ZkClient, parent: str) -> dict[str, str]:
    """Every node two levels under `parent` (its buckets' children): name -> path."""
    listed = await under_each(client, parent, await _children(client, parent))
    return {child: f"{parent}/{name}/{child}" for name, kids in listed.items() for child in kids}


async def assignments_of(client: ZkClient, layout: JobsLayout, job_id: str) -> list[Found]:
    """Every worker's assignment of `job_id` (one read per worker queue, at once)."""
    hits: list[Found] = []

    def look(worker: str) -> Callable[[], Awaitable[None]]:
        async def read() -> None:
            hit = await _get(client, "assigned", layout.assignment(worker, job_id), worker)
            if hit is not None:
                hits.append(hit)

        return read

    await at_once(look(w) for w in await _children(client, layout.assignments))
    return hits


def info_of(job_id: str, found: Found, now: float | None = None) -> JobInfo:
    """The `JobInfo` that `found` describes; `NodeDataError` if its record does not decode."""
    if found.where == "result":
        return result_info(job_id, decode_result(found.path, found.data))
    job = decode_job(found.path, found.data)
    if found.where == "pending":
        return pending_info(job_id, job, time.time() if now is None else now)
    return assigned_info(job_id, found.worker or "", job)


async def _where(
    client: ZkClient, layout: JobsLayout, status: JobStatus | None
) -> dict[str, tuple[str, str, str | None]]:
    """Every job id the listing may show: id -> (where, path, worker); results win."""
    found: dict[str, tuple[str, str, str | None]] = {}
    if status is None or status in _ASSIGNED:
        workers = await _children(client, layout.assignments)
        for worker, ids in sorted((await under_each(client, layout.assignments, workers)).items()):
            for job_id in ids:
                found[job_id] = ("assigned", layout.assignment(worker, job_id), worker)
    if status is None or status in _PENDING:
        for job_id, path in (await bucketed(client, layout.jobs)).items():
            found[job_id] = ("pending", path, None)
    if status is None or status in _RESULTS:
        for job_id, path in (await bucketed(client, layout.results)).items():
            found[job_id] = ("result", path, None)
    return found


def _read(
    client: ZkClient,
    place: tuple[str, str, str | None],
    job_id: str,
    nodes: dict[str, Found | None],
) -> Callable[[], Awaitable[None]]:
    async def read() -> None:
        where, path, worker = place
        nodes[job_id] = await _get(client, where, path, worker)

    return read


async def list_jobs(
    client: ZkClient,
    layout: JobsLayout,
    *,
    status: JobStatus | None,
    limit: int | None,
    after: str | None,
) -> AsyncIterator[JobInfo]:
    """Jobs in id order after `after`, with `status` if given, at most `limit` of them.

    A node that does not decode is logged and left out (it fails only its own
    job); a job that moves while listed shows the status read.
    """
    places = await _where(client, layout, status)
    ids = sorted(i for i in places if after is None or i > after)
    shown = 0
    for start in range(0, len(ids), _BATCH):
        batch = ids[start : start + _BATCH]
        nodes: dict[str, Found | None] = {}
        await at_once(_read(client, places[i], i, nodes) for i in batch)
        now = time.time()
        for job_id in batch:
            found = nodes.get(job_id)
            if found is None:
                continue  # moved on since the listing
            try:
                info = info_of(job_id, found, now)
            except NodeDataError as exc:
                log.warning("job %s left out of the listing: %s", job_id, exc)
                continue
            if status is not None and info.status is not status:
                continue
            yield info
            shown += 1
            if limit is not None and shown >= limit:
                return
