"""`persistent_ttl_node`: Curator's layout, never missing while its owner lives, gone a TTL after.

A server of this module's own checks containers and TTL nodes every 250 ms
(``znode.container.checkIntervalMs``) with TTL nodes enabled; another has
``extendedTypesEnabled=false``, where entering must fail at once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

import aiocoord
from aiocoord import ConfigError, InvalidPathError, NoNodeError, persistent_ttl_node
from aiocoord.recipes.membership._ttl import MAX_TTL, default_data
from aiocoord.testing import FaultProxy, ZooKeeperServer, expire_session
from aiocoord.zk import CreateMode
from tests.helpers import created_kinds, eventually

pytestmark = pytest.mark.anyio

CHECK_INTERVAL = 0.25  # seconds: the server's container and TTL check
TTL = 1500  # ms
HELD_TTL = 3000  # ms, for the test across faults: a touch every 1.5 s, slack for a loaded machine
ROOT = Path(__file__).parents[2]


JVM_ARGS = [f"-Dznode.container.checkIntervalMs={int(CHECK_INTERVAL * 1000)}"]


@pytest.fixture(scope="module")
def ttl_server() -> Iterator[ZooKeeperServer]:
    """TTL nodes enabled, containers and TTL nodes checked every 250 ms."""
    with ZooKeeperServer(jvm_args=JVM_ARGS) as server:
        yield server


@pytest.fixture(scope="module")
def server_without_ttl() -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(extra_config={"extendedTypesEnabled": "false"}) as server:
        yield server


@asynccontextmanager
async def connected(hosts: str, chroot: str) -> AsyncIterator[aiocoord.Coordinator]:
    async with aiocoord.connect(hosts, namespace=chroot, session_timeout=4.0) as coord:
        yield coord


async def missing(client: aiocoord.ZkClient, path: str) -> bool:
    return await client.exists(path) is None


def gone_within() -> float:
    """How long the server may take to remove a node a TTL after its last touch, in seconds.

    ``touch`` expires `TTL` after its last write and goes at the next check;
    the container, empty then, at the one after; plus slack for a loaded machine.
    """
    return TTL / 1000 + 2 * CHECK_INTERVAL + 2.0


class Reader:
    """Polls the node every 50 ms from its own session: each miss, and the czxids seen."""

    def __init__(self, client: aiocoord.ZkClient, path: str) -> None:
        self.client = client
        self.path = path
        self.polls = 0
        self.misses: list[float] = []
        self.czxids: set[int] = set()

    async def run(self) -> None:
        while True:
            stat = await self.client.exists(self.path)
            self.polls += 1
            if stat is None:
                self.misses.append(time.monotonic())
            else:
                self.czxids.add(stat.czxid)
            await anyio.sleep(0.05)


async def test_the_layout_is_curators(ttl_server: ZooKeeperServer, zk_chroot: str) -> None:
    with anyio.fail_after(30):
        async with (
            connected(ttl_server.connect_string, zk_chroot) as owner,
            connected(ttl_server.connect_string, zk_chroot) as other,
            persistent_ttl_node(owner, "/reg/batch-7", ttl=TTL, data=b"payload") as node,
        ):
            client = other.client
            container = await client.get("/reg/batch-7")
            touch = await client.get("/reg/batch-7/touch")
            assert container.data == b"payload"
            kinds = await created_kinds(ttl_server)
            assert kinds[f"{zk_chroot}/reg/batch-7"] == "createContainer"
            assert kinds[f"{zk_chroot}/reg/batch-7/touch"] == "createTtl"
            assert touch.data == await default_data()  # Curator's default data
            assert await client.children("/reg/batch-7") == ["touch"]
            assert node.touch_path == "/reg/batch-7/touch" and node.ttl == TTL
            assert node.present and node.stat is not None
            assert node.stat.czxid == container.stat.czxid
            assert "PRESENT" in repr(node)
            await node.set_data(b"new")
            assert (await client.get("/reg/batch-7")).data == b"new"
            # Touched every TTL/2: written again within a TTL.
            version = touch.stat.version

            async def touched() -> bool:
                return (await client.get("/reg/batch-7/touch")).stat.version > version

            await eventually(touched, timeout=TTL / 1000 + 1)


async def test_never_missing_while_the_owner_lives(
    ttl_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """Over more than three TTLs, through a cut connection and an expired session."""
    with anyio.fail_after(60), FaultProxy(*ttl_server.address) as proxy:
        async with (
            connected(proxy.connect_string, zk_chroot) as owner,
            connected(ttl_server.connect_string, zk_chroot) as other,
            persistent_ttl_node(owner, "/held", ttl=HELD_TTL, data=b"d"),
            anyio.create_task_group() as tg,
        ):
            reader = Reader(other.client, "/held")
            touch_czxid = (await other.client.get("/held/touch")).stat.czxid
            tg.start_soon(reader.run)
            started = time.monotonic()
            await anyio.sleep(HELD_TTL / 1000 * 1.2)
            proxy.cut()  # the owner reconnects on the same session
            await anyio.sleep(HELD_TTL / 1000 * 1.2)
            first = owner.session_id
            assert await expire_session(owner, ttl_server.address)

            async def new_session() -> bool:
                return owner.session_id not in (None, first)

            await eventually(new_session, timeout=20)
            await anyio.sleep(HELD_TTL / 1000 * 1.2)
            tg.cancel_scope.cancel()
        held = time.monotonic() - started
        assert held >= 3 * HELD_TTL / 1000
        assert reader.misses == [], f"missing {len(reader.misses)} of {reader.polls} polls"
        assert len(reader.czxids) == 1, f"made again: czxids {sorted(reader.czxids)}"
        assert reader.polls >= 3 * HELD_TTL / 1000 / 0.1  # really polled (at most 100 ms apart)
        async with connected(ttl_server.connect_string, zk_chroot) as check:
            # ``touch`` never expired either: the same node, written throughout.
            assert (await check.client.get("/held/touch")).stat.czxid == touch_czxid


async def test_gone_about_a_ttl_after_the_owner_leaves(
    ttl_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """Leaving deletes nothing (Curator's close()); the server removes both nodes after the TTL."""
    with anyio.fail_after(30):
        async with connected(ttl_server.connect_string, zk_chroot) as other:
            async with connected(ttl_server.connect_string, zk_chroot) as owner:
                async with persistent_ttl_node(owner, "/left/n", ttl=TTL, data=b"d"):
                    await anyio.sleep(TTL / 1000)
                left = time.monotonic()
                assert not await missing(other.client, "/left/n")
                assert not await missing(other.client, "/left/n/touch")
                await expire_session(owner)  # nothing of the session keeps it either
            await eventually(lambda: missing(other.client, "/left/n"), timeout=gone_within())
            took = time.monotonic() - left
            # Not before touch could have expired (it was written within TTL/2 before leaving).
            assert took >= TTL / 1000 / 2 - CHECK_INTERVAL
            print(f"gone {took:.2f}s after leaving (TTL {TTL} ms)")
            # The parent container, empty now, goes at a later check (not part of the promise).
            await eventually(lambda: missing(other.client, "/left"), timeout=10)


OWNER_SCRIPT = """
import sys, anyio, aiocoord

async def main():
    hosts, chroot, path, ttl = sys.argv[1:5]
    async with aiocoord.connect(hosts, namespace=chroot, session_timeout=4.0) as coord:
        async with aiocoord.persistent_ttl_node(coord, path, ttl=int(ttl), data=b"proc"):
            print("READY", flush=True)
            await anyio.sleep_forever()

anyio.run(main)
"""


async def test_gone_about_a_ttl_after_the_owner_is_killed(
    ttl_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """The owner's process killed (SIGKILL: no goodbye of any kind)."""
    args = [sys.executable, "-c", OWNER_SCRIPT, ttl_server.connect_string, zk_chroot, "/k/n"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with anyio.fail_after(60):
        process = await anyio.open_process([*args, str(TTL)], env=env, stderr=subprocess.DEVNULL)
        try:
            assert process.stdout is not None
            async for line in process.stdout:
                if b"READY" in line:
                    break
            async with connected(ttl_server.connect_string, zk_chroot) as other:
                assert (await other.client.get("/k/n")).data == b"proc"
                await anyio.sleep(TTL / 1000)  # it lives: still there
                assert not await missing(other.client, "/k/n")
                os.kill(process.pid, signal.SIGKILL)
                await process.wait()
                killed = time.monotonic()
                await eventually(lambda: missing(other.client, "/k/n"), timeout=gone_within())
                print(f"gone {time.monotonic() - killed:.2f}s after the kill (TTL {TTL} ms)")
        finally:
            with anyio.CancelScope(shield=True):
                if process.returncode is None:
                    os.kill(process.pid, signal.SIGKILL)
                    await process.wait()


async def test_aclose_delete_removes_it_now(ttl_server: ZooKeeperServer, zk_chroot: str) -> None:
    with anyio.fail_after(30):
        async with connected(ttl_server.connect_string, zk_chroot) as coord:
            node = persistent_ttl_node(coord, "/now", ttl=60_000)
            await node.start()
            assert not await missing(coord.client, "/now/touch")
            await node.aclose(delete=True)
            assert await missing(coord.client, "/now")


async def test_a_node_found_there_is_kept_and_written(
    ttl_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """Curator's PersistentNode writes its data to the node it finds; one deleted is made again."""
    with anyio.fail_after(30):
        async with (
            connected(ttl_server.connect_string, zk_chroot) as owner,
            connected(ttl_server.connect_string, zk_chroot) as other,
        ):
            before = await other.client.create("/found", b"old", mode=CreateMode.CONTAINER)
            async with persistent_ttl_node(owner, "/found", ttl=TTL, data=b"mine") as node:

                async def written() -> bool:
                    return (await other.client.get("/found")).data == b"mine"

                await eventually(written, timeout=10)
                assert (await other.client.get("/found")).stat.czxid == before.stat.czxid
                await other.client.delete("/found/touch")
                await other.client.delete("/found")

                async def again() -> bool:
                    try:
                        await other.client.get("/found/touch")
                    except NoNodeError:
                        return False
                    return (await other.client.get("/found")).data == b"mine"

                await eventually(again, timeout=10)
                assert node.present


async def test_refused_at_once_without_extended_types(
    server_without_ttl: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with connected(server_without_ttl.connect_string, zk_chroot) as coord:
            started = time.monotonic()
            with pytest.raises(ConfigError, match=r"zookeeper\.extendedTypesEnabled") as raised:
                async with persistent_ttl_node(coord, "/r/n", ttl=TTL):
                    pytest.fail("entered on a server without TTL nodes")
            assert raised.value.field == "zookeeper.extendedTypesEnabled"
            assert time.monotonic() - started < 5
            # The container it made is gone (an empty one that never had a child stays forever).
            assert await missing(coord.client, "/r/n")


async def test_bad_arguments_name_themselves(ttl_server: ZooKeeperServer, zk_chroot: str) -> None:
    async with connected(ttl_server.connect_string, zk_chroot) as c:
        for bad in (0, -5, MAX_TTL + 1):
            with pytest.raises(ConfigError, match="ttl") as raised:
                persistent_ttl_node(c, "/x", ttl=bad)
            assert raised.value.field == "ttl"
        for wrong in (True, 1.5, "1000", None):
            with pytest.raises(TypeError, match="ttl"):
                persistent_ttl_node(c, "/x", ttl=wrong)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="data"):
            persistent_ttl_node(c, "/x", ttl=TTL, data="text")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="coord"):
            persistent_ttl_node(object(), "/x", ttl=TTL)  # type: ignore[arg-type]
        with pytest.raises(InvalidPathError):
            persistent_ttl_node(c, "x", ttl=TTL)
        with pytest.raises(ConfigError, match="path"):
            persistent_ttl_node(c, "/", ttl=TTL)
        with pytest.raises(TypeError, match="ttl"):
            persistent_ttl_node(c, "/x")  # type: ignore[call-arg]
