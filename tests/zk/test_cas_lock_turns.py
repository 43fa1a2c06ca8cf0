"""The CAS lock takes turns: the order its record keeps, then contenders on a real server.

The pure part checks the order (`_turns`): who ranks first, how the list
moves when someone takes the lock, how a newcomer joins.  The server part
runs contenders in a tight acquire -> release loop, where a lock without
turns hands the lock back to the one that just released it again and again.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import anyio.lowlevel
import pytest

import aiocoord
from aiocoord import Coordinator
from aiocoord.recipes.cas_lock import CasLock
from aiocoord.recipes.cas_lock._record import LockRecord, decode, encode
from aiocoord.recipes.cas_lock._turns import (
    MAX_RECENT,
    SKIPPED,
    contender_id,
    joining,
    rank,
    served,
)
from aiocoord.testing import ZooKeeperServer

LOCK = "/locks/turns"

# --- the order (no server) -----------------------------------------------------------------


def test_the_least_recently_served_ranks_first_and_a_newcomer_within_the_first_step() -> None:
    recent = ("a", "b", "c")
    assert [rank(recent, me, 7) for me in recent] == [0.0, 1.0, 2.0]
    assert rank(("a~", "b"), "a", 7) == 0.0  # a mark keeps the place
    newcomers = {rank(recent, f"n{i}", 7) for i in range(50)}
    assert all(0 <= r < 0.5 for r in newcomers) and len(newcomers) == 50
    assert rank(recent, "n1", 7) == rank(recent, "n1", 7) != rank(recent, "n1", 9)


def test_taking_the_lock_moves_to_the_end_and_marks_then_drops_who_let_a_turn_pass() -> None:
    assert served(("a", "b", "c"), "a") == ("b", "c", "a")
    assert served(("a", "b", "c"), "d") == ("a", "b", "c", "d")
    assert served(("a", "b", "c"), "b", skipped=1) == ("a" + SKIPPED, "c", "b")
    assert served(("a" + SKIPPED, "b", "c"), "c", skipped=2) == ("b" + SKIPPED, "c")
    assert served(("a" + SKIPPED, "b"), "a") == ("b", "a")  # served: unmarked
    full = tuple(f"c{i}" for i in range(MAX_RECENT))
    after = served(full, "new")
    assert len(after) == MAX_RECENT and after[-1] == "new" and after[0] == "c0"


def test_a_newcomer_joins_just_before_the_holder_and_states_the_token() -> None:
    held = LockRecord(held=True, owner="h", holder="x", lease_expires=1e9, recent=("a", "h"))
    joined = joining(held, 42, "n")
    assert joined is not None and joined.recent == ("a", "n", "h") and joined.token == 42
    assert joining(joined, 43, "n") is None  # listed already
    assert joining(LockRecord(held=True, holder="x", lease_expires=1e9, token=5), 9, "n") == (
        LockRecord(held=True, holder="x", lease_expires=1e9, token=5, recent=("n",))
    )
    assert decode("/x", encode(joined)) == joined


def test_a_contender_is_one_owner_on_one_session() -> None:
    assert contender_id("pod-1", 7) == contender_id("pod-1", 7)
    assert len({contender_id("pod-1", 7), contender_id("pod-2", 7), contender_id("pod-1", 8)}) == 3


# --- on a real server ----------------------------------------------------------------------


@asynccontextmanager
async def sessions(
    server: ZooKeeperServer, chroot: str, n: int
) -> AsyncIterator[list[Coordinator]]:
    async with AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(
                aiocoord.connect(server.connect_string, namespace=chroot, session_timeout=10.0)
            )
            for _ in range(n)
        ]


async def tight_loop(coords: list[Coordinator], steady: int) -> tuple[list[int], int]:
    """Each coordinator acquires and releases as fast as it can, until `steady` acquisitions
    have followed the first one of the last contender to get one.

    Returns the order of acquisitions and how many came before that point.
    """
    order: list[int] = []
    warm: int | None = None
    inside = 0

    async def contender(i: int) -> None:
        nonlocal inside, warm
        lock = CasLock(coords[i], LOCK, owner=f"c{i}", lease=10.0)
        while warm is None or len(order) < warm + steady:
            await lock.acquire()
            inside += 1
            assert inside == 1, "two holders at once"
            order.append(i)
            if warm is None and len(set(order)) == len(coords):
                warm = len(order)
            await anyio.lowlevel.checkpoint()
            inside -= 1
            await lock.release()

    async with anyio.create_task_group() as tg:
        for i in range(len(coords)):
            tg.start_soon(contender, i)
    assert warm is not None
    return order, warm


@pytest.mark.anyio
@pytest.mark.parametrize("k", [4, 8])
async def test_contenders_in_a_tight_loop_take_turns(
    zk_server: ZooKeeperServer, zk_chroot: str, k: int
) -> None:
    """Once every contender is listed, the lock goes round: hardly ever to the same one twice.

    Without turns, the contender that just released takes the lock again most
    of the time (it writes first, without reading).  A loaded machine may stall
    a waiter past its turn now and then, so a few repeats are allowed.
    """
    with anyio.fail_after(120):
        async with sessions(zk_server, zk_chroot, k) as coords:
            order, warm = await tight_loop(coords, steady=20 * k)
            record = decode(LOCK, (await coords[0].client.get(LOCK)).data)
            ids = {contender_id(f"c{i}", c.session_id) for i, c in enumerate(coords)}
    steady = order[warm:]
    repeats = sum(a == b for a, b in itertools.pairwise(steady))
    assert repeats <= len(steady) // 10, (repeats, steady)
    counts = Counter(steady)
    assert min(counts.values()) >= len(steady) / k / 2, counts
    assert record is not None
    listed = {entry.rstrip(SKIPPED) for entry in record.recent}
    assert listed == ids
