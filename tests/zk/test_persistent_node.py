"""`persistent_node`: created on entry, back after a lost session or a deletion, gone on leaving."""

from __future__ import annotations

import anyio
import pytest

import aiocoord
from aiocoord import ConfigError, CreateMode, InvalidPathError, NoNodeError, persistent_node
from aiocoord.testing import ZooKeeperServer, expire_session
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
                assert await holds(other.client, "/reg/pod-1", b"one", first)
                await expire_session(coordinator)
                await eventually(lambda: new_session(coordinator, first), timeout=20)
                await eventually(
                    lambda: holds(other.client, "/reg/pod-1", b"one", coordinator.session_id),
                    timeout=20,
                )
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


async def test_persistent_and_ttl_modes(coordinator: aiocoord.Coordinator) -> None:
    client = coordinator.client
    with anyio.fail_after(20):
        async with persistent_node(coordinator, "/p/kept", data=b"1", mode=CreateMode.PERSISTENT):
            stat = await client.exists("/p/kept")
            assert stat is not None and stat.ephemeral_owner == 0
        assert await client.exists("/p/kept") is None
        ttl = persistent_node(
            coordinator, "/p/ttl", data=b"t", mode=CreateMode.PERSISTENT_WITH_TTL, ttl=60_000
        )
        async with ttl:
            assert (await client.get("/p/ttl")).data == b"t"
        assert await client.exists("/p/ttl") is None


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
