"""Self-claims on a slow host: a worker never claims past its capacity.

The assigner holds the election but does nothing (its session open, as a
frozen process's would be), so the worker claims the pending jobs itself.
Its queue watch is slowed (each CREATED handled a second late, as on a host
too busy to keep up): before the fix the worker, not yet seeing its own
claims, claimed again at every round for the same free slots.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import anyio
import pytest

import aiocoord
from aiocoord import Scheduler
from aiocoord.recipes.leader_latch import leader_latch
from aiocoord.scheduler import _worker_session
from aiocoord.testing import ZooKeeperServer
from aiocoord.zk.types import EventType, WatchedEvent

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

ROOT = "/claims"


async def test_a_lagging_worker_never_claims_past_its_capacity(
    zk_server: ZooKeeperServer, zk_chroot: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = _worker_session.WorkerSession._on_event

    def late(self: Any, queue: str, event: WatchedEvent) -> None:
        if event.type is EventType.CREATED and self._tg is not None:

            async def later() -> None:
                await anyio.sleep(1.2)
                original(self, queue, event)

            self._tg.start_soon(later)
            return
        original(self, queue, event)

    monkeypatch.setattr(_worker_session.WorkerSession, "_on_event", late)
    gate = anyio.Event()

    async def hold(n: int) -> int:
        await gate.wait()
        return n

    with anyio.fail_after(40):
        async with AsyncExitStack() as stack:

            async def connect() -> aiocoord.Coordinator:
                return await stack.enter_async_context(
                    aiocoord.connect(zk_server.connect_string, namespace=zk_chroot)
                )

            frozen = await connect()
            latch = await stack.enter_async_context(
                leader_latch(frozen, f"{ROOT}/assigner", participant_id="frozen")
            )
            await latch.wait()  # the election is held; nothing is assigned
            sched = Scheduler(await connect(), ROOT)
            sched.job("hold")(hold)
            worker = await stack.enter_async_context(sched.worker(capacity=2, worker_id="w"))
            ids = [await sched.submit("hold", {"n": n}) for n in range(8)]
            assert worker.id is not None
            queue = f"{ROOT}/assignments/{worker.id}"
            most = 0
            with anyio.move_on_after(4):  # rounds every 0.5 s: several of them
                while True:
                    most = max(most, len(await frozen.client.children(queue)))
                    await anyio.sleep(0.05)
            assert 1 <= most <= 2, most
            gate.set()
            assert [await sched.result(job_id) for job_id in ids] == list(range(8))
