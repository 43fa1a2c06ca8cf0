"""Distributed job scheduler: submit JSON jobs, assign them to workers, await their results.

See `aiocoord.scheduler.scheduler` for the protocol and node layout.
"""

from __future__ import annotations

from ._jobs import Handler as Handler
from ._payload import PayloadField as PayloadField
from ._payload import PayloadShape as PayloadShape
from ._policy import Backoff as Backoff
from ._policy import RetryBackoff as RetryBackoff
from ._status import JobInfo as JobInfo
from ._status import JobStatus as JobStatus
from ._strategies import JobRequest as JobRequest
from ._strategies import LeastLoaded as LeastLoaded
from ._strategies import RandomChoice as RandomChoice
from ._strategies import RoundRobin as RoundRobin
from ._strategies import Strategy as Strategy
from ._strategies import WorkerLoad as WorkerLoad
from ._worker import JobWorker as JobWorker
from .describe import PendingJob as PendingJob
from .describe import ResultSummary as ResultSummary
from .describe import SchedulerView as SchedulerView
from .describe import SchedulerWorker as SchedulerWorker
from .describe import describe_scheduler as describe_scheduler
from .describe import is_scheduler as is_scheduler
from .scheduler import Scheduler as Scheduler

__all__ = (
    "Backoff",
    "Handler",
    "JobInfo",
    "JobRequest",
    "JobStatus",
    "JobWorker",
    "LeastLoaded",
    "PayloadField",
    "PayloadShape",
    "RetryBackoff",
    "RandomChoice",
    "RoundRobin",
    "Scheduler",
    "Strategy",
    "WorkerLoad",
    "PendingJob",
    "ResultSummary",
    "SchedulerView",
    "SchedulerWorker",
    "describe_scheduler",
    "is_scheduler",
)
