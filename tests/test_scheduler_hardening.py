"""Job scheduler under bad results and impatient clients (real server).

- A handler's result (or error text) that cannot be stored as a record fails
  its own job with a reason; the worker, and the jobs it runs meanwhile, go on.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest

import aiocoord
from aiocoord import JobFailed
from aiocoord.scheduler import Scheduler
from aiocoord.testing import ZooKeeperServer

ROOT = "/sched"
NOT_UTF8 = os.fsdecode(b"report-\xff.csv")  # what os.listdir gives for a non-UTF-8 name


@asynccontextmanager
async def process(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> AsyncIterator[tuple[aiocoord.Coordinator, Scheduler]]:
    async with aiocoord.connect(
        zk_server.connect_string, namespace=zk_chroot, session_timeout=4
    ) as coord:
        yield coord, Scheduler(coord, ROOT)


@pytest.mark.anyio
async def test_a_result_that_cannot_be_stored_fails_its_job_and_the_worker_goes_on(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    gate, started = anyio.Event(), anyio.Event()
    with anyio.fail_after(30):
        async with process(zk_server, zk_chroot) as (_coord, sched):

            @sched.job("slow")
            async def slow() -> int:
                started.set()
                await gate.wait()
                return 1

            @sched.job("file_name")
            async def file_name() -> str:
                return NOT_UTF8

            @sched.job("open_file")
            async def open_file() -> None:
                raise FileNotFoundError(f"no such file: {NOT_UTF8}")

            @sched.job("huge")
            async def huge() -> str:
                return "x" * (1 << 20)

            async with sched.worker(capacity=4, worker_id="w") as worker:
                running = await sched.submit("slow")
                await started.wait()

                with pytest.raises(JobFailed) as info:
                    await sched.result(await sched.submit("file_name"))
                assert info.value.type == "ValueError"
                assert "cannot be stored" in info.value.message
                assert "surrogate" in info.value.message

                # A failure whose text cannot be encoded keeps its type; the text is escaped.
                with pytest.raises(JobFailed) as info:
                    await sched.result(await sched.submit("open_file"))
                assert info.value.type == "FileNotFoundError"
                assert info.value.message == "no such file: report-\\udcff.csv"

                with pytest.raises(JobFailed) as info:
                    await sched.result(await sched.submit("huge"))
                assert info.value.type == "ValueError"
                assert "bytes as JSON" in info.value.message

                # The job that ran meanwhile was not cancelled, and the worker goes on.
                gate.set()
                assert await sched.result(running) == 1
                assert worker.id is not None
                assert await sched.result(await sched.submit("slow")) == 1
