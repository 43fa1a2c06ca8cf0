"""The mutex on real servers: FIFO, tokens, losses, cleanup, misuse (its pure tables: tests/unit)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import pytest

import aiocoord
from aiocoord import (
    ConfigError,
    ConnectionState,
    Coordinator,
    CoordinatorClosedError,
    InvalidPathError,
    LockLost,
    LockNotAcquired,
    Mutex,
    NodeDataError,
    mutex,
)
from aiocoord.recipes._queue import LOCK, Waiter, created_node, first
from aiocoord.recipes.mutex import MutexParticipant
from aiocoord.testing import FaultProxy, ZooKeeperServer, expire_session
from tests.helpers import eventually, recording

S = ConnectionState


# --- arguments ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_bad_arguments_are_refused_by_name() -> None:
    coord = aiocoord.connect("127.0.0.1:1")
    for path in ("relative/path", "/", "/zookeeper/x"):
        with pytest.raises(InvalidPathError):
            Mutex(coord, path)
    for pid in ("", "x" * 1025, "\ud800"):
        with pytest.raises(ConfigError, match="participant_id"):
            Mutex(coord, "/a", participant_id=pid)
    with pytest.raises(TypeError, match="participant_id"):
        Mutex(coord, "/a", participant_id=b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="lose_on_suspend"):
        Mutex(coord, "/a", lose_on_suspend="no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="coord"):
        mutex("127.0.0.1:2181", "/a")  # type: ignore[arg-type]
    for bad in (-1, float("nan")):
        with pytest.raises(ConfigError, match="timeout"):
            mutex(coord, "/a", timeout=bad)
    with pytest.raises(TypeError, match="timeout"):
        mutex(coord, "/a", timeout="1")  # type: ignore[arg-type]
    m = Mutex(coord, "/a", participant_id="p")
    assert repr(m) == "<Mutex /a id=p FREE>"
    assert m.token is None and not m.is_held and m.node is None
    with pytest.raises(ConfigError, match="timeout"):
        await m.acquire(timeout=-0.5)
    with pytest.raises(CoordinatorClosedError, match="not open"):
        await m.acquire()
    with pytest.raises(CoordinatorClosedError, match="not open"):
        async with m:
            pass
    with pytest.raises(RuntimeError, match="not held"):
        await m.release()


# --- helpers for the real-server tests ----------------------------------------------------


@asynccontextmanager
async def sessions(
    hosts: str, chroot: str, n: int, **settings: Any
) -> AsyncIterator[list[Coordinator]]:
    """`n` coordinators, each its own session."""
    settings.setdefault("session_timeout", 4.0)
    async with AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(aiocoord.connect(hosts, namespace=chroot, **settings))
            for _ in range(n)
        ]


class Holder:
    """``async with mutex(...)`` in a task of its own: entered when it can, left on demand."""

    def __init__(self, coord: Coordinator, path: str, pid: str, **kwargs: Any) -> None:
        self.mutex = mutex(coord, path, participant_id=pid, **kwargs)
        self.entered = anyio.Event()
        self.left = anyio.Event()
        self.token = 0
        self.error: BaseException | None = None
        self.cancelled_inside = False
        self._leave = anyio.Event()

    async def run(self) -> None:
        try:
            async with self.mutex as held:
                assert held is self.mutex and held.is_held and held.token is not None
                self.token = held.token
                self.entered.set()
                try:
                    await self._leave.wait()
                except anyio.get_cancelled_exc_class():
                    self.cancelled_inside = True
                    raise
        except LockLost as exc:
            self.error = exc
        finally:
            self.left.set()

    async def leave(self) -> None:
        self._leave.set()
        await self.left.wait()


async def ids(coord: Coordinator, path: str) -> list[str]:
    return [p.id for p in await Mutex(coord, path).participants()]


async def until_ids(coord: Coordinator, path: str, expected: list[str]) -> None:
    async def check() -> bool:
        return await ids(coord, path) == expected

    await eventually(check, timeout=10, every=0.02)


async def leftovers(coord: Coordinator, path: str) -> list[str]:
    try:
        return await coord.client.children(path)
    except aiocoord.NoNodeError:
        return []


async def start(
    tg: anyio.abc.TaskGroup, holder: Holder, observer: Coordinator, *queue: str
) -> None:
    """Start `holder`, and wait until the queue at its path reads `queue`."""
    tg.start_soon(holder.run)
    await until_ids(observer, holder.mutex.path, list(queue))


# --- the real-server scenarios -------------------------------------------------------------


@pytest.mark.anyio
async def test_fifo_hand_over_in_queue_order_with_rising_tokens(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = "/fifo"
    with anyio.fail_after(30):
        async with (
            sessions(zk_server.connect_string, zk_chroot, 4) as coords,
            anyio.create_task_group() as tg,
        ):
            holders = [Holder(c, path, f"p{i}") for i, c in enumerate(coords)]
            for i, holder in enumerate(holders):
                await start(tg, holder, coords[0], *[f"p{j}" for j in range(i + 1)])
            queue = await Mutex(coords[1], path).participants()
            assert [(p.id, p.holds) for p in queue] == [
                ("p0", True),
                ("p1", False),
                ("p2", False),
                ("p3", False),
            ]
            assert all(p.node.startswith("_c_") and "-lock-" in p.node for p in queue)
            assert queue[0].node == holders[0].mutex.node.rsplit("/", 1)[1]  # type: ignore[union-attr]
            assert repr(holders[1].mutex) == f"<Mutex {path} id=p1 WAITING behind {queue[0].node}>"
            tokens = []
            for i, holder in enumerate(holders):
                await holder.entered.wait()
                assert [h.mutex.is_held for h in holders] == [j == i for j in range(4)]
                assert [h.entered.is_set() for h in holders] == [j <= i for j in range(4)]
                assert repr(holder.mutex) == f"<Mutex {path} id=p{i} HELD token=0x{holder.token:x}>"
                tokens.append(holder.token)
                await holder.leave()
                assert holder.error is None and repr(holder.mutex) == f"<Mutex {path} id=p{i} FREE>"
            assert tokens == sorted(set(tokens))
            assert await leftovers(coords[0], path) == []


@pytest.mark.anyio
async def test_not_reentrant_an_error_not_a_deadlock_and_tasks_share_one_mutex(
    coordinator: Coordinator,
) -> None:
    with anyio.fail_after(20):
        m = Mutex(coordinator, "/re", participant_id="me")
        async with m as held:
            for again in (held, Mutex(coordinator, "/re")):
                with pytest.raises(RuntimeError, match="not reentrant"):
                    await again.acquire(timeout=5)
            with pytest.raises(RuntimeError, match="not reentrant"):
                async with mutex(coordinator, "/re"):
                    pass
            assert held.is_held and await ids(coordinator, "/re") == ["me"]
        assert await m.acquire(timeout=0)  # free again for this task
        await m.release()

        # Tasks sharing one Mutex take it in turn, each acquisition its own node.
        inside: list[str] = []

        async def use(name: str) -> None:
            async with m:
                inside.append(f"+{name}")
                await anyio.sleep(0.01)
                inside.append(f"-{name}")

        async with anyio.create_task_group() as tg:
            for name in "abc":
                tg.start_soon(use, name)
        assert len(inside) == 6
        assert all(inside[i][1] == inside[i + 1][1] for i in range(0, 6, 2))
        assert await leftovers(coordinator, "/re") == []


@pytest.mark.anyio
async def test_timeouts_and_cancelled_waits_leave_no_node(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = "/cx"
    with anyio.fail_after(30), FaultProxy(*zk_server.address) as proxy:
        async with (
            sessions(zk_server.connect_string, zk_chroot, 2) as (lead, other),
            aiocoord.connect(proxy.connect_string, namespace=zk_chroot, session_timeout=4) as slow,
            mutex(lead, path, participant_id="holder"),
        ):
            waiter = Mutex(other, path, participant_id="waiter")
            assert not await waiter.acquire(timeout=0)
            assert not await waiter.acquire(timeout=0.2)
            with pytest.raises(LockNotAcquired):
                async with mutex(other, path, timeout=0.2):
                    pytest.fail("entered a held lock")
            with anyio.move_on_after(0.3) as scope:
                async with mutex(other, path):
                    pytest.fail("entered a held lock")
            assert scope.cancelled_caught
            assert repr(waiter) == f"<Mutex {path} id=waiter FREE>"
            assert await ids(lead, path) == ["holder"]

            # A create still on its way when the wait is cancelled: found by its uuid, deleted.
            proxy.delay(0.4)
            with anyio.move_on_after(0.1) as scope:
                await Mutex(slow, path, participant_id="late").acquire()
            assert scope.cancelled_caught
            proxy.delay(0)
            assert await ids(lead, path) == ["holder"]


@pytest.mark.anyio
async def test_session_expiry_cancels_the_body_then_lock_lost_and_the_next_takes_over(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = "/exp"
    with anyio.fail_after(30):
        async with (
            sessions(zk_server.connect_string, zk_chroot, 2) as (ca, cb),
            anyio.create_task_group() as tg,
        ):
            a, b = Holder(ca, path, "a"), Holder(cb, path, "b")
            await start(tg, a, cb, "a")
            await a.entered.wait()
            await start(tg, b, cb, "a", "b")
            await expire_session(ca)
            await a.left.wait()
            assert a.cancelled_inside
            assert isinstance(a.error, LockLost) and a.error.path == path
            assert a.error.reason in ("suspended", "session lost")
            await b.entered.wait()
            assert b.token > a.token
            assert await ids(ca, path) == ["b"]
            await b.leave()
            assert await leftovers(cb, path) == []


@pytest.mark.anyio
async def test_closing_the_coordinator_cancels_the_body_then_lock_lost(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            coord = aiocoord.connect(zk_server.connect_string, namespace=zk_chroot)
            await coord.start()
            holder = Holder(coord, "/closing", "a")
            tg.start_soon(holder.run)
            await holder.entered.wait()
            await coord.aclose()  # from another task than the body's
            await holder.left.wait()
            assert holder.cancelled_inside
            assert (
                isinstance(holder.error, LockLost) and holder.error.reason == "coordinator closed"
            )


@pytest.mark.anyio
async def test_suspended_loses_when_strict_and_lose_on_suspend_false_keeps_it(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30), FaultProxy(*zk_server.address) as proxy:
        async with (
            sessions(proxy.connect_string, zk_chroot, 2, session_timeout=8) as (c1, c2),
            sessions(zk_server.connect_string, zk_chroot, 1) as (observer,),
            anyio.create_task_group() as tg,
        ):
            strict = Holder(c1, "/strict", "strict", lose_on_suspend=True)
            lenient = Holder(c2, "/lenient", "lenient", lose_on_suspend=False)
            for holder in (strict, lenient):
                tg.start_soon(holder.run)
                await holder.entered.wait()
            async with recording(c1) as conn1, recording(c2) as conn2:
                proxy.cut()
                for conn in (conn1, conn2):
                    back = await conn.wait_for(S.RECONNECTED, timeout=10)
                    assert not back.new_session
            await strict.left.wait()
            assert strict.cancelled_inside
            assert isinstance(strict.error, LockLost) and strict.error.reason == "suspended"
            assert lenient.mutex.is_held and not lenient.left.is_set()
            await lenient.leave()
            assert lenient.error is None and not lenient.cancelled_inside
            for path in ("/strict", "/lenient"):
                assert await leftovers(observer, path) == []


@pytest.mark.anyio
@pytest.mark.parametrize("back_in_time", [True, False], ids=["retried", "by-a-chore"])
async def test_a_release_cut_off_by_a_connection_loss_leaves_no_orphan(
    zk_server: ZooKeeperServer, zk_chroot: str, back_in_time: bool
) -> None:
    """The delete is retried once the connection is back: within the request timeout by
    `release()` itself, or after it by a chore of the session (`release()` then says so)."""
    path = "/orphan"
    settings: dict[str, Any] = {} if back_in_time else {"request_timeout": 1.0}
    with anyio.fail_after(30), FaultProxy(*zk_server.address) as proxy:
        async with (
            aiocoord.connect(
                proxy.connect_string, namespace=zk_chroot, session_timeout=8, **settings
            ) as ca,
            sessions(zk_server.connect_string, zk_chroot, 1) as (cb,),
            anyio.create_task_group() as tg,
            recording(ca) as conn,
        ):
            held = Mutex(ca, path, participant_id="a")
            assert await held.acquire(timeout=5)
            b = Holder(cb, path, "b")
            await start(tg, b, cb, "a", "b")
            proxy.pause()
            released = anyio.Event()
            outcome: list[BaseException | None] = []

            async def release() -> None:
                try:
                    await held.release()
                    outcome.append(None)
                except aiocoord.ConnectionLostError as exc:
                    outcome.append(exc)
                released.set()

            tg.start_soon(release)
            await anyio.wait_all_tasks_blocked()  # the delete is sent, and held up in the proxy
            assert not held.is_held
            proxy.cut()  # the delete never reaches the server
            if not back_in_time:
                await released.wait()  # the request timeout passed first
                assert isinstance(outcome[0], aiocoord.ConnectionLostError)
                assert await ids(cb, path) == ["a", "b"]
            proxy.resume()
            back = await conn.wait_for(S.RECONNECTED, timeout=10)
            assert not back.new_session  # same session: nothing would delete the node but us
            await released.wait()
            assert outcome == [None] if back_in_time else len(outcome) == 1
            await b.entered.wait()
            assert await ids(cb, path) == ["b"]
            await b.leave()


@pytest.mark.anyio
async def test_a_waiter_whose_session_was_lost_joins_again_at_the_tail(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """LOST by the client's own timer: whether its old node is gone by the time it lists
    again (the coordinator ends the old session) or still listed (the ephemeral-owner
    check, below), the waiter queues again at the tail."""
    path = "/stale"
    with anyio.fail_after(40), FaultProxy(*zk_server.address) as proxy:
        async with (
            sessions(zk_server.connect_string, zk_chroot, 2) as (ch, cb),
            aiocoord.connect(
                proxy.connect_string,
                namespace=zk_chroot,
                session_timeout=4,
                session_lost_fraction=0.5,
            ) as ca,
            recording(ca) as conn,
            anyio.create_task_group() as tg,
        ):
            h, a, b = Holder(ch, path, "h"), Holder(ca, path, "a"), Holder(cb, path, "b")
            await start(tg, h, cb, "h")
            await start(tg, a, cb, "h", "a")
            await start(tg, b, cb, "h", "a", "b")
            proxy.pause()
            await conn.wait_for(S.LOST, timeout=10)
            proxy.resume()
            back = await conn.wait_for(S.RECONNECTED, after=conn.mark() - 1, timeout=10)
            assert back.new_session
            await until_ids(cb, path, ["h", "b", "a"])
            await h.leave()
            await b.entered.wait()
            assert not a.entered.is_set()
            await b.leave()
            await a.entered.wait()
            assert a.token > b.token > h.token
            await a.leave()
            assert [x.error for x in (h, a, b)] == [None, None, None]


@pytest.mark.anyio
async def test_a_node_of_another_session_is_never_held_on(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """The ephemeral-owner check (Curator's CURATOR-696 fix; its mutex lacks it, CURATOR-604):
    a node first in line but created by an earlier session of ours is deleted, not held on."""
    with anyio.fail_after(20):
        async with sessions(zk_server.connect_string, zk_chroot, 2) as (coord, earlier):
            created = await earlier.client.create_protected("/own/lock-", b"me")
            ticket = Waiter(coord, "/own", b"me", LOCK, first, recipe="mutex")
            ticket.node = created_node(created)  # as a node of ours from a session now gone
            assert await ticket.wait_turn(None)
            assert ticket.node is not None and ticket.node.path != created.path
            assert ticket.node.owner == coord.session_id
            assert await coord.client.exists(created.path) is None
            await ticket.withdraw()
            assert await leftovers(coord, "/own") == []


@pytest.mark.anyio
async def test_a_waiter_whose_node_someone_deleted_never_holds_on_it(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = "/deleted"
    with anyio.fail_after(30):
        async with (
            sessions(zk_server.connect_string, zk_chroot, 4) as (ch, ca, cb, admin),
            anyio.create_task_group() as tg,
        ):
            h, a, b = Holder(ch, path, "h"), Holder(ca, path, "a"), Holder(cb, path, "b")
            await start(tg, h, admin, "h")
            await start(tg, a, admin, "h", "a")
            await start(tg, b, admin, "h", "a", "b")
            node = a.mutex.node
            assert node is not None
            await admin.client.delete(node)
            await h.leave()
            # `a` wakes with `b` (both now wait behind `h`); its listing lacks its node,
            # so it joins again at the tail instead of holding alongside `b`.
            await b.entered.wait()
            await until_ids(admin, path, ["b", "a"])
            assert not a.entered.is_set()
            await b.leave()
            await a.entered.wait()
            await a.leave()
            assert await leftovers(admin, path) == []


@pytest.mark.anyio
async def test_left_from_another_task_and_participants_of_foreign_nodes(
    coordinator: Coordinator,
) -> None:
    path = "/foreign"
    with anyio.fail_after(20):
        c = coordinator.client
        await c.create(path + "/-blocker", b"10.0.0.7", make_parents=True)  # a contender
        await c.create(path + "/zzz", b"\xff\xfe binary")
        m = Mutex(coordinator, path, participant_id="me")
        assert not await m.acquire(timeout=0.2)  # "-blocker" sorts first and holds it
        with pytest.raises(NodeDataError) as bad:
            await m.participants()
        assert bad.value.path == path + "/zzz"
        await c.delete(path + "/zzz")
        assert await m.participants() == [MutexParticipant("10.0.0.7", True)]
        # Entered in a task of its own (as a framework's start-up hook would), left from this one.
        entering = asyncio.get_running_loop().create_task(m.__aenter__())
        await until_ids(coordinator, path, ["10.0.0.7", "me"])
        await c.delete(path + "/-blocker")
        assert await entering is m
        assert m.is_held
        await m.__aexit__(None, None, None)
        assert not m.is_held and await leftovers(coordinator, path) == []


def test_mutex_benchmark_still_runs(zk_server: ZooKeeperServer) -> None:
    from benchmarks import mutex as bench

    costs = bench.measure_costs(zk_server.connect_string, [3], 0.5)
    ((measured, counts),) = costs
    assert measured.contenders == 3 and sum(counts) == measured.acquisitions > 0
    assert measured.per(measured.notifications) <= 1.05  # one per hand-over (a few at the end)
    assert bench.report_costs(costs, 0.5).splitlines()[1].split()[0] == "3"
    results: dict[str, list[list[int]]] = {"mutex": [[5, 5]], "aiozk Lock": [[4, 6]]}
    table = bench.report(results, 1.0)
    assert "mutex" in table and "1.000" in table
