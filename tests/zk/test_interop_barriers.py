"""Interop, for real: Curator's ``DistributedBarrier`` and ``DistributedDoubleBarrier`` with ours.

Java processes running Apache Curator 5.4 (Debian ``libcurator-recipes-java``;
``tests/interop/CuratorBarriers.java``, compiled with ``javac`` at test time)
share a barrier and a double barrier with aiocoord participants: a barrier
set by one side holds the other until it is removed, and a double barrier of
four (two Java, two Python) lets nobody in before the fourth arrives and
nobody out before the last leaves.
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
from aiocoord import Barrier, double_barrier
from aiocoord.testing import ZooKeeperServer
from benchmarks.mutex_peers import JARS
from tests.helpers import compile_java

pytestmark = pytest.mark.anyio

BARRIER = "/interop/barrier"
DOUBLE = "/interop/double"


@pytest.fixture(scope="module")
def barriers_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    return compile_java("CuratorBarriers", list(JARS), tmp_path_factory.mktemp("curator-barriers"))


class Java:
    """One Curator process: commands in, lines out (seen in order, kept)."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        assert process.stdout is not None
        self._lines = BufferedByteReceiveStream(process.stdout)
        self.seen: list[str] = []

    async def expect(self, word: str) -> None:
        while word not in self.seen:
            line = (await self._lines.receive_until(b"\n", 1 << 16)).decode().strip()
            assert not line.startswith("FAILED"), line
            self.seen.append(line)

    async def send(self, command: str) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(command.encode() + b"\n")
        await self.expect(f"OK {command}")


@asynccontextmanager
async def java(classpath: str, hosts: str) -> AsyncIterator[Java]:
    process = await anyio.open_process(
        ["java", "-Xmx64m", "-cp", classpath, "CuratorBarriers", hosts, BARRIER, DOUBLE, "4"],
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


async def test_barriers_shared_with_curator(
    zk_server: ZooKeeperServer, zk_chroot: str, barriers_classpath: str
) -> None:
    hosts = zk_server.connect_string
    with anyio.fail_after(60):
        async with AsyncExitStack() as stack:
            coords = [
                await stack.enter_async_context(aiocoord.connect(hosts, namespace=zk_chroot))
                for _ in range(2)
            ]
            await coords[0].client.create("/interop")
            javas = [
                await stack.enter_async_context(java(barriers_classpath, hosts + zk_chroot))
                for _ in range(2)
            ]

            # A barrier set by Python holds Java until Python removes it, and the other way.
            barrier = Barrier(coords[0], BARRIER)
            await barrier.set()
            await javas[0].send("wait")
            assert not await barrier.wait(timeout=0.3)
            assert "PASSED" not in javas[0].seen
            await barrier.remove()
            await javas[0].expect("PASSED")
            await javas[1].send("set")
            await javas[1].expect("DONE set")
            assert not await barrier.wait(timeout=0.3)
            await javas[1].send("remove")
            assert await barrier.wait(timeout=10)

            # A double barrier of four: two Java, two Python.
            entered: list[str] = []
            out = [anyio.Event(), anyio.Event()]
            all_in = anyio.Event()

            async def python(i: int) -> None:
                async with double_barrier(coords[i], DOUBLE, members=4, participant_id=f"py{i}"):
                    entered.append(f"py{i}")
                    if len(entered) == 2:
                        all_in.set()
                    await out[i].wait()

            async with anyio.create_task_group() as tg:
                await javas[0].send("enter")
                tg.start_soon(python, 0)
                await javas[1].send("enter")
                await anyio.sleep(0.5)
                assert entered == [] and "ENTERED" not in javas[0].seen + javas[1].seen
                tg.start_soon(python, 1)  # the fourth
                await all_in.wait()
                await javas[0].expect("ENTERED")
                await javas[1].expect("ENTERED")
                # Leaving: nobody is out before the last one leaves (a Java one).
                out[0].set()
                await javas[0].send("leave")
                out[1].set()
                await anyio.sleep(0.5)
                assert "LEFT" not in javas[0].seen
                await javas[1].send("leave")
            await javas[0].expect("LEFT")
            await javas[1].expect("LEFT")
            # Nothing left; the parent itself may be gone (a container the server reaps).
            with suppress(aiocoord.NoNodeError):
                assert await coords[0].client.children(DOUBLE) == []
