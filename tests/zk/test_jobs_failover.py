"""Deaths: delayed jobs across an assigner's failover, a poison job that kills its workers,
and an assigner killed outright.

The poison test runs real worker processes (`tests.zk._jobs_worker`) and
lets the job SIGKILL each one that runs it: after ``max_deliveries`` (2)
deaths it is FAILED as ``PoisonJob``, and the other jobs all finish.  The
last test SIGKILLs the worker process that is the assigner: its session
lives on for 10 s, yet the other workers keep taking the pending jobs.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
import pytest

import aiocoord
from aiocoord import JobFailed, JobStatus, Scheduler
from aiocoord.recipes.leader_latch import LeaderLatch
from aiocoord.testing import ZooKeeperServer, expire_session
from tests.helpers import bucketed_ids, eventually
from tests.zk import _jobs_worker

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
ROOT = "/jobs"


@pytest.fixture(scope="module")
def anyio_backend() -> object:
    return "asyncio"  # one loop: these scenarios take seconds each


async def test_delayed_jobs_survive_an_assigner_failover(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """The assigner holding the due times dies; the next one rebuilds them: none lost, none twice."""
    started: dict[str, list[float]] = {}
    due: dict[str, float] = {}

    async def step(key: str) -> str:
        started.setdefault(key, []).append(time.time())
        return key

    with anyio.fail_after(40):
        async with AsyncExitStack() as stack:
            hosts = zk_server.connect_string

            async def connect() -> aiocoord.Coordinator:
                return await stack.enter_async_context(
                    aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=3.0)
                )

            desk_coord, runner_coord = await connect(), await connect()
            desk = Scheduler(desk_coord, ROOT)
            desk.job("noop")(_noop)
            desk_worker = await stack.enter_async_context(desk.worker(worker_id="desk"))
            await eventually(lambda: _true(desk_worker.is_assigner))
            runner = Scheduler(runner_coord, ROOT)
            runner.job("step")(step)
            runner_worker = await stack.enter_async_context(runner.worker(worker_id="runner"))
            keys = [f"k{i:02}" for i in range(16)]
            for i, key in enumerate(keys):
                delay = 0.4 + 0.15 * i  # due from 0.4 s to 2.65 s from now
                due[key] = time.time() + delay
                await runner.submit("step", {"key": key}, job_id=key, delay=delay)
            assert {(await runner.info(k)).status for k in keys[2:]} == {JobStatus.SCHEDULED}
            assert await expire_session(desk_coord)  # the assigner dies with its heap
            for key in keys:
                assert await runner.result(key) == key
            assert runner_worker.is_assigner or desk_worker.is_assigner
            assert sorted(started) == keys
            assert all(len(times) == 1 for times in started.values()), started
            for key in keys:
                assert started[key][0] >= due[key] - 0.05, key  # never early
            assert [i.id async for i in runner.jobs(status=JobStatus.DONE)] == keys


async def _noop() -> None:
    return None


async def _true(value: bool) -> bool:
    return value


class WorkerProcess:
    """One `tests.zk._jobs_worker` process and what it printed."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.output = ""

    async def read(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        assert self.process.stdout is not None
        told = False
        async for chunk in self.process.stdout:
            self.output += chunk.decode()
            if not told and "ready" in self.output:
                told = True
                task_status.started()
        if not told:
            raise AssertionError(f"the worker ended before it was ready: {self.output!r}")


@asynccontextmanager
async def worker_processes(
    zk_server: ZooKeeperServer, chroot: str, count: int, *, session: float = 2.0, first: int = 0
) -> AsyncIterator[list[WorkerProcess]]:
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )
    workers: list[WorkerProcess] = []
    async with anyio.create_task_group() as tg:
        try:
            for i in range(first, first + count):
                command = [sys.executable, "-m", "tests.zk._jobs_worker"]
                process = await anyio.open_process(
                    [*command, zk_server.connect_string, chroot, f"proc-{i}", str(session)],
                    env=env,
                    cwd=REPO,
                    stderr=None,
                )
                worker = WorkerProcess(process)
                workers.append(worker)
                await tg.start(worker.read)
            yield workers
        finally:
            with anyio.CancelScope(shield=True):
                for worker in workers:
                    if worker.process.returncode is None:
                        worker.process.kill()
                    with anyio.move_on_after(10):
                        await worker.process.wait()


