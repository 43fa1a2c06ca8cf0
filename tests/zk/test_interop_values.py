"""Interop, for real: Curator's ``SharedCount`` and ``DistributedAtomicLong`` share a counter with us.

Java processes running Apache Curator 5.4 (Debian ``libcurator-recipes-java``;
``tests/interop/CuratorCounters.java``, compiled with ``javac`` at test time)
and aiocoord contenders, each with its own session, increment one counter at
once; the final value is the sum of every increment: none is lost on either
side, which needs both sides to read and write the same encoding and to
compare-and-set on the node's version.
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager, suppress

import anyio
import anyio.abc
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

import aiocoord
from aiocoord.testing import ZooKeeperServer
from benchmarks.mutex_peers import JARS
from tests.helpers import compile_java

pytestmark = pytest.mark.anyio

N = 150  # increments per contender


@pytest.fixture(scope="module")
def counters_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    return compile_java("CuratorCounters", list(JARS), tmp_path_factory.mktemp("curator-counters"))


class Java:
    """One Curator process: wait for READY, send the start line, read VALUE and DONE."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        assert process.stdout is not None
        self._lines = BufferedByteReceiveStream(process.stdout)

    async def expect(self, word: str) -> str:
        while True:
            line = (await self._lines.receive_until(b"\n", 1 << 16)).decode().strip()
            if line.startswith(word):
                return line[len(word) :].strip()

    async def go(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(b"go\n")


@asynccontextmanager
async def java(classpath: str, hosts: str, kind: str, path: str) -> AsyncIterator[Java]:
    process = await anyio.open_process(
        ["java", "-Xmx64m", "-cp", classpath, "CuratorCounters", hosts, kind, path, str(N)],
        stderr=subprocess.DEVNULL,
    )
    try:
        peer = Java(process)
        await peer.expect("READY")
        yield peer
    finally:
        with anyio.CancelScope(shield=True):
            with suppress(ProcessLookupError):  # it may have ended by itself
                process.kill()
            await process.wait()


@pytest.mark.parametrize("kind", ["shared", "long"])
async def test_java_and_python_increments_lose_nothing(
    zk_server: ZooKeeperServer, zk_chroot: str, counters_classpath: str, kind: str
) -> None:
    hosts = zk_server.connect_string
    path = f"/interop/{kind}"
    with anyio.fail_after(90):
        async with AsyncExitStack() as stack:
            coords = [
                await stack.enter_async_context(aiocoord.connect(hosts, namespace=zk_chroot))
                for _ in range(2)
            ]
            await coords[0].client.create("/interop", make_parents=True)
            javas = [
                await stack.enter_async_context(
                    java(counters_classpath, hosts + zk_chroot, kind, path)
                )
                for _ in range(2)
            ]
            retries: list[int] = []

            async def python(coord: aiocoord.Coordinator) -> None:
                if kind == "shared":
                    async with aiocoord.shared_count(coord, path) as count:
                        for _ in range(N):
                            await count.add(1)
                else:
                    counter = aiocoord.atomic_long(coord, path)
                    for _ in range(N):
                        await counter.increment()
                    retries.append(counter.retries)

            async with anyio.create_task_group() as tg:
                for peer in javas:
                    await peer.go()
                for coord in coords:
                    tg.start_soon(python, coord)
            lost = [int(await peer.expect("DONE")) for peer in javas]
            data = (await coords[0].client.get(path)).data
            size = 4 if kind == "shared" else 8
            assert len(data) == size
            assert int.from_bytes(data, "big", signed=True) == 4 * N
            print(f"{kind}: Java lost {lost} compare-and-sets, Python {retries}")
