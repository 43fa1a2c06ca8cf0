"""`persistent_node`: created on entry, back after a lost session or a deletion, gone on leaving."""

from __future__ import annotations

import re

import anyio
import pytest

import aiocoord
from aiocoord import ConfigError, ConnectionState, InvalidPathError, NoNodeError, persistent_node
from aiocoord.testing import FaultProxy, ZooKeeperServer, expire_session, four_letter_word
from aiocoord.zk import CreateMode
from tests.helpers import eventually

pytestmark = pytest.mark.anyio


async def holds(client: aiocoord.ZkClient, path: str, data: bytes, owner: int | None) -> bool:
    try:
        node = await client.get(path)
    except NoNodeError:
        return False
    return node.data == data and (owner is None or node.stat.ephemeral_owner == owner)


async def kids(client: aiocoord.ZkClient, path: str) -> list[str]:
    try:
        return await client.children(path)
    except NoNodeError:  # a container parent goes once empty
        return []


async def new_session(coord: aiocoord.Coordinator, old: int | None) -> bool:
    return coord.session_id not in (old, None)


async def present(node: aiocoord.PersistentNode) -> bool:
    return node.present


async def test_ephemeral_node_comes_back_after_session_expiry(
    coordinator: aiocoord.Coordinator, zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(40):
        async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as other:
            async with persistent_node(coordinator, "/reg/pod-1", data=b"one") as node:
                first = coordinator.session_id
                assert node.present and node.actual_path == "/reg/pod-1"
                assert node.created_in == first  # known from the create's reply
                assert await holds(other.client, "/reg/pod-1", b"one", first)
                await expire_session(coordinator)
                await eventually(lambda: new_session(coordinator, first), timeout=20)
                await eventually(
                    lambda: holds(other.client, "/reg/pod-1", b"one", coordinator.session_id),
                    timeout=20,
                )
                await eventually(lambda: created_anew(node, first))
                # Deleted by someone else: put back.
                await other.client.delete("/reg/pod-1")
                await eventually(lambda: holds(other.client, "/reg/pod-1", b"one", None))
                await eventually(lambda: present(node))
                assert "PRESENT" in repr(node)
            assert await other.client.exists("/reg/pod-1") is None


async def test_set_data_survives_a_lost_session(
    coordinator: aiocoord.Coordinator, zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(40):
        async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as other:
            async with persistent_node(coordinator, "/reg/pod-2", data=b"a") as node:
                await node.set_data(b"b")
                assert (await other.client.get("/reg/pod-2")).data == b"b"
                await expire_session(coordinator)
                await node.set_data(b"c")  # blocks until written on the new session
                assert node.data == b"c"
                assert await holds(other.client, "/reg/pod-2", b"c", coordinator.session_id)


async def test_protected_sequential_node_gets_a_new_name_after_expiry(
    coordinator: aiocoord.Coordinator, zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(40):
        async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as other:
            node = persistent_node(
                coordinator, "/grp/member-", data=b"x", mode=CreateMode.EPHEMERAL_SEQUENTIAL
            )
            async with node:
                first = node.actual_path
                assert first is not None and first.startswith("/grp/_c_")
                assert first.endswith("member-0000000000")
                await expire_session(coordinator)

                async def renamed() -> bool:
                    names = await kids(other.client, "/grp")
                    return len(names) == 1 and node.actual_path not in (None, first)

                await eventually(renamed, timeout=20)
                assert node.actual_path is not None
                assert await holds(other.client, node.actual_path, b"x", coordinator.session_id)
            assert await kids(other.client, "/grp") == []


async def test_persistent_mode(coordinator: aiocoord.Coordinator) -> None:
    client = coordinator.client
    with anyio.fail_after(20):
        async with persistent_node(coordinator, "/p/kept", data=b"1", mode=CreateMode.PERSISTENT):
            stat = await client.exists("/p/kept")
            assert stat is not None and stat.ephemeral_owner == 0
        assert await client.exists("/p/kept") is None


async def test_ttl_mode_is_refused_pointing_to_persistent_ttl_node(
    coordinator: aiocoord.Coordinator,
) -> None:
    """Held as a raw TTL node, the server deleted it after its TTL and it was made again (a flap)."""
    with pytest.raises(ConfigError, match="persistent_ttl_node") as raised:
        persistent_node(coordinator, "/p/ttl", mode=CreateMode.PERSISTENT_WITH_TTL, ttl=1500)
    assert raised.value.field == "mode"
    with pytest.raises(ConfigError, match="persistent_ttl_node") as raised:
        persistent_node(coordinator, "/p/ttl", mode=CreateMode.PERSISTENT, ttl=1500)
    assert raised.value.field == "ttl"
    assert await coordinator.client.exists("/p/ttl") is None


async def test_waits_for_a_foreign_ephemeral_to_go(
    coordinator: aiocoord.Coordinator, zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as other:
            await other.client.create(
                "/w/n", b"theirs", mode=CreateMode.EPHEMERAL, make_parents=True
            )
            entered = anyio.Event()

            async def enter() -> None:
                async with persistent_node(coordinator, "/w/n", data=b"mine"):
                    entered.set()
                    await anyio.sleep_forever()

            async with anyio.create_task_group() as tg:
                tg.start_soon(enter)
                await anyio.sleep(0.3)
                assert not entered.is_set()
                await other.client.delete("/w/n")
                await entered.wait()
                assert (await other.client.get("/w/n")).data == b"mine"
                tg.cancel_scope.cancel()


async def test_bad_arguments_name_themselves(coordinator: aiocoord.Coordinator) -> None:
    with pytest.raises(TypeError, match="coord"):
        persistent_node(object(), "/x")  # type: ignore[arg-type]
    with pytest.raises(InvalidPathError):
        persistent_node(coordinator, "x")
    with pytest.raises(TypeError, match="data"):
        persistent_node(coordinator, "/x", data="text")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="mode"):
        persistent_node(coordinator, "/x", mode=CreateMode.CONTAINER)
    with pytest.raises(ConfigError, match="ttl"):
        persistent_node(coordinator, "/x", mode=CreateMode.PERSISTENT_WITH_TTL)
    with pytest.raises(ConfigError, match="ttl"):
        persistent_node(coordinator, "/x", ttl=5)


async def test_leaving_right_after_a_recreation_deletes_the_node(
    coordinator: aiocoord.Coordinator, zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """The node made again may not have reached the cache yet when the block is left."""
    with anyio.fail_after(30):
        async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as other:
            for _ in range(5):
                async with persistent_node(
                    coordinator, "/p/again", data=b"d", mode=CreateMode.PERSISTENT
                ):
                    await other.client.delete("/p/again")
                    await eventually(lambda: holds(other.client, "/p/again", b"d", None))
                assert await other.client.exists("/p/again") is None


async def test_stat_and_on_change_follow_each_creation(
    coordinator: aiocoord.Coordinator, zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """`stat` says which node is held (its session, its czxid); `on_change` says when that changes."""
    seen: list[aiocoord.Stat | None] = []
    node = persistent_node(
        coordinator, "/reg/watched", data=b"w", on_change=lambda: seen.append(node.stat)
    )
    with anyio.fail_after(40):
        async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as other:
            async with node:
                first = node.stat
                assert first is not None and first.ephemeral_owner == coordinator.session_id
                assert seen == [first]
                await other.client.delete("/reg/watched")
                await eventually(lambda: _true(node.stat is not None and node.stat != first))
                assert None in seen  # seen gone, then back
                await expire_session(coordinator)
                await eventually(
                    lambda: _true(
                        node.stat is not None
                        and node.stat.ephemeral_owner == coordinator.session_id
                        and coordinator.session_id != first.ephemeral_owner
                    ),
                    timeout=20,
                )
                again = node.stat
                assert again is not None and seen[-1] == again
            assert node.stat == again  # kept after leaving: which node it was


async def test_aclose_without_delete_leaves_the_node_to_the_caller(
    coordinator: aiocoord.Coordinator,
) -> None:
    with anyio.fail_after(20):
        node = persistent_node(coordinator, "/reg/kept", data=b"k")
        await node.start()
        await node.aclose(delete=False)
        stat = await coordinator.client.exists("/reg/kept")
        assert stat is not None and node.stat is not None and stat.czxid == node.stat.czxid
        await coordinator.client.delete("/reg/kept")
        await anyio.sleep(0.2)
        assert await coordinator.client.exists("/reg/kept") is None  # not kept any more


async def test_own_node_of_a_session_given_up_early_is_replaced_at_once(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """The client gave its session up (LOST) while the server still keeps it, with our node.

    That node is ours (this node created it in that session): it is deleted
    and created again on the new session at once, not waited out until the
    server expires the old session (a worker re-registering after LOST did
    this by hand; `persistent_node` used to wait the full session timeout).
    """
    timeout = 20.0
    with FaultProxy(*zk_server.address) as proxy:
        async with aiocoord.connect(
            proxy.connect_string,
            namespace=zk_chroot,
            session_timeout=timeout,
            session_lost_fraction=0.05,
        ) as coord:
            with anyio.fail_after(timeout * 0.9):
                async with persistent_node(coord, "/reg/early", data=b"e") as node:
                    old = coord.session_id
                    proxy.reject_new()
                    proxy.cut()
                    await eventually(lambda: _true(coord.state is ConnectionState.LOST))
                    proxy.reject_new(False)
                    await eventually(lambda: new_session(coord, old), timeout=5)
                    # The server keeps the old session for `timeout` seconds after it last
                    # heard of it: well after this.
                    await eventually(
                        lambda: holds(coord.client, "/reg/early", b"e", coord.session_id),
                        timeout=timeout / 2,
                    )
                    # The node's own view (its cache) follows the server's a moment later.
                    await eventually(lambda: _true(owned_by(node, coord.session_id)))
                    assert node.created_in == coord.session_id


async def _true(value: bool) -> bool:
    return value


async def test_entering_costs_three_requests(
    coordinator: aiocoord.Coordinator, zk_server: ZooKeeperServer
) -> None:
    """Create, then the cache's watch and read, sent together (it was five, one after another:
    the cache's first read also caught up with a sync and read the node again after its
    creation's notification)."""

    def received() -> int:
        found = re.search(
            r"zk_packets_received\s+(\d+)", four_letter_word(*zk_server.address, "mntr")
        )
        assert found is not None
        return int(found.group(1))

    with anyio.fail_after(20):
        await coordinator.client.ensure_path("/cost")
        counts = []
        for i in range(3):
            idle = received()
            before = received()
            base = before - idle  # what asking costs, if anything
            async with persistent_node(coordinator, f"/cost/n{i}", data=b"c"):
                counts.append(received() - before - base)
        assert min(counts) == 3, counts


async def created_anew(node: aiocoord.PersistentNode, first: int | None) -> bool:
    return node.created_in not in (None, first)


def owned_by(node: aiocoord.PersistentNode, session: int | None) -> bool:
    return node.stat is not None and node.stat.ephemeral_owner == session
