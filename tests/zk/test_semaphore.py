"""The semaphore on real servers: at most N holders, FIFO leases, losses, cleanup, bad input."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager, suppress
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
    Lease,
    LockLost,
    LockNotAcquired,
    Semaphore,
    semaphore,
)
from aiocoord.testing import FaultProxy, ZooKeeperServer, expire_session
from tests.helpers import eventually, recording

pytestmark = pytest.mark.anyio

S = ConnectionState


async def test_bad_arguments_are_refused_by_name() -> None:
    coord = aiocoord.connect("127.0.0.1:1")
    for path in ("relative/path", "/", "/zookeeper/x"):
        with pytest.raises(InvalidPathError):
            Semaphore(coord, path, max_leases=1)
    for bad in (0, -3):
        with pytest.raises(ConfigError, match="max_leases"):
            Semaphore(coord, "/s", max_leases=bad)
    for wrong in ("2", 2.0, True, None):
        with pytest.raises(TypeError, match="max_leases"):
            Semaphore(coord, "/s", max_leases=wrong)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="participant_id"):
        semaphore(coord, "/s", max_leases=1, participant_id="")
    with pytest.raises(TypeError, match="lose_on_suspend"):
        semaphore(coord, "/s", max_leases=1, lose_on_suspend=1)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="timeout"):
        semaphore(coord, "/s", max_leases=1, timeout=-1)
    with pytest.raises(TypeError, match="coord"):
        Semaphore("127.0.0.1:2181", "/s", max_leases=1)  # type: ignore[arg-type]
    sem = Semaphore(coord, "/s", max_leases=2, participant_id="p")
    assert repr(sem) == "<Semaphore /s id=p max_leases=2 blocks=0>"
    with pytest.raises(ConfigError, match="timeout"):
        await sem.acquire(timeout=float("nan"))
    with pytest.raises(CoordinatorClosedError, match="not open"):
        await sem.acquire()
    with pytest.raises(CoordinatorClosedError, match="not open"):
        async with sem:
            pass


@asynccontextmanager
async def sessions(
    hosts: str, chroot: str, n: int, **settings: Any
) -> AsyncIterator[list[Coordinator]]:
    settings.setdefault("session_timeout", 4.0)
    async with AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(aiocoord.connect(hosts, namespace=chroot, **settings))
            for _ in range(n)
        ]


async def until(condition: Callable[[], bool]) -> None:
    """Wait for a local condition set by another task (bounded)."""

    async def check() -> bool:
        return condition()

    await eventually(check, timeout=10, every=0.01)


async def leftovers(coord: Coordinator, path: str) -> list[str]:
    names: list[str] = []
    for part in ("locks", "leases"):
        with suppress(aiocoord.NoNodeError):
            names += await coord.client.children(f"{path}/{part}")
    return names


async def test_never_more_than_n_holders_and_every_contender_gets_its_turns(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path, n, k, rounds = "/sem/cap", 2, 5, 6
    holding: set[str] = set()
    most = 0
    tokens: list[int] = []
    turns: dict[str, int] = {}

    async def contender(coord: Coordinator, name: str) -> None:
        nonlocal most
        for _ in range(rounds):
            async with semaphore(coord, path, max_leases=n, participant_id=name) as lease:
                assert lease.is_held and name not in holding
                holding.add(name)
                most = max(most, len(holding))
                tokens.append(lease.token)
                await anyio.sleep(0.01)
                holding.discard(name)
            turns[name] = turns.get(name, 0) + 1

    with anyio.fail_after(60):
        async with sessions(zk_server.connect_string, zk_chroot, k) as coords:
            async with anyio.create_task_group() as tg:
                for i, coord in enumerate(coords):
                    tg.start_soon(contender, coord, f"c{i}")
            assert most == n
            assert turns == {f"c{i}": rounds for i in range(k)}
            assert len(set(tokens)) == k * rounds
            assert await leftovers(coords[0], path) == []


async def test_a_contender_past_n_waits_until_a_holder_releases(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """Two leases of two held: a third is refused for as long as they hold, then granted."""
    path = "/sem/third"
    with anyio.fail_after(30):
        async with sessions(zk_server.connect_string, zk_chroot, 3) as coords:
            sems = [
                Semaphore(coord, path, max_leases=2, participant_id=f"c{i}")
                for i, coord in enumerate(coords)
            ]
            first, second = await sems[0].acquire(timeout=5), await sems[1].acquire(timeout=5)
            assert first is not None and second is not None
            assert await sems[2].acquire(timeout=0.5) is None
            await first.release()
            third = await sems[2].acquire(timeout=5)
            assert third is not None
            await second.release()
            await third.release()
            assert await leftovers(coords[0], path) == []


async def test_acquire_returns_none_past_its_timeout_and_leaves_no_node(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = "/sem/timeout"
    with anyio.fail_after(30):
        async with sessions(zk_server.connect_string, zk_chroot, 2) as (ca, cb):
            a = Semaphore(ca, path, max_leases=1, participant_id="a")
            b = Semaphore(cb, path, max_leases=1, participant_id="b")
            first = await a.acquire()
            assert isinstance(first, Lease) and first.is_held
            assert [p.id for p in await a.participants()] == ["a"]
            assert await b.acquire(timeout=0) is None
            assert await b.acquire(timeout=0.3) is None
            with pytest.raises(LockNotAcquired):
                async with semaphore(cb, path, max_leases=1, timeout=0.2):
                    pass
            with anyio.move_on_after(0.3):
                await b.acquire()
            assert await leftovers(cb, path) == [first.node.rsplit("/", 1)[1]]
            with pytest.raises(RuntimeError, match="wait for itself"):
                await a.acquire(timeout=0)  # this task's own lease fills it
            with pytest.raises(RuntimeError, match="wait for itself"):
                await Semaphore(ca, path, max_leases=1).acquire()  # through another object too
            await first.release()
            await first.release()  # twice: a no-op
            again = await a.acquire(timeout=5)  # released: this task may take one again
            assert again is not None
            await again.release()
            assert not first.is_held
            lease = await b.acquire(timeout=5)
            assert lease is not None and lease.token > first.token
            assert [(p.id, p.holds) for p in await b.participants()] == [("b", True)]
            await lease.release()
            assert await leftovers(ca, path) == []


async def test_leases_go_in_the_order_they_were_asked_for(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = "/sem/fifo"
    order: list[str] = []
    with anyio.fail_after(30):
        async with (
            sessions(zk_server.connect_string, zk_chroot, 4) as coords,
            anyio.create_task_group() as tg,
        ):
            gate = await Semaphore(coords[0], path, max_leases=1).acquire()
            assert gate is not None

            async def take(coord: Coordinator, name: str) -> None:
                lease = await Semaphore(coord, path, max_leases=1, participant_id=name).acquire()
                assert lease is not None
                order.append(name)
                await lease.release()

            for i, coord in enumerate(coords[1:]):
                tg.start_soon(take, coord, f"w{i}")

                async def queued(count: int = i + 1) -> bool:
                    return len(await coords[0].client.children(f"{path}/locks")) == count

                await eventually(queued, timeout=10)
            await gate.release()
        assert order == ["w0", "w1", "w2"]


async def test_session_expiry_cancels_the_body_then_lock_lost_and_a_waiter_takes_over(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = "/sem/expiry"
    entered = anyio.Event()
    outcome: list[BaseException] = []
    cancelled_inside = False

    async def holder(coord: Coordinator) -> None:
        nonlocal cancelled_inside
        try:
            async with semaphore(coord, path, max_leases=1, participant_id="a"):
                entered.set()
                try:
                    await anyio.sleep_forever()
                except anyio.get_cancelled_exc_class():
                    cancelled_inside = True
                    raise
        except LockLost as exc:
            outcome.append(exc)

    with anyio.fail_after(30):
        async with (
            sessions(zk_server.connect_string, zk_chroot, 2) as (ca, cb),
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(holder, ca)
            await entered.wait()
            waiter = Semaphore(cb, path, max_leases=1, participant_id="b")
            with anyio.move_on_after(0.2):
                await waiter.acquire()
            await expire_session(ca)
            lease = await waiter.acquire(timeout=15)
            assert lease is not None
            await until(lambda: bool(outcome))
            assert cancelled_inside
            assert isinstance(outcome[0], LockLost) and outcome[0].path == path
            assert [p.id for p in await waiter.participants()] == ["b"]
            await lease.release()


async def test_a_waiter_keeps_its_place_through_suspended(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = "/sem/suspended"
    with anyio.fail_after(30), FaultProxy(*zk_server.address) as proxy:
        async with (
            sessions(proxy.connect_string, zk_chroot, 1, session_timeout=8) as (cw,),
            sessions(zk_server.connect_string, zk_chroot, 2) as (ch, observer),
            anyio.create_task_group() as tg,
        ):
            held = await Semaphore(ch, path, max_leases=1, participant_id="h").acquire()
            assert held is not None
            got: list[Lease] = []

            async def wait() -> None:
                lease = await Semaphore(cw, path, max_leases=1, participant_id="w").acquire()
                assert lease is not None
                got.append(lease)

            tg.start_soon(wait)

            async def queued() -> bool:
                return len(await observer.client.children(f"{path}/leases")) == 2

            await eventually(queued, timeout=10)
            before = await observer.client.children(f"{path}/leases")
            async with recording(cw) as conn:
                proxy.cut()
                back = await conn.wait_for(S.RECONNECTED, timeout=10)
                assert not back.new_session
            assert await observer.client.children(f"{path}/leases") == before  # same place
            await held.release()
            await until(lambda: bool(got))
            assert got[0].is_held and got[0].node.rsplit("/", 1)[1] in before
            await got[0].release()
            assert await leftovers(observer, path) == []


async def test_suspended_loses_a_held_lease_when_strict(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = "/sem/strict"
    errors: list[BaseException] = []
    entered = anyio.Event()

    async def hold(coord: Coordinator) -> None:
        try:
            async with semaphore(
                coord, path, max_leases=2, participant_id="s", lose_on_suspend=True
            ):
                entered.set()
                await anyio.sleep_forever()
        except LockLost as exc:
            errors.append(exc)

    with anyio.fail_after(30), FaultProxy(*zk_server.address) as proxy:
        async with (
            sessions(proxy.connect_string, zk_chroot, 1, session_timeout=8) as (c,),
            sessions(zk_server.connect_string, zk_chroot, 1) as (observer,),
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(hold, c)
            await entered.wait()
            async with recording(c) as conn:
                proxy.cut()
                await conn.wait_for(S.RECONNECTED, timeout=10)
            await until(lambda: bool(errors))
            assert isinstance(errors[0], LockLost) and errors[0].reason == "suspended"

            async def clean() -> bool:
                return await leftovers(observer, path) == []

            await eventually(clean, timeout=10)


def test_locks_benchmark_still_runs(zk_server: ZooKeeperServer) -> None:
    from benchmarks import locks as bench

    for kind in bench.KINDS:
        ((costs, counts),) = bench.measure_costs(zk_server.connect_string, kind, [3], 0.5, 2)
        assert costs.contenders == 3 and sum(counts) == costs.acquisitions > 0
    table = bench.report({"aiocoord": [[5, 5]], "Curator": [[5, 5]], "kazoo": [[4, 4]]}, 1.0)
    assert "1.25x" in table and "1.00x" in table and "1.000" in table


async def test_a_waiter_whose_session_expired_joins_again_and_gets_its_lease(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = "/sem/rejoin"
    with anyio.fail_after(40):
        async with (
            sessions(zk_server.connect_string, zk_chroot, 3) as (ch, cw, observer),
            anyio.create_task_group() as tg,
        ):
            held = await Semaphore(ch, path, max_leases=1, participant_id="h").acquire()
            assert held is not None
            got: list[Lease] = []

            async def wait() -> None:
                lease = await Semaphore(cw, path, max_leases=1, participant_id="w").acquire()
                assert lease is not None
                got.append(lease)

            tg.start_soon(wait)

            async def waiting(sid: int | None) -> bool:
                try:
                    names = await observer.client.children(f"{path}/leases")
                    nodes = [await observer.client.get(f"{path}/leases/{n}") for n in names]
                except aiocoord.NoNodeError:
                    return False
                return any(n.stat.ephemeral_owner == sid and n.data == b"w" for n in nodes)

            await eventually(lambda: waiting(cw.session_id), timeout=10)
            old = cw.session_id
            await expire_session(cw)
            await until(lambda: cw.session_id not in (None, old))
            await eventually(lambda: waiting(cw.session_id), timeout=15)  # in line again
            assert not got
            await held.release()
            await until(lambda: bool(got))
            assert got[0].is_held and got[0].token > held.token
            await got[0].release()
            assert await leftovers(observer, path) == []


async def test_an_uncontended_lease_costs_six_requests(
    coordinator: Coordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inner mutex create, listing, lease create, listing, inner mutex delete, lease delete.

    The leases' listing sets a watch that a granted lease no longer needs; asking the
    server to drop it put a seventh request ahead of the inner mutex's delete, which
    every waiter of the semaphore queues behind.
    """
    from aiocoord.zk import _connection
    from aiocoord.zk._wire import OpCode

    sent: list[OpCode] = []
    queue = _connection.Connection.queue

    def counted(
        self: _connection.Connection,
        packet: bytes,
        xid: int,
        opcode: OpCode,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        sent.append(opcode)
        return queue(self, packet, xid, opcode, *args, **kwargs)

    with anyio.fail_after(20):
        sem = semaphore(coordinator, "/s/cost", max_leases=2)
        async with sem:  # the parents are created on the first one
            pass
        monkeypatch.setattr(_connection.Connection, "queue", counted)
        async with sem:
            pass
        requests = [op for op in sent if op is not OpCode.PING]
        assert len(requests) == 6, requests


async def test_a_session_lost_between_the_grant_and_the_block_cancels_the_block(
    zk_server: ZooKeeperServer, zk_chroot: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lease granted on a session that is lost before the block starts is lost at once.

    The grant is followed by an await (the inner mutex is left) before the
    hold follows the connection states; a session lost meanwhile used to be
    taken for history, and the block ran on a lease node that had gone with
    the old session: a third holder of two leases in campaign seeds 41 and
    51 (the participant frozen, or its session expired by force, right
    after the grant).  Here the session is expired while the inner mutex is
    left, and the block must be cancelled as soon as it starts.
    """
    semaphore_module = __import__("aiocoord.recipes.mutex._semaphore", fromlist=["Waiter"])
    original = semaphore_module.Waiter.leave
    async with sessions(zk_server.connect_string, zk_chroot, 1) as (coord,):
        expired: list[int] = []

        async def leave(self: Any) -> None:
            if not expired and self.node is not None:  # the inner mutex, left after the grant
                old = coord.session_id
                assert old is not None
                expired.append(old)
                await expire_session(coord)
                await until(
                    lambda: (
                        coord.session_id not in (None, old)
                        and coord.state in (S.CONNECTED, S.RECONNECTED)
                    )
                )
            await original(self)

        monkeypatch.setattr(semaphore_module.Waiter, "leave", leave)
        ran_on: list[bool] = []

        async def hold() -> None:
            async with semaphore(coord, "/sem/grant", max_leases=1, participant_id="a") as lease:
                assert expired, "the session was not expired between the grant and the block"
                await anyio.sleep(3)
                ran_on.append(lease.is_held)

        with anyio.fail_after(30), pytest.raises(LockLost):
            await hold()
        assert not ran_on, "the block ran on a lease of the lost session"
