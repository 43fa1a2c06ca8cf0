"""`Barrier` and `double_barrier` against a real server, on Curator's layouts."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AsyncExitStack, suppress

import anyio
import pytest

import aiocoord
from aiocoord import Barrier, ConfigError, double_barrier
from aiocoord.testing import FaultProxy, ZooKeeperServer, expire_session
from tests.helpers import eventually

pytestmark = pytest.mark.anyio


async def test_barrier_set_wait_remove(coordinator: aiocoord.Coordinator) -> None:
    barrier = Barrier(coordinator, "/b/deploy")
    with anyio.fail_after(20):
        assert await barrier.wait(timeout=0)  # down: at once
        await barrier.set()
        await barrier.set()  # idempotent
        assert await barrier.is_set()
        assert (await coordinator.client.get("/b/deploy")).data == b""
        assert not await barrier.wait(timeout=0.2)
        passed = anyio.Event()

        async def waiter() -> None:
            assert await barrier.wait()
            passed.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.sleep(0.1)
            assert not passed.is_set()
            await barrier.remove()
            await passed.wait()
        await barrier.remove()  # idempotent
        assert not await barrier.is_set()


async def test_barrier_removed_while_disconnected_ends_the_wait(
    coordinator: aiocoord.Coordinator, zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as other:
            await Barrier(other, "/b/x").set()
            async with anyio.create_task_group() as tg:
                result: list[bool] = []

                async def waiter() -> None:
                    result.append(await Barrier(coordinator, "/b/x").wait())

                tg.start_soon(waiter)
                await anyio.sleep(0.2)
                await expire_session(coordinator)
                await Barrier(other, "/b/x").remove()
            assert result == [True]


async def test_double_barrier_in_together_out_together(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    hosts = zk_server.connect_string
    entered: list[str] = []
    left: list[str] = []
    with anyio.fail_after(30):
        async with AsyncExitStack() as stack:
            coords = [
                await stack.enter_async_context(aiocoord.connect(hosts, namespace=zk_chroot))
                for _ in range(3)
            ]
            release = [anyio.Event() for _ in coords]
            all_in = anyio.Event()

            async def member(i: int) -> None:
                barrier = double_barrier(coords[i], "/b/batch", members=3, participant_id=f"p{i}")
                async with barrier:
                    entered.append(barrier.participant_id)
                    if len(entered) == 3:
                        all_in.set()
                    assert barrier.entered and "ENTERED" in repr(barrier)
                    await release[i].wait()
                left.append(barrier.participant_id)

            async with anyio.create_task_group() as tg:
                tg.start_soon(member, 0)
                tg.start_soon(member, 1)
                await anyio.sleep(0.3)
                assert entered == []  # two of three
                tg.start_soon(member, 2)
                await all_in.wait()
                release[0].set()
                release[1].set()
                await anyio.sleep(0.3)
                assert left == []  # one is still in
                release[2].set()
            assert sorted(left) == ["p0", "p1", "p2"]
            # Nothing of ours is left: the barrier's node is empty, or already gone
            # (a container: the server's container check may have deleted it).
            with suppress(aiocoord.NoNodeError):
                assert await coords[0].client.children("/b/batch") == []


async def test_double_barrier_enter_timeout_takes_its_node_back(
    coordinator: aiocoord.Coordinator,
) -> None:
    barrier = double_barrier(coordinator, "/b/t", members=2, participant_id="alone")
    with anyio.fail_after(10):
        assert not await barrier.enter(timeout=0.3)
        assert not barrier.entered
        assert await coordinator.client.children("/b/t") == []
        assert await barrier.leave()  # not entered: nothing


async def test_bad_arguments_name_themselves(coordinator: aiocoord.Coordinator) -> None:
    with pytest.raises(ConfigError, match="members"):
        double_barrier(coordinator, "/b", members=0)
    with pytest.raises(TypeError, match="members"):
        double_barrier(coordinator, "/b", members="2")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="participant_id"):
        double_barrier(coordinator, "/b", members=2, participant_id="ready")
    with pytest.raises(ConfigError, match="participant_id"):
        double_barrier(coordinator, "/b", members=2, participant_id="a/b")
    with pytest.raises(TypeError, match="coord"):
        Barrier("zk", "/b")  # type: ignore[arg-type]


async def test_a_participant_lost_with_its_session_while_entering_joins_again(
    coordinator: aiocoord.Coordinator, zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(40):
        async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as other:
            entered = anyio.Event()
            old: int | None = None

            async def first() -> None:
                async with double_barrier(coordinator, "/b/lost", members=2, participant_id="a"):
                    entered.set()
                    await anyio.sleep_forever()

            async def joined_on(session: int | None) -> bool:
                stat = await other.client.exists("/b/lost/a")
                return stat is not None and stat.ephemeral_owner == session != old

            async with anyio.create_task_group() as tg:
                tg.start_soon(first)
                await eventually(lambda: joined_on(coordinator.session_id))
                old = coordinator.session_id
                await expire_session(coordinator)
                await eventually(lambda: joined_on(coordinator.session_id), timeout=20)
                async with double_barrier(other, "/b/lost", members=2, participant_id="b"):
                    await entered.wait()
                    tg.cancel_scope.cancel()


@pytest.fixture
def proxy(zk_server: ZooKeeperServer) -> Iterator[FaultProxy]:
    with FaultProxy(*zk_server.address) as p:
        yield p


async def test_barrier_wait_keeps_its_deadline_while_zookeeper_is_silent(
    coordinator: aiocoord.Coordinator, proxy: FaultProxy, zk_chroot: str
) -> None:
    # The first read is inside the deadline: a silent server gives False at the
    # deadline, never `ConnectionLostError` after the request timeout.
    with anyio.fail_after(30):
        async with aiocoord.connect(
            proxy.connect_string, namespace=zk_chroot, session_timeout=6.0
        ) as waiting:
            barrier = Barrier(waiting, "/b/silent")
            await Barrier(coordinator, "/b/silent").set()
            proxy.pause()
            try:
                started = anyio.current_time()
                assert await barrier.wait(timeout=1) is False
                assert anyio.current_time() - started < 1.5

                async def suspended() -> bool:
                    return waiting.state is aiocoord.ConnectionState.SUSPENDED

                await eventually(suspended)
                started = anyio.current_time()
                assert await barrier.wait(0) is False  # no connection to look on
                assert anyio.current_time() - started < 0.5
            finally:
                proxy.resume()


async def test_barrier_wait_started_while_zookeeper_is_silent_ends_when_it_answers(
    coordinator: aiocoord.Coordinator, proxy: FaultProxy, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with aiocoord.connect(
            proxy.connect_string, namespace=zk_chroot, session_timeout=6.0
        ) as waiting:
            await Barrier(coordinator, "/b/later").set()
            proxy.pause()
            result: list[bool] = []
            try:
                async with anyio.create_task_group() as tg:

                    async def waiter() -> None:
                        result.append(await Barrier(waiting, "/b/later").wait(timeout=20))

                    tg.start_soon(waiter)
                    # Past the request timeout: the first read has failed by now.
                    await anyio.sleep(waiting.client.session.timing.request_timeout + 0.5)
                    assert result == []
                    await Barrier(coordinator, "/b/later").remove()
                    proxy.resume()
            finally:
                proxy.resume()
            assert result == [True]
