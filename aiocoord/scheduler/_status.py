"""A job's status as one record: `JobStatus`, `JobInfo`, built from whichever node holds it.

Pure: each builder turns one decoded node into a `JobInfo`.  Where a job is
decides its status: ``results/<id>`` (DONE, FAILED or CANCELLED, final),
``jobs/<id>`` (PENDING, or SCHEDULED while its `run_at` is ahead),
``assignments/<worker>/<id>`` (ASSIGNED, or RUNNING once the worker marked
it started).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import UTC, datetime

from ._records import JobRecord, ResultRecord

__all__ = ("FINAL", "JobInfo", "JobStatus", "assigned_info", "pending_info", "result_info")


class JobStatus(enum.Enum):
    """Where a job is in its life (see the state diagram in the scheduler's guide).

    PENDING (waiting for a worker), SCHEDULED (waiting for its time: a delay,
    or the backoff before a retry), ASSIGNED (given to a worker), RUNNING (its
    handler started), then one final status: DONE, FAILED or CANCELLED.
    """

    PENDING = "pending"
    SCHEDULED = "scheduled"
    ASSIGNED = "assigned"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def final(self) -> bool:
        """True for DONE, FAILED and CANCELLED: nothing changes the job any more."""
        return self in FINAL


FINAL = frozenset({JobStatus.DONE, JobStatus.FAILED, JobStatus.CANCELLED})


@dataclass(frozen=True, slots=True)
class JobInfo:
    """A job's status record, as `Scheduler.info` and `Scheduler.jobs` return it.

    `attempts` counts the runs started (a retry or a redelivery adds one);
    `worker` is the worker node that holds or ran it (None while pending);
    times are timezone-aware UTC datetimes, None when they have not happened
    (`run_at` is None for a job due at once); `error` is ``"Type: message"``
    of the last failure (a job being retried shows the error it is retried
    for), None otherwise.
    """

    id: str
    name: str
    status: JobStatus
    attempts: int
    worker: str | None
    submitted_at: datetime | None
    run_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None


def _when(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, tz=UTC)


def _error(type_: str, message: str) -> str | None:
    return f"{type_}: {message}" if type_ else None


def result_info(job_id: str, result: ResultRecord) -> JobInfo:
    """A finished job, from its result node."""
    if result.ok:
        status = JobStatus.DONE
    else:
        status = JobStatus.CANCELLED if result.cancelled else JobStatus.FAILED
    return JobInfo(
        id=job_id,
        name=result.name,
        status=status,
        attempts=result.attempts,
        worker=result.worker or None,
        submitted_at=_when(result.submitted),
        run_at=_when(result.run_at),
        started_at=_when(result.started),
        finished_at=_when(result.finished),
        error=None if result.ok else _error(result.type, result.message),
    )


def pending_info(job_id: str, job: JobRecord, now: float) -> JobInfo:
    """A job in ``jobs/``: SCHEDULED while it is not due, else PENDING."""
    status = JobStatus.PENDING if job.due(now) else JobStatus.SCHEDULED
    return _unfinished(job_id, job, status, worker=None, started=None)


def assigned_info(job_id: str, worker: str, job: JobRecord) -> JobInfo:
    """A job in a worker's queue: RUNNING once the worker marked it started."""
    status = JobStatus.ASSIGNED if job.started is None else JobStatus.RUNNING
    return _unfinished(job_id, job, status, worker=worker, started=job.started)


def _unfinished(
    job_id: str, job: JobRecord, status: JobStatus, *, worker: str | None, started: float | None
) -> JobInfo:
    return JobInfo(
        id=job_id,
        name=job.name,
        status=status,
        attempts=job.attempts,
        worker=worker,
        submitted_at=_when(job.submitted),
        run_at=_when(job.run_at),
        started_at=_when(started),
        finished_at=None,
        error=_error(job.error_type, job.error_message),
    )
