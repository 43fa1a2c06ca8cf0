"""`Scheduler.result` for an id nothing is known of: an error at once, or a wait when asked."""

from __future__ import annotations

import anyio
import pytest

import aiocoord
from aiocoord import NoNodeError
from aiocoord.scheduler import Scheduler
from aiocoord.testing import ZooKeeperServer

pytestmark = pytest.mark.anyio


async def test_result_of_an_id_never_submitted_fails_at_once_unless_asked_to_wait(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """``await sched.result("typo")`` waited forever, while `info` raised `NoNodeError`."""
    async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as coord:
        sched = Scheduler(coord, "/jobs")

        @sched.job("add")
        async def add(a: int, b: int = 0) -> int:
            return a + b

        with anyio.fail_after(5), pytest.raises(NoNodeError, match="'typo'"):
            await sched.result("typo")
        with pytest.raises(TypeError, match="not_submitted_yet"):
            await sched.result("typo", not_submitted_yet=1)  # type: ignore[arg-type]
        async with sched.worker():
            with anyio.fail_after(20):
                async with anyio.create_task_group() as tg:
                    results: list[int] = []

                    async def wait() -> None:
                        results.append(await sched.result("later", not_submitted_yet=True))

                    tg.start_soon(wait)
                    await anyio.sleep(0.3)  # the waiter is waiting before the job exists
                    assert not results
                    await sched.submit("add", {"a": 2, "b": 3}, job_id="later")
                assert results == [5]
                # Known (finished) and known (pending or running) ids need no flag.
                assert await sched.result("later") == 5
                job_id = await sched.submit("add", {"a": 1}, delay=0.5)
                assert await sched.result(job_id) == 1
                # Another process, which did not submit it, finds the job still waiting.
                other = Scheduler(coord, "/jobs")
                job_id = await sched.submit("add", {"a": 4}, delay=0.5)
                assert await other.result(job_id) == 4
