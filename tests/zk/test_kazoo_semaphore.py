"""Mixed fleets, for real: kazoo's ``Semaphore`` and ``semaphore(..., layout="kazoo")``.

kazoo 2.x contenders (threads, each with its own ``KazooClient``) and aiocoord
contenders (each with its own session) take leases of one semaphore: never
more than `max_leases` holders at once, on one clock.  kazoo's `max_leases`
check holds both ways.  Then the aiocoord side's session expires while kazoo
holds every lease, and it still gets none until a kazoo lease is released.
"""

from __future__ import annotations

import re
import time
from typing import Any

import anyio
import anyio.to_thread
import pytest

from aiocoord import ConfigError, Semaphore, semaphore
from aiocoord.testing import ZooKeeperServer, expire_session
from tests.helpers import eventually
from tests.zk._kazoo_fleet import Holders, coordinator, kazoo_client

pytestmark = pytest.mark.anyio

N = 20  # leases per contender
MAX = 2
HOLD = 0.003


@pytest.fixture(scope="module")
def anyio_backend() -> Any:
    return ("asyncio", {"use_uvloop": False})


def kazoo_contender(hosts: str, path: str, name: str, holders: Holders) -> None:
    with kazoo_client(hosts) as zk:
        sem = zk.Semaphore(path, name, max_leases=MAX)
        for _ in range(N):
            assert sem.acquire(timeout=30), f"{name} timed out"
            try:
                holders.enter(name)
                time.sleep(HOLD)
                holders.leave(name)
            finally:
                sem.release()


async def aiocoord_contender(hosts: str, path: str, name: str, holders: Holders) -> None:
    async with coordinator(hosts) as coord:
        sem = Semaphore(
            coord, path, max_leases=MAX, participant_id=name, layout="kazoo", timeout=30
        )
        for _ in range(N):
            async with sem:
                holders.enter(name)
                await anyio.sleep(HOLD)
                holders.leave(name)


async def test_never_more_than_max_leases_across_kazoo_and_aiocoord(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = f"{zk_chroot}/sem"
    hosts = zk_server.connect_string
    holders = Holders()
    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            for i in range(3):
                tg.start_soon(
                    anyio.to_thread.run_sync, kazoo_contender, hosts, path, f"kazoo-{i}", holders
                )
                tg.start_soon(aiocoord_contender, hosts, path, f"aiocoord-{i}", holders)
    assert len(holders.intervals) == 6 * N
    assert holders.most == MAX  # full, and never more
    assert holders.handovers() >= 10


async def test_the_pool_is_kazoos_and_max_leases_is_checked_both_ways(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = f"{zk_chroot}/pool"
    hosts = zk_server.connect_string
    with anyio.fail_after(30), kazoo_client(hosts) as zk:
        async with coordinator(hosts) as coord:
            lease = await Semaphore(
                coord, path, max_leases=3, participant_id="aiocoord-a", layout="kazoo"
            ).acquire(timeout=10)
            assert lease is not None
            assert (await coord.client.get(path)).data == b"3"
            (name,) = await coord.client.children(path)
            assert re.fullmatch(r"[0-9a-f]{32}", name) and lease.node == f"{path}/{name}"
            assert await coord.client.children(f"{path}-__lock__") == []  # guard left
            kazoo_sem = zk.Semaphore(path, "kazoo-b", max_leases=3)
            assert await anyio.to_thread.run_sync(kazoo_sem.lease_holders) == ["aiocoord-a"]
            assert await anyio.to_thread.run_sync(lambda: kazoo_sem.acquire(timeout=10))
            ours = Semaphore(coord, path, max_leases=3, layout="kazoo")
            assert sorted(p.id for p in await ours.participants()) == ["aiocoord-a", "kazoo-b"]
            wrong = zk.Semaphore(path, "kazoo-c", max_leases=5)
            with pytest.raises(ValueError, match="Inconsistent max leases"):
                await anyio.to_thread.run_sync(wrong.acquire)
            with pytest.raises(ConfigError, match=r"^max_leases: ") as info:
                await Semaphore(coord, path, max_leases=4, layout="kazoo").acquire(timeout=5)
            assert info.value.field == "max_leases"
            await anyio.to_thread.run_sync(kazoo_sem.release)
            await lease.release()
            assert await coord.client.children(path) == []


async def test_an_expired_session_gets_no_lease_while_kazoo_holds_them_all(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = f"{zk_chroot}/expired"
    hosts = zk_server.connect_string
    granted_at: list[float] = []
    with anyio.fail_after(60), kazoo_client(hosts) as zk:
        held = [zk.Semaphore(path, f"kazoo-{i}", max_leases=MAX) for i in range(MAX)]
        for sem in held:
            assert sem.acquire(timeout=10)
        async with coordinator(hosts) as coord, anyio.create_task_group() as tg:

            async def wait() -> None:
                async with semaphore(
                    coord, path, max_leases=MAX, participant_id="aiocoord-w", layout="kazoo"
                ):
                    granted_at.append(time.monotonic())

            tg.start_soon(wait)

            async def guarding() -> bool:  # our node holds the guard, waiting on the pool
                return len(await coord.client.children(f"{path}-__lock__")) == 1

            await eventually(guarding)
            first = coord.session_id
            assert await expire_session(coord)

            async def guarding_again() -> bool:
                if coord.session_id in (None, first):
                    return False
                kids = await coord.client.children(f"{path}-__lock__")
                if len(kids) != 1:
                    return False
                stat = await coord.client.exists(f"{path}-__lock__/{kids[0]}")
                return stat is not None and stat.ephemeral_owner == coord.session_id

            await eventually(guarding_again, timeout=20)
            assert not granted_at
            assert len(await coord.client.children(path)) == MAX  # kazoo's two, no more
            released = time.monotonic()
            await anyio.to_thread.run_sync(held[0].release)
        assert granted_at and granted_at[0] > released
        held[1].release()
