"""The scheduler's writes shared by the assigner and the workers.

Each is safe to repeat: a create that finds its node already there, or a
delete that finds it gone, means someone (perhaps this same call before a
connection loss) already did it.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TypeVar

import anyio
import anyio.lowlevel

from ..errors import (
    BadVersionError,
    ConnectionLostError,
    NodeDataError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    TransactionFailed,
    ZooKeeperError,
)
from ..session import Coordinator
from ..zk.client import ZkClient
from ..zk.types import CreateMode, CreateOp, DeleteOp, Op, SetDataOp
from ._layout import BUCKETS
from ._records import (
    JobRecord,
    JobsLayout,
    ResultRecord,
    decode_job,
    encode_job_record,
    encode_outcome,
    encode_result,
    room_for_data,
)

__all__ = (
    "Retention",
    "ensure_all_buckets",
    "ensure_buckets",
    "ensure_layout",
    "fail_job",
    "finish_with",
    "move_back",
    "probe_ttl",
    "reclaim",
    "retry_connection",
    "write_result",
)

log = logging.getLogger(__name__)

_BUCKETS_PER_MULTI = 128

T = TypeVar("T")

UNIMPLEMENTED = -6  # the server's answer to a TTL create without extendedTypesEnabled


class Retention:
    """How long results are kept, and whether the server can do it with TTL nodes."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.ttl_supported: bool | None = None  # None: not known yet

    @property
    def ms(self) -> int:
        return max(1, int(self.seconds * 1000))

    def unsupported(self) -> None:
        if self.ttl_supported is not False:
            log.warning(
                "the ZooKeeper server refuses TTL nodes (extendedTypesEnabled=false): "
                "results are persistent and the assigner sweeps them after %.0fs",
                self.seconds,
            )
        self.ttl_supported = False

    def create_op(self, path: str, data: bytes) -> CreateOp:
        """The op that creates a result node: a TTL node unless the server refuses them."""
        if self.ttl_supported is False:
            return CreateOp(path, data)
        return CreateOp(path, data, mode=CreateMode.PERSISTENT_WITH_TTL, ttl=self.ms)

    async def create_ttl(self, client: ZkClient, path: str, data: bytes = b"") -> bool:
        """Create `path` as a TTL node; False (and noted here) if the server refuses them."""
        try:
            await client.create(path, data, mode=CreateMode.PERSISTENT_WITH_TTL, ttl=self.ms)
        except ZooKeeperError as exc:
            if exc.code != UNIMPLEMENTED:
                raise
            self.unsupported()
            return False
        self.ttl_supported = True
        return True


async def retry_connection(coord: Coordinator, op: Callable[[], Awaitable[T]]) -> T:
    """Run an idempotent write until it gets an answer, waiting out connection losses."""
    while True:
        try:
            return await op()
        except ConnectionLostError:
            await anyio.lowlevel.checkpoint()
            await coord.client.session.wait_connected()


async def ensure_layout(client: ZkClient, layout: JobsLayout) -> None:
    """Create the root and its four persistent parents (never containers: they may go empty)."""
    await client.ensure_path(layout.root, mode=CreateMode.PERSISTENT)
    for path in layout.parents:
        with contextlib.suppress(NodeExistsError):
            await client.create(path)


async def ensure_all_buckets(client: ZkClient, layout: JobsLayout) -> None:
    """Create the buckets of results and of default-priority jobs that are missing.

    Done by each new assigner (two listings when they exist), so that a submit
    or a result does not pay for creating its bucket; other priorities' buckets
    are made by the first job that needs them.  The missing ones are created
    in a few transactions, not one write each (each a disk sync on the
    server); a transaction refused because a submit made one of its buckets
    meanwhile is tried again without it.
    """
    for attempt in range(4):
        missing: list[str] = []
        for parent, prefix in ((layout.jobs, "0."), (layout.results, "")):
            have = set(await client.children(parent))
            missing += [
                f"{parent}/{prefix}{i:02x}"
                for i in range(BUCKETS)
                if f"{prefix}{i:02x}" not in have
            ]
        if not missing:
            return
        refused = False
        for start in range(0, len(missing), _BUCKETS_PER_MULTI):
            chunk = missing[start : start + _BUCKETS_PER_MULTI]
            if attempt == 3:  # still racing: one at a time
                for path in chunk:
                    with contextlib.suppress(NodeExistsError):
                        await client.create(path)
                continue
            try:
                await client.multi([CreateOp(path) for path in chunk])
            except TransactionFailed:
                refused = True
        if not refused:
            return


