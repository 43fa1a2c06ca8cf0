"""One wait contract on a real server: ``timeout=0`` tries once, a timeout gives its kind's shape.

Table-driven over the locks, the latch and the barrier (docs/concepts.md,
"Waiting: one contract"); then the CAS lock's own `timeout=` and
``async with``, which it did not have.  The argument checks and the result
types are in tests/unit/test_wait_contract.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

import aiocoord
from aiocoord import Coordinator, LeadershipTerm, Lease, LockLost, LockNotAcquired, Participant
from aiocoord.recipes.cas_lock._record import LockRecord, encode
from aiocoord.testing import ZooKeeperServer

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def sessions(
    server: ZooKeeperServer, chroot: str, n: int
) -> AsyncIterator[list[Coordinator]]:
    async with AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(
                aiocoord.connect(server.connect_string, namespace=chroot, session_timeout=4.0)
            )
            for _ in range(n)
        ]


@dataclass
class Kind:
    """One lock's wait: the lock, what a timeout gives, and how to give back what was got."""

    make: Callable[[Coordinator, str, str], Any]
    timed_out: object  # what `acquire` returns when the timeout passes first
    got: Callable[[object], bool]
    semaphore: bool = False  # gives back the lease, not the lock; its nodes are two deep


KINDS: dict[str, Kind] = {
    "Mutex": Kind(lambda c, p, i: aiocoord.Mutex(c, p, participant_id=i), False, bool),
    "WriteLock": Kind(
        lambda c, p, i: aiocoord.ReadWriteLock(c, p, participant_id=i).write(), False, bool
    ),
    "ReadLock": Kind(
        lambda c, p, i: aiocoord.ReadWriteLock(c, p, participant_id=i).read(), False, bool
    ),
    "CasLock": Kind(lambda c, p, i: aiocoord.CasLock(c, p, owner=i, lease=30.0), False, bool),
    "Semaphore": Kind(
        lambda c, p, i: aiocoord.Semaphore(c, p, max_leases=1, participant_id=i),
        None,
        lambda v: isinstance(v, Lease),
        semaphore=True,
    ),
}


async def _nodes(coord: Coordinator, path: str, deep: bool) -> list[str]:
    """The nodes under `path` (and, `deep`, under each of them: a semaphore's two levels)."""
    try:
        children = sorted(await coord.client.children(path))
    except aiocoord.NoNodeError:
        return []
    if not deep:
        return children
    return [
        f"{c}/{n}" for c in children for n in sorted(await coord.client.children(f"{path}/{c}"))
    ]


async def _give_back(kind: Kind, lock: Any, value: object) -> None:
    await (value.release() if kind.semaphore else lock.release())  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", KINDS)
async def test_a_lock_wait_tries_once_at_zero_and_gives_its_shape_on_timeout(
    zk_server: ZooKeeperServer, zk_chroot: str, name: str
) -> None:
    kind = KINDS[name]
    path = f"/contract/{name.lower()}"
    with anyio.fail_after(30):
        async with sessions(zk_server, zk_chroot, 2) as (a, b):
            # For the read lock, a writer holds it: a reader waits for a writer.
            first = KINDS["WriteLock" if name == "ReadLock" else name]
            holder = first.make(a, path, "a")
            held = await holder.acquire(0)  # free: got at once
            assert first.got(held)
            before = await _nodes(a, path, kind.semaphore)
            waiter = kind.make(b, path, "b")
            assert await waiter.acquire(0) == kind.timed_out  # held: one try, no wait
            assert await waiter.acquire(0.3) == kind.timed_out
            with anyio.move_on_after(0.3):  # cancelled: nothing held, as after a timeout
                await waiter.acquire(None)
            if name != "CasLock":  # a queue: the waiter took its node back each time
                assert await _nodes(a, path, kind.semaphore) == before
            await _give_back(first, holder, held)
            got = await waiter.acquire(10)  # free again: got within the timeout
            assert kind.got(got)
            await _give_back(kind, waiter, got)


