"""The scheduler's JSON record formats, with strict decoding.

Every node the scheduler writes holds one JSON object with a format version
``"v": 1``, read and written by the one record codec (`aiocoord._records`);
decoding checks each field and raises `NodeDataError` for anything else
(foreign data, corruption, a newer format), so one bad node fails only the job
it belongs to.  Nothing is ever pickled.  The layout is in `_layout`:

    jobs/<p>.<hh>/<id>, assignments/<worker>/<id>   JobRecord  (the same bytes move between them)
    workers/<worker>                                WorkerRecord
    results/<hh>/<id>                               ResultRecord  (done, failed or cancelled)

A job record carries its run so far (attempts, failures, deliveries, the
last error, when it is due and when it started), so whoever holds the node
(the assigner, a worker, a canceller) decides from it alone.  Fields added
after the first format are optional with a default, so older nodes still read.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from dataclasses import dataclass, replace
from typing import Any

from .._records import (
    FLAG,
    INT64,
    TEXT,
    TIMESTAMP,
    Record,
    RecordEncodeError,
    dump,
    integer,
    list_of,
    load_record,
    one_of,
    optional,
    show,
)
from ..zk.client import MAX_DATA
from ._layout import (
    FORMAT,
    MAX_CAPACITY,
    MAX_PRIORITY,
    JobsLayout,
    bucket_of,
    check_job_id,
    check_job_name,
    check_priority,
    dumps,
    job_limit,
    new_job_id,
    room_for_data,
)

__all__ = (
    "FORMAT",
    "MAX_CAPACITY",
    "JobRecord",
    "JobsLayout",
    "MAX_PRIORITY",
    "ResultRecord",
    "WorkerRecord",
    "bucket_of",
    "check_job_id",
    "check_job_name",
    "check_priority",
    "decode_job",
    "decode_result",
    "decode_worker",
    "dumps",
    "encode_job",
    "encode_job_record",
    "encode_outcome",
    "encode_result",
    "encode_worker",
    "job_key",
    "job_limit",
    "new_job_id",
    "room_for_data",
)

_COUNT = integer(0, 2**31 - 1)
_PRIORITY = integer(-MAX_PRIORITY, MAX_PRIORITY)
_MAX_ERROR = 100  # characters of an error message kept in a job record (the result keeps all)


def _load(path: str, data: bytes) -> Record:
    record = load_record(path, data)
    version = record.value("v") if "v" in record else None
    if type(version) is not int or version != FORMAT:
        raise record.error(f"unknown record format {show(version)} (this code reads {FORMAT})")
    return record


def job_key(name: str, payload: Any) -> str:
    """The digest of a job's name and payload: the same id submitted twice must match it."""
    return hashlib.sha256(dump([name, payload], sort_keys=True)).hexdigest()[:32]


# --- jobs --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A job: the handler's name, its JSON payload (validated at submit) and its run so far.

    `attempts` counts the runs started (RUNNING recorded), `failures` those
    that failed (for `retries`), `deliveries` those whose worker died while
    running it (for `max_deliveries`).  `run_at` is when it is due (None: at
    once), `started` when the current run began (set on the assignment only).
    `priority` orders due jobs (higher first) and names the job's bucket.
    """

    name: str
    payload: Any
    submitted: float
    run_at: float | None = None
    attempts: int = 0
    failures: int = 0
    deliveries: int = 0
    max_deliveries: int = 5
    started: float | None = None
    error_type: str = ""
    error_message: str = ""
    key: str = ""
    priority: int = 0

    def due(self, now: float) -> bool:
        return self.run_at is None or self.run_at <= now


def encode_job_record(job: JobRecord) -> bytes:
    """The node bytes of `job` (for a record that was already within its limit at submit)."""
    record: dict[str, Any] = {
        "v": FORMAT,
        "name": job.name,
        "payload": job.payload,
        "submitted": job.submitted,
    }
    if job.key:
        record["key"] = job.key
    if job.priority:
        record["priority"] = job.priority
    if job.run_at is not None:
        record["run_at"] = job.run_at
    if job.attempts or job.failures or job.deliveries or job.max_deliveries != 5:
        record.update(
            attempts=job.attempts,
            failures=job.failures,
            deliveries=job.deliveries,
            max_deliveries=job.max_deliveries,
        )
    if job.started is not None:
        record["started"] = job.started
    if job.error_type:
        record["error"] = {
            "type": _escaped(job.error_type)[:_MAX_ERROR],
            "message": _escaped(job.error_message)[:_MAX_ERROR],
        }
    return dumps(record)


def encode_job(
    name: str,
    payload: Any,
    limit: int = MAX_DATA,
    *,
    run_at: float | None = None,
    max_deliveries: int = 5,
    key: str = "",
    priority: int = 0,
) -> bytes:
    """A new job's bytes; `ValueError` naming `payload` if over `limit` (see `job_limit`)."""
    job = JobRecord(name, payload, time.time())
    try:
        data = encode_job_record(job)
    except RecordEncodeError as exc:
        raise RecordEncodeError(f"payload: {exc}") from exc
    # The limit is on name, payload and time: the rest has its room (`BOOKKEEPING_ROOM`).
    if len(data) > limit:
        raise ValueError(
            f"payload: the job is {len(data)} bytes as JSON; a job holds at most "
            f"{limit} bytes (ZooKeeper's 1 MB request limit, less the paths that "
            "travel with it): pass a reference to the data instead"
        )
    if run_at is None and max_deliveries == 5 and not key and not priority:
        return data
    return encode_job_record(
        replace(job, run_at=run_at, max_deliveries=max_deliveries, key=key, priority=priority)
    )


