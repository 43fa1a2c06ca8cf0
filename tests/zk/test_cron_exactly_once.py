"""Every scheduled time runs exactly once: three workers in two versions, an upgrade, an expiry.

Three workers (two of 1.0, then one of 1.1), each with its own coordinator
and session, run two 1-second jobs for over 40 firings each: ``plain``
(``every=1``, ``retry_interrupted=False``) and ``retry`` (the six-field
expression ``* * * * * *``, ``retry_interrupted=True``).  The 1.1 worker
joins (a rolling upgrade: both jobs move to it), then its session is
expired while both jobs hang in a firing; the 1.0 workers take over until
it is back.  From the jobs' histories and from the functions' own log:
every scheduled time ran once, except the interrupted ones (the one hung
at the expiry, and any a hand-over cancelled), which ``plain`` records as
interrupted (started once) and ``retry`` runs again (started twice).  One event loop only: the scenario takes most of a minute.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

import aiocoord
from aiocoord import Coordinator, Cron, Firing, Worker
from aiocoord.recipes.cron import FiringOutcome
from aiocoord.testing import ZooKeeperServer, expire_session
from tests.helpers import eventually

pytestmark = pytest.mark.anyio

ROOT = "/app/cron"
JOBS = ("plain", "retry")
FIRINGS = 42


@pytest.fixture(scope="module")
def anyio_backend() -> Any:
    return ("asyncio", {"use_uvloop": True})


@dataclass
class Start:
    job: str
    at: float
    worker: str
    attempt: int


@dataclass
class Scene:
    """The workers' coordinators and crons, and what the jobs' functions did."""

    hosts: str
    chroot: str
    stack: AsyncExitStack
    starts: list[Start] = field(default_factory=list)
    coords: dict[str, Coordinator] = field(default_factory=dict)
    crons: dict[str, Cron] = field(default_factory=dict)
    hang_on: str | None = None  # the worker whose next firing of each job hangs
    hanging: set[str] = field(default_factory=set)
    changed: anyio.Event = field(default_factory=anyio.Event)

    def _note(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    async def until(self, check: Callable[[], bool], timeout: float) -> None:
        with anyio.fail_after(timeout):
            while not check():
                await self.changed.wait()

    def ran(self, job: str, worker: str | None = None) -> list[Start]:
        return [s for s in self.starts if s.job == job and worker in (None, s.worker)]

    async def start(self, worker_id: str, version: str) -> None:
        coord = await self.stack.enter_async_context(
            aiocoord.connect(self.hosts, namespace=self.chroot, session_timeout=3.0)
        )
        cron = Cron(
            coord, ROOT, worker=Worker(version, id=worker_id), settle=0.2, history=200, grace=30
        )
        for job in JOBS:

            async def run(firing: Firing, worker: str = worker_id) -> None:
                self.starts.append(
                    Start(firing.job, firing.scheduled_at.timestamp(), worker, firing.attempt)
                )
                self._note()
                if self.hang_on == worker and firing.job not in self.hanging:
                    self.hanging.add(firing.job)
                    self._note()
                    await anyio.sleep(60)  # until the session expiry cancels it
                await anyio.sleep(0.05)  # a little work: a hand-over may interrupt it

            if job == "plain":
                cron.job(every=1, name=job)(run)
            else:  # a cron expression with seconds: every second
                cron.job("* * * * * *", name=job, retry_interrupted=True)(run)
        await self.stack.enter_async_context(cron)
        self.coords[worker_id], self.crons[worker_id] = coord, cron


@asynccontextmanager
async def scene(server: ZooKeeperServer, chroot: str) -> AsyncIterator[Scene]:
    async with AsyncExitStack() as stack:
        yield Scene(server.connect_string, chroot, stack)


def times_of(history: list[FiringOutcome]) -> list[float]:
    return [h.scheduled_at.timestamp() for h in history]


async def test_every_firing_runs_once_across_an_upgrade_and_a_session_expiry(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(100):
        async with scene(zk_server, zk_chroot) as s:
            await s.start("old-1", "1.0")
            await s.start("old-2", "1.0")
            await s.until(lambda: all(len(s.ran(j)) >= 8 for j in JOBS), timeout=20)
            # Balanced: the two jobs are spread over the two 1.0 workers.
            assert s.crons["old-1"].leading | s.crons["old-2"].leading == set(JOBS)
            assert len(s.crons["old-1"].leading) == len(s.crons["old-2"].leading) == 1

            await s.start("new", "1.1")  # the rolling upgrade: both jobs move to 1.1
            await s.until(lambda: all(len(s.ran(j, "new")) >= 4 for j in JOBS), timeout=20)
            s.hang_on = "new"
            await s.until(lambda: s.hanging == set(JOBS), timeout=10)
            hung = {j: s.ran(j, "new")[-1].at for j in JOBS}
            assert await expire_session(s.coords["new"])
            s.hang_on = None
            # The 1.0 workers take over, then the 1.1 worker is back with a new session.
            await s.until(
                lambda: all(any(x.at > hung[j] + 2 for x in s.ran(j, "new")) for j in JOBS),
                timeout=30,
            )
            await s.until(
                lambda: all(len({x.at for x in s.ran(j)}) >= FIRINGS for j in JOBS), timeout=40
            )
            histories: dict[str, list[FiringOutcome]] = {}

            async def recorded() -> bool:
                for j in JOBS:
                    histories[j] = await s.crons["old-1"].history(j)
                return all(len(set(times_of(h))) >= FIRINGS for h in histories.values())

            await eventually(recorded, timeout=10)

    for job in JOBS:
        history = histories[job]
        last = max(times_of(history))
        ran = [x for x in s.ran(job) if x.at <= last]  # later ones had not ended yet
        per_time = {t: [x.attempt for x in ran if x.at == t] for t in {x.at for x in ran}}
        entries = {
            t: [(h.status, h.attempt) for h in history if h.scheduled_at.timestamp() == t]
            for t in per_time
        }
        # One entry per scheduled time (two or more for a retried one), consecutive, and
        # what ran is what the history says.
        distinct = sorted(set(times_of(history)))
        assert all(math.isclose(b - a, 1.0) for a, b in itertools.pairwise(distinct)), job
        assert len(distinct) >= FIRINGS
        assert set(per_time) == set(distinct)
        # Interrupted: the firing hung at the expiry, and any a hand-over cancelled.
        interrupted = {t for t, e in entries.items() if ("interrupted", 1) in e}
        assert hung[job] in interrupted and len(interrupted) <= 3, (job, interrupted)
        for t, attempts in per_time.items():
            if t not in interrupted:
                assert (attempts, entries[t]) == ([1], [("ok", 1)]), (job, t)
            elif job == "plain":  # not run again: started once in all
                assert (attempts, entries[t]) == ([1], [("interrupted", 1)]), (job, t)
            else:  # run again until one attempt ended: at least once
                n = len(attempts)
                assert attempts == list(range(1, n + 1)) and n >= 2, (job, t, attempts)
                assert entries[t] == [("interrupted", k) for k in range(1, n)] + [("ok", n)]
        assert [h for h in history if h.status not in ("ok", "interrupted")] == []
        expired = next(h for h in history if h.scheduled_at.timestamp() == hung[job])
        assert (expired.status, expired.worker, expired.version) == ("interrupted", "new", "1.1")
        # Who ran them: 1.0 before the upgrade, 1.1 after it, 1.0 only while 1.1 was away.
        versions = [h.version for h in history if h.status == "ok"]
        assert versions[0] == "1.0" and versions[-1] == "1.1"
        tokens = [h.token or 0 for h in history]
        assert tokens == sorted(tokens)  # each later leader has a larger fencing token
