"""The session manager against real ZooKeeper: Curator's states, healing, watches, deadlines."""

from __future__ import annotations

import time
from collections.abc import Iterator

import anyio
import pytest

import aiocoord
from aiocoord import ConnectionLostError, ConnectionState, CoordinatorClosedError, InvalidPathError
from aiocoord.errors import NotReadOnlyError
from aiocoord.testing import (
    EnsembleMember,
    FaultProxy,
    SilentListener,
    ZooKeeperEnsemble,
    ZooKeeperServer,
    expire_session,
)
from aiocoord.zk import CreateMode, EventType
from tests.helpers import eventually, recording

S = ConnectionState
pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def fault_server() -> Iterator[ZooKeeperServer]:
    """A server of this module's own, for tests that stop and restart it."""
    with ZooKeeperServer() as server:
        yield server


@pytest.fixture
def proxy(zk_server: ZooKeeperServer) -> Iterator[FaultProxy]:
    with FaultProxy(*zk_server.address) as p:
        yield p


async def test_first_event_is_connected(zk_server: ZooKeeperServer, zk_chroot: str) -> None:
    with anyio.fail_after(15):
        async with aiocoord.connect(
            zk_server.connect_string, namespace=zk_chroot, session_timeout=4
        ) as coord:
            await coord.wait_connected()
            first = await coord.connection_events().__anext__()
            assert first.state is S.CONNECTED
            assert first.session_id == coord.session_id is not None
            assert coord.state is S.CONNECTED
            assert isinstance(coord.session_password, bytes)
            assert 0.5 <= coord.session_timeout <= 4.0
            assert await coord.client.exists("/") is not None  # the namespace was created


async def test_restart_within_timeout_keeps_session_and_watches(
    fault_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(40):
        hosts = fault_server.connect_string
        async with (
            aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=8) as coord,
            aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=8) as other,
        ):
            c = coord.client
            await c.create("/eph", mode=CreateMode.EPHEMERAL)
            await c.create("/data", b"1")
            await c.create("/kids")
            await c.create("/doomed")
            _, data_watch = await c.get_watch("/data")
            _, child_watch = await c.children_watch("/kids")
            _, delete_watch = await c.exists_watch("/doomed")  # waits for the deletion
            absent, create_watch = await c.exists_watch("/later")  # waits for the creation
            assert absent is None
            session = coord.session_id
            async with recording(coord) as rec:
                fault_server.restart()
                suspended = await rec.wait_for(S.SUSPENDED)
                back = await rec.wait_for(S.RECONNECTED, after=rec.events.index(suspended))
                assert back.new_session is False
                assert back.session_id == session == coord.session_id
                assert S.LOST not in rec.states
            assert await other.client.exists("/eph") is not None
            await other.wait_connected()
            # No spurious events: nothing changed, so nothing fired.
            for watch in (data_watch, child_watch, delete_watch, create_watch):
                assert not watch.fired, watch
            await other.client.set("/data", b"2")
            await other.client.create("/kids/k")
            await other.client.delete("/doomed")
            await other.client.create("/later")
            with anyio.fail_after(5):
                assert (await data_watch.wait()).type is EventType.DATA_CHANGED
                assert (await child_watch.wait()).type is EventType.CHILDREN_CHANGED
                assert (await delete_watch.wait()).type is EventType.DELETED
                assert (await create_watch.wait()).type is EventType.CREATED


async def test_expired_on_server_lost_then_new_session(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        hosts = zk_server.connect_string
        async with (
            aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=4) as coord,
            aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=4) as other,
        ):
            await coord.client.create("/eph", mode=CreateMode.EPHEMERAL)
            _, watch = await coord.client.get_watch("/eph")
            old = coord.session_id
            async with recording(coord) as rec:
                assert await expire_session(coord) is True
                lost = await rec.wait_for(S.LOST)
                assert lost.session_id == old
                back = await rec.wait_for(S.RECONNECTED, after=rec.events.index(lost))
                assert back.new_session is True
                assert back.session_id == coord.session_id != old
                # The watch died with the session and says so.
                assert (await watch.wait()).type is EventType.SESSION_LOST
                assert await other.client.exists("/eph") is None
                count = rec.mark()
                with anyio.move_on_after(1.0):
                    await rec.wait_for(S.SUSPENDED, after=count, timeout=2)
                    pytest.fail("an event arrived after the new session settled")
                assert rec.states[count:] == []
            # The new session works.
            await coord.client.create("/eph2", mode=CreateMode.EPHEMERAL)