async def ensure_buckets(
    client: ZkClient, layout: JobsLayout, job_id: str, priority: int | None = 0
) -> None:
    """Create the buckets `job_id` goes in (its pending one unless `priority` is None).

    The layout above them is made only if they cannot be created without it.
    """
    buckets = [layout.result_bucket(job_id)]
    if priority is not None:
        buckets.append(layout.job_bucket(job_id, priority))
    for path in buckets:
        try:
            await client.create(path)
        except NodeExistsError:
            pass
        except NoNodeError:
            await ensure_layout(client, layout)
            with contextlib.suppress(NodeExistsError):
                await client.create(path)


async def probe_ttl(client: ZkClient, layout: JobsLayout, retention: Retention) -> bool:
    """Find out once whether the server accepts TTL nodes (a create and a delete)."""
    if retention.ttl_supported is None:
        probe = f"{layout.root}/ttl-probe-{uuid.uuid4().hex[:12]}"
        if await retention.create_ttl(client, probe):
            await client.delete(probe)
    return bool(retention.ttl_supported)


async def write_result(
    client: ZkClient, layout: JobsLayout, retention: Retention, job_id: str, data: bytes
) -> bool:
    """Create the result node (a TTL node if the server allows); False if it already existed."""
    path = layout.result(job_id)
    for _ in range(4):
        try:
            if retention.ttl_supported is False:
                await client.create(path, data)
            elif not await retention.create_ttl(client, path, data):
                continue
            return True
        except NodeExistsError:
            return False  # a run before this one (or our own lost reply) recorded it first
        except NoNodeError:
            await ensure_buckets(client, layout, job_id, None)
    raise NoNodeError("the scheduler's results node keeps vanishing", path=layout.results)


async def finish_with(
    client: ZkClient,
    layout: JobsLayout,
    retention: Retention,
    job_id: str,
    data: bytes,
    others: list[Op],
) -> None:
    """Create the result node and apply `others` in one transaction (`TransactionFailed`).

    The result's creation is the one decision point of a job's end: whoever
    creates ``results/<id>`` first decides its final status, and the other
    operations (removing the job from where it was) happen with it or not at all.
    """
    path = layout.result(job_id)
    for _ in range(3):
        try:
            await client.multi([retention.create_op(path, data), *others])
            return
        except TransactionFailed as exc:
            if exc.failed_index == 0 and isinstance(exc.cause, NoNodeError):
                await ensure_buckets(client, layout, job_id, None)  # its bucket is new
                continue
            if exc.code != UNIMPLEMENTED or exc.failed_index != 0:
                raise
            if retention.ttl_supported is False:
                raise
            retention.unsupported()
        except ZooKeeperError as exc:
            if exc.code != UNIMPLEMENTED or retention.ttl_supported is False:
                raise
            retention.unsupported()


async def fail_job(
    client: ZkClient,
    layout: JobsLayout,
    retention: Retention,
    path: str,
    job_id: str,
    version: int,
    why: str,
) -> None:
    """Fail a pending job (at `path`) whose node cannot be read: record the error, remove the node."""
    record = ResultRecord("", ok=False, type="NodeDataError", message=why, worker="")
    await write_result(client, layout, retention, job_id, encode_result(record))
    with contextlib.suppress(NoNodeError, BadVersionError):  # changed: whoever did decides
        await client.delete(path, version=version)


