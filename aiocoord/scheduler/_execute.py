"""One assignment run by a worker: read it, mark it RUNNING, run it, then end it or retry it.

    get    assignments/<w>/<id>          the job record
    set    assignments/<w>/<id>          attempts + 1, started: RUNNING (the handler starts)
    ...    the handler, within its timeout (holding a slot of its name, if capped: `_slots`)
    multi  create results/<id>           done or failed (the decision point, see `finish_with`)
           delete assignments/<w>/<id>
or, for a failed attempt that is retried:
    multi  delete the assignment, create jobs/<id> (failures + 1, run_at = now + backoff, the error)

The result and the delete are one transaction (one request, one write): a
crash cannot come between them.  Runs that make their mark, or end, in the
same step share one transaction (`_coalesce`).  If it fails (a result was there first: a
cancel, or an earlier run; or the assignment went), the two are made one
after the other, the result first: a crash in between re-runs nothing (the
assigner sees the result and only removes the assignment).  A retry moves
the job back in one transaction, so it is never both pending and assigned;
if a cancel removed the assignment first, the transaction fails and the job
stays cancelled.  A deleted assignment (cancelled, or taken back) cancels
the run through the worker's watch, whatever step it is at.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace

from ..errors import NodeDataError, NodeExistsError, NoNodeError, TransactionFailed
from ..session import Coordinator
from ..zk.types import CreateOp, DeleteOp, Op, SetDataOp
from ._coalesce import Coalescer
from ._jobs import JobType, run_attempt
from ._ops import Retention, ensure_buckets, finish_with, retry_connection, write_result
from ._records import (
    JobRecord,
    JobsLayout,
    ResultRecord,
    decode_job,
    encode_job_record,
    encode_outcome,
    room_for_data,
)
from ._slots import acquire_slot, release_slot

__all__ = ("Execution", "Hooks")

log = logging.getLogger(__name__)


@dataclass
class Hooks:
    """Test hooks: `after_result` runs after a result is written, before the assignment goes."""

    after_result: Callable[[str], Awaitable[None]] | None = None


@dataclass
class Execution:
    """What a worker session needs to run its assignments."""

    coord: Coordinator
    layout: JobsLayout
    retention: Retention
    handlers: Mapping[str, JobType]
    worker: str
    done: set[str]  # the worker's finished jobs whose assignment delete it has not seen
    hooks: Hooks
    batch: Coalescer  # shares one transaction among the runs' writes of one step

    async def run(self, job_id: str) -> None:
        """Run the assignment `job_id` to its end (cancelled from outside if it is taken away)."""
        client, coord, layout = self.coord.client, self.coord, self.layout
        path = layout.assignment(self.worker, job_id)
        try:
            node = await retry_connection(coord, lambda: client.get(path))
        except NoNodeError:
            return
        try:
            job = decode_job(path, node.data)
        except NodeDataError as exc:
            log.error("job %s failed: %s", job_id, exc)
            await self._finish(
                job_id, ResultRecord("", False, type="NodeDataError", message=str(exc))
            )
            return
        handler = self.handlers.get(job.name)
        cap = handler.options.concurrency if handler is not None else None
        if cap is None:
            await self._run(job_id, path, job, handler)
            return
        # One of the name's slots while it runs (see `_slots`): the job stays ASSIGNED meanwhile.
        slot = await acquire_slot(coord, layout, job.name, cap)
        try:
            await self._run(job_id, path, job, handler)
        finally:
            await release_slot(coord, slot)

    async def _run(self, job_id: str, path: str, job: JobRecord, handler: JobType | None) -> None:
        client, coord = self.coord.client, self.coord
        if handler is not None:
            job = replace(job, attempts=job.attempts + 1, started=time.time())
            data = encode_job_record(job)
            try:
                if not await self.batch.apply([SetDataOp(path, data)], len(data)):
                    await retry_connection(coord, lambda: client.set(path, data))
            except NoNodeError:
                return  # cancelled, or taken back, before it started
        outcome, error = await run_attempt(handler, job.name, job.payload)
        if (
            error is not None
            and handler is not None
            and handler.options.retries_after(error, job.failures + 1)
        ):
            await self._retry(job_id, job, handler, outcome)
            return
        await self._finish(job_id, outcome.with_job(job))

    async def _finish(self, job_id: str, outcome: ResultRecord) -> None:
        client, coord, layout = self.coord.client, self.coord, self.layout
        path = layout.assignment(self.worker, job_id)
        result = layout.result(job_id)
        # A result that cannot be stored fails this job only (never the worker's other jobs).
        data = encode_outcome(replace(outcome, worker=self.worker), room_for_data(result))
        self.done.add(job_id)  # before the assignment's delete reaches the watch
        # One transaction for both only when it fits ZooKeeper's request limit: a result
        # at the size limit goes in two steps.
        if self.hooks.after_result is None and len(data) <= room_for_data(result, path):
            create = self.retention.create_op(result, data)
            if await self.batch.apply([create, DeleteOp(path)], len(data)):
                return
            try:
                ops: list[Op] = [DeleteOp(path)]
                await retry_connection(
                    coord, lambda: finish_with(client, layout, self.retention, job_id, data, ops)
                )
                return
            except TransactionFailed as exc:
                # A result was there first (a cancel, an earlier run, our own lost reply), or
                # the assignment went: the two steps below do what each case needs.
                log.debug("job %s: result and delete in one: %s", job_id, exc)
        await retry_connection(
            coord, lambda: write_result(client, layout, self.retention, job_id, data)
        )
        if self.hooks.after_result is not None:
            await self.hooks.after_result(job_id)

        async def delete() -> None:
            with contextlib.suppress(NoNodeError):
                await client.delete(path)

        await retry_connection(coord, delete)

    async def _retry(
        self, job_id: str, job: JobRecord, handler: JobType, outcome: ResultRecord
    ) -> None:
        """Move the job back to ``jobs/``, due after the backoff, with the error it failed with."""
        client, layout = self.coord.client, self.layout
        failures = job.failures + 1
        wait = handler.options.backoff.delay(failures)
        again = replace(
            job,
            failures=failures,
            started=None,
            run_at=time.time() + wait,
            error_type=outcome.type,
            error_message=outcome.message,
        )
        data = encode_job_record(again)
        path, pending = layout.assignment(self.worker, job_id), layout.job(job_id, job.priority)

        # Logged first: deleting the assignment cancels this run through the watch.
        log.info(
            "job %s failed (%s: %s); retry %d of %d in %.2f s",
            job_id,
            outcome.type,
            outcome.message,
            failures,
            handler.options.retries,
            wait,
        )

        async def move() -> None:
            # The assignment goes first, so the assigner sees the job leave the worker
            # before it sees it pending again.
            try:
                try:
                    await client.multi([DeleteOp(path), CreateOp(pending, data)])
                except TransactionFailed as exc:
                    if exc.failed_index != 1 or not isinstance(exc.cause, NoNodeError):
                        raise
                    await ensure_buckets(client, layout, job_id, job.priority)  # a new bucket
                    await client.multi([DeleteOp(path), CreateOp(pending, data)])
            except TransactionFailed as exc:
                if exc.failed_index == 1 and isinstance(exc.cause, NodeExistsError):
                    # A second submit of the id waits there: this run's record replaces it.
                    with contextlib.suppress(TransactionFailed):
                        await client.multi([DeleteOp(path), SetDataOp(pending, data)])
                # Else the assignment went (cancelled, taken back): whoever did decides.

        await retry_connection(self.coord, move)