def decode_job(path: str, data: bytes) -> JobRecord:
    record = _load(path, data)
    error = record.maybe_record("error")
    return JobRecord(
        name=record.get("name", TEXT),
        payload=record.value("payload"),
        submitted=record.get("submitted", TIMESTAMP),
        run_at=record.get("run_at", optional(TIMESTAMP), None),
        attempts=record.get("attempts", _COUNT, 0),
        failures=record.get("failures", _COUNT, 0),
        deliveries=record.get("deliveries", _COUNT, 0),
        max_deliveries=record.get("max_deliveries", integer(1, 2**31 - 1), 5),
        started=record.get("started", optional(TIMESTAMP), None),
        error_type=error.get("type", TEXT) if error is not None else "",
        error_message=error.get("message", TEXT) if error is not None else "",
        key=record.get("key", TEXT, ""),
        priority=record.get("priority", _PRIORITY, 0),
    )


# --- results -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResultRecord:
    """A job's outcome: `value` when `ok`, else the error `type` and `message`.

    `cancelled` marks a job cancelled by `Scheduler.cancel` (not `ok`, type
    ``JobCancelled``).  The rest copies the job's run for `Scheduler.info`;
    it is left out when the value alone fills the node.
    """

    name: str
    ok: bool
    value: Any = None
    type: str = ""
    message: str = ""
    worker: str = ""
    finished: float = 0.0
    cancelled: bool = False
    attempts: int = 0
    submitted: float | None = None
    run_at: float | None = None
    started: float | None = None
    key: str = ""
    # What `Scheduler.retry` needs to queue the job again (the payload only if it fit).
    payload: Any = None
    has_payload: bool = False
    priority: int = 0
    max_deliveries: int = 5

    def with_job(self, job: JobRecord) -> ResultRecord:
        """This outcome with the run's bookkeeping (and the payload, for a retry) from `job`."""
        return replace(
            self,
            attempts=job.attempts,
            submitted=job.submitted,
            run_at=job.run_at,
            started=job.started,
            key=job.key,
            payload=job.payload,
            has_payload=True,
            priority=job.priority,
            max_deliveries=job.max_deliveries,
        )

    @property
    def status(self) -> str:
        return "done" if self.ok else ("cancelled" if self.cancelled else "failed")


def encode_result(result: ResultRecord, *, bookkeeping: bool = True) -> bytes:
    record: dict[str, Any] = {"v": FORMAT, "name": result.name, "worker": result.worker}
    record["finished"] = result.finished or time.time()
    record["status"] = result.status
    if result.ok:
        record["value"] = result.value
    else:
        record.update(type=result.type, message=result.message)
    if bookkeeping:
        if result.attempts:
            record["attempts"] = result.attempts
        for field in ("submitted", "run_at", "started"):
            if getattr(result, field) is not None:
                record[field] = getattr(result, field)
        if result.key:
            record["key"] = result.key
        if result.priority:
            record["priority"] = result.priority
        if result.max_deliveries != 5:
            record["max_deliveries"] = result.max_deliveries
        if result.has_payload and not result.ok:  # a done job is never retried
            record["payload"] = result.payload
    return dumps(record)