async def test_the_latch_wait_has_both_shapes_and_tries_once_at_zero(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with sessions(zk_server, zk_chroot, 2) as (a, b):
            first = aiocoord.LeaderLatch(a, "/contract/latch", participant_id="a")
            await first.start()
            try:
                assert isinstance(await first.wait(), LeadershipTerm)
                assert await first.wait(0) is True
                async with aiocoord.leader_latch(
                    b, "/contract/latch", participant_id="b"
                ) as second:
                    assert await second.wait(0) is False
                    assert await second.wait(0.3) is False
                    ranks = await second.participants()
                    assert ranks == [Participant("a", True), Participant("b", False)]
                    assert [p.is_leader for p in ranks] == [True, False]
                    await first.aclose()
                    assert await second.wait(10) is True
            finally:
                await first.aclose()


async def test_the_barrier_wait_tries_once_at_zero(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with sessions(zk_server, zk_chroot, 1) as (a,):
            barrier = aiocoord.barrier(a, "/contract/barrier")
            assert await barrier.wait(0) is True  # down: nothing to wait for
            await barrier.set()
            assert await barrier.wait(0) is False
            assert await barrier.wait(0.2) is False
            await barrier.remove()
            assert await barrier.wait(0) is True


async def test_the_double_barrier_lists_the_one_participant_type(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with sessions(zk_server, zk_chroot, 2) as (a, b):
            one = aiocoord.DoubleBarrier(a, "/contract/double", members=2, participant_id="one")
            two = aiocoord.DoubleBarrier(b, "/contract/double", members=2, participant_id="two")
            assert await one.enter(0.2) is False  # alone: not full
            assert one.participants() == []
            async with anyio.create_task_group() as tg:
                tg.start_soon(one.enter, 10)
                assert await two.enter(10) is True
            got = two.participants()
            assert got == [Participant("one", True), Participant("two", True)]
            assert [p.node for p in got] == ["one", "two"]
            async with anyio.create_task_group() as tg:
                tg.start_soon(one.leave, 10)
                assert await two.leave(10) is True


async def test_a_cas_lock_is_an_async_context_manager_bounded_by_its_timeout(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """It had neither: ``async with CasLock(...)`` failed, and `acquire()` had no bound."""
    path = "/contract/cas-with"
    with anyio.fail_after(30):
        async with sessions(zk_server, zk_chroot, 2) as (a, b):
            async with aiocoord.CasLock(a, path, owner="a", lease=30.0) as lock:
                assert lock.held and lock.token is not None
                other = aiocoord.CasLock(b, path, owner="b", lease=30.0, timeout=0.3)
                started = anyio.current_time()
                with pytest.raises(LockNotAcquired):
                    async with other:
                        pytest.fail("entered a held lock")
                # It waited rather than tried once (uvloop's timers may fire a millisecond early).
                assert anyio.current_time() - started >= 0.25
                with pytest.raises(LockNotAcquired):
                    async with aiocoord.cas_lock(b, path, owner="b", timeout=0):
                        pytest.fail("entered a held lock")
                with pytest.raises(LockNotAcquired):
                    async with aiocoord.cas_lock(b, path, owner="b", blocking=False):
                        pytest.fail("entered a held lock")
                assert await other.acquire(0.2) is False
                assert not other.held
            assert not lock.held
            assert not (await aiocoord.CasLock(b, path).status()).held
            async with lock:  # free now: the same object enters again
                assert lock.held
                assert await other.acquire(0) is False
            assert await other.acquire(10) is True
            await other.release()


async def test_a_cas_lock_waiter_with_a_timeout_gets_the_lock_once_released(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = "/contract/cas-wait"
    with anyio.fail_after(30):
        async with sessions(zk_server, zk_chroot, 2) as (a, b):
            holder = aiocoord.CasLock(a, path, owner="a", lease=30.0)
            assert await holder.acquire(0) is True
            waiter = aiocoord.CasLock(b, path, owner="b", lease=30.0, timeout=10.0)
            got: list[bool] = []

            async def wait() -> None:
                async with waiter:
                    got.append(waiter.held)

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await anyio.sleep(0.3)
                assert got == []
                await holder.release()
            assert got == [True]
            assert not waiter.held


async def test_a_cas_lock_block_is_cancelled_then_lock_lost_raised(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """``async with CasLock`` keeps `hold()`'s loss handling: a renewal that loses its CAS."""
    path = "/contract/cas-lost"
    forced = encode(LockRecord(held=True, owner="intruder", holder="x", lease_expires=1e10))
    with anyio.fail_after(30):
        async with sessions(zk_server, zk_chroot, 2) as (a, b):
            cancelled = False

            async def hold() -> None:
                nonlocal cancelled
                async with aiocoord.CasLock(a, path, owner="a", lease=1.5, skew=0.1):
                    await b.client.set(path, forced)  # a blind write by someone else
                    try:
                        await anyio.sleep_forever()
                    finally:
                        cancelled = True

            with pytest.raises(LockLost) as info:
                await hold()
            assert cancelled
            assert "CAS" in info.value.reason
            assert (await b.client.get(path)).data == forced  # left untouched
