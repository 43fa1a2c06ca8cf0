"""Priorities, retry, watch and per-name concurrency, against a real server."""

from __future__ import annotations

import itertools
from contextlib import AsyncExitStack

import anyio
import pytest

import aiocoord
from aiocoord import JobConflict, JobFailed, JobStatus, NoNodeError, Scheduler
from aiocoord.testing import ZooKeeperServer, expire_session
from tests.helpers import eventually
from tests.zk._jobs_lab import lab

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def test_a_higher_priority_runs_first_on_a_busy_worker(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    async with lab(zk_server, zk_chroot) as it:
        await it.stack.enter_async_context(it.runner.worker(capacity=1, worker_id="runner"))
        with anyio.fail_after(30):
            busy = await it.client.submit("step", {"key": "busy"})
            await it.until(lambda: it.started == ["busy"])
            order = [("l1", 0), ("l2", 0), ("h", 5), ("l3", 0), ("m", 2), ("neg", -3), ("h2", 5)]
            ids = {}
            for key, priority in order:
                it.gates[key].set()  # each ends as soon as it starts
                ids[key] = await it.client.submit("step", {"key": key}, priority=priority)
            for key in ids:
                await it.reaches(ids[key], JobStatus.PENDING)
            it.gates["busy"].set()
            for key, job_id in ids.items():
                assert await it.client.result(job_id) == key
            assert await it.client.result(busy) == "busy"
            # Highest first; within one priority, in the order submitted.
            assert it.started == ["busy", "h", "h2", "m", "l1", "l2", "l3", "neg"]
        with pytest.raises(ValueError, match="priority"):
            await it.client.submit("step", {"key": "x"}, priority=10**9)
        with pytest.raises(TypeError, match="priority"):
            await it.client.submit("step", {"key": "x"}, priority=1.5)  # type: ignore[arg-type]


async def test_retry_runs_a_failed_or_cancelled_job_again(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    async with lab(zk_server, zk_chroot) as it:
        with anyio.fail_after(30):
            # Cancelled while pending (no worker runs "step" yet): retried, it runs.
            waiting = await it.client.submit("step", {"key": "c"}, priority=3)
            assert await it.client.cancel(waiting) is JobStatus.CANCELLED
            await it.client.retry(waiting)
            assert await it.client.status(waiting) is JobStatus.PENDING
            await it.run_worker()
            it.gates["c"].set()
            assert await it.client.result(waiting) == "c"
            with pytest.raises(JobConflict, match="DONE"):
                await it.client.retry(waiting)
            # Failed: retried, it runs again, its attempts kept.
            failed = await it.client.submit("boom", {"message": "no"})
            with pytest.raises(JobFailed):
                await it.client.result(failed)
            assert (await it.client.info(failed)).attempts == 1
            await it.client.retry(failed)
            with pytest.raises(JobFailed, match="no"):
                await it.client.result(failed)
            info = await it.client.info(failed)
            assert (info.status, info.attempts) == (JobStatus.FAILED, 2)
            # Not finished: refused, naming the status.
            running = await it.client.submit("step", {"key": "r"})
            await it.reaches(running, JobStatus.RUNNING)
            with pytest.raises(JobConflict, match="RUNNING"):
                await it.client.retry(running)
            it.gates["r"].set()
            with pytest.raises(NoNodeError):
                await it.client.retry("never-submitted")
            with pytest.raises(ValueError, match="job_id"):
                await it.client.retry("a/b")


async def test_watch_yields_each_status_until_the_final_one(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    async with lab(zk_server, zk_chroot) as it:
        with anyio.fail_after(30):
            job_id = await it.client.submit("step", {"key": "w"})
            seen: list[JobStatus] = []
            running = anyio.Event()

            async def follow() -> None:
                async for info in it.client.watch(job_id):
                    assert info.id == job_id
                    seen.append(info.status)
                    if info.status is JobStatus.RUNNING:
                        running.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(follow)
                await it.run_worker()
                await running.wait()
                it.gates["w"].set()
            assert seen[0] is JobStatus.PENDING
            assert seen[-1] is JobStatus.DONE
            assert JobStatus.RUNNING in seen
            assert all(a is not b for a, b in itertools.pairwise(seen))
            # A finished job: its final status, at once.
            assert [i.status async for i in it.client.watch(job_id)] == [JobStatus.DONE]
            with pytest.raises(NoNodeError):
                async for _ in it.client.watch("never-submitted"):
                    pass


async def test_concurrency_caps_runs_across_the_fleet_through_failover_and_death(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    running = 0
    most = 0
    started = 0
    gate = anyio.Event()
    some_started = anyio.Event()
    both_held = anyio.Event()

    async def report(n: int) -> int:
        nonlocal running, most, started
        running += 1
        started += 1
        most = max(most, running)
        if started >= 3:
            some_started.set()
        if running >= 2:
            both_held.set()
        try:
            if n >= 100:
                await gate.wait()
            else:
                await anyio.sleep(0.05)
        finally:
            running -= 1
        return n

    def register(sched: Scheduler) -> None:
        sched.job("report", concurrency=2)(report)

    with anyio.fail_after(50):
        async with AsyncExitStack() as stack:

            async def connect() -> aiocoord.Coordinator:
                return await stack.enter_async_context(
                    aiocoord.connect(
                        zk_server.connect_string, namespace=zk_chroot, session_timeout=3.0
                    )
                )

            desk_coord = await connect()
            desk = Scheduler(desk_coord, "/capped")
            desk.job("noop")(_noop)
            desk_worker = await stack.enter_async_context(desk.worker(worker_id="desk"))
            await eventually(lambda: _true(desk_worker.is_assigner))
            client = Scheduler(await connect(), "/capped")
            register(client)
            w1_coord = await connect()
            w1 = Scheduler(w1_coord, "/capped")
            register(w1)
            await stack.enter_async_context(w1.worker(capacity=4, worker_id="w1"))
            w2_stack = AsyncExitStack()
            w2 = Scheduler(await connect(), "/capped")
            register(w2)
            await w2_stack.enter_async_context(w2.worker(capacity=4, worker_id="w2"))
            # The assigner dies while the capped jobs run: never more than 2 at once.
            ids = [await client.submit("report", {"n": n}) for n in range(12)]
            await some_started.wait()
            assert await expire_session(desk_coord)
            assert [await client.result(job_id) for job_id in ids] == list(range(12))
            assert most == 2
            # A worker dies holding both slots: its session's end frees them.
            await w2_stack.aclose()
            both_held = anyio.Event()
            held = [await client.submit("report", {"n": n}) for n in (100, 101)]
            await both_held.wait()
            victim = w1_coord  # runs both: the only worker of the name
            w3 = Scheduler(await connect(), "/capped")
            register(w3)
            await stack.enter_async_context(w3.worker(capacity=4, worker_id="w3"))
            assert await expire_session(victim)
            gate.set()
            assert [await client.result(job_id) for job_id in held] == [100, 101]


async def _noop() -> None:
    return None


async def _true(value: bool) -> bool:
    return value


async def test_priorities_hold_through_an_assigner_failover(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """The assigner dies with the jobs read; the next one reads their priorities from the paths."""
    started: list[int] = []
    busy = anyio.Event()
    release = anyio.Event()

    async def step(n: int) -> int:
        started.append(n)
        if n == 0:
            busy.set()
            await release.wait()
        return n

    with anyio.fail_after(40):
        async with AsyncExitStack() as stack:

            async def connect() -> aiocoord.Coordinator:
                return await stack.enter_async_context(
                    aiocoord.connect(
                        zk_server.connect_string, namespace=zk_chroot, session_timeout=3.0
                    )
                )

            desk_coord = await connect()
            desk = Scheduler(desk_coord, "/prio")
            desk.job("noop")(_noop)
            desk_worker = await stack.enter_async_context(desk.worker(worker_id="desk"))
            await eventually(lambda: _true(desk_worker.is_assigner))
            client = Scheduler(await connect(), "/prio")
            client.job("step")(step)
            runner = Scheduler(await connect(), "/prio")
            runner.job("step")(step)
            await stack.enter_async_context(runner.worker(capacity=1, worker_id="runner"))
            first = await client.submit("step", {"n": 0})
            await busy.wait()
            plan = [(1, 0), (2, 0), (3, 7), (4, -1), (5, 7), (6, 3)]
            ids = [await client.submit("step", {"n": n}, priority=p) for n, p in plan]
            assert await expire_session(desk_coord)  # the assigner that read them dies
            release.set()
            assert await client.result(first) == 0
            assert [await client.result(job_id) for job_id in ids] == [n for n, _ in plan]
            assert started == [0, 3, 5, 6, 1, 2, 4]


async def test_the_same_id_with_another_priority_is_a_conflict(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    async with lab(zk_server, zk_chroot) as it:
        with anyio.fail_after(30):
            # Pending at priority 3: the same id at 0 or 7 is refused, at 3 is a no-op.
            assert await it.client.submit("step", {"key": "a"}, "p-1", priority=3) == "p-1"
            assert await it.client.submit("step", {"key": "a"}, "p-1", priority=3) == "p-1"
            for other in (0, 7):
                with pytest.raises(JobConflict, match="priority 3, not") as conflict:
                    await it.client.submit("step", {"key": "a"}, "p-1", priority=other)
                assert isinstance(conflict.value, ValueError)
            # Pending at the default priority: another one is refused the same way.
            await it.client.submit("step", {"key": "b"}, "p-2")
            with pytest.raises(JobConflict, match="priority 0, not 5"):
                await it.client.submit("step", {"key": "b"}, "p-2", priority=5)
            # Nothing was queued twice: one pending node each.
            pending = [i async for i in it.client.jobs(JobStatus.PENDING)]
            assert sorted(i.id for i in pending) == ["p-1", "p-2"]
            # Finished: its result keeps the priority it ran with.
            await it.run_worker()
            it.gates["a"].set()
            it.gates["b"].set()
            assert await it.client.result("p-1") == "a"
            assert await it.client.result("p-2") == "b"
            with pytest.raises(JobConflict, match=r"\(finished\) with priority 3, not 0"):
                await it.client.submit("step", {"key": "a"}, "p-1")
            assert await it.client.submit("step", {"key": "a"}, "p-1", priority=3) == "p-1"
            assert it.started.count("a") == 1
