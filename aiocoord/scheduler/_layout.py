"""The scheduler's node layout and names: paths under one root, job ids, size limits.

<root>/jobs/<id>                 PERSISTENT  a pending or scheduled job
<root>/workers/<worker>          EPHEMERAL   a live worker
<root>/assignments/<worker>      PERSISTENT  (empty) the worker's queue
<root>/assignments/<worker>/<id> PERSISTENT  a job assigned to it (running once marked)
<root>/results/<id>              PERSISTENT_WITH_TTL  the outcome: done, failed or cancelled
<root>/assigner/                 the assigners' leader latch
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from .._records import dump
from ..zk.client import MAX_DATA
from ..zk.paths import join

__all__ = (
    "BOOKKEEPING_ROOM",
    "FORMAT",
    "MAX_CAPACITY",
    "JobsLayout",
    "check_job_id",
    "check_job_name",
    "dumps",
    "job_limit",
    "new_job_id",
    "room_for_data",
)

FORMAT = 1
MAX_CAPACITY = 2**31 - 1
BOOKKEEPING_ROOM = 2048
"""Bytes a job record is kept under its limit, for what is added as it runs (attempts, errors)."""
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@=+-]{0,199}")


def dumps(value: object) -> bytes:
    """Compact, strict JSON: `RecordEncodeError` (a `ValueError`) for what `load` would refuse."""
    return dump(value, ensure_ascii=False)


def _check_name(kind: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{kind} must be a str, not {type(value).__name__}")
    if not _NAME_RE.fullmatch(value):
        raise ValueError(
            f"{kind} {value!r} is not valid: 1-200 characters of letters, digits and "
            "'_.:@=+-', starting with a letter or digit"
        )
    return value


def check_job_id(job_id: object) -> str:
    """A job id is a node name: 1-200 of ``[A-Za-z0-9_.:@=+-]``, not starting with punctuation."""
    return _check_name("job_id", job_id)


def check_job_name(name: object) -> str:
    """Job names follow the same rule as ids (they are written in worker records)."""
    return _check_name("name", name)


def new_job_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True, slots=True)
class JobsLayout:
    """The paths under one scheduler root."""

    root: str

    @property
    def jobs(self) -> str:
        return join(self.root, "jobs")

    @property
    def workers(self) -> str:
        return join(self.root, "workers")

    @property
    def assignments(self) -> str:
        return join(self.root, "assignments")

    @property
    def results(self) -> str:
        return join(self.root, "results")

    @property
    def assigner(self) -> str:
        return join(self.root, "assigner")

    @property
    def parents(self) -> tuple[str, ...]:
        return (self.jobs, self.workers, self.assignments, self.results)

    def job(self, job_id: str) -> str:
        return join(self.jobs, job_id)

    def worker(self, worker: str) -> str:
        return join(self.workers, worker)

    def queue(self, worker: str) -> str:
        return join(self.assignments, worker)

    def assignment(self, worker: str, job_id: str) -> str:
        return join(self.assignments, worker, job_id)

    def result(self, job_id: str) -> str:
        return join(self.results, job_id)


def room_for_data(*paths: str) -> int:
    """The largest node data a request carrying `paths` can hold.

    ZooKeeper drops a request longer than jute.maxbuffer (`MAX_DATA`) in all:
    the data shares it with the paths, the ACL and the headers.
    """
    return MAX_DATA - 512 - sum(len(p.encode("utf-8")) + 32 for p in paths)


def job_limit(layout: JobsLayout) -> int:
    """The largest job record: the assigner's transaction carries it with three paths.

    Those are the worker's node, the assignment and the job, with worker and
    job ids of up to 200 characters (a worker's node name adds its session),
    less `BOOKKEEPING_ROOM` for the fields a run adds.
    """
    longest_id = "x" * 220
    paths = (layout.worker(longest_id), layout.assignment(longest_id, longest_id))
    return room_for_data(*paths, layout.job(longest_id)) - BOOKKEEPING_ROOM
