"""The job path's per-job cost at the server, counted (not timed): a regression fails here.

Two worker sessions (one of them the assigner) and one client session, as
`benchmarks.arq_shape` deploys them; after a warm-up batch (buckets created,
listings done) a batch of jobs is submitted at once and awaited, and the
server's `mntr` counters before and after give, per job, the requests it
received and the watch notifications it sent.  The counts do not depend on
the host's load; the bounds are the counts measured, with a margin for
pings and batching that varies with timing.
"""

from __future__ import annotations

import re
from contextlib import AsyncExitStack

import anyio
import pytest

import aiocoord
from aiocoord import Scheduler
from aiocoord.testing import ZooKeeperServer, four_letter_word

pytestmark = pytest.mark.anyio

ROOT = "/jobs"
JOBS = 200
REQUESTS_PER_JOB = 8.0  # measured 6.2-6.6
NOTIFICATIONS_PER_JOB = 14.0  # measured 12.0-12.1 with two workers


def _counts(server: ZooKeeperServer) -> tuple[float, float]:
    mntr = four_letter_word(*server.address, "mntr")

    def metric(name: str) -> float:
        found = re.search(rf"^{name}\s+(\d+)", mntr, re.MULTILINE)
        return float(found.group(1)) if found else 0.0

    notifications = sum(
        metric(f"zk_sum_node_{kind}_watch_count")
        for kind in ("created", "deleted", "changed", "children")
    )
    return metric("zk_packets_received"), notifications


async def _batch(client: Scheduler, n: int) -> None:
    async def one(i: int) -> None:
        job_id = await client.submit("echo", {"n": i})
        assert await client.result(job_id) == i

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)


async def test_requests_and_notifications_per_job_stay_within_budget(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(120):
        async with AsyncExitStack() as stack:
            scheds = []
            for _ in range(3):
                coord = await stack.enter_async_context(
                    aiocoord.connect(zk_server.connect_string, namespace=zk_chroot)
                )
                sched = Scheduler(coord, ROOT)

                @sched.job("echo")
                async def echo(n: int) -> int:
                    return n

                scheds.append(sched)
            for i, sched in enumerate(scheds[:2]):
                await stack.enter_async_context(sched.worker(capacity=64, worker_id=f"w{i}"))
            client = scheds[2]
            await _batch(client, 50)  # warm-up: buckets, listings, the assigner elected
            await anyio.sleep(0.5)
            requests, notifications = _counts(zk_server)
            await _batch(client, JOBS)
            await anyio.sleep(0.5)  # the workers' last deletes
            requests_after, notifications_after = _counts(zk_server)
    per_request = (requests_after - requests) / JOBS
    per_notification = (notifications_after - notifications) / JOBS
    print(f"per job: {per_request:.2f} requests, {per_notification:.2f} notifications")
    assert per_request <= REQUESTS_PER_JOB
    assert per_notification <= NOTIFICATIONS_PER_JOB
