"""One cron job on one worker: lead it whenever chosen, claim each due firing, run it, record it.

The loop inside ``tl.lead(job)``: read the job's record, ask `_plan.plan`
what to do, do it (wait for the next time, or write with a CAS on the version
read and maybe run the claimed firing), and read again.  The firing's
function runs inside the ``lead()`` block, so a hand-over, SUSPENDED or LOST
cancels it; its claim then stays in the record without an outcome, and the
next leader records it interrupted (or runs it again).  A write whose reply
was lost is resolved by reading the node back: our exact bytes at the next
version mean it landed.  Each outcome is handed to `on_outcome` (the cron's
outcome stream) once it is written: the end of a firing this worker ran (even
if the record moved on meanwhile), and the interrupted and missed times it
recorded.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass, replace
from datetime import datetime, tzinfo
from typing import Any

import anyio
import anyio.lowlevel

from ...errors import (
    ConnectionLostError,
    CoordError,
    LeadershipLost,
    NodeDataError,
    NodeExistsError,
    NoNodeError,
)
from ...zk import Node, Stat, ZkClient
from .._cas_write import cas_write
from ..task_leadership import TaskLeadership, Worker
from ._firing import Firing
from ._plan import Fenced, Me, Options, Wait, plan
from ._record import Claim, Entry, JobRecord, decode, encode
from ._schedule import Schedule

__all__ = ("Job", "JobRunner")

log = logging.getLogger("aiocoord.recipes.cron")

RETRY_DELAY = 1.0  # after a ZooKeeper error that did not end leadership


@dataclass(frozen=True, slots=True)
class Job:
    """A registered job: its function, schedule and policy."""

    name: str
    func: Callable[[Firing], Awaitable[Any]]
    schedule: Schedule
    options: Options
    jitter: float = 0.0


class JobRunner:
    """Leads `job` whenever this worker is chosen for it; see the module docstring."""

    def __init__(
        self,
        job: Job,
        *,
        client: ZkClient,
        path: str,
        tz: tzinfo,
        tz_name: str,
        tl: TaskLeadership,
        worker: Worker,
        io_timeout: float,
        on_outcome: Callable[[str, Entry], None] = lambda _job, _entry: None,
    ) -> None:
        self.job = job
        self.path = path
        self._client = client
        self._tz = tz
        self._tz_name = tz_name
        self._tl = tl
        self._worker = worker
        self._io_timeout = io_timeout
        self._on_outcome = on_outcome
        self._jitter: tuple[float, float] | None = None  # (scheduled time, its drawn delay)
        self._bad: NodeDataError | None = None

    async def serve(self, closing: Callable[[], bool]) -> None:
        """Lead the job each time this worker is chosen, until the cron closes."""
        while True:
            try:
                async with self._tl.lead(self.job.name) as term:
                    log.info("cron %s: leading %s (token %d)", self.path, self.job.name, term.token)
                    await self._lead(Me(self._worker.id, self._worker.version, term.token))
            except LeadershipLost as exc:
                if exc.reason == "closed" or closing():
                    return
                log.info("cron %s: no longer leading (%s)", self.path, exc.reason)
            except RuntimeError:
                if closing():
                    return
                raise
            except Exception:
                # A fault of this loop, not of the job's function (whose errors are
                # recorded): log it, and lead again after a pause rather than stop the cron.
                log.exception("cron %s: leading %s failed", self.path, self.job.name)
                await anyio.sleep(RETRY_DELAY)

    async def _lead(self, me: Me) -> None:
        job = self.job
        while True:
            try:
                node = await self._read()
                if node is None:
                    await self._create(me)
                    continue
                record = decode(self.path, node.data)
            except NodeDataError as exc:
                await self._wait_repaired(exc)
                continue
            except CoordError as exc:
                log.warning("cron %s: %s; trying again", self.path, exc)
                await anyio.sleep(RETRY_DELAY)
                continue
            self._bad = None
            step = plan(record, job.schedule, time.time(), job.options, me)
            if isinstance(step, Fenced):
                log.warning(
                    "cron %s: a newer leader (token %d > %d) wrote; waiting for the hand-over",
                    self.path,
                    step.token,
                    me.token,
                )
                await anyio.sleep_forever()
            elif isinstance(step, Wait):
                await self._sleep_until(step.until)
            else:
                try:
                    stat = await self._cas(step.record, node.stat.version)
                except CoordError as exc:
                    log.warning("cron %s: %s; trying again", self.path, exc)
                    await anyio.sleep(RETRY_DELAY)
                    continue
                if stat is None:
                    continue
                for entry in step.entries:
                    self._on_outcome(job.name, entry)
                if step.run is not None:
                    await self._fire(step.record, stat.version, step.run)

    # --- firing ----------------------------------------------------------------------------

    async def _fire(self, record: JobRecord, version: int, claim: Claim) -> None:
        """Run the claimed firing, then record its outcome (shielded, bounded)."""
        job = self.job
        # The term may have ended while the claim was written: then the function
        # must not start (the claim stays, and the next leader sees it interrupted).
        await anyio.lowlevel.checkpoint_if_cancelled()
        firing = Firing(
            job.name,
            datetime.fromtimestamp(claim.at, self._tz),
            claim.token,
            claim.attempt,
            claim.catch_up,
        )
        log.info(
            "cron %s: firing %s for %s (attempt %d)",
            self.path,
            job.name,
            firing.scheduled_at.isoformat(),
            claim.attempt,
        )
        error: str | None = None
        try:
            await job.func(firing)
        except Exception as exc:
            log.exception("cron %s: %s failed", self.path, job.name)
            error = f"{type(exc).__name__}: {exc}"
        entry = Entry.of_claim(claim, "failed" if error else "ok", ended=time.time(), error=error)
        with anyio.CancelScope(shield=True), anyio.move_on_after(self._io_timeout):
            try:
                await self._finish(record, version, claim, entry)
            except CoordError as exc:
                log.warning(
                    "cron %s: the outcome of %s was not recorded (%s); the next leader "
                    "records it interrupted",
                    self.path,
                    job.name,
                    exc,
                )
        # What this worker ran, whether or not the record still took it.
        self._on_outcome(job.name, entry)

    async def _finish(self, record: JobRecord, version: int, claim: Claim, entry: Entry) -> None:
        keep = self.job.options.keep
        while True:
            done = replace(record.with_entries((entry,), keep), claim=None)
            if await self._cas(done, version) is not None:
                return
            node = await self._read()
            current = None if node is None else decode(self.path, node.data)
            if node is None or current is None or current.claim != claim:
                log.warning(
                    "cron %s: the record moved on; the outcome of %s is not recorded",
                    self.path,
                    self.job.name,
                )
                return
            record, version = current, node.stat.version

    # --- waiting ---------------------------------------------------------------------------

    async def _sleep_until(self, until: float | None) -> None:
        if until is None:
            log.info("cron %s: %s never fires again", self.path, self.job.name)
            await anyio.sleep_forever()
            return
        if self._jitter is None or self._jitter[0] != until:
            delay = random.uniform(0.0, self.job.jitter) if self.job.jitter else 0.0
            self._jitter = (until, delay)
        await anyio.sleep(max(0.0, until + self._jitter[1] - time.time()))

    async def _wait_repaired(self, exc: NodeDataError) -> None:
        """A record this code cannot read: leave it, wait until someone changes it."""
        if self._bad is None or self._bad.reason != exc.reason:
            log.error("cron %s: job %s stopped: %s", self.path, self.job.name, exc)
        self._bad = exc
        try:
            _stat, watch = await self._client.exists_watch(self.path)
            await watch.wait()
        except CoordError:
            await anyio.sleep(RETRY_DELAY)

    # --- node I/O --------------------------------------------------------------------------

    async def _read(self) -> Node | None:
        try:
            return await self._client.get(self.path)
        except NoNodeError:
            return None

    async def _create(self, me: Me) -> None:
        record = JobRecord(
            last=time.time(),
            schedule=self.job.schedule.text,
            timezone=self._tz_name,
            token=me.token,
        )
        # Someone else's, or ours with a lost reply: the next read tells.
        with suppress(NodeExistsError, ConnectionLostError):
            await self._client.create(self.path, encode(record), make_parents=True)

    async def _cas(self, record: JobRecord, version: int) -> Stat | None:
        """``setData`` conditional on `version`; None when the CAS lost (a lost reply is
        resolved by reading the record back: see ``recipes/_cas_write``)."""
        return await cas_write(
            self._client, self.path, encode(record), version, log=log, recipe="cron"
        )
