"""Interop, for real: Curator's ``PersistentTtlNode`` and ``persistent_ttl_node`` share one layout.

A Java process running Apache Curator 5.4 (Debian ``libcurator-recipes-java``;
``tests/interop/CuratorTtlNode.java``, compiled with ``javac`` at test time)
and aiocoord each make a node; the server's transaction log shows the same
creates on both (a container, then a TTL child ``touch``), with the same data,
and each side reads the other's node as its own.  Then each side takes over
the other's node on the same path and keeps it alone for three TTLs while the
other leaves: never missing, never made again; once both have left, the
server removes both nodes about a TTL later.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, suppress

import anyio
import anyio.abc
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

import aiocoord
from aiocoord import persistent_ttl_node
from aiocoord.recipes.membership._ttl import default_data
from aiocoord.testing import ZooKeeperServer
from benchmarks.mutex_peers import JARS
from tests.helpers import compile_java, created_kinds, eventually

pytestmark = pytest.mark.anyio

CHECK_INTERVAL = 0.25  # seconds: the server's container and TTL check
TTL = 1500  # ms


@pytest.fixture(scope="module")
def ttl_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    return compile_java("CuratorTtlNode", list(JARS), tmp_path_factory.mktemp("curator-ttl"))


@pytest.fixture(scope="module")
def ttl_server() -> Iterator[ZooKeeperServer]:
    """TTL nodes enabled, containers and TTL nodes checked every 250 ms."""
    check = f"-Dznode.container.checkIntervalMs={int(CHECK_INTERVAL * 1000)}"
    with ZooKeeperServer(jvm_args=[check]) as server:
        yield server


class Java:
    """The Curator process: one command at a time, each answered by one line."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        assert process.stdout is not None
        self._lines = BufferedByteReceiveStream(process.stdout)
        self.default_data = b""

    async def expect(self, word: str) -> str:
        with anyio.fail_after(20):
            while True:
                line = (await self._lines.receive_until(b"\n", 1 << 16)).decode().strip()
                if line.startswith(word):
                    return line[len(word) :].strip()

    async def command(self, line: str, reply: str) -> str:
        assert self.process.stdin is not None
        await self.process.stdin.send(line.encode() + b"\n")
        return await self.expect(reply)

    async def start(self, path: str, data: str) -> None:
        assert await self.command(f"start {path} {TTL} {data}", "STARTED") == f"{path} true"

    async def close(self, path: str) -> None:
        await self.command(f"close {path}", "CLOSED")

    async def inspect(self, path: str) -> tuple[str, str, str]:
        seen = await self.command(f"inspect {path}", "INSPECT")
        data, children, touch = seen.removeprefix(f"{path} ").split("|")
        return data, children, touch


@asynccontextmanager
async def java(classpath: str, hosts: str) -> AsyncIterator[Java]:
    process = await anyio.open_process(
        ["java", "-Xmx64m", "-cp", classpath, "CuratorTtlNode", hosts],
        stderr=subprocess.DEVNULL,
    )
    try:
        peer = Java(process)
        peer.default_data = (await peer.expect("READY")).encode()
        yield peer
    finally:
        with anyio.CancelScope(shield=True):
            with suppress(ProcessLookupError):  # it may have ended by itself
                process.kill()
            await process.wait()


class Reader:
    """Polls nodes every 50 ms from its own session: each miss, and the czxids seen."""

    def __init__(self, client: aiocoord.ZkClient, *paths: str) -> None:
        self.client = client
        self.paths = paths
        self.misses: list[str] = []
        self.czxids: dict[str, set[int]] = {path: set() for path in paths}

    async def run(self) -> None:
        while True:
            for path in self.paths:
                stat = await self.client.exists(path)
                if stat is None:
                    self.misses.append(path)
                else:
                    self.czxids[path].add(stat.czxid)
            await anyio.sleep(0.05)


async def test_java_persistent_ttl_node_shares_the_layout(
    ttl_server: ZooKeeperServer, zk_chroot: str, ttl_classpath: str
) -> None:
    hosts = ttl_server.connect_string
    with anyio.fail_after(90):
        async with (
            aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=4.0) as coord,
            aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=4.0) as other,
            java(ttl_classpath, hosts + zk_chroot) as peer,
            AsyncExitStack() as stack,
        ):
            client = other.client
            await client.create("/ttl", make_parents=True)  # a parent that stays
            ours = await default_data()
            assert peer.default_data == ours  # Curator's default data: the local address

            # Each makes a node; Curator writes ``touch`` only after TTL/2.
            await peer.start("/ttl/java", "from-java")
            async with persistent_ttl_node(coord, "/ttl/py", ttl=TTL, data=b"from-py"):

                async def touched() -> bool:
                    return await client.exists("/ttl/java/touch") is not None

                await eventually(touched, timeout=TTL / 1000 + 5)
                kinds = await created_kinds(ttl_server)
                for name in ("java", "py"):
                    assert kinds[f"{zk_chroot}/ttl/{name}"] == "createContainer", kinds
                    assert kinds[f"{zk_chroot}/ttl/{name}/touch"] == "createTtl", kinds
                    assert await client.children(f"/ttl/{name}") == ["touch"]
                    assert (await client.get(f"/ttl/{name}/touch")).data == ours
                assert (await client.get("/ttl/java")).data == b"from-java"
                # Java reads ours as it reads its own.
                assert await peer.inspect("/ttl/py") == ("from-py", "touch", ours.decode())
                assert await peer.inspect("/ttl/java") == ("from-java", "touch", ours.decode())

                # Each takes the other's node over, then the other leaves.
                java_czxid = (await client.get("/ttl/java")).stat.czxid
                py_czxid = (await client.get("/ttl/py")).stat.czxid
                await peer.start("/ttl/py", "from-py")
                mine = persistent_ttl_node(coord, "/ttl/java", ttl=TTL, data=b"from-java")
                await stack.enter_async_context(mine)
                assert mine.stat is not None and mine.stat.czxid == java_czxid
            # ``py`` left (deleting nothing), Curator keeps /ttl/py; we keep /ttl/java.
            await peer.close("/ttl/java")
            reader = Reader(client, "/ttl/java", "/ttl/py")
            async with anyio.create_task_group() as tg:
                tg.start_soon(reader.run)
                await anyio.sleep(3 * TTL / 1000 + 2 * CHECK_INTERVAL)
                tg.cancel_scope.cancel()
            assert reader.misses == []
            assert reader.czxids == {"/ttl/java": {java_czxid}, "/ttl/py": {py_czxid}}
            assert (await client.get("/ttl/py")).data == b"from-py"
            assert (await client.get("/ttl/java")).data == b"from-java"

            # Both leave: the server removes both about a TTL later.
            await peer.close("/ttl/py")
            await mine.aclose()
            left = time.monotonic()
            for name in ("java", "py"):

                async def gone(path: str = f"/ttl/{name}") -> bool:
                    return await client.exists(path) is None

                await eventually(gone, timeout=TTL / 1000 + 2 * CHECK_INTERVAL + 3)
            print(f"both gone {time.monotonic() - left:.2f}s after both left (TTL {TTL} ms)")