async def test_a_poison_job_fails_after_max_deliveries_and_spares_the_others(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(60):
        async with aiocoord.connect(
            zk_server.connect_string, namespace=zk_chroot, session_timeout=4.0
        ) as coord:
            desk = Scheduler(coord, ROOT)  # the assigner: it runs none of these jobs
            desk.job("noop")(_noop)
            client = Scheduler(coord, ROOT)
            _jobs_worker.register(client)
            async with desk.worker(worker_id="desk") as desk_worker:
                await eventually(lambda: _true(desk_worker.is_assigner))
                async with worker_processes(zk_server, zk_chroot, 3) as workers:
                    squares = [await client.submit("square", {"n": n}) for n in range(20)]
                    poison = await client.submit("poison", {"n": 1}, job_id="poison")
                    more = [await client.submit("square", {"n": n}) for n in range(20, 40)]
                    with pytest.raises(JobFailed) as failed:
                        await client.result(poison)
                    assert failed.value.type == "PoisonJob"
                    assert "max_deliveries=2" in failed.value.message
                    info = await client.info(poison)
                    assert (info.status, info.attempts) == (JobStatus.FAILED, 2)
                    for n, job_id in enumerate(squares + more):
                        assert await client.result(job_id) == n * n
                    killed = [w for w in workers if "poisoned" in w.output]
                    assert len(killed) == 2
                    for w in killed:
                        assert await w.process.wait() == -signal.SIGKILL
                    alive = [w for w in workers if w not in killed]
                    assert len(alive) == 1 and alive[0].process.returncode is None
                    assert desk_worker.is_assigner  # the deaths cost the assigner nothing


async def test_pending_jobs_keep_moving_when_the_assigner_is_killed(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """SIGKILL the assigner's process: its 10 s session holds the election, yet no job waits for it.

    The live workers claim the jobs no assigner took (`_claimer`): every job
    runs, well before the dead session expires and another assigner is elected.
    """
    with anyio.fail_after(60):
        async with aiocoord.connect(
            zk_server.connect_string, namespace=zk_chroot, session_timeout=10.0
        ) as coord:
            client = Scheduler(coord, ROOT)
            _jobs_worker.register(client)
            election = LeaderLatch(coord, f"{ROOT}/assigner")

            async def leader_is(worker_id: str) -> bool:
                leader = await election.leader()
                return leader is not None and leader.id == worker_id

            async with worker_processes(zk_server, zk_chroot, 1, session=10.0) as assigners:
                await eventually(lambda: leader_is("proc-0"))
                async with worker_processes(zk_server, zk_chroot, 2, session=10.0, first=1):
                    before = [await client.submit("square", {"n": n}) for n in range(10)]
                    for n, job_id in enumerate(before):
                        assert await client.result(job_id) == n * n
                    assigners[0].process.kill()
                    killed = time.monotonic()
                    assert await assigners[0].process.wait() == -signal.SIGKILL
                    after = [await client.submit("square", {"n": n}) for n in range(10, 40)]
                    for n, job_id in enumerate(after, start=10):
                        assert await client.result(job_id) == n * n
                    gap = time.monotonic() - killed
                    # Far below the session timeout: nobody waited for the dead session.
                    assert gap < 3.0, gap
                    assert await leader_is("proc-0")  # the dead process still holds the election
                    assert await bucketed_ids(coord.client, f"{ROOT}/jobs") == []
                    for job_id in before + after:
                        assert (await client.info(job_id)).status is JobStatus.DONE


async def test_a_worker_whose_assigner_join_times_out_stands_again(
    zk_server: ZooKeeperServer, zk_chroot: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A join of the assigner election that runs out of time does not close the worker.

    The election's join raises `ConnectionLostError` when ZooKeeper stays away
    past the request timeout (seen in the fault campaign: the worker closed,
    its registration stayed, and the jobs given to it waited for ever).  The
    first join here fails that way; the worker must stand again and assign.
    """
    from aiocoord import ConnectionLostError
    from aiocoord.recipes.leader_latch import leader_selector as real
    from aiocoord.scheduler import _worker

    calls = 0

    class _Timeout:
        async def __aenter__(self) -> None:
            raise ConnectionLostError("leader latch /jobs/assigner: could not join after 3.00s")

        async def __aexit__(self, *exc: object) -> None:
            return None

    def flaky(*args: object, **kwargs: object) -> object:
        nonlocal calls
        calls += 1
        return _Timeout() if calls == 1 else real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_worker, "leader_selector", flaky)
    async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as coord:
        sched = Scheduler(coord, ROOT)

        @sched.job("echo")
        async def echo(n: int) -> int:
            return n

        with anyio.fail_after(30):
            async with sched.worker(capacity=2) as worker:
                job_id = await sched.submit("echo", {"n": 7})
                assert await sched.result(job_id) == 7
                assert worker.is_assigner
    assert calls == 2


async def test_a_worker_that_fails_while_registering_leaves_no_node(
    zk_server: ZooKeeperServer, zk_chroot: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A registration whose request landed but whose outcome the worker never saw is undone.

    The worker's nodes are named after its session, so on leaving it deletes
    whatever of them exists, confirmed or not: a node left behind on a live
    session would have jobs assigned to it that nobody runs.
    """
    from aiocoord.scheduler import _worker_session

    real = _worker_session.WorkerSession._register

    async def lands_then_fails(self: _worker_session.WorkerSession) -> None:
        await real(self)
        self.registered = False  # as if its reply had not come back yet
        raise RuntimeError("failed before the registration was recorded")

    monkeypatch.setattr(_worker_session.WorkerSession, "_register", lands_then_fails)
    async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as coord:
        sched = Scheduler(coord, ROOT)

        @sched.job("echo")
        async def echo(n: int) -> int:
            return n

        with anyio.fail_after(30):
            with pytest.raises(BaseException, match="registration was recorded"):
                async with sched.worker(capacity=2):
                    pass
            assert await coord.client.children(f"{ROOT}/workers") == []
            assert await coord.client.children(f"{ROOT}/assignments") == []
