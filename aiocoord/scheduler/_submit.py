"""Writing a new job: one create, idempotent for a given job id, with one deadline.

A job submitted with its own id is created only if it has no result yet
(create the job, create and delete the result, in one transaction).  An id
that exists already (pending, scheduled or finished) writes nothing: the
same name and payload return the id, a different one raises `JobConflict`
(compared by the record's `key`, a digest of name and payload).  An id
being run by a worker is not compared: the second copy waits, and the
assigner drops it once the first run has left a result.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from .._records import RecordEncodeError
from ..errors import (
    ConnectionLostError,
    CoordinatorClosedError,
    JobConflict,
    NodeDataError,
    NodeExistsError,
    NoNodeError,
    TransactionFailed,
)
from ..zk.client import ZkClient
from ..zk.types import CreateOp, DeleteOp
from ._jobs import JobType
from ._ops import ensure_buckets
from ._policy import check_delay, check_run_at
from ._records import (
    JobsLayout,
    check_job_id,
    check_priority,
    decode_job,
    decode_result,
    encode_job,
    job_key,
    job_limit,
    new_job_id,
)

__all__ = ("NewJob", "check_conflict", "prepare_job", "write_job")


@dataclass(frozen=True, slots=True)
class NewJob:
    """A job checked and encoded, ready to be written."""

    job_id: str
    data: bytes
    key: str
    careful: bool  # its id was given: create it only if it has no result
    priority: int = 0


def prepare_job(
    handlers: Mapping[str, JobType],
    layout: JobsLayout,
    name: object,
    payload: Any,
    job_id: str | None,
    delay: object,
    run_at: object,
    priority: object = 0,
) -> NewJob:
    """Check a submit's arguments and encode the job (see `Scheduler.submit`); writes nothing."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, not {type(name).__name__}")
    job = handlers.get(name)
    if job is None:
        known = ", ".join(repr(n) for n in handlers) or "none"
        raise ValueError(
            f"name: no job {name!r} is registered here (registered: {known}); "
            f"use @scheduler.job({name!r})"
        )
    priority = check_priority(priority)
    if delay is not None and run_at is not None:
        raise ValueError("delay and run_at: give one of them, not both")
    due = None
    if delay is not None:
        due = check_delay(delay, time.time()) if delay != 0 else None
    elif run_at is not None:
        due = check_run_at(run_at)
    value = job.validate_payload(payload)
    try:
        key = job_key(name, value)
    except RecordEncodeError as exc:  # NaN or infinity: valid for pydantic, not JSON
        raise RecordEncodeError(f"payload: {exc}") from exc
    limit = job_limit(layout)
    data = encode_job(
        name,
        value,
        limit,
        run_at=due,
        max_deliveries=job.options.max_deliveries,
        key=key,
        priority=priority,
    )
    careful = job_id is not None
    job_id = check_job_id(job_id) if job_id is not None else new_job_id()
    return NewJob(job_id, data, key, careful, priority)


async def check_conflict(
    client: ZkClient, layout: JobsLayout, job_id: str, key: str, priority: int = 0
) -> None:
    """`JobConflict` if the existing job `job_id` was submitted with another name or payload."""
    places = (("pending", layout.job(job_id, priority)), ("finished", layout.result(job_id)))
    for where, path in places:
        try:
            node = await client.get(path)
        except NoNodeError:
            continue
        try:
            if where == "pending":
                theirs = decode_job(path, node.data).key
            else:
                theirs = decode_result(path, node.data).key
        except NodeDataError:
            return  # unreadable: it fails on its own, and the id stays taken
        if theirs and theirs != key:
            raise JobConflict(job_id, f"({where}) with a different name or payload")
        return


async def write_job(
    client: ZkClient,
    layout: JobsLayout,
    job_id: str,
    data: bytes,
    *,
    careful: bool,
    key: str,
    priority: int = 0,
) -> str:
    """Create the job node; see the module docstring and `Scheduler.submit`."""
    path, result = layout.job(job_id, priority), layout.result(job_id)
    # One deadline for the whole submit: the writes, the reconnect waits and the retries.
    deadline = client._session.deadline()
    failure: ConnectionLostError | None = None
    with anyio.CancelScope(deadline=deadline.at):
        for _ in range(6):
            try:
                if careful:
                    # Create the job only if it has no result yet: creating and deleting
                    # the result node in the same transaction fails if it exists.
                    await client.multi([CreateOp(path, data), CreateOp(result), DeleteOp(result)])
                else:
                    await client.create(path, data)
                return job_id
            except TransactionFailed as exc:
                if isinstance(exc.cause, NodeExistsError):
                    await check_conflict(client, layout, job_id, key, priority)
                    return job_id  # pending (first op) or done (second op)
                if not isinstance(exc.cause, NoNodeError):
                    raise
                await ensure_buckets(client, layout, job_id, priority)
            except NodeExistsError:
                return job_id  # our own create, whose reply was lost
            except NoNodeError:
                await ensure_buckets(client, layout, job_id, priority)
            except CoordinatorClosedError:
                raise
            except ConnectionLostError as exc:
                failure = exc
                careful = True  # the job may have been created and run meanwhile
                await client._session.wait_connected()  # within the deadline around the loop
    client._session.ensure_open()
    error = client._session.unreachable(
        deadline, f"could not submit job {job_id} to {layout.root} (it may have been queued)"
    )
    raise error from (error.__cause__ or failure)
