"""Shared set-up of the job system's tests: handlers that report what they do, and a fake worker.

Three schedulers on one root: ``desk`` runs a worker with only a ``noop``
handler (started first, it is the assigner and never runs the jobs under
test), ``runner`` is the worker that runs them, ``client`` only submits and
reads.  Handlers wait on a gate per key, so a test decides when each ends.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field

import anyio

import aiocoord
from aiocoord import Coordinator, JobStatus, NoNodeError, Scheduler
from aiocoord.scheduler._ops import ensure_layout
from aiocoord.scheduler._records import JobsLayout, WorkerRecord, encode_worker
from aiocoord.testing import ZooKeeperServer
from aiocoord.zk import CreateMode
from tests.helpers import eventually

ROOT = "/jobs"
LAYOUT = JobsLayout(ROOT)


@dataclass
class Lab:
    """What the handlers did, and the events a test waits on."""

    coord: Coordinator
    client: Scheduler
    runner: Scheduler
    stack: AsyncExitStack
    gates: defaultdict[str, anyio.Event] = field(default_factory=lambda: defaultdict(anyio.Event))
    started: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    changed: anyio.Event = field(default_factory=anyio.Event)
    fail_until: dict[str, int] = field(default_factory=dict)  # key -> attempts that fail

    def note(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    async def until(self, check: Callable[[], bool], timeout: float = 10.0) -> None:
        with anyio.fail_after(timeout):
            while not check():
                await self.changed.wait()

    def register(self, sched: Scheduler) -> None:
        @sched.job("step")
        async def step(key: str) -> str:
            self.started.append(key)
            self.note()
            try:
                await self.gates[key].wait()
            except anyio.get_cancelled_exc_class():
                self.cancelled.append(key)
                self.note()
                raise
            self.finished.append(key)
            self.note()
            return key

        @sched.job("boom")
        async def boom(message: str) -> int:
            raise ValueError(message)

    async def run_worker(self) -> None:
        """Start the runner's worker (it handles ``step`` and ``boom``)."""
        await self.stack.enter_async_context(self.runner.worker(capacity=8, worker_id="runner"))

    async def status(self, job_id: str) -> JobStatus | None:
        try:
            return await self.client.status(job_id)
        except NoNodeError:
            return None

    async def reaches(self, job_id: str, status: JobStatus, timeout: float = 10.0) -> None:
        """Ask the server until the job shows `status` (its nodes are the only place to see it)."""

        async def shows() -> bool:
            return await self.status(job_id) is status

        await eventually(shows, timeout=timeout, every=0.02)


async def fake_worker(coord: Coordinator, name: str, jobs: frozenset[str]) -> None:
    """A registered worker that never runs anything: jobs given to it stay ASSIGNED."""
    await ensure_layout(coord.client, LAYOUT)
    await coord.client.create(LAYOUT.queue(name))
    record = WorkerRecord(name, 8, jobs)
    await coord.client.create(LAYOUT.worker(name), encode_worker(record), mode=CreateMode.EPHEMERAL)


@asynccontextmanager
async def lab(
    zk_server: ZooKeeperServer, chroot: str, register: Callable[[Scheduler], None] | None = None
) -> AsyncIterator[Lab]:
    """A connected lab with the desk (assigner) worker running; see the module docstring."""
    async with AsyncExitStack() as stack:
        coord = await stack.enter_async_context(
            aiocoord.connect(zk_server.connect_string, namespace=chroot, session_timeout=4.0)
        )
        desk = Scheduler(coord, ROOT)

        @desk.job("noop")
        async def noop() -> None:
            return None

        client, runner = Scheduler(coord, ROOT), Scheduler(coord, ROOT)
        it = Lab(coord, client, runner, stack)
        for sched in (client, runner):
            it.register(sched)
            if register is not None:
                register(sched)
        desk_worker = await stack.enter_async_context(desk.worker(worker_id="desk"))

        async def elected() -> bool:
            return desk_worker.is_assigner

        await eventually(elected, every=0.02)
        yield it
