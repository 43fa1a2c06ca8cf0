"""The scheduler's node layout and names: paths under one root, job ids, size limits.

<root>/jobs/<p>.<hh>/<id>        PERSISTENT  a pending or scheduled job of priority <p>
<root>/workers/<worker>          EPHEMERAL   a live worker
<root>/assignments/<worker>      PERSISTENT  (empty) the worker's queue
<root>/assignments/<worker>/<id> PERSISTENT  a job assigned to it (running once marked)
<root>/results/<hh>/<id>         PERSISTENT_WITH_TTL  the outcome: done, failed or cancelled
<root>/slots/<name>/<n>          EPHEMERAL   run slot n of a job name with a concurrency limit
<root>/assigner/                 the assigners' leader latch

Pending jobs and results are spread over `BUCKETS` buckets by a hash of the
job id (`<hh>`, two hex digits), and pending jobs also by priority (`<p>`, an
int), so that no listing grows with the backlog as a whole: a bucket holds
1/256 of it (a 1 MiB reply holds some 25,000 ids, so a listing reaches the
packet limit past six million pending jobs of one priority).  Bucket nodes are
persistent, created when the first job needs them and never removed (at most
256 per priority used).  A job's bucket follows from its id and priority,
so a pending job of the default priority is found with one read.  A worker's
queue needs no buckets: it never holds more than the worker's capacity.
"""

from __future__ import annotations

import os
import re
import threading
import time
import zlib
from dataclasses import dataclass

from .._checks import check_int, check_node_name
from .._records import dump
from ..zk.client import MAX_DATA
from ..zk.paths import join

__all__ = (
    "BOOKKEEPING_ROOM",
    "BUCKETS",
    "FORMAT",
    "MAX_PRIORITY",
    "MAX_CAPACITY",
    "JobsLayout",
    "check_job_id",
    "check_job_name",
    "check_priority",
    "job_bucket_priority",
    "dumps",
    "bucket_of",
    "job_limit",
    "new_job_id",
    "room_for_data",
)

FORMAT = 1
BUCKETS = 256
MAX_PRIORITY = 1_000_000
MAX_CAPACITY = 2**31 - 1
BOOKKEEPING_ROOM = 2048
"""Bytes a job record is kept under its limit, for what is added as it runs (attempts, errors)."""
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@=+-]{0,199}")
_NAME_RULE = "1-200 characters of letters, digits and '_.:@=+-', starting with a letter or digit"


def dumps(value: object) -> bytes:
    """Compact, strict JSON: `RecordEncodeError` (a `ValueError`) for what `load` would refuse."""
    return dump(value, ensure_ascii=False)


def check_job_id(job_id: object, field: str = "job_id") -> str:
    """A job id is a node name: 1-200 of ``[A-Za-z0-9_.:@=+-]``, not starting with punctuation."""
    return check_node_name(field, job_id, pattern=_NAME_RE, rule=_NAME_RULE)


def check_job_name(name: object, field: str = "name") -> str:
    """Job names follow the same rule as ids (they are written in worker records, as worker ids)."""
    return check_node_name(field, name, pattern=_NAME_RE, rule=_NAME_RULE)


def check_priority(priority: object) -> int:
    """A priority is an int within +-`MAX_PRIORITY` (higher runs first; 0 by default)."""
    return check_int("priority", priority, least=-MAX_PRIORITY, most=MAX_PRIORITY)


_last_id = [0, 0]  # the last id's (milliseconds, sequence) in this process
_id_lock = threading.Lock()  # a blocking façade's threads may submit too


def new_job_id() -> str:
    """32 hex digits: 12 of the time in ms, 4 of a sequence within it, 16 random.

    Ids sort in submission order (as UUIDv7 with a counter): two made by one
    process in the same millisecond still come out in the order they were
    made, so jobs of one priority submitted back to back run first-in first-out.
    """
    with _id_lock:
        ms = max(time.time_ns() // 1_000_000, _last_id[0])
        seq = _last_id[1] + 1 if ms == _last_id[0] else 0
        if seq > 0xFFFF:  # more than 65,536 in one millisecond: borrow the next one
            ms, seq = ms + 1, 0
        _last_id[:] = [ms, seq]
    return f"{ms:012x}{seq:04x}{os.urandom(8).hex()}"


def bucket_of(job_id: str) -> str:
    """The hash bucket of a job id: two hex digits (`BUCKETS` of them)."""
    return f"{zlib.crc32(job_id.encode('utf-8')) % BUCKETS:02x}"


def job_bucket_priority(bucket: str) -> int | None:
    """The priority of a ``jobs/`` bucket's name (``<p>.<hh>``), or None if it is not one."""
    head, dot, tail = bucket.partition(".")
    if not dot or len(tail) != 2:
        return None
    try:
        return int(head)
    except ValueError:
        return None


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

    def job_bucket(self, job_id: str, priority: int = 0) -> str:
        return join(self.jobs, f"{priority}.{bucket_of(job_id)}")

    def job(self, job_id: str, priority: int = 0) -> str:
        return join(self.job_bucket(job_id, priority), job_id)

    @property
    def slots(self) -> str:
        return join(self.root, "slots")

    def slot(self, name: str, index: int) -> str:
        return join(self.slots, name, str(index))

    def worker(self, worker: str) -> str:
        return join(self.workers, worker)

    def queue(self, worker: str) -> str:
        return join(self.assignments, worker)

    def assignment(self, worker: str, job_id: str) -> str:
        return join(self.assignments, worker, job_id)

    def result_bucket(self, job_id: str) -> str:
        return join(self.results, bucket_of(job_id))

    def result(self, job_id: str) -> str:
        return join(self.result_bucket(job_id), job_id)


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
    return room_for_data(*paths, layout.job(longest_id, -MAX_PRIORITY)) - BOOKKEEPING_ROOM
