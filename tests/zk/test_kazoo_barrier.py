"""Mixed fleets, for real: kazoo's ``Barrier``/``DoubleBarrier`` and aiocoord's, one layout.

kazoo 2.x's barriers lay out their nodes as Curator's do (the barrier is the
node at the path; a double barrier is one ephemeral child per participant
plus ``ready``), so the DEFAULT layout serves both: kazoo's and aiocoord's
barriers on one path wait for each other.  On one clock, no participant of
either kind is through ``enter`` before all are in, nor through ``leave``
before all have begun to leave.  Then an aiocoord participant's session
expires while it is inside beside kazoo participants: every participant
still leaves, and none before all have begun to.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import anyio.to_thread
import pytest

from aiocoord import Barrier, double_barrier
from aiocoord.testing import ZooKeeperServer, expire_session
from tests.helpers import eventually
from tests.zk._kazoo_fleet import coordinator, kazoo_client

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> Any:
    return ("asyncio", {"use_uvloop": False})


async def test_a_barrier_set_by_one_kind_holds_the_other(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = f"{zk_chroot}/gate"
    hosts = zk_server.connect_string
    with anyio.fail_after(30), kazoo_client(hosts) as zk:
        kazoo_barrier = zk.Barrier(path)
        async with coordinator(hosts) as coord, anyio.create_task_group() as tg:
            ours = Barrier(coord, path)
            await anyio.to_thread.run_sync(kazoo_barrier.create)
            assert await ours.is_set()
            done: list[bool] = []

            async def wait() -> None:
                done.append(await ours.wait(timeout=20))

            tg.start_soon(wait)
            assert not await ours.wait(timeout=0.2)  # up: it waits
            await anyio.to_thread.run_sync(kazoo_barrier.remove)
            await eventually(lambda: _true(bool(done)))
            assert done == [True]

            await ours.set()
            assert not await anyio.to_thread.run_sync(kazoo_barrier.wait, 0.2)
            waited: list[bool] = []

            def kazoo_waits() -> None:
                waited.append(kazoo_barrier.wait(20))

            tg.start_soon(anyio.to_thread.run_sync, kazoo_waits)
            await ours.remove()
        assert waited == [True]


async def _true(value: bool) -> bool:
    return value


class Log:
    """When each participant began and finished entering and leaving (one clock, any thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.times: dict[str, dict[str, float]] = {}

    def mark(self, who: str, what: str) -> None:
        with self._lock:
            self.times.setdefault(who, {})[what] = time.monotonic()

    def check(self, n: int) -> None:
        assert len(self.times) == n and all(len(t) == 4 for t in self.times.values())
        last_in = max(t["entering"] for t in self.times.values())
        last_out = max(t["leaving"] for t in self.times.values())
        for who, t in self.times.items():
            assert t["entered"] >= last_in, f"{who} entered before everyone was in"
            assert t["left"] >= last_out, f"{who} left before everyone was leaving"


def kazoo_participant(hosts: str, path: str, n: int, name: str, log: Log) -> None:
    with kazoo_client(hosts) as zk:
        barrier = zk.DoubleBarrier(path, n, identifier=name)
        log.mark(name, "entering")
        barrier.enter()
        assert barrier.participating, f"{name} could not enter"
        log.mark(name, "entered")
        time.sleep(0.05)
        log.mark(name, "leaving")
        barrier.leave()
        log.mark(name, "left")


async def aiocoord_participant(
    hosts: str, path: str, n: int, name: str, log: Log, delay: float
) -> None:
    async with coordinator(hosts) as coord:
        await anyio.sleep(delay)  # staggered, so that each kind waits for the other
        log.mark(name, "entering")
        async with double_barrier(coord, path, members=n):
            log.mark(name, "entered")
            await anyio.sleep(delay)
            log.mark(name, "leaving")
        log.mark(name, "left")


async def test_kazoo_and_aiocoord_enter_and_leave_together(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = f"{zk_chroot}/double"
    hosts = zk_server.connect_string
    log = Log()
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for i in range(2):
                tg.start_soon(
                    anyio.to_thread.run_sync, kazoo_participant, hosts, path, 4, f"kazoo-{i}", log
                )
                tg.start_soon(aiocoord_participant, hosts, path, 4, f"aiocoord-{i}", log, 0.2 * i)
    log.check(4)


async def test_an_expired_participant_inside_lets_kazoo_leave(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = f"{zk_chroot}/expired"
    hosts = zk_server.connect_string
    log = Log()
    with anyio.fail_after(60):
        async with coordinator(hosts) as victim, anyio.create_task_group() as tg:
            for i in range(2):
                tg.start_soon(
                    anyio.to_thread.run_sync, kazoo_participant, hosts, path, 3, f"kazoo-{i}", log
                )
            barrier = double_barrier(victim, path, members=3)
            log.mark("aiocoord-victim", "entering")
            assert await barrier.enter(timeout=30)
            log.mark("aiocoord-victim", "entered")
            assert await expire_session(victim)  # inside, while kazoo's are too
            log.mark("aiocoord-victim", "leaving")
            assert await barrier.leave(timeout=30)  # our node went with the session
            log.mark("aiocoord-victim", "left")
    log.check(3)
