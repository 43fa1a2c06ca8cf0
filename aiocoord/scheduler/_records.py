"""The scheduler's node layout and JSON record formats, with strict decoding.

Every node the scheduler writes holds one JSON object with a format version
``"v": 1``, read and written by the one record codec (`aiocoord.recipes._records`);
decoding checks each field and raises `NodeDataError` for anything else
(foreign data, corruption, a newer format), so one bad node fails only the job
it belongs to.  Nothing is ever pickled.

    <root>/jobs/<id>                 PERSISTENT  JobRecord      a pending job
    <root>/workers/<worker>          EPHEMERAL   WorkerRecord   a live worker
    <root>/assignments/<worker>      PERSISTENT  (empty)        the worker's queue
    <root>/assignments/<worker>/<id> PERSISTENT  JobRecord      a job assigned to it
    <root>/results/<id>              PERSISTENT_WITH_TTL  ResultRecord
    <root>/assigner/                 the assigners' leader latch
    <root>/ttl-probe-<hex>           TTL node an assigner creates and deletes once per term
"""

from __future__ import annotations

import os
import re
import socket
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any

from ..recipes._records import (
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
    show,
)
from ..zk.client import MAX_DATA
from ..zk.paths import join

__all__ = (
    "FORMAT",
    "JobRecord",
    "JobsLayout",
    "ResultRecord",
    "WorkerRecord",
    "check_job_id",
    "check_job_name",
    "decode_job",
    "decode_result",
    "decode_worker",
    "dumps",
    "encode_job",
    "job_limit",
    "room_for_data",
    "encode_outcome",
    "encode_result",
    "encode_worker",
    "new_job_id",
)

FORMAT = 1
MAX_CAPACITY = 2**31 - 1
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


def _load(path: str, data: bytes) -> Record:
    record = load_record(path, data)
    version = record.value("v") if "v" in record else None
    if type(version) is not int or version != FORMAT:
        raise record.error(f"unknown record format {show(version)} (this code reads {FORMAT})")
    return record


# --- jobs --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A job: the handler's name and its JSON payload (already validated at submit)."""

    name: str
    payload: Any
    submitted: float


def room_for_data(*paths: str) -> int:
    """The largest node data a request carrying `paths` can hold.

    ZooKeeper drops a request longer than jute.maxbuffer (`MAX_DATA`) in all:
    the data shares it with the paths, the ACL and the headers.
    """
    return MAX_DATA - 512 - sum(len(p.encode("utf-8")) + 32 for p in paths)


def job_limit(layout: JobsLayout) -> int:
    """The largest job record: the assigner's transaction carries it with three paths.

    Those are the worker's node, the assignment and the job, with worker and
    job ids of up to 200 characters (a worker's node name adds its session).
    """
    longest_id = "x" * 220
    return room_for_data(
        layout.worker(longest_id), layout.assignment(longest_id, longest_id), layout.job(longest_id)
    )


def encode_job(name: str, payload: Any, limit: int = MAX_DATA) -> bytes:
    """The job node's bytes; `ValueError` naming `payload` if over `limit` (see `job_limit`)."""
    try:
        data = dumps({"v": FORMAT, "name": name, "payload": payload, "submitted": time.time()})
    except RecordEncodeError as exc:
        raise RecordEncodeError(f"payload: {exc}") from exc
    if len(data) > limit:
        raise ValueError(
            f"payload: the job is {len(data)} bytes as JSON; a job holds at most "
            f"{limit} bytes (ZooKeeper's 1 MB request limit, less the paths that "
            "travel with it): pass a reference to the data instead"
        )
    return data


def decode_job(path: str, data: bytes) -> JobRecord:
    record = _load(path, data)
    return JobRecord(
        name=record.get("name", TEXT),
        payload=record.value("payload"),
        submitted=record.get("submitted", TIMESTAMP),
    )


# --- results -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResultRecord:
    """A job's outcome: `value` when `ok`, else the handler's error `type` and `message`."""

    name: str
    ok: bool
    value: Any = None
    type: str = ""
    message: str = ""
    worker: str = ""
    finished: float = 0.0


def encode_result(result: ResultRecord) -> bytes:
    record: dict[str, Any] = {"v": FORMAT, "name": result.name, "worker": result.worker}
    record["finished"] = result.finished or time.time()
    if result.ok:
        record.update(status="done", value=result.value)
    else:
        record.update(status="failed", type=result.type, message=result.message)
    return dumps(record)


def encode_outcome(result: ResultRecord, limit: int) -> bytes:
    """The result node's bytes for any outcome: one that cannot be stored fails, saying why.

    A value the record codec refuses (a lone surrogate from `os.fsdecode`, NaN,
    ...) or a record over `limit` bytes becomes a failed result of type
    ``ValueError`` naming the reason; a failure keeps its type and message,
    with what UTF-8 cannot hold escaped (``\\udcff``).  Never raises for what a
    handler returned or raised.
    """
    if not result.ok:
        result = replace(result, type=_escaped(result.type), message=_escaped(result.message))
    try:
        data = encode_result(result)
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
    if record.get("status", one_of("done", "failed")) == "done":
        return ResultRecord(name, True, record.value("value"), worker=worker, finished=finished)
    return ResultRecord(
        name,
        False,
        type=record.get("type", TEXT),
        message=record.get("message", TEXT),
        worker=worker,
        finished=finished,
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

    @classmethod
    def local(cls, worker_id: str, capacity: int, jobs: frozenset[str]) -> WorkerRecord:
        return cls(worker_id, capacity, jobs, host=socket.gethostname(), pid=os.getpid())


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
    )
