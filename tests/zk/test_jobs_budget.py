"""The job path's per-job cost at the server, counted (not timed): a regression fails here.

Two (or four) worker sessions, the first of them the assigner, and one client
session, each its own session as `benchmarks.arq_shape` deploys them; after a
warm-up batch (buckets created, listings done) a batch of jobs is submitted at
once and awaited, and the server's ``mntr`` counters before and after give,
per job, the requests it received and the watches each change reached (the
sums of ``node_*_watch_count``, one per session reached).  Those sums count
a deletion twice (the server's data and child watch tables each count it),
though it is sent once: the notifications the test's sessions received are
counted too.  The counts do not depend on the host's load; the bounds are
the counts measured plus a margin for pings, for batching and for the share
of jobs given to the assigner's own worker (its queue's events cost nothing
more: its session watches ``assignments/`` already), which vary with timing.
"""

from __future__ import annotations

import re
from contextlib import AsyncExitStack
from dataclasses import dataclass

import anyio
import pytest

import aiocoord
from aiocoord import Scheduler
from aiocoord.testing import ZooKeeperServer, four_letter_word
from aiocoord.zk import _watches
from tests.helpers import eventually

pytestmark = pytest.mark.anyio

ROOT = "/jobs"
JOBS = 200


@dataclass(frozen=True)
class PerJob:
    requests: float  # received by the server
    reached: float  # the sums of mntr's node_*_watch_count
    received: float  # notifications the sessions were sent


def _counts(server: ZooKeeperServer) -> tuple[float, float]:
    """The server's requests received and the watches its changes reached, so far."""
    mntr = four_letter_word(*server.address, "mntr")

    def metric(name: str) -> float:
        found = re.search(rf"^{name}\s+(\d+)", mntr, re.MULTILINE)
        return float(found.group(1)) if found else 0.0

    reached = sum(
        metric(f"zk_sum_node_{kind}_watch_count")
        for kind in ("created", "deleted", "changed", "children")
    )
    return metric("zk_packets_received"), reached


async def _batch(client: Scheduler, n: int) -> None:
    async def one(i: int) -> None:
        job_id = await client.submit("echo", {"n": i})
        assert await client.result(job_id) == i

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)


async def _per_job(
    zk_server: ZooKeeperServer, chroot: str, monkeypatch: pytest.MonkeyPatch, workers: int
) -> PerJob:
    received = [0]
    dispatch = _watches.WatchRegistry.dispatch

    def counted(self: _watches.WatchRegistry, type_: int, server: str, client: str) -> None:
        received[0] += 1
        dispatch(self, type_, server, client)

    monkeypatch.setattr(_watches.WatchRegistry, "dispatch", counted)
    async with AsyncExitStack() as stack:
        scheds = []
        for _ in range(workers + 1):
            coord = await stack.enter_async_context(
                aiocoord.connect(zk_server.connect_string, namespace=chroot)
            )
            sched = Scheduler(coord, ROOT)

            @sched.job("echo")
            async def echo(n: int) -> int:
                return n

            scheds.append(sched)
        first = await stack.enter_async_context(scheds[0].worker(capacity=64, worker_id="w0"))

        async def leads() -> bool:
            return first.is_assigner

        await eventually(leads)  # the first by name: the claim watches are the same in every run
        for i, sched in enumerate(scheds[1:workers], start=1):
            await stack.enter_async_context(sched.worker(capacity=64, worker_id=f"w{i}"))
        client = scheds[workers]
        await _batch(client, 50)
        await anyio.sleep(0.5)
        requests, reached = _counts(zk_server)
        received[0] = 0
        await _batch(client, JOBS)
        await anyio.sleep(0.5)  # the workers' last deletes
        requests_after, reached_after = _counts(zk_server)
        sent = received[0]
    return PerJob((requests_after - requests) / JOBS, (reached_after - reached) / JOBS, sent / JOBS)


async def test_requests_and_notifications_per_job_stay_within_budget(
    zk_server: ZooKeeperServer, zk_chroot: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers.

    Sent per job (9.5 measured, 10.1-10.7 before): 5 to the assigner (the job
    created and deleted, the assignment created, marked and deleted; results
    no longer), 2 to the other worker's claim watch, 3 to a queue for each job
    given to that worker (about half), 1 to the client.
    """
    with anyio.fail_after(120):
        cost = await _per_job(zk_server, zk_chroot, monkeypatch, workers=2)
    print(f"per job: {cost}")
    assert cost.requests <= 7.0, cost  # measured 5.4-6.1 (batching varies with timing)
    # measured 12.9-13.0 here, 13.56 in CI (more jobs given to the other worker);
    # 14.0-14.2 before
    assert cost.reached <= 13.9, cost
    assert cost.received <= 10.0, cost  # measured 9.5 (10.1-10.7 before)


async def test_claim_watches_do_not_grow_with_the_workers(
    zk_server: ZooKeeperServer, zk_chroot: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four workers: one claim watch on ``jobs/`` (the second by name), not three.

    Sent per job (10.25 measured, 15.25 before): 5 to the assigner, 2 to the
    claim watch, 3 to a queue for each job given to one of the three other
    workers, 1 to the client.
    """
    with anyio.fail_after(120):
        cost = await _per_job(zk_server, zk_chroot, monkeypatch, workers=4)
    print(f"per job: {cost}")
    assert cost.requests <= 7.0
    assert cost.reached <= 14.5  # measured 14.0 (21.0 before)
    assert cost.received <= 10.75  # measured 10.25 (15.25 before)
