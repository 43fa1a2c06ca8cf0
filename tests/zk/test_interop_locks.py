"""Interop, for real: Curator's semaphore and read/write lock share their paths with aiocoord's.

Two Java processes running Apache Curator 5.4 (Debian ``libcurator-recipes-java``;
``tests/interop/CuratorLocks.java``, compiled with ``javac`` at test time) and
two aiocoord contenders, each with its own session, take one lock many times
each: ``InterProcessSemaphoreV2`` against `Semaphore` (at most N holders), then
``InterProcessReadWriteLock`` against `ReadWriteLock` (a writer overlaps
nobody).  Exclusion is checked on one clock: Java's ``System.nanoTime`` and
Python's ``time.monotonic_ns`` are both CLOCK_MONOTONIC.
"""

from __future__ import annotations

import subprocess
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import anyio.abc
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

import aiocoord
from aiocoord import (
    Coordinator,
    LockLost,
    Mutex,
    ReadWriteLock,
    Semaphore,
    mutex,
    revoke,
    semaphore,
)
from aiocoord.testing import ZooKeeperServer
from benchmarks.mutex_peers import JARS
from tests.helpers import compile_java, eventually

pytestmark = pytest.mark.anyio

N = 60  # acquisitions per contender

Interval = tuple[int, int, str, str]  # start, end (ns, CLOCK_MONOTONIC), kind, holder


@pytest.fixture(scope="module")
def curator_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    return compile_java("CuratorLocks", list(JARS), tmp_path_factory.mktemp("curator-locks"))


class JavaContender:
    """A Java process with one Curator lock: its holds, and whether it finished."""

    def __init__(self, process: anyio.abc.Process, name: str) -> None:
        self.process = process
        self.name = name
        self.intervals: list[Interval] = []
        self.failures: list[str] = []
        self.done = anyio.Event()
        self.ready = anyio.Event()
        self.going = anyio.Event()
        self.said: defaultdict[str, anyio.Event] = defaultdict(anyio.Event)  # by first word

    async def read(self) -> None:
        assert self.process.stdout is not None
        lines = BufferedByteReceiveStream(self.process.stdout)
        while True:
            try:
                raw = await lines.receive_until(b"\n", 1 << 20)
            except (anyio.EndOfStream, anyio.IncompleteRead):
                self.done.set()
                return
            kind, _, rest = raw.decode().strip().partition(" ")
            self.said[kind].set()
            if kind == "HELD" and rest:
                what, start, end = rest.split()
                self.intervals.append((int(start), int(end), what, self.name))
            elif kind == "READY":
                self.ready.set()
            elif kind == "GOING":
                self.going.set()
            elif kind == "FAILED":
                self.failures.append(rest)
                self.done.set()
            elif kind == "DONE":
                self.done.set()

    async def go(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(b"go\n")
        await self.going.wait()


@asynccontextmanager
async def java(
    tg: anyio.abc.TaskGroup, classpath: str, hosts: str, name: str, *args: str
) -> AsyncIterator[JavaContender]:
    process = await anyio.open_process(
        ["java", "-Xmx64m", "-cp", classpath, "CuratorLocks", hosts, *args, name],
        stderr=subprocess.DEVNULL,
    )
    contender = JavaContender(process, name)
    try:
        tg.start_soon(contender.read)
        with anyio.fail_after(20):
            await contender.ready.wait()
        yield contender
    finally:
        with anyio.CancelScope(shield=True):
            process.kill()
            await process.wait()


def most_at_once(intervals: list[Interval]) -> int:
    """The largest number of intervals that overlap at one instant."""
    edges = sorted([(s, 1) for s, _, _, _ in intervals] + [(e, -1) for _, e, _, _ in intervals])
    most = now = 0
    for _, step in edges:  # at one instant an end (-1) sorts before a start (+1)
        now += step
        most = max(most, now)
    return most


def overlaps(a: Interval, b: Interval) -> bool:
    return a[0] < b[1] and b[0] < a[1]


async def test_curator_semaphore_v2_and_aiocoord_count_leases_together(
    zk_server: ZooKeeperServer, zk_chroot: str, curator_classpath: str
) -> None:
    hosts, path, leases = zk_server.connect_string, "/interop/sem", 2
    python: list[Interval] = []

    async def contender(coord: Coordinator, name: str) -> None:
        for _ in range(N):
            async with semaphore(coord, path, max_leases=leases, participant_id=name):
                start = time.monotonic_ns()
                await anyio.sleep(0.02)  # as the Java side: long enough to overlap
                python.append((start, time.monotonic_ns(), "lease", name))

    with anyio.fail_after(120):
        async with AsyncExitStack() as stack:
            coords = [
                await stack.enter_async_context(
                    aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=10)
                )
                for _ in range(3)
            ]
            tg = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(tg.cancel_scope.cancel)
            args = ("semaphore", path, str(N), str(leases))
            javas = [
                await stack.enter_async_context(
                    java(tg, curator_classpath, hosts + zk_chroot, name, *args)
                )
                for name in ("java-1", "java-2")
            ]
            # Both languages see one count: two Python leases leave none for Java.
            sem = Semaphore(coords[0], path, max_leases=leases, participant_id="gate")
            gate = [await sem.acquire(timeout=10), await sem.acquire(timeout=10)]
            assert None not in gate
            await javas[0].go()
            await anyio.sleep(0.5)
            assert javas[0].intervals == []
            assert [p.id for p in await sem.participants()] == ["gate", "gate"]
            for lease in gate:
                assert lease is not None
                await lease.release()
            await javas[1].go()
            async with anyio.create_task_group() as mine:
                for coord, name in zip(coords[1:], ("python-1", "python-2"), strict=True):
                    mine.start_soon(contender, coord, name)
            for jc in javas:
                await jc.done.wait()
            assert [f for jc in javas for f in jc.failures] == []
            intervals = python + [i for jc in javas for i in jc.intervals]
            assert len(intervals) == 4 * N
            assert most_at_once(intervals) <= leases
            mixed = [
                (a, b)
                for a in python
                for b in javas[0].intervals + javas[1].intervals
                if overlaps(a, b)
            ]
            assert mixed, "a Java and a Python lease never ran side by side"
            assert await sem.participants() == []


