"""Writing a new job: one create (one transaction for a given id), idempotent, one deadline.

A job submitted with its own id is created only if it has no result yet
and is not pending at another priority: one transaction creates the job and
creates and deletes the result node, and the same node in each bucket of
another priority that the id's hash could be in (the bucket names are
listed first; buckets are never removed).  An id that exists already
(pending, scheduled or finished) writes nothing: the same name, payload and
priority return the id, a different one raises `JobConflict` (name and
payload compared by the record's `key`, a digest of both; the priority by
the bucket it waits in or the result's record).  An id being run by a
worker is not compared: the second copy waits, and the assigner drops it
once the first run has left a result.  Two submits of one id with different
priorities racing the first creation of a priority's bucket may both be
queued; the assigner runs the id once at most at a time, as for any copy.
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
from ..zk.types import CreateOp, DeleteOp, Op
from ._jobs import JobType
from ._layout import bucket_of, job_bucket_priority
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

__all__ = ("NewJob", "check_conflict", "other_priorities", "prepare_job", "write_job")


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
    """`JobConflict` if the existing job `job_id` has another name, payload or priority."""
    places = (("pending", layout.job(job_id, priority)), ("finished", layout.result(job_id)))
    for where, path in places:
        try:
            node = await client.get(path)
        except NoNodeError:
            continue
        try:
            if where == "pending":
                theirs = decode_job(path, node.data)
                their_key, their_priority = theirs.key, theirs.priority
            else:
                result = decode_result(path, node.data)
                their_key, their_priority = result.key, result.priority
        except NodeDataError:
            return  # unreadable: it fails on its own, and the id stays taken
        if their_key and their_key != key:
            raise JobConflict(job_id, f"({where}) with a different name or payload")
        if their_key and their_priority != priority:
            raise JobConflict(job_id, f"({where}) with priority {their_priority}, not {priority}")
        return


async def other_priorities(
    client: ZkClient, layout: JobsLayout, job_id: str, priority: int
) -> list[str]:
    """The pending nodes `job_id` would have in the existing buckets of other priorities."""
    hh = bucket_of(job_id)
    try:
        buckets = await client.children(layout.jobs)
    except NoNodeError:
        return []
    others = (job_bucket_priority(b) for b in buckets if b.endswith(f".{hh}"))
    return sorted(layout.job(job_id, p) for p in others if p is not None and p != priority)


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
    deadline = client.session.deadline()
    failure: ConnectionLostError | None = None
    others: list[str] = []
    with anyio.CancelScope(deadline=deadline.at):
        for _ in range(6):
            try:
                if careful:
                    # Create the job only if it has no result yet and waits at no other
                    # priority: creating and deleting a node in one transaction fails if
                    # it exists.
                    others = await other_priorities(client, layout, job_id, priority)
                    ops: list[Op] = [CreateOp(path, data)]
                    for absent in (result, *others):
                        ops += [CreateOp(absent), DeleteOp(absent)]
                    await client.multi(ops)
                else:
                    await client.create(path, data)
                return job_id
            except TransactionFailed as exc:
                if isinstance(exc.cause, NodeExistsError):
                    if exc.failed_index > 2:  # waiting in another priority's bucket
                        theirs = job_bucket_priority(
                            others[(exc.failed_index - 3) // 2].split("/")[-2]
                        )
                        raise JobConflict(
                            job_id, f"(pending) with priority {theirs}, not {priority}"
                        ) from exc
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
                await client.session.wait_connected()  # within the deadline around the loop
    client.session.ensure_open()
    error = client.session.unreachable(
        deadline, f"could not submit job {job_id} to {layout.root} (it may have been queued)"
    )
    raise error from (error.__cause__ or failure)