def encode_outcome(result: ResultRecord, limit: int) -> bytes:
    """The result node's bytes for any outcome: one that cannot be stored fails, saying why.

    A value the record codec refuses (a lone surrogate from `os.fsdecode`, NaN,
    ...) or a record over `limit` bytes becomes a failed result of type
    ``ValueError`` naming the reason; a failure keeps its type and message,
    with what UTF-8 cannot hold escaped (``\\udcff``).  Never raises for what a
    handler returned or raised.  The run's bookkeeping is dropped first when
    the record does not fit with it.
    """
    if not result.ok:
        result = replace(result, type=_escaped(result.type), message=_escaped(result.message))
    try:
        data = encode_result(result)
        if len(data) > limit:
            data = encode_result(result, bookkeeping=False)
    except (ValueError, TypeError) as exc:  # RecordEncodeError is a ValueError
        why = f"the result cannot be stored as JSON: {_escaped(str(exc))}"
    else:
        if len(data) <= limit:
            return data
        why = f"the result is {len(data)} bytes as JSON; a result holds at most {limit}"
    return encode_result(replace(result, ok=False, value=None, type="ValueError", message=why))


def _escaped(text: str) -> str:
    """`text` with lone surrogates written as ``\\udcff``: storable as UTF-8, still readable."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def decode_result(path: str, data: bytes) -> ResultRecord:
    record = _load(path, data)
    name, worker = record.get("name", TEXT), record.get("worker", TEXT)
    finished = record.get("finished", TIMESTAMP)
    status = record.get("status", one_of("done", "failed", "cancelled"))
    if status == "done":
        outcome = ResultRecord(name, True, record.value("value"), worker=worker, finished=finished)
    else:
        outcome = ResultRecord(
            name,
            False,
            type=record.get("type", TEXT),
            message=record.get("message", TEXT),
            worker=worker,
            finished=finished,
            cancelled=status == "cancelled",
        )
    return replace(
        outcome,
        attempts=record.get("attempts", _COUNT, 0),
        submitted=record.get("submitted", optional(TIMESTAMP), None),
        run_at=record.get("run_at", optional(TIMESTAMP), None),
        started=record.get("started", optional(TIMESTAMP), None),
        key=record.get("key", TEXT, ""),
        payload=record.value("payload") if "payload" in record else None,
        has_payload="payload" in record,
        priority=record.get("priority", _PRIORITY, 0),
        max_deliveries=record.get("max_deliveries", integer(1, 2**31 - 1), 5),
    )


# --- workers -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkerRecord:
    """A live worker: how many jobs it runs at once, which job names it has handlers for."""

    id: str
    capacity: int
    jobs: frozenset[str]
    draining: bool = False
    host: str = ""
    pid: int = 0
    limits: tuple[tuple[str, int], ...] = ()  # (name, runs at once across the fleet)

    @classmethod
    def local(
        cls,
        worker_id: str,
        capacity: int,
        jobs: frozenset[str],
        limits: tuple[tuple[str, int], ...] = (),
    ) -> WorkerRecord:
        host, pid = socket.gethostname(), os.getpid()
        return cls(worker_id, capacity, jobs, host=host, pid=pid, limits=limits)


def encode_worker(worker: WorkerRecord) -> bytes:
    return dumps(
        {
            "v": FORMAT,
            "id": worker.id,
            "capacity": worker.capacity,
            "jobs": sorted(worker.jobs),
            "draining": worker.draining,
            "host": worker.host,
            "pid": worker.pid,
            **({"limits": dict(worker.limits)} if worker.limits else {}),
        }
    )


def decode_worker(path: str, data: bytes) -> WorkerRecord:
    record = _load(path, data)
    return WorkerRecord(
        id=record.get("id", TEXT),
        capacity=record.get("capacity", integer(1, MAX_CAPACITY)),
        jobs=frozenset(record.get("jobs", list_of(TEXT))),
        draining=record.get("draining", FLAG, False),
        host=record.get("host", TEXT, ""),
        pid=record.get("pid", INT64, 0),
        limits=_limits(record),
    )


def _limits(record: Record) -> tuple[tuple[str, int], ...]:
    if "limits" not in record:
        return ()
    limits = record.value("limits")
    if not isinstance(limits, dict) or not all(
        isinstance(name, str) and type(cap) is int and 1 <= cap <= 2**31 - 1
        for name, cap in limits.items()
    ):
        raise record.error(f"limits: expected {{name: runs at once}}, got {show(limits)}")
    return tuple(sorted(limits.items()))
