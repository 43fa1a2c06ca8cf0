"""The job path's per-job cost at the server, counted (not timed): a regression fails here.

Two worker sessions (one of them the assigner) and one client session, each
its own session as `benchmarks.arq_shape` deploys them; after a warm-up batch
(buckets created, listings done, the assigner elected) a batch of jobs is
submitted at once and awaited, and the server's ``mntr`` counters before and
after give, per job, the requests it received and the watch notifications it
sent (the watches each change reached).  The counts do not depend on the
host's load; the bounds are the counts measured plus a margin for pings and
for batching, which varies with timing.
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


def _counts(server: ZooKeeperServer) -> tuple[float, float]:
    """The server's requests received and watch notifications sent, so far."""
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


async def _per_job(zk_server: ZooKeeperServer, chroot: str) -> tuple[float, float]:
    async with AsyncExitStack() as stack:
        scheds = []
        for _ in range(3):
            coord = await stack.enter_async_context(
                aiocoord.connect(zk_server.connect_string, namespace=chroot)
            )
            sched = Scheduler(coord, ROOT)

            @sched.job("echo")
            async def echo(n: int) -> int:
                return n

            scheds.append(sched)
        for i, sched in enumerate(scheds[:2]):
            await stack.enter_async_context(sched.worker(capacity=64, worker_id=f"w{i}"))
        client = scheds[2]
        await _batch(client, 50)
        await anyio.sleep(0.5)
        requests, notifications = _counts(zk_server)
        await _batch(client, JOBS)
        await anyio.sleep(0.5)  # the workers' last deletes
        requests_after, notifications_after = _counts(zk_server)
    return (requests_after - requests) / JOBS, (notifications_after - notifications) / JOBS


async def test_requests_and_notifications_per_job_stay_within_budget(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(120):
        requests, notifications = await _per_job(zk_server, zk_chroot)
    print(f"per job: {requests:.2f} requests, {notifications:.2f} notifications")
    assert requests <= 7.0  # measured 5.5-6.3 (batching varies with timing)
    assert (
        notifications <= 14.5
    )  # measured 14.0: 6 to the assigner, 2 to each claim watch, 3 to a queue, 1 to the client
