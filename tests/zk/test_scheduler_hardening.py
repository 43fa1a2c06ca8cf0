"""Job scheduler under bad results and impatient clients (real server).

- A handler's result (or error text) that cannot be stored as a record fails
  its own job with a reason; the worker, and the jobs it runs meanwhile, go on.
- The assigner keeps nothing of workers that are gone (per-session state).
- A `result()` wait that is given up (cancelled, timed out) leaves no watch
  behind: none in the client's registry, none on the server (``wchc``).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import anyio
import pytest

import aiocoord
from aiocoord import JobFailed
from aiocoord.scheduler import RoundRobin, Scheduler
from aiocoord.scheduler._assigner import Assigner
from aiocoord.scheduler._ops import Retention, ensure_layout
from aiocoord.scheduler._records import JobsLayout, WorkerRecord, encode_worker
from aiocoord.testing import ZooKeeperServer
from tests.helpers import eventually
from tests.zk.test_watch_removal import server_watches

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


@pytest.mark.anyio
async def test_given_up_result_waits_leave_no_watch_on_client_or_server(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(60):
        async with process(zk_server, zk_chroot) as (coord, sched):

            @sched.job("noop")
            async def noop() -> None:
                return None

            client = coord.client
            session = client._session
            ids = [f"never-{i}" for i in range(20)]
            paths = [session.server_path(f"{ROOT}/results/{job_id}") for job_id in ids]
            await client.ensure_path(f"{ROOT}/results")
            for round_ in range(10):  # 200 waits given up, at every moment of the wait
                for job_id in ids:
                    with anyio.move_on_after(0.002 * round_):
                        await sched.result(job_id, not_submitted_yet=True)
            assert not any(session.watches.watched(p) for p in paths)
            await client.exists("/")  # sent after the removals: answered after them
            assert not set(paths) & set(server_watches(zk_server, coord.session_id))

            # A finished job's result: read, its watch not kept either.
            done = await sched.submit("noop")
            async with sched.worker(capacity=1, worker_id="w"):
                await sched.result(done)
            path = session.server_path(f"{ROOT}/results/{done}")
            assert await sched.result(done) is None  # already there: no wait at all
            assert not session.watches.watched(path)
            await client.exists("/")
            assert path not in server_watches(zk_server, coord.session_id)


@pytest.mark.anyio
async def test_the_assigner_keeps_nothing_of_workers_that_are_gone(
    coordinator: aiocoord.Coordinator,
) -> None:
    layout = JobsLayout(ROOT)
    client = coordinator.client
    await ensure_layout(client, layout)
    assigner = Assigner(coordinator, layout, RoundRobin(), Retention(3600.0))
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(assigner.run)
            for i in range(50):  # workers of sessions that come and go
                record = WorkerRecord(f"w-{i}", 1, frozenset({"noop"}))
                await client.create(layout.worker(record.id), encode_worker(record))
                await eventually(partial(_knows, assigner, record.id))
                await client.delete(layout.worker(record.id))
            await eventually(lambda: _true(not assigner.state.workers and not assigner._worker_gen))
            tg.cancel_scope.cancel()


async def _true(value: bool) -> bool:
    return value


async def _knows(assigner: Assigner, worker: str) -> bool:
    return worker in assigner.state.workers