async def move_back(
    client: ZkClient,
    layout: JobsLayout,
    worker: str,
    job_id: str,
    *,
    died: Retention | None = None,
) -> str:
    """Return one assignment to the pending jobs; what happened: requeued, done, poisoned or gone.

    A job that already has a result (its worker stopped between writing it and
    deleting the assignment) is not run again: the assignment is just removed.
    If the same id was submitted again meanwhile, the original data wins.
    `died` (the retention of results) says the worker died: a job it was
    running counts a delivery, and one at its `max_deliveries` is failed as
    poison (``PoisonJob``) instead of sent to another worker.  A worker that
    hands its jobs back (leaving) counts none.
    """
    path = layout.assignment(worker, job_id)
    try:
        node = await client.get(path)
    except NoNodeError:
        return "gone"
    version = node.stat.version
    if await client.exists(layout.result(job_id)) is not None:
        try:
            await client.delete(path, version=version)
        except (NoNodeError, BadVersionError):
            return "gone"
        return "done"
    data = node.data
    try:
        record = decode_job(path, data)
    except NodeDataError:
        record = None  # moved back as it is: the assigner fails it when it reads it
    if record is not None and record.started is not None:
        deliveries = record.deliveries + (1 if died is not None else 0)
        record = replace(record, started=None, deliveries=deliveries)
        if died is not None and deliveries >= record.max_deliveries:
            return await _poison(client, layout, died, job_id, record, path, version, worker)
        data = encode_job_record(record)
    priority = record.priority if record is not None else 0
    job = layout.job(job_id, priority)
    try:
        try:
            await client.multi([CreateOp(job, data), DeleteOp(path, version)])
        except TransactionFailed as exc:
            if exc.failed_index != 0 or not isinstance(exc.cause, NoNodeError):
                raise
            await ensure_buckets(client, layout, job_id, priority)  # its bucket is new
            await client.multi([CreateOp(job, data), DeleteOp(path, version)])
    except TransactionFailed as exc:
        if exc.failed_index != 0 or not isinstance(exc.cause, NodeExistsError):
            return "gone"  # the assignment changed or went: someone else handled it
        try:
            await client.multi([SetDataOp(job, data), DeleteOp(path, version)])
        except TransactionFailed:
            return "gone"
    return "requeued"


async def _poison(
    client: ZkClient,
    layout: JobsLayout,
    retention: Retention,
    job_id: str,
    record: JobRecord,
    path: str,
    version: int,
    worker: str,
) -> str:
    why = (
        f"its worker died while running it {record.deliveries} times "
        f"(max_deliveries={record.max_deliveries}): not sent to another worker"
    )
    outcome = ResultRecord(record.name, False, type="PoisonJob", message=why, worker=worker)
    data = encode_outcome(outcome.with_job(record), room_for_data(layout.result(job_id)))
    try:
        await finish_with(client, layout, retention, job_id, data, [DeleteOp(path, version)])
    except TransactionFailed:
        return "gone"
    log.warning("job %s failed as poison: %s", job_id, why)
    return "poisoned"


async def _move_into(
    results: list[str],
    client: ZkClient,
    layout: JobsLayout,
    worker: str,
    job_id: str,
    retention: Retention,
) -> None:
    results.append(await move_back(client, layout, worker, job_id, died=retention))


async def reclaim(client: ZkClient, layout: JobsLayout, worker: str, retention: Retention) -> int:
    """Move every assignment of a dead worker back, then remove its queue node."""
    moved = 0
    queue = layout.queue(worker)
    for _ in range(3):
        try:
            names = await client.children(queue)
        except NoNodeError:
            return moved
        results: list[str] = []
        async with anyio.create_task_group() as tg:
            for name in names:
                tg.start_soon(_move_into, results, client, layout, worker, name, retention)
        moved += results.count("requeued")
        try:
            await client.delete(queue)
            break
        except NoNodeError:
            break
        except NotEmptyError:
            continue
    if moved:
        log.warning("returned %d job(s) of gone worker %s to the pending queue", moved, worker)
    return moved


def older_than(mtime_ms: int, seconds: float) -> bool:
    return mtime_ms / 1000.0 < time.time() - seconds
