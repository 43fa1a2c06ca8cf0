"""The job scheduler's gap when its assigner dies without a word.

The assigner worker reaches the server through a `FaultProxy`; pausing the
proxy freezes it as a SIGKILL (or a frozen host) would: the server keeps its
session, and so its leadership, for the whole session timeout.  Jobs are
submitted at a steady rate before and after; what is measured is the longest
wait (submit -> result) of a job submitted after the freeze, and the longest
time without any result.  The frozen assigner has no handler for these jobs,
so none of them waits in its queue: what is left is the pick-up gap alone.
"""

from __future__ import annotations

import itertools
import time
from contextlib import AsyncExitStack

import anyio

import aiocoord
from aiocoord.scheduler import Scheduler
from aiocoord.testing import FaultProxy, ZooKeeperServer

__all__ = ("failover_gap",)

ROOT = "/bench-scheduler-failover"


def _scheduler(coord: aiocoord.Coordinator, name: str) -> Scheduler:
    sched = Scheduler(coord, ROOT, result_ttl=60)

    @sched.job(name)
    async def echo(n: int) -> int:
        return n

    return sched


async def failover_gap(
    server: ZooKeeperServer, *, workers: int = 2, rate: float = 50.0, seconds: float = 2.0
) -> dict[str, float]:
    """Freeze the assigner mid-stream; the longest wait of a later job and the longest silence."""
    submitted: dict[int, float] = {}
    finished: dict[int, float] = {}
    frozen = 0.0
    with FaultProxy(server.host, server.port) as proxy:
        async with AsyncExitStack() as stack:

            async def connect(hosts: str) -> aiocoord.Coordinator:
                return await stack.enter_async_context(aiocoord.connect(hosts, session_timeout=10))

            assigner = _scheduler(await connect(proxy.connect_string), "elsewhere")
            first = await stack.enter_async_context(assigner.worker(capacity=8))
            with anyio.fail_after(30):
                while not first.is_assigner:  # noqa: ASYNC110 - no event for it; a benchmark
                    await anyio.sleep(0.01)
            client = _scheduler(await connect(server.connect_string), "echo")
            for _ in range(workers):
                sched = _scheduler(await connect(server.connect_string), "echo")
                await stack.enter_async_context(sched.worker(capacity=8))

            async def one(n: int) -> None:
                submitted[n] = time.monotonic()
                assert await client.result(await client.submit("echo", {"n": n})) == n
                finished[n] = time.monotonic()

            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    total = round(rate * seconds * 2)
                    for n in range(total):
                        if n == total // 2:
                            proxy.pause()
                            frozen = time.monotonic()
                        tg.start_soon(one, n)
                        await anyio.sleep(1 / rate)
            proxy.resume()  # let the frozen worker leave cleanly
    later = [finished[n] - submitted[n] for n in submitted if submitted[n] >= frozen]
    ends = sorted([frozen, *finished.values()])
    silence = max(b - a for a, b in itertools.pairwise(ends) if b >= frozen)
    return {"gap_wait_s": max(later), "gap_silence_s": silence}
