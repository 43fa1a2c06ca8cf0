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

import anyio

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
from ._ops import ensure_layout
from ._records import JobsLayout, decode_job, decode_result

__all__ = ("check_conflict", "write_job")


async def check_conflict(client: ZkClient, layout: JobsLayout, job_id: str, key: str) -> None:
    """`JobConflict` if the existing job `job_id` was submitted with another name or payload."""
    for where, path in (("pending", layout.job(job_id)), ("finished", layout.result(job_id))):
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
    client: ZkClient, layout: JobsLayout, job_id: str, data: bytes, *, careful: bool, key: str
) -> str:
    """Create the job node; see the module docstring and `Scheduler.submit`."""
    path, result = layout.job(job_id), layout.result(job_id)
    # One deadline for the whole submit: the writes, the reconnect waits and the retries.
    deadline = client.deadline()
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
                    await check_conflict(client, layout, job_id, key)
                    return job_id  # pending (first op) or done (second op)
                if not isinstance(exc.cause, NoNodeError):
                    raise
                await ensure_layout(client, layout)
            except NodeExistsError:
                return job_id  # our own create, whose reply was lost
            except NoNodeError:
                await ensure_layout(client, layout)
            except CoordinatorClosedError:
                raise
            except ConnectionLostError as exc:
                failure = exc
                careful = True  # the job may have been created and run meanwhile
                await client.wait_connected()  # within the deadline around the loop
    client.session.ensure_open()
    error = client.unreachable(
        deadline, f"could not submit job {job_id} to {layout.root} (it may have been queued)"
    )
    raise error from (error.__cause__ or failure)