async def test_curator_read_write_lock_and_aiocoord_share_one_lock(
    zk_server: ZooKeeperServer, zk_chroot: str, curator_classpath: str
) -> None:
    hosts, path = zk_server.connect_string, "/interop/rw"
    python: list[Interval] = []

    async def contender(rw: ReadWriteLock, name: str) -> None:
        for i in range(N):
            write = i % 10 < 2  # 20 % writes, as the Java side
            async with rw.write() if write else rw.read():
                start = time.monotonic_ns()
                await anyio.sleep(0.005)  # as the Java side
                python.append((start, time.monotonic_ns(), "write" if write else "read", name))

    with anyio.fail_after(120):
        async with AsyncExitStack() as stack:
            coords = [
                await stack.enter_async_context(
                    aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=10)
                )
                for _ in range(3)
            ]
            tg = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(tg.cancel_scope.cancel)
            args = ("rwlock", path, str(N), "2")
            javas = [
                await stack.enter_async_context(
                    java(tg, curator_classpath, hosts + zk_chroot, name, *args)
                )
                for name in ("java-1", "java-2")
            ]
            # A Python writer keeps Java readers out; a Python reader lets them in.
            rw = ReadWriteLock(coords[0], path, participant_id="gate")
            writer = rw.write_lock()
            assert await writer.acquire(timeout=10)
            await javas[0].go()

            async def java_queued() -> bool:
                return len(await rw.participants()) == 2

            # A JVM on a busy machine may take more than half a second to queue.
            await eventually(java_queued, timeout=30)
            await anyio.sleep(0.5)
            assert javas[0].intervals == []
            queue = await rw.participants()
            assert [p.id for p in queue] == ["gate", "java-1"]
            assert [p.holds for p in queue] == [True, False]
            await writer.release()
            await javas[1].go()
            async with anyio.create_task_group() as mine:
                for coord, name in zip(coords[1:], ("python-1", "python-2"), strict=True):
                    mine.start_soon(
                        contender, ReadWriteLock(coord, path, participant_id=name), name
                    )
            for jc in javas:
                await jc.done.wait()
            assert [f for jc in javas for f in jc.failures] == []
            intervals = python + [i for jc in javas for i in jc.intervals]
            assert len(intervals) == 4 * N
            writes = [i for i in intervals if i[2] == "write"]
            for w in writes:
                others = [i for i in intervals if i is not w and overlaps(w, i)]
                assert others == [], f"{w[3]} wrote while {[o[3] for o in others]} held the lock"
            reads = [i for i in intervals if i[2] == "read"]
            assert most_at_once(reads) >= 2, "readers never shared the lock"
            assert await rw.participants() == []


async def test_revocation_both_ways_between_curator_and_aiocoord(
    zk_server: ZooKeeperServer, zk_chroot: str, curator_classpath: str
) -> None:
    hosts, path = zk_server.connect_string, "/interop/revocable"
    with anyio.fail_after(60):
        async with AsyncExitStack() as stack:
            coord = await stack.enter_async_context(
                aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=10)
            )
            tg = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(tg.cancel_scope.cancel)
            # aiocoord.revoke asks a Java InterProcessMutex made revocable to let go.
            holder = await stack.enter_async_context(
                java(tg, curator_classpath, hosts + zk_chroot, "java", "revocable", path, "0", "0")
            )
            await holder.go()
            await holder.said["HELD"].wait()
            assert len(await revoke(coord, path)) == 1
            await holder.said["REVOKED"].wait()
            # Curator's Revoker.attemptRevoke asks an aiocoord revocable mutex to let go.
            lost: list[LockLost] = []
            entered = anyio.Event()

            async def hold() -> None:
                try:
                    async with mutex(coord, path, participant_id="py", revocable=True):
                        entered.set()
                        await anyio.sleep_forever()
                except LockLost as exc:
                    lost.append(exc)

            async with anyio.create_task_group() as mine:
                mine.start_soon(hold)
                await entered.wait()
                (node,) = [p.node for p in await Mutex(coord, path).participants()]
                revoker = await stack.enter_async_context(
                    java(
                        tg,
                        curator_classpath,
                        hosts + zk_chroot,
                        "r",
                        "revoke",
                        f"{path}/{node}",
                        "0",
                        "0",
                    )
                )
                await revoker.go()
            assert lost and lost[0].reason == "revoked"
            assert await Mutex(coord, path).participants() == []
