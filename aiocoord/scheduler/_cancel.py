"""Cancelling a job: one transaction that records CANCELLED and removes the job from where it is.

The transaction creates ``results/<id>`` (status cancelled) and deletes the
job's node, ``jobs/<id>`` or ``assignments/<worker>/<id>``, at once.  The
result's creation is the decision point every end of a job goes through
(`finish_with`): if the worker's result (or a retry, or another cancel) came
first, the transaction fails and the cancel reports the status that won, so a
cancel racing a completion ends in one final status, the same for every
reader.  A worker whose assignment is deleted cancels the handler's scope
(its watch sees the deletion), and its own result write then finds the node
taken.  A job moved between the read and the transaction is looked up again.
The same id submitted again while it runs waits in ``jobs/`` beside its
assignment: cancelling that copy also removes the assignment, so the run
is cancelled too.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import replace

from ..errors import NodeDataError, NoNodeError, TransactionFailed
from ..zk.client import ZkClient
from ..zk.types import DeleteOp
from ._lookup import assignments_of, info_of, locate
from ._ops import Retention, finish_with
from ._records import JobsLayout, ResultRecord, decode_job, encode_result
from ._status import JobStatus

__all__ = ("cancel_job",)

log = logging.getLogger(__name__)


async def cancel_job(
    client: ZkClient, layout: JobsLayout, retention: Retention, job_id: str
) -> JobStatus:
    """Cancel `job_id`; its final status (CANCELLED, or the one that came first).

    `NoNodeError` if nothing is known of the job (never submitted, or its
    result expired).
    """
    for _ in range(20):  # each round sees the job move on; it has only so many places to go
        found = await locate(client, layout, job_id)
        if found is None:
            raise NoNodeError(
                f"no job {job_id!r} (never submitted, or its result expired)",
                path=layout.job(job_id),
            )
        if found.where == "result":
            return info_of(job_id, found).status
        outcome = ResultRecord(
            "",
            ok=False,
            type="JobCancelled",
            message="cancelled by request",
            worker=found.worker or "",
            finished=time.time(),
            cancelled=True,
        )
        try:
            job = decode_job(found.path, found.data)
        except NodeDataError as exc:
            log.warning("cancelling job %s, whose record is unreadable: %s", job_id, exc)
        else:
            outcome = replace(outcome.with_job(job), name=job.name)
        data = encode_result(outcome)
        try:
            await finish_with(client, layout, retention, job_id, data, [DeleteOp(found.path)])
        except TransactionFailed as exc:
            log.debug("cancel of %s lost a race (%s); looking again", job_id, exc)
            continue
        if found.where == "pending":
            await _stop_runs(client, layout, job_id)
        log.info("cancelled job %s (it was %s)", job_id, found.where)
        return JobStatus.CANCELLED
    found = await locate(client, layout, job_id)
    if found is None:
        raise NoNodeError(f"no job {job_id!r}", path=layout.job(job_id))
    return info_of(job_id, found).status


async def _stop_runs(client: ZkClient, layout: JobsLayout, job_id: str) -> None:
    """Remove the assignments of a job cancelled while a second submit of it waited.

    Its result says CANCELLED already: the worker's watch cancels the run.
    """
    for run in await assignments_of(client, layout, job_id):
        with contextlib.suppress(NoNodeError):
            await client.delete(run.path)
