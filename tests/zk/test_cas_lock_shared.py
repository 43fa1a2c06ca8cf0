"""One `CasLock` shared by several tasks of one process: they take it in turn.

The documented form ``lock = CasLock(...); async with lock:`` is used from
many tasks; each must hold it alone, with its own hold (one task's exit never
releases another's), and a task's `timeout` covers its wait for the others.
"""

from __future__ import annotations

import time

import anyio
import pytest

from aiocoord import Coordinator, LockNotAcquired
from aiocoord.recipes.cas_lock import CasLock, cas_lock
from aiocoord.recipes.cas_lock._record import decode

LOCK = "/locks/shared"


@pytest.mark.anyio
async def test_tasks_sharing_one_cas_lock_never_hold_it_at_once(coordinator: Coordinator) -> None:
    lock = CasLock(coordinator, LOCK, owner="pod", lease=10)
    inside: list[str] = []
    overlaps: list[tuple[str, ...]] = []
    entered: list[str] = []
    tokens: list[int | None] = []

    async def worker(name: str) -> None:
        for _ in range(3):
            async with lock:
                inside.append(name)
                if len(inside) > 1:
                    overlaps.append(tuple(inside))
                entered.append(name)
                tokens.append(lock.token)
                await anyio.sleep(0.05)  # others get to run while we hold it
                inside.remove(name)

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            for name in ("a", "b", "c"):
                tg.start_soon(worker, name)
        assert overlaps == []
        assert sorted(entered) == ["a"] * 3 + ["b"] * 3 + ["c"] * 3
        assert all(t is not None for t in tokens) and len(set(tokens)) == 9
        assert not lock.held
        node = await coordinator.client.get(LOCK)
        record = decode(LOCK, node.data)
        assert record is not None and not record.held and record.token == tokens[-1]


@pytest.mark.anyio
async def test_a_task_waiting_its_turn_times_out_with_lock_not_acquired(
    coordinator: Coordinator,
) -> None:
    lock = CasLock(coordinator, LOCK, owner="pod", lease=10, timeout=0.5)
    held = anyio.Event()
    done = anyio.Event()

    async def holder() -> None:
        async with lock:
            held.set()
            await done.wait()

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(holder)
            await held.wait()
            # The same lock from another task: its turn does not come within the timeout.
            started = time.monotonic()
            with pytest.raises(LockNotAcquired) as info:
                async with lock:
                    pytest.fail("entered while another task holds it")
            assert 0.4 < time.monotonic() - started < 3
            assert info.value.holder == "pod"
            assert not await lock.try_acquire()  # another task has it: no, without waiting
            with pytest.raises(LockNotAcquired):
                async with lock.hold(blocking=False):
                    pytest.fail("entered while another task holds it")
            assert lock.held  # the holder's hold is untouched
            done.set()
        # The holder released; the lock is free for the next task again.
        async with cas_lock(coordinator, LOCK, owner="other", lease=10, blocking=False) as other:
            assert other.held


@pytest.mark.anyio
async def test_the_same_task_acquiring_twice_is_refused(coordinator: Coordinator) -> None:
    lock = CasLock(coordinator, LOCK, owner="pod", lease=10)
    with anyio.fail_after(20):
        assert await lock.acquire(timeout=5)
        with pytest.raises(RuntimeError, match="not reentrant"):
            await lock.acquire(timeout=5)
        with pytest.raises(RuntimeError, match="not reentrant"):
            await lock.try_acquire()

        # Any task may release what another acquired; the next one then gets its turn.
        async def release() -> None:
            await lock.release()

        async with anyio.create_task_group() as tg:
            tg.start_soon(release)
        assert not lock.held
        assert await lock.acquire(timeout=5)
        await lock.release()
