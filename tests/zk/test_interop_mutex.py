"""Interop, for real: Curator's ``InterProcessMutex`` and aiocoord's mutex share one lock.

Two Java processes running Apache Curator 5.4's ``InterProcessMutex`` (Debian
``libcurator-recipes-java``; ``tests/interop/CuratorMutex.java``, compiled with
``javac`` at test time) and two aiocoord contenders, each with its own session,
join one lock path in turn (Java, Python, Java, Python) and then take it a
hundred times each.  Mutual exclusion is checked twice: on one clock (Java's
``System.nanoTime`` and Python's ``time.monotonic_ns`` are both CLOCK_MONOTONIC)
no two holds overlap, and every holder increments a shared counter node with a
versioned write, which fails if anyone else wrote in between.  The queue is
FIFO on both sides, so the lock goes round in queue order and hands over from
Java to Python and from Python to Java a hundred times or more each way.
"""

from __future__ import annotations

import itertools
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

import aiocoord
from aiocoord import Coordinator, Mutex, mutex
from aiocoord.testing import ZooKeeperServer
from benchmarks.mutex_peers import JARS
from tests.helpers import compile_java, eventually

pytestmark = pytest.mark.anyio

PATH = "/interop/lock"
COUNTER = "/interop/counter"
N = 100  # acquisitions per contender

Interval = tuple[int, int, str]  # start, end (ns, CLOCK_MONOTONIC), holder


@pytest.fixture(scope="module")
def curator_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    return compile_java("CuratorMutex", list(JARS), tmp_path_factory.mktemp("curator-mutex"))


class JavaContender:
    """A Java process with one ``InterProcessMutex``: its holds, and a command channel."""

    def __init__(self, process: anyio.abc.Process, name: str) -> None:
        self.process = process
        self.name = name
        self.intervals: list[Interval] = []
        self.failures: list[str] = []
        self.done = anyio.Event()
        self._replies, self._reply_box = anyio.create_memory_object_stream[str](100)

    async def read(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        assert self.process.stdout is not None
        lines = BufferedByteReceiveStream(self.process.stdout)
        task_status.started()
        async with self._replies:
            while True:
                try:
                    raw = await lines.receive_until(b"\n", 1 << 20)
                except (anyio.EndOfStream, anyio.IncompleteRead):
                    self.done.set()
                    return
                kind, _, rest = raw.decode().strip().partition(" ")
                if kind == "HELD":
                    start, end = rest.split()
                    self.intervals.append((int(start), int(end), self.name))
                elif kind == "FAILED":
                    self.failures.append(rest)
                    self.done.set()
                elif kind == "DONE":
                    self.done.set()
                else:
                    await self._replies.send(raw.decode().strip())

    async def command(self, command: str, reply: str) -> str:
        """Send a command; the text after `reply` in its answer."""
        assert self.process.stdin is not None
        await self.process.stdin.send(command.encode() + b"\n")
        return await self.expect(reply)

    async def expect(self, reply: str) -> str:
        with anyio.fail_after(15):
            async for line in self._reply_box:
                if line.startswith(reply):
                    return line[len(reply) :].strip()
        raise AssertionError(f"{self.name}: the program ended before {reply}")


@asynccontextmanager
async def java(
    tg: anyio.abc.TaskGroup, classpath: str, hosts: str, name: str
) -> AsyncIterator[JavaContender]:
    process = await anyio.open_process(
        ["java", "-Xmx64m", "-cp", classpath, "CuratorMutex", hosts, PATH, COUNTER, str(N)],
        stderr=subprocess.DEVNULL,
    )
    contender = JavaContender(process, name)
    try:
        await tg.start(contender.read)
        await contender.expect("READY")
        yield contender
    finally:
        with anyio.CancelScope(shield=True):
            process.kill()
            await process.wait()


async def python_contender(
    coord: Coordinator, name: str, intervals: list[Interval], done: anyio.Event
) -> None:
    """N holds of ``async with mutex(...)``, each incrementing the counter by a versioned write."""
    try:
        for _ in range(N):
            async with mutex(coord, PATH, participant_id=name):
                start = time.monotonic_ns()
                node = await coord.client.get(COUNTER)
                value = str(int(node.data) + 1).encode()
                await coord.client.set(COUNTER, value, version=node.stat.version)
                intervals.append((start, time.monotonic_ns(), name))
    finally:
        done.set()


async def test_curator_interprocessmutex_and_aiocoord_share_one_lock(
    zk_server: ZooKeeperServer, zk_chroot: str, curator_classpath: str, tmp_path: Path
) -> None:
    hosts = zk_server.connect_string
    with anyio.fail_after(60):
        async with AsyncExitStack() as stack:
            coords = [
                await stack.enter_async_context(
                    aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=10)
                )
                for _ in range(3)
            ]
            await coords[0].client.create(COUNTER, b"0", make_parents=True)
            tg = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(tg.cancel_scope.cancel)
            javas = [
                await stack.enter_async_context(
                    java(tg, curator_classpath, hosts + zk_chroot, name)
                )
                for name in ("java-1", "java-2")
            ]
            # A gate holds the lock while the four join, one at a time: J, P, J, P.
            gate = Mutex(coords[0], PATH, participant_id="gate")
            assert await gate.acquire(timeout=10)
            python_intervals: list[Interval] = []
            finished: list[anyio.Event] = []
            queued = 1

            async def joined() -> bool:
                return len(await gate.participants()) == queued

            for jc, coord, name in zip(javas, coords[1:], ("python-1", "python-2"), strict=True):
                await jc.command("go", "GOING")
                queued += 1
                await eventually(joined)
                finished.append(anyio.Event())
                tg.start_soon(python_contender, coord, name, python_intervals, finished[-1])
                queued += 1
                await eventually(joined)
            # Both sides see one queue, in one order.
            queue = await gate.participants()
            assert [p.node for p in queue] == (await javas[0].command("nodes", "NODES")).split(",")
            assert [p.id for p in queue][::2] == ["gate", "python-1", "python-2"]
            assert [p.holds for p in queue] == [True, False, False, False, False]
            await gate.release()
            for event in [*(jc.done for jc in javas), *finished]:
                await event.wait()

            assert [f for jc in javas for f in jc.failures] == []
            assert int((await coords[0].client.get(COUNTER)).data) == 4 * N
            intervals = sorted(python_intervals + [i for jc in javas for i in jc.intervals])
            assert len(intervals) == 4 * N
            for (_, end, first), (start, _, second) in itertools.pairwise(intervals):
                assert end <= start, f"{first} still held the lock when {second} took it"
            hand_overs = [(a[2][:4], b[2][:4]) for a, b in itertools.pairwise(intervals)]
            java_to_python = hand_overs.count(("java", "pyth"))
            python_to_java = hand_overs.count(("pyth", "java"))
            # The lock goes round in queue order, and a contender queues again as soon as it
            # has released: at least every other hand-over crosses the language line, each way.
            assert java_to_python >= N // 2 and python_to_java >= N // 2, (
                java_to_python,
                python_to_java,
            )
            assert await gate.participants() == []
