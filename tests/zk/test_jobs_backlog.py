"""A backlog submitted with no worker up, then run by three workers, the assigner killed halfway.

Every coordinator reads replies of at most `max_packet` bytes: the quick
variant (5,000 jobs, 64 KiB: a flat listing of the ids would be some
170 KB) fails if anything in the scheduler lists all pending jobs or all
results in one reply.  The slow tier runs the issue's 200,000 jobs with the
default limit (a flat listing would be some 7 MB); run it with
``./scripts/check -m slow_tier`` (or ``pytest -m slow_tier tests/zk/test_jobs_backlog.py -s``).
The figures are printed.
"""

from __future__ import annotations

import time
from contextlib import AsyncExitStack
from typing import Any

import anyio
import pytest

import aiocoord
from aiocoord import Scheduler
from aiocoord.testing import ZooKeeperServer, expire_session
from tests.helpers import bucketed_ids, eventually

pytestmark = pytest.mark.anyio

ROOT = "/backlog"


@pytest.fixture(scope="module")
def anyio_backend() -> object:
    return "asyncio"  # one loop: a long scenario


async def _submit_all(sched: Scheduler, count: int, submitters: int = 200) -> list[str]:
    ids: list[str] = []
    next_n = iter(range(count))

    async def submitter() -> None:
        for n in next_n:
            ids.append(await sched.submit("noop", {"n": n}))

    async with anyio.create_task_group() as tg:
        for _ in range(submitters):
            tg.start_soon(submitter)
    return ids


async def run_backlog(
    server: ZooKeeperServer, chroot: str, count: int, *, max_packet: int | None, limit: float
) -> dict[str, float]:
    """Submit `count` jobs, start 3 workers, expire the assigner's session halfway; the figures."""
    ran: set[int] = set()
    half = anyio.Event()
    all_done = anyio.Event()

    async def noop(n: int) -> None:
        ran.add(n)
        if len(ran) >= count // 2:
            half.set()
        if len(ran) >= count:
            all_done.set()

    settings: dict[str, Any] = {} if max_packet is None else {"max_packet": max_packet}
    figures: dict[str, float] = {}
    with anyio.fail_after(limit):
        async with AsyncExitStack() as stack:

            async def connect() -> aiocoord.Coordinator:
                return await stack.enter_async_context(
                    aiocoord.connect(
                        server.connect_string, namespace=chroot, session_timeout=6.0, **settings
                    )
                )

            client = Scheduler(await connect(), ROOT)
            client.job("noop")(noop)
            started = time.monotonic()
            ids = await _submit_all(client, count)
            figures["submit_s"] = time.monotonic() - started
            assert len(set(ids)) == count
            coords, workers = [], []
            started = time.monotonic()
            for i in range(3):
                coord = await connect()
                sched = Scheduler(coord, ROOT)
                sched.job("noop")(noop)
                coords.append(coord)
                workers.append(
                    await stack.enter_async_context(sched.worker(capacity=64, worker_id=f"w{i}"))
                )
            await half.wait()
            figures["half_s"] = time.monotonic() - started
            assigner = next(i for i, w in enumerate(workers) if w.is_assigner)
            assert await expire_session(coords[assigner])  # killed: its session ends now
            await all_done.wait()
            figures["run_s"] = time.monotonic() - started
            figures["jobs_per_s"] = count / figures["run_s"]
            assert ran == set(range(count))
            layout_client = coords[(assigner + 1) % 3].client
            jobs = f"{ROOT}/jobs"
            await eventually(lambda: _empty(layout_client, jobs), timeout=30)
            results = await bucketed_ids(layout_client, f"{ROOT}/results")
            assert len(results) == count
    print(
        f"\nbacklog of {count} jobs (max_packet {max_packet or 'default'}): submitted in "
        f"{figures['submit_s']:.1f} s ({count / figures['submit_s']:.0f}/s); 3 workers ran half "
        f"in {figures['half_s']:.1f} s, then the assigner's session was expired; all ran in "
        f"{figures['run_s']:.1f} s ({figures['jobs_per_s']:.0f} jobs/s)"
    )
    return figures


async def _empty(client: aiocoord.ZkClient, parent: str) -> bool:
    return await bucketed_ids(client, parent) == []


@pytest.mark.timeout(300)
async def test_a_backlog_runs_with_no_listing_over_the_packet_limit(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    await run_backlog(zk_server, zk_chroot, 5_000, max_packet=64 * 1024, limit=240)


@pytest.mark.slow_tier
@pytest.mark.timeout(1800)
async def test_a_backlog_of_200_000_jobs(zk_server: ZooKeeperServer, zk_chroot: str) -> None:
    await run_backlog(zk_server, zk_chroot, 200_000, max_packet=None, limit=1700)
