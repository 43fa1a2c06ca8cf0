"""Self-claims: which workers watch for them, and on a slow host none claims past its capacity.

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
from aiocoord.scheduler._worker import JobWorker
from aiocoord.testing import ZooKeeperServer
from aiocoord.zk.types import EventType, WatchedEvent
from tests.helpers import eventually

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


async def test_only_the_first_two_workers_by_name_watch_the_pending_jobs(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """Four workers: the two first by node name watch ``jobs/``, the assigner's own left out.

    The others hold no watch there (nothing sent to them per job).  When the
    first leaves, the next by name takes its place.
    """

    async def echo(n: int) -> int:
        return n

    with anyio.fail_after(40):
        async with AsyncExitStack() as stack:
            workers = []
            for name in ("a", "b", "c", "d"):  # node names "<id>-<session>" sort as the ids
                coord = await stack.enter_async_context(
                    aiocoord.connect(zk_server.connect_string, namespace=zk_chroot)
                )
                sched = Scheduler(coord, ROOT)
                sched.job("echo")(echo)
                workers.append(await stack.enter_async_context(sched.worker(worker_id=name)))
            client = sched

            async def watchers_are_the_first_two() -> bool:
                live = [w for w in workers if w.id is not None]
                if not any(w.is_assigner for w in live):
                    return False
                expected = [i < 2 and not w.is_assigner for i, w in enumerate(live)]
                return [_watching(w) for w in live] == expected

            await eventually(watchers_are_the_first_two)
            assert sum(_watching(w) for w in workers) <= 2
            assert await client.result(await client.submit("echo", {"n": 1})) == 1
            await workers[0].aclose()
            workers.pop(0)
            await eventually(watchers_are_the_first_two)
            assert await client.result(await client.submit("echo", {"n": 2})) == 2


def _watching(worker: JobWorker) -> bool:
    sess = worker._current
    return sess is not None and sess.claimer.watching