async def test_server_down_past_threshold_is_lost_without_the_server(
    fault_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(40):
        async with aiocoord.connect(
            fault_server.connect_string, namespace=zk_chroot, session_timeout=2
        ) as coord:
            timeout = coord.session_timeout
            old = coord.session_id
            async with recording(coord) as rec:
                stopped_at = time.monotonic()
                fault_server.stop()
                try:
                    lost = await rec.wait_for(S.LOST, timeout=timeout + 5)
                    # Counted from the last answer, which came at most timeout/3 before the stop.
                    assert lost.at - stopped_at <= timeout + 0.75
                    assert lost.at - stopped_at >= timeout * 2 / 3 - 0.2
                    assert lost.session_id == old
                    assert not fault_server.running
                finally:
                    fault_server.start()
                back = await rec.wait_for(S.RECONNECTED, after=rec.events.index(lost), timeout=15)
                assert back.new_session is True
                assert coord.session_id not in (None, old)


async def test_killing_the_members_server_moves_the_session(
    zk_ensemble: ZooKeeperEnsemble, zk_chroot: str
) -> None:
    with anyio.fail_after(60):
        async with aiocoord.connect(
            zk_ensemble.connect_string, namespace=zk_chroot, session_timeout=6
        ) as coord:
            await coord.client.create("/eph", mode=CreateMode.EPHEMERAL)
            assert coord.connected_address is not None
            member = zk_ensemble.member_for_port(coord.connected_address[1])
            session = coord.session_id
            async with recording(coord) as rec:
                member.kill()
                try:
                    suspended = await rec.wait_for(S.SUSPENDED, timeout=5)
                    back = await rec.wait_for(
                        S.RECONNECTED, after=rec.events.index(suspended), timeout=10
                    )
                    assert back.session_id == session
                    assert back.new_session is False
                    assert S.LOST not in rec.states
                    assert coord.connected_address[1] != member.port
                    assert await coord.client.exists("/eph") is not None
                finally:
                    member.start()
                    zk_ensemble.wait_formed(30)


async def test_frozen_member_moves_the_session_within_the_timeout(
    zk_ensemble: ZooKeeperEnsemble, zk_chroot: str
) -> None:
    with anyio.fail_after(90):
        # Freeze a follower (freezing the leader costs an election, a different test).
        for _ in range(20):
            coord = aiocoord.connect(
                zk_ensemble.connect_string, namespace=zk_chroot, session_timeout=6
            )
            await coord.__aenter__()
            assert coord.connected_address is not None
            member = zk_ensemble.member_for_port(coord.connected_address[1])
            if member.role() == "follower":
                break
            await coord.close()
        else:
            pytest.fail("never landed on a follower")
        try:
            session = coord.session_id
            async with recording(coord) as rec:
                paused_at = time.monotonic()
                member.pause()
                try:
                    suspended = await rec.wait_for(S.SUSPENDED, timeout=8)
                    assert suspended.at - paused_at <= coord.session_timeout * 2 / 3 + 0.5
                    back = await rec.wait_for(
                        S.RECONNECTED, after=rec.events.index(suspended), timeout=8
                    )
                    assert back.at - paused_at < coord.session_timeout
                    assert back.session_id == session
                    assert S.LOST not in rec.states
                finally:
                    member.resume()
        finally:
            await coord.close()


async def test_cut_connection_suspends_and_reconnects(proxy: FaultProxy, zk_chroot: str) -> None:
    with anyio.fail_after(20):
        async with aiocoord.connect(
            proxy.connect_string, namespace=zk_chroot, session_timeout=4
        ) as coord:
            async with recording(coord) as rec:
                assert proxy.cut() == 1
                suspended = await rec.wait_for(S.SUSPENDED)
                back = await rec.wait_for(S.RECONNECTED, after=rec.events.index(suspended))
                assert back.new_session is False
            await coord.client.create("/after-cut")


async def test_paused_traffic_suspends_within_two_thirds_of_the_timeout(
    proxy: FaultProxy, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with aiocoord.connect(
            proxy.connect_string, namespace=zk_chroot, session_timeout=3
        ) as coord:
            timeout = coord.session_timeout
            async with recording(coord) as rec:
                paused_at = time.monotonic()
                proxy.pause()
                try:
                    suspended = await rec.wait_for(S.SUSPENDED, timeout=timeout)
                    assert suspended.at - paused_at <= timeout * 2 / 3 + 0.3
                finally:
                    proxy.resume()
                back = await rec.wait_for(S.RECONNECTED, after=rec.events.index(suspended))
                assert back.new_session is False


async def test_requests_have_deadlines(proxy: FaultProxy, zk_chroot: str) -> None:
    with anyio.fail_after(30):
        async with aiocoord.connect(
            proxy.connect_string, namespace=zk_chroot, session_timeout=3, request_timeout=1.0
        ) as coord:
            proxy.pause()
            try:
                started = time.monotonic()
                with pytest.raises(ConnectionLostError):
                    await coord.client.create("/never")
                assert time.monotonic() - started < 2.5
            finally:
                proxy.resume()
            await coord.wait_connected()


async def test_slow_subscriber_sees_every_transition(proxy: FaultProxy, zk_chroot: str) -> None:
    with anyio.fail_after(30):
        async with aiocoord.connect(
            proxy.connect_string, namespace=zk_chroot, session_timeout=4
        ) as coord:
            slow = coord.connection_events()
            first = await slow.__anext__()  # subscribed; then reads nothing for a while
            async with recording(coord) as fast:
                for _ in range(2):
                    mark = fast.mark()
                    proxy.cut()
                    await fast.wait_for(S.RECONNECTED, after=mark)
            seen = [first.state]
            with anyio.fail_after(2):
                while len(seen) < 5:
                    seen.append((await slow.__anext__()).state)
            expected = [S.CONNECTED, S.SUSPENDED, S.RECONNECTED, S.SUSPENDED, S.RECONNECTED]
            assert seen == expected
            assert fast.states == expected
            await slow.aclose()  # type: ignore[attr-defined]


async def test_silent_first_host_does_not_stall_recovery(
    fault_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(40), SilentListener() as silent:
        hosts = f"{silent.connect_string},{fault_server.connect_string}"
        async with aiocoord.connect(
            hosts, namespace=zk_chroot, session_timeout=6, randomize_hosts=False
        ) as coord:
            assert silent.accepted >= 1  # it was tried first
            assert coord.connected_address == fault_server.address
            session = coord.session_id
            async with recording(coord) as rec:
                stopped_at = time.monotonic()
                fault_server.restart()
                back = await rec.wait_for(S.RECONNECTED, timeout=coord.session_timeout + 2)
                assert back.at - stopped_at < coord.session_timeout
                assert back.session_id == session
                assert S.LOST not in rec.states


async def test_protected_create_after_a_cut_leaves_one_node(
    proxy: FaultProxy, zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with (
            aiocoord.connect(proxy.connect_string, namespace=zk_chroot, session_timeout=4) as coord,
            aiocoord.connect(
                zk_server.connect_string, namespace=zk_chroot, session_timeout=4
            ) as observer,
        ):
            await observer.client.create("/latch")
            names, appeared = await observer.client.children_watch("/latch")
            assert names == []
            proxy.delay(0.6)  # the reply will still be in flight when we cut
            result: list[aiocoord.zk.Created] = []
            async with anyio.create_task_group() as tg:

                async def create() -> None:
                    result.append(await coord.client.create_protected("/latch/latch-", b"me"))

                tg.start_soon(create)
                await appeared.wait()  # the server has applied the create...
                proxy.delay(0)
                assert proxy.cut() == 1  # ...and the client never gets the answer
            children = await observer.client.children("/latch")
            assert len(children) == 1
            assert result[0].path == "/latch/" + children[0]
            assert children[0].startswith("_c_")
            stat = await observer.client.exists(result[0].path)
            assert stat is not None
            assert stat.ephemeral_owner == coord.session_id


async def test_auth_is_replayed_on_every_connection(proxy: FaultProxy, zk_chroot: str) -> None:
    with anyio.fail_after(20):
        async with aiocoord.connect(
            proxy.connect_string, namespace=zk_chroot, auth="alice:secret"
        ) as coord:
            assert ("digest", "alice") in await coord.client.whoami()
            async with recording(coord) as rec:
                proxy.cut()
                await rec.wait_for(S.RECONNECTED)
            assert ("digest", "alice") in await coord.client.whoami()


async def test_unreachable_hosts_fail_after_the_connect_timeout() -> None:
    with SilentListener() as silent:
        started = time.monotonic()
        with anyio.fail_after(10), pytest.raises(ConnectionLostError, match=r"within 1\.5s"):
            async with aiocoord.connect(
                silent.connect_string + ",127.0.0.1:1", connect_timeout=1.5, session_timeout=2
            ):
                pass
        assert time.monotonic() - started < 3.0


async def test_closed_coordinator(zk_server: ZooKeeperServer, zk_chroot: str) -> None:
    with anyio.fail_after(15):
        coord = aiocoord.connect(zk_server.connect_string, namespace=zk_chroot)
        with pytest.raises(CoordinatorClosedError):
            await coord.client.exists("/")
        async with coord:
            await coord.client.create("/eph", mode=CreateMode.EPHEMERAL)
            sid = coord.session_id
        await coord.close()  # twice is fine
        assert coord.closed
        with pytest.raises(CoordinatorClosedError):
            await coord.client.exists("/")
        with pytest.raises(CoordinatorClosedError):
            async with coord:
                pass
        events = [e async for e in coord.connection_events()]
        assert len(events) <= 1  # the stream of a closed coordinator ends at once
        async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as other:
            # Closing ended the session on the server: the ephemeral is gone now, not later.
            assert await other.client.exists("/eph") is None
            assert sid != other.session_id


async def test_bad_paths_and_data_fail_at_the_call(coordinator: aiocoord.Coordinator) -> None:
    c = coordinator.client
    for bad in ["relative", "/trailing/", "/a//b", "/a/./b", "/a/../b"]:
        with pytest.raises(InvalidPathError):
            await c.create(bad)
        with pytest.raises(InvalidPathError):
            await c.get(bad)
    with pytest.raises(InvalidPathError, match="reserved"):
        await c.create("/zookeeper/mine")
    with pytest.raises(TypeError, match="data"):
        await c.create("/x", "text")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at most"):
        await c.create("/x", b"x" * (1 << 20 + 1))
    with pytest.raises(ValueError, match="ttl"):
        await c.create("/x", mode=CreateMode.PERSISTENT_WITH_TTL)
    with pytest.raises(ValueError, match="version"):
        await c.set("/x", b"", version=-5)
    assert await c.exists("/x") is None


async def test_persistent_watch_survives_a_cut(proxy: FaultProxy, zk_chroot: str) -> None:
    with anyio.fail_after(20):
        async with aiocoord.connect(
            proxy.connect_string, namespace=zk_chroot, session_timeout=4
        ) as coord:
            await coord.client.create("/tree")
            async with coord.client.watch("/tree", recursive=True) as pw, recording(coord) as rec:
                proxy.cut()
                await rec.wait_for(S.RECONNECTED)
                await coord.client.create("/tree/a")
                await coord.client.create("/tree/a/b")
                seen = [await pw.events.receive(), await pw.events.receive()]
                assert [(e.type, e.path) for e in seen] == [
                    (EventType.CREATED, "/tree/a"),
                    (EventType.CREATED, "/tree/a/b"),
                ]


async def test_persistent_watch_callback_keeps_the_order(
    coordinator: aiocoord.Coordinator,
) -> None:
    c = coordinator.client
    await c.create("/cb")
    got: list[tuple[EventType, str]] = []
    with anyio.fail_after(10):
        async with c.watch("/cb", recursive=True) as pw:
            await c.create("/cb/a")  # waits in `events` until the callback is set
            await c.sync("/cb")  # its notification has arrived by now
            pw.set_callback(lambda e: got.append((e.type, e.path)))
            await c.create("/cb/b")  # delivered to the callback where it is read
            await c.delete("/cb/a")
            await c.sync("/cb")
            assert got == [
                (EventType.CREATED, "/cb/a"),
                (EventType.CREATED, "/cb/b"),
                (EventType.DELETED, "/cb/a"),
            ]
            with pytest.raises(anyio.WouldBlock):
                pw.events.receive_nowait()  # nothing went to the stream
        with pytest.raises(anyio.EndOfStream):
            pw.events.receive_nowait()  # it still ends with the watch


async def test_containers_and_ttl_nodes_are_real(coordinator: aiocoord.Coordinator) -> None:
    c = coordinator.client
    await c.create("/box", mode=CreateMode.CONTAINER)
    await c.create("/box/item")
    await c.delete("/box/item")

    await eventually(
        lambda: _absent(c, "/box"), timeout=10
    )  # aiozk's "container" flag made a plain node, never reaped
    created = await c.create("/ttl", mode=CreateMode.PERSISTENT_WITH_TTL, ttl=500)
    assert created.path == "/ttl"
    await eventually(lambda: _absent(c, "/ttl"), timeout=10)


async def _absent(c: aiocoord.ZkClient, path: str) -> bool:
    return await c.exists(path) is None


async def test_multi_reports_each_result_and_the_transaction_zxid(
    coordinator: aiocoord.Coordinator,
) -> None:
    c = coordinator.client
    await c.create("/m", b"0")
    results = await c.multi(
        [aiocoord.zk.CreateOp("/m/a", b"a"), aiocoord.zk.SetDataOp("/m", b"1", 0)]
    )
    a = await c.get("/m/a")
    assert results.zxid == a.stat.czxid == (await c.get("/m")).stat.mzxid
    with pytest.raises(aiocoord.TransactionFailed) as info:
        await c.multi([aiocoord.zk.CreateOp("/m/b"), aiocoord.zk.CheckOp("/m", 0)])
    assert info.value.failed_index == 1
    assert isinstance(info.value.cause, aiocoord.BadVersionError)
    assert await c.exists("/m/b") is None  # rolled back


@pytest.fixture(scope="module")
def read_only_member() -> Iterator[EnsembleMember]:
    """The last member of an ensemble that lost its quorum, serving read-only."""
    with pytest.MonkeyPatch.context() as env:
        # readonlymode.enabled is a JVM property, not a zoo.cfg key.
        env.setenv("JAVA_TOOL_OPTIONS", "-Dreadonlymode.enabled=true")
        ensemble = ZooKeeperEnsemble(
            3,
            extra_config={"localSessionsEnabled": "true", "localSessionsUpgradingEnabled": "true"},
        )
        ensemble.start()
    with ensemble:
        survivor = ensemble.members[0]
        ensemble.kill(1)
        ensemble.kill(2)
        deadline = time.monotonic() + 30
        while survivor.role() != "read-only":
            assert time.monotonic() < deadline, "the survivor never turned read-only"
            time.sleep(0.1)
        yield survivor


async def test_read_only_server(read_only_member: EnsembleMember) -> None:
    with anyio.fail_after(30):
        async with aiocoord.connect(
            read_only_member.connect_string, read_only=True, session_timeout=4
        ) as coord:
            first = await coord.connection_events().__anext__()
            assert first.state is S.READ_ONLY
            assert coord.state is S.READ_ONLY
            assert await coord.client.exists("/") is not None  # reads are served
            with pytest.raises(NotReadOnlyError):
                await coord.client.create("/x")
        # A client that does not accept a read-only server is refused, clearly and in time.
        with pytest.raises(ConnectionLostError, match=r"within 1\.5s"):
            async with aiocoord.connect(read_only_member.connect_string, connect_timeout=1.5):
                pass
