"""Caches across connection changes: stale while cut off, then exactly the differences.

The cache's coordinator talks through a `FaultProxy`, so the test decides when
it is cut off and when it may come back; a second coordinator, connected
directly, changes the tree meanwhile.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress

import anyio
import pytest

import aiocoord
from aiocoord import CacheEvent, CacheEventType
from aiocoord.testing import FaultProxy, ZooKeeperEnsemble, ZooKeeperServer, expire_session
from tests.zk.test_cache import converged, recording

C, U, D = CacheEventType.CREATED, CacheEventType.CHANGED, CacheEventType.DELETED
STALE, FRESH = CacheEventType.STALE, CacheEventType.FRESH


async def populate(client: aiocoord.ZkClient) -> None:
    await client.create("/r", b"root")
    for path, data in [
        ("/r/keep", b"k"),
        ("/r/change", b"1"),
        ("/r/delete", b"d"),
        ("/r/recreate", b"x"),
        ("/r/del-parent", b""),
        ("/r/del-parent/child", b"c"),
        ("/r/hot", b"0"),
    ]:
        await client.create(path, data)


async def again(op: Callable[[], Awaitable[object]]) -> None:
    """Run a write until it is known to have landed (the ensemble may be electing a leader)."""
    for attempt in range(100):
        try:
            await op()
            return
        except aiocoord.ConnectionLostError:
            await anyio.sleep(0.1)
        except (aiocoord.NoNodeError, aiocoord.NodeExistsError):
            if not attempt:
                raise
            return  # an earlier try landed after all
    raise AssertionError("the write never landed")


async def change_while_away(client: aiocoord.ZkClient) -> None:
    await again(lambda: client.set("/r/change", b"2"))
    await again(lambda: client.delete("/r/delete"))
    await again(lambda: client.delete("/r/recreate"))
    await again(lambda: client.create("/r/recreate", b"x"))  # the same data: only its czxid tells
    await again(lambda: client.create("/r/new", b"n"))
    await again(lambda: client.delete_all("/r/del-parent"))


EXPECTED = [
    (D, "/r/recreate"),
    (D, "/r/delete"),
    (D, "/r/del-parent/child"),
    (D, "/r/del-parent"),
    (U, "/r/change"),
    (C, "/r/new"),
    (C, "/r/recreate"),
]


def without_hot(events: list[CacheEvent]) -> list[tuple[CacheEventType, str]]:
    return [(e.type, e.path) for e in events if e.path != "/r/hot" and e.type in (C, U, D)]


def rising(events: list[CacheEvent]) -> None:
    """Per path, each version reported is later than the one before."""
    last: dict[str, tuple[int, int]] = {}
    for event in events:
        if event.node is not None:
            key = (event.node.stat.czxid, event.node.stat.mzxid)
            assert key > last.get(event.path, (0, 0)), event
            last[event.path] = key


@asynccontextmanager
async def hot_writer(client: aiocoord.ZkClient) -> AsyncIterator[None]:
    """Keep setting /r/hot until the block ends (writes the server refuses are fine)."""

    async def write() -> None:
        n = 0
        while True:
            n += 1
            with suppress(aiocoord.ConnectionLostError):
                await client.set("/r/hot", str(n).encode())
            await anyio.sleep(0.005)

    async with anyio.create_task_group() as tg:
        tg.start_soon(write)
        yield
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("expire", [False, True], ids=["same-session", "new-session"])
@pytest.mark.anyio
async def test_after_a_reconnect_exactly_the_differences(
    zk_server: ZooKeeperServer, zk_chroot: str, expire: bool
) -> None:
    with FaultProxy(*zk_server.address) as proxy, anyio.fail_after(40):
        async with (
            aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as writer,
            aiocoord.connect(
                proxy.connect_string, namespace=zk_chroot, session_timeout=10
            ) as coord,
        ):
            await populate(writer.client)
            async with aiocoord.tree_cache(coord, "/r") as tree, recording(tree) as rec:
                async with hot_writer(writer.client):
                    session = coord.session_id
                    proxy.reject_new(True)
                    proxy.cut()
                    await rec.wait_for(STALE)
                    assert tree.stale and "STALE" in repr(tree)
                    served = tree.nodes()
                    if expire:
                        await expire_session(coord, zk_server.address)
                    await change_while_away(writer.client)
                    assert tree.nodes() == served  # the last state read, never older
                    proxy.reject_new(False)
                    await rec.wait_for(FRESH)
                    assert not tree.stale
                    assert (coord.session_id != session) is expire
                    assert without_hot(rec.events) == EXPECTED
                await converged(writer.client, tree, "/r")
                rising(rec.events)
                assert [e.type for e in rec.events].count(STALE) == 1


@pytest.mark.anyio
async def test_session_expired_while_nodes_change_converges(
    coordinator: aiocoord.Coordinator, zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(40):
        async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as writer:
            await populate(writer.client)
            async with aiocoord.tree_cache(coordinator, "/r") as tree, recording(tree) as rec:
                session = coordinator.session_id
                async with hot_writer(writer.client):
                    await expire_session(coordinator)
                    await change_while_away(writer.client)
                    while coordinator.session_id in (session, None):
                        await rec.wait_for(FRESH)
                        await anyio.sleep(0.05)
                await converged(writer.client, tree, "/r")
                rising(rec.events)
                # However the changes met the new session (as notifications, or in its
                # re-read), the net effect on every path is what happened.
                final = {p for t, p in without_hot(rec.events) if t is not D}
                assert {"/r/new", "/r/change", "/r/recreate"} <= final
                deleted = {p for t, p in without_hot(rec.events) if t is D}
                assert deleted == {
                    "/r/delete",
                    "/r/recreate",
                    "/r/del-parent",
                    "/r/del-parent/child",
                }


@pytest.mark.ensemble
@pytest.mark.parametrize("role", ["leader", "follower"])
@pytest.mark.anyio
async def test_member_killed_under_the_cache(
    zk_ensemble: ZooKeeperEnsemble, zk_chroot: str, role: str
) -> None:
    with anyio.fail_after(60):
        await anyio.to_thread.run_sync(zk_ensemble.wait_formed, 30)
        member = zk_ensemble.leader() if role == "leader" else zk_ensemble.followers()[0]
        assert member is not None
        rest = [m.connect_string for m in zk_ensemble.members if m is not member]
        async with aiocoord.connect(
            ",".join([member.connect_string, *rest]),
            namespace=zk_chroot,
            session_timeout=8,
            randomize_hosts=False,  # on the member to kill first
        ) as coord:
            address = coord.connected_address
            assert address is not None and address[1] == member.address[1]
            others = ",".join(rest)
            async with aiocoord.connect(others, namespace=zk_chroot) as writer:
                await populate(writer.client)
                async with aiocoord.tree_cache(coord, "/r") as tree, recording(tree) as rec:
                    session = coord.session_id
                    await anyio.to_thread.run_sync(member.kill)
                    try:
                        async with hot_writer(writer.client):
                            await rec.wait_for(STALE)
                            await change_while_away(writer.client)
                            await rec.wait_for(FRESH)
                        await converged(writer.client, tree, "/r")
                        assert coord.session_id == session  # the session moved with us
                        rising(rec.events)
                        changed = {p for t, p in without_hot(rec.events) if t is not D}
                        assert {"/r/new", "/r/change", "/r/recreate"} <= changed
                    finally:
                        await anyio.to_thread.run_sync(member.start)
                        await anyio.to_thread.run_sync(zk_ensemble.wait_formed, 30)
