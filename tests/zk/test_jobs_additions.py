"""Priorities, retry and watch, against a real server (the lab of `tests.zk._jobs_lab`)."""

from __future__ import annotations

import itertools

import anyio
import pytest

from aiocoord import JobConflict, JobFailed, JobStatus, NoNodeError
from aiocoord.testing import ZooKeeperServer
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
