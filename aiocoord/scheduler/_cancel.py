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
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from ..errors import NodeDataError, NoNodeError, TransactionFailed
from ..zk.client import ZkClient
from ..zk.types import DeleteOp
from ._lookup import info_of, locate
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
        log.info("cancelled job %s (it was %s)", job_id, found.where)
        return JobStatus.CANCELLED
    found = await locate(client, layout, job_id)
    if found is None:
        raise NoNodeError(f"no job {job_id!r}", path=layout.job(job_id))
    return info_of(job_id, found).status
