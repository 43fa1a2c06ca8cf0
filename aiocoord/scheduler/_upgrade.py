"""Jobs and results written in the flat layout, moved into their buckets.

Before buckets (`_layout`), a pending job was ``<root>/jobs/<id>`` and an
outcome ``<root>/results/<id>``.  The bucketed scheduler reads neither, so
each new assigner moves what it finds there when its term begins, and any
flat job an older client submits while its term lasts (a rolling upgrade):

- a job moves in one transaction (created in its bucket, deleted from the
  flat folder at the version read), so it is pending in exactly one place
  and runs once; a job whose id is already pending in its bucket is a
  duplicate submit, and only the flat copy is deleted;
- an outcome is written to its bucket first and then deleted from the flat
  folder (readers look in the bucket only), and a move cut short is
  finished by the next assigner;
- a node whose data does not decode stays where it is, with a warning
  naming it (`NodeDataError` for that item only).

The flat folder must fit one reply to be listed: a backlog of flat jobs
over the packet limit (some 25,000 per MiB) is moved by an assigner run
with ``AIOCOORD_MAX_PACKET`` raised above its listing's size.

Ids generated before buckets are 32 hex digits and never look like a bucket
name (``<p>.<hh>`` for jobs, ``<hh>`` for results); a hand-chosen flat id
that does is left alone.
"""

from __future__ import annotations

import contextlib
import logging

from ..errors import (
    BadVersionError,
    NodeDataError,
    NodeExistsError,
    NoNodeError,
    TransactionFailed,
)
from ..zk.client import ZkClient
from ..zk.types import CreateOp, DeleteOp
from ._layout import BUCKETS, JobsLayout, job_bucket_priority
from ._ops import Retention, ensure_buckets, write_result
from ._records import decode_job, decode_result

__all__ = ("is_flat", "move_flat", "move_flat_job", "move_flat_result")

log = logging.getLogger(__name__)

_RESULT_BUCKETS = frozenset(f"{i:02x}" for i in range(BUCKETS))


def is_flat(folder: str, name: str) -> bool:
    """Whether child `name` of ``jobs/`` or ``results/`` (`folder`) is a node of the flat layout."""
    if folder == "jobs":
        return job_bucket_priority(name) is None
    return name not in _RESULT_BUCKETS


async def move_flat(client: ZkClient, layout: JobsLayout, retention: Retention) -> int:
    """Move every flat job and outcome under `layout` into its bucket; how many moved.

    Blocks for two listings and a few requests per node moved.  Cancelling it
    leaves each node either moved or not: a later call finishes the rest.
    """
    moved = 0
    for name in await client.children(layout.jobs):
        if is_flat("jobs", name):
            moved += await move_flat_job(client, layout, name)
    for name in await client.children(layout.results):
        if is_flat("results", name):
            moved += await move_flat_result(client, layout, retention, name)
    if moved:
        log.info("moved %d jobs and outcomes of %s into their buckets", moved, layout.root)
    return moved


async def move_flat_job(client: ZkClient, layout: JobsLayout, job_id: str) -> int:
    """Move the flat job `job_id` into its bucket in one transaction: 1 if moved, else 0."""
    old = f"{layout.jobs}/{job_id}"
    try:
        node = await client.get(old)
    except NoNodeError:
        return 0  # moved by another assigner, or assigned by an older one
    try:
        record = decode_job(old, node.data)
    except NodeDataError as exc:
        log.warning("a flat job node is not a job record; left in place: %s", exc)
        return 0
    await ensure_buckets(client, layout, job_id, record.priority)
    new = layout.job(job_id, record.priority)
    try:
        await client.multi([CreateOp(new, node.data), DeleteOp(old, node.stat.version)])
    except TransactionFailed as exc:
        if isinstance(exc.cause, NodeExistsError):  # already pending in its bucket
            with contextlib.suppress(NoNodeError, BadVersionError):
                await client.delete(old, version=node.stat.version)
        return 0  # otherwise changed or gone meanwhile: whoever did it owns it
    return 1


async def move_flat_result(
    client: ZkClient, layout: JobsLayout, retention: Retention, job_id: str
) -> int:
    """Move the flat outcome of `job_id` into its bucket: 1 if moved, else 0."""
    old = f"{layout.results}/{job_id}"
    try:
        node = await client.get(old)
    except NoNodeError:
        return 0
    try:
        decode_result(old, node.data)
    except NodeDataError as exc:
        log.warning("a flat result node is not a job outcome; left in place: %s", exc)
        return 0
    await write_result(client, layout, retention, job_id, node.data)  # False: already there
    try:
        await client.delete(old, version=node.stat.version)
    except (NoNodeError, BadVersionError):
        return 0  # gone or rewritten meanwhile: whoever did it owns it
    return 1
