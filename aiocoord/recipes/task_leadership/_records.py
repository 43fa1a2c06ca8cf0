"""The records of task leadership: `Worker`, the JSON in worker and leader nodes, their reads.

A worker node holds ``{"id", "version", "host", "pid", "started"}``; a leader
node ``{"id", "version"}`` of the worker that leads the task.  Both are UTF-8
JSON objects, read and written by the record codec (`aiocoord._records`);
extra keys are allowed (newer writers may add some), missing or ill-typed ones
make the node's data invalid: `NodeDataError`, never a crash.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid

from aiocoord.errors import (
    ConfigError,
    NodeDataError,
    NoNodeError,
)
from aiocoord.zk import ZkClient

from ..._checks import check_node_name
from ..._records import (
    INT64,
    TEXT,
    TIMESTAMP,
    Invalid,
    Reader,
    dump,
    load_record,
    show,
)
from ._choice import VersionKey
from ._versions import maven_version_key

__all__ = (
    "Worker",
    "decode_leader",
    "decode_worker",
    "encode_leader",
    "encode_worker",
    "read_leader",
)

log = logging.getLogger("aiocoord.recipes.task_leadership")


class Worker:
    """Who this process is in task leadership: its version, a unique id and its host.

    ``Worker(version="2.4.1")`` fills `id` with a random uuid and `host` with
    this machine's name; `pid` and `started` (Unix time) are recorded too.
    The version is checked with Maven's ordering (`maven_version_key`), which
    refuses an empty text or one with whitespace or control characters:
    `ConfigError` naming ``version``.  `task_leadership()` checks it again with
    its own `version_key`.  Workers read back from ZooKeeper (`workers()`) are
    instances too.
    """

    __slots__ = ("host", "id", "pid", "started", "version")

    version: str
    id: str
    host: str
    pid: int
    started: float

    def __init__(self, version: str, id: str | None = None, host: str | None = None) -> None:
        maven_version_key(version)  # ConfigError("version", ...) on a bad version
        self.version = version
        self.id = str(uuid.uuid4()) if id is None else check_node_name("id", id)
        if host is None:
            host = socket.gethostname()
        elif not isinstance(host, str):
            raise ConfigError("host", f"must be a str, not {type(host).__name__}")
        elif not host.isascii():
            try:
                host.encode("utf-8")  # a lone surrogate would make the record unreadable
            except UnicodeEncodeError:
                raise ConfigError("host", f"{host!r} is not valid Unicode text") from None
        self.host = host
        self.pid = os.getpid()
        self.started = time.time()

    @classmethod
    def _restore(cls, id: str, version: str, host: str, pid: int, started: float) -> Worker:
        """A worker as recorded in ZooKeeper (already validated by `decode_worker`)."""
        worker = cls.__new__(cls)
        worker.id, worker.version, worker.host = id, version, host
        worker.pid, worker.started = pid, started
        return worker

    def __setattr__(self, name: str, value: object) -> None:
        if hasattr(self, name):
            raise AttributeError(f"Worker.{name} is read-only")
        object.__setattr__(self, name, value)

    def _fields(self) -> tuple[str, str, str, int, float]:
        return (self.id, self.version, self.host, self.pid, self.started)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Worker):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return f"<Worker {self.id} version={self.version} host={self.host} pid={self.pid}>"


def _dumps(record: dict[str, object]) -> bytes:
    return dump(record, sort_keys=True)


def encode_worker(worker: Worker) -> bytes:
    """The worker node's data: the same bytes for the same `Worker`, so it can recognise its own."""
    return _dumps(
        {
            "id": worker.id,
            "version": worker.version,
            "host": worker.host,
            "pid": worker.pid,
            "started": worker.started,
        }
    )


def encode_leader(worker: Worker) -> bytes:
    """The leader node's data: who leads, with which version."""
    return _dumps({"id": worker.id, "version": worker.version})


def _orderable(version_key: VersionKey) -> Reader[str]:
    def read(value: object) -> str:
        version = TEXT(value)
        try:
            version_key(version)
        except Exception as exc:
            raise Invalid(f"{show(version)} cannot be ordered: {exc}") from None
        return version

    return read


def decode_worker(path: str, name: str, data: bytes, version_key: VersionKey) -> Worker:
    """The `Worker` recorded at `path` (node `name`); `NodeDataError` if the record is invalid."""
    record = load_record(path, data)
    worker_id = record.get("id", TEXT)
    if worker_id != name:
        raise record.error(f"id {show(worker_id)} does not match the node name {name!r}")
    return Worker._restore(
        worker_id,
        record.get("version", _orderable(version_key)),
        record.get("host", TEXT),
        record.get("pid", INT64),
        record.get("started", TIMESTAMP),
    )


def decode_leader(path: str, data: bytes) -> tuple[str, str]:
    """``(worker id, version)`` recorded in a leader node; `NodeDataError` if invalid."""
    record = load_record(path, data)
    return record.get("id", TEXT), record.get("version", TEXT)


# --- reads ----------------------------------------------------------------------------------


async def read_leader(client: ZkClient, path: str) -> tuple[str, str, int] | None:
    """(worker id, version, czxid) recorded at a leader node; None if absent or invalid."""
    try:
        node = await client.get(path)
    except NoNodeError:
        return None
    try:
        holder, version = decode_leader(path, node.data)
    except NodeDataError:
        return None
    return holder, version, node.stat.czxid
