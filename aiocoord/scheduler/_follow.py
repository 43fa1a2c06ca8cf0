"""Following one job: running a finished job again (`retry_job`), and its status changes (`watch_job`).

Retry: a FAILED or CANCELLED job's result keeps what its run needs (name,
payload, priority, attempts); one transaction deletes the result (the
version read) and creates the pending job again, so a retry racing another
retry, or the result's expiry, queues the job at most once.  A DONE job, or
one not finished, is refused with `JobConflict`.

Watch: the job is located, its `JobInfo` yielded when its status changed,
and then one-shot watches are set on the node that holds it and on its
result node.  A node that moved between the read and the watch is seen at
once (the watch finds it gone or changed), so no change is missed between
two looks; changes that come and go faster than a look (ASSIGNED then
RUNNING at once) may show only the later status.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator

import anyio

from ..errors import (
    ConnectionLostError,
    CoordinatorClosedError,
    JobConflict,
    NodeDataError,
    NoNodeError,
    TransactionFailed,
)
from ..session import Coordinator
from ..zk import Watch
from ..zk.types import CreateOp, DeleteOp, Op
from ._lookup import Found, info_of, locate
from ._ops import ensure_buckets
from ._records import JobRecord, JobsLayout, decode_result, encode_job_record
from ._status import JobInfo, JobStatus

__all__ = ("retry_job", "watch_job")


def _missing(layout: JobsLayout, job_id: str) -> NoNodeError:
    return NoNodeError(
        f"no job {job_id!r} (never submitted, or its result expired)", path=layout.result(job_id)
    )


async def retry_job(coord: Coordinator, layout: JobsLayout, job_id: str) -> None:
    """Queue a FAILED or CANCELLED job again; see the module docstring."""
    client = coord.client
    for _ in range(10):
        found = await locate(client, layout, job_id)
        if found is None:
            raise _missing(layout, job_id)
        if found.where != "result":
            status = info_of(job_id, found).status
            raise JobConflict(
                job_id, f"and is {status.name}: only a FAILED or CANCELLED job can be retried"
            )
        result = decode_result(found.path, found.data)
        if result.ok:
            raise JobConflict(job_id, "and is DONE: only a FAILED or CANCELLED job can be retried")
        if not result.has_payload or not result.name:
            raise JobConflict(
                job_id,
                "but its result does not hold its payload (it failed unreadable, or the "
                "payload did not fit beside the error): submit it again under a new id",
            )
        job = JobRecord(
            result.name,
            result.payload,
            result.submitted if result.submitted is not None else time.time(),
            attempts=result.attempts,
            max_deliveries=result.max_deliveries,
            key=result.key,
            priority=result.priority,
        )
        pending = layout.job(job_id, job.priority)
        data = encode_job_record(job)
        ops: list[Op] = [DeleteOp(found.path, found.version), CreateOp(pending, data)]
        try:
            await client.multi(ops)
            return
        except TransactionFailed as exc:
            if exc.failed_index == 1 and isinstance(exc.cause, NoNodeError):
                await ensure_buckets(client, layout, job_id, job.priority)
            elif exc.failed_index == 1:  # a second submit of the id waits: it runs instead
                with contextlib.suppress(NoNodeError):
                    await client.delete(found.path, version=found.version)
                return
            # Else the result changed or went (another retry, its expiry): look again.
    raise JobConflict(job_id, "kept changing while it was retried; try again")


async def watch_job(coord: Coordinator, layout: JobsLayout, job_id: str) -> AsyncIterator[JobInfo]:
    """`JobInfo` at each status change of `job_id`, ending with its final status."""
    client = coord.client
    last: JobStatus | None = None
    seen = False
    while True:
        try:
            found = await locate(client, layout, job_id)
            if found is None:
                if not seen:
                    raise _missing(layout, job_id)
                # Between two places (or its result expired at once): look again shortly.
                await anyio.sleep(0.05)
                continue
            seen = True
            info = info_of(job_id, found)
            if info.status is not last:
                last = info.status
                yield info
            if info.status.final:
                return
            await _until_moved(coord, layout, job_id, found)
        except (CoordinatorClosedError, NoNodeError, NodeDataError):
            raise
        except ConnectionLostError:
            await coord.client.session.wait_connected()


async def _until_moved(coord: Coordinator, layout: JobsLayout, job_id: str, found: Found) -> None:
    """Return once the node that held the job changed or went, or its result appeared."""
    client = coord.client
    stat, held = await client.exists_watch(found.path)
    try:
        if stat is None or stat.version != found.version:
            return
        done, result = await client.exists_watch(layout.result(job_id))
        try:
            if done is not None:
                return
            async with anyio.create_task_group() as tg:

                async def first(watch: Watch) -> None:
                    await watch.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(first, held)
                tg.start_soon(first, result)
        finally:
            client.remove_watch(result)
    finally:
        client.remove_watch(held)
