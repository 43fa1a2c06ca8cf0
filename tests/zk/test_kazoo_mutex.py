"""Mixed fleets, for real: kazoo's ``Lock`` and ``mutex(..., layout="kazoo")`` on one path.

kazoo 2.x contenders (each in a thread with its own ``KazooClient``) and
aiocoord contenders (each with its own session) take one lock in turn; on one
clock (``time.monotonic`` in both) no two hold it at once.  Then the aiocoord
side is faulted (an expired session while queued, a cut connection while
holding) while kazoo holds or waits, and the exclusion still holds.
"""

from __future__ import annotations

import re
import time
from typing import Any

import anyio
import anyio.to_thread
import pytest

from aiocoord import ConfigError, LockLost, Mutex, mutex
from aiocoord.testing import FaultProxy, ZooKeeperServer, expire_session
from tests.helpers import eventually
from tests.zk._kazoo_fleet import Holders, coordinator, kazoo_client

pytestmark = pytest.mark.anyio

N = 30  # holds per contender
HOLD = 0.002  # seconds inside: long enough for an overlap to show


@pytest.fixture(scope="module")
def anyio_backend() -> Any:
    return ("asyncio", {"use_uvloop": False})


def kazoo_contender(hosts: str, path: str, name: str, holders: Holders, n: int) -> None:
    with kazoo_client(hosts) as zk:
        lock = zk.Lock(path, name)
        for _ in range(n):
            assert lock.acquire(timeout=30), f"{name} timed out"
            try:
                holders.enter(name)
                time.sleep(HOLD)
                holders.leave(name)
            finally:
                lock.release()


async def aiocoord_contender(hosts: str, path: str, name: str, holders: Holders, n: int) -> None:
    async with coordinator(hosts) as coord:
        lock = Mutex(coord, path, participant_id=name, layout="kazoo", timeout=30)
        for _ in range(n):
            async with lock:
                holders.enter(name)
                await anyio.sleep(HOLD)
                holders.leave(name)


async def test_kazoo_locks_and_kazoo_layout_mutexes_exclude_each_other(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = f"{zk_chroot}/lock"
    hosts = zk_server.connect_string
    holders = Holders()
    with anyio.fail_after(90):
        async with anyio.create_task_group() as tg:
            for i in range(2):
                tg.start_soon(
                    anyio.to_thread.run_sync, kazoo_contender, hosts, path, f"kazoo-{i}", holders, N
                )
                tg.start_soon(aiocoord_contender, hosts, path, f"aiocoord-{i}", holders, N)
    assert len(holders.intervals) == 4 * N
    assert holders.most == 1, "two holders at once"
    assert holders.overlaps() == []
    assert holders.handovers() >= 10  # the lock really went back and forth


async def test_each_side_lists_the_other_as_contenders(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = f"{zk_chroot}/seen"
    hosts = zk_server.connect_string
    with anyio.fail_after(30), kazoo_client(hosts) as zk:
        kazoo_lock = zk.Lock(path, "kazoo-a")
        assert kazoo_lock.acquire(timeout=10)
        try:
            async with coordinator(hosts) as coord, anyio.create_task_group() as tg:
                ours = Mutex(coord, path, participant_id="aiocoord-b", layout="kazoo")
                tg.start_soon(ours.acquire)

                async def queued() -> bool:
                    return len(await coord.client.children(path)) == 2

                await eventually(queued)
                node = ours.node
                assert node is not None
                name = node.rsplit("/", 1)[1]
                assert re.fullmatch(r"[0-9a-f]{32}__lock__\d{10}", name)  # as kazoo names its own
                seen = [(p.id, p.holds) for p in await ours.participants()]
                assert seen == [("kazoo-a", True), ("aiocoord-b", False)]
                assert await anyio.to_thread.run_sync(kazoo_lock.contenders) == [
                    "kazoo-a",
                    "aiocoord-b",
                ]
                assert not ours.is_held
                await anyio.to_thread.run_sync(kazoo_lock.release)
                await eventually(lambda: _true(ours.is_held))
                await ours.release()
        finally:
            kazoo_lock.release()


async def _true(value: bool) -> bool:
    return value


async def test_an_expired_session_while_kazoo_holds_never_grants_ours(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = f"{zk_chroot}/expired"
    hosts = zk_server.connect_string
    released_at: list[float] = []
    granted_at: list[float] = []
    with anyio.fail_after(60), kazoo_client(hosts) as zk:
        kazoo_lock = zk.Lock(path, "kazoo-holder")
        assert kazoo_lock.acquire(timeout=10)
        async with coordinator(hosts) as coord, anyio.create_task_group() as tg:
            ours = Mutex(coord, path, participant_id="aiocoord-waiter", layout="kazoo")

            async def wait() -> None:
                assert await ours.acquire(timeout=40)
                granted_at.append(time.monotonic())

            tg.start_soon(wait)

            async def queued() -> bool:
                return len(await coord.client.children(path)) == 2

            await eventually(queued)
            first = coord.session_id
            assert await expire_session(coord)

            async def requeued() -> bool:
                # Our node again, on the new session, behind kazoo's.
                if coord.session_id in (None, first):
                    return False
                node = ours.node
                if node is None:
                    return False
                stat = await coord.client.exists(node)
                return stat is not None and stat.ephemeral_owner == coord.session_id

            await eventually(requeued, timeout=20)
            assert not granted_at and not ours.is_held  # kazoo still holds
            assert await anyio.to_thread.run_sync(kazoo_lock.contenders) == [
                "kazoo-holder",
                "aiocoord-waiter",
            ]
            released_at.append(time.monotonic())
            await anyio.to_thread.run_sync(kazoo_lock.release)
        assert granted_at and granted_at[0] > released_at[0]


async def test_a_cut_connection_ends_our_hold_before_kazoo_gets_the_lock(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = f"{zk_chroot}/cut"
    ended: list[float] = []
    entered = anyio.Event()
    kazoo_got: list[float] = []
    errors: list[BaseException] = []
    with anyio.fail_after(60), FaultProxy(*zk_server.address) as proxy:
        async with coordinator(proxy.connect_string, session_timeout=8) as coord:

            async def hold() -> None:
                try:
                    async with mutex(
                        coord,
                        path,
                        participant_id="aiocoord-h",
                        layout="kazoo",
                        lose_on_suspend=True,
                    ):
                        entered.set()
                        try:
                            await anyio.sleep_forever()
                        finally:
                            ended.append(time.monotonic())
                except LockLost as exc:
                    errors.append(exc)

            def kazoo_waits() -> None:
                with kazoo_client(zk_server.connect_string) as zk:
                    lock = zk.Lock(path, "kazoo-w")
                    assert lock.acquire(timeout=30)
                    kazoo_got.append(time.monotonic())
                    lock.release()

            async with anyio.create_task_group() as tg:
                tg.start_soon(hold)
                await entered.wait()
                tg.start_soon(anyio.to_thread.run_sync, kazoo_waits)

                async def queued() -> bool:
                    return len(await coord.client.children(path)) == 2

                await eventually(queued)
                assert not kazoo_got
                proxy.cut()
    assert errors and isinstance(errors[0], LockLost)
    assert kazoo_got and ended and ended[0] < kazoo_got[0]


async def test_a_bad_layout_is_a_config_error_naming_it(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    async with coordinator(zk_server.connect_string) as coord:
        for bad in ("Kazoo", "", None, 1):
            with pytest.raises(ConfigError, match=r"^layout: ") as info:
                Mutex(coord, f"{zk_chroot}/x", layout=bad)  # type: ignore[arg-type]
            assert info.value.field == "layout"
