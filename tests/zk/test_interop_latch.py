"""Interop, for real: aiocoord latches and Java recipes in one election on one path.

Apache Curator's ``LeaderLatch`` (Debian ``libcurator-recipes-java``) with the
default layout, and ZooKeeper's ``LeaderElectionSupport`` (the ``zookeeper``
package's ``zookeeper-recipes-election.jar``) with ``layout="zookeeper"``.  The
small Java programs in ``tests/interop/`` are compiled with ``javac`` at test
time and driven over stdin/stdout.  Two Java and two Python participants go
through several hand-overs: exactly one of the four leads at any time (checked
on one clock: Java's ``System.nanoTime`` and Python's ``time.monotonic`` are both
CLOCK_MONOTONIC), and each side lists the other's ids in the same order.
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
from aiocoord import Coordinator
from aiocoord.recipes.leader_latch import ElectionState, LeaderLatch, leader_latch
from aiocoord.testing import ZooKeeperServer
from aiocoord.zk import CreateMode
from tests.helpers import compile_java, eventually

pytestmark = pytest.mark.anyio

ZK_JARS = ["zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar", "slf4j-nop.jar"]
PROGRAMS = {
    "CuratorLatch": [
        "curator-framework.jar",
        "curator-client.jar",
        "curator-recipes.jar",
        "guava.jar",
        *ZK_JARS,
    ],
    "ZkElection": ["zookeeper-recipes-election.jar", *ZK_JARS],
}
HAND_OVERS = 6


def _compile(program: str, out: Path) -> str:
    """Compile `program` into `out`; its class path, or skip saying what is missing."""
    return compile_java(program, PROGRAMS[program], out)


@pytest.fixture(scope="module")
def curator_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _compile("CuratorLatch", tmp_path_factory.mktemp("curator-latch"))


@pytest.fixture(scope="module")
def zookeeper_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _compile("ZkElection", tmp_path_factory.mktemp("zk-election"))


class JavaParticipant:
    """A Java participant process: its leadership intervals, and a command channel."""

    def __init__(self, process: anyio.abc.Process, pid: str) -> None:
        self.process = process
        self.id = pid
        self.leading_since: int | None = None
        self.intervals: list[tuple[int, int]] = []
        self.failures: list[str] = []
        self._replies, self._reply_box = anyio.create_memory_object_stream[str](100)

    @property
    def has_leadership(self) -> bool:
        return self.leading_since is not None

    async def read(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        assert self.process.stdout is not None
        lines = BufferedByteReceiveStream(self.process.stdout)
        task_status.started()
        async with self._replies:
            while True:
                try:
                    raw = await lines.receive_until(b"\n", 1 << 20)
                except (anyio.EndOfStream, anyio.IncompleteRead):
                    return
                kind, _, rest = raw.decode().strip().partition(" ")
                if kind == "LEADER":
                    self.leading_since = int(rest)
                elif kind in ("NOTLEADER", "RELEASED") and self.leading_since is not None:
                    self.intervals.append((self.leading_since, int(rest)))
                    self.leading_since = None
                elif kind == "FAILED":
                    self.failures.append(rest)
                if kind not in ("LEADER", "NOTLEADER", "FAILED"):
                    await self._replies.send(raw.decode().strip())

    async def command(self, command: str, reply: str) -> str:
        """Send a command; the text after `reply` in its answer."""
        assert self.process.stdin is not None
        await self.process.stdin.send(command.encode() + b"\n")
        return await self.expect(reply)

    async def expect(self, reply: str) -> str:
        """The text after `reply` in the next answer that starts with it."""
        with anyio.fail_after(10):
            async for line in self._reply_box:
                if line.startswith(reply):
                    return line[len(reply) :].strip()
        raise AssertionError(f"{self.id}: the program ended before {reply}")

    async def participants(self) -> list[tuple[str, bool]]:
        text = await self.command("participants", "PARTICIPANTS")
        pairs = [item.rsplit("=", 1) for item in text.split(",") if item]
        return [(pid, flag == "true") for pid, flag in pairs]

    async def release(self) -> None:
        before = time.monotonic_ns()
        released = int(await self.command("release", "RELEASED"))
        # One clock on both sides, or the interval check below would mean nothing.
        assert before <= released <= time.monotonic_ns()
        await self.expect("CLOSED")

    async def join(self) -> None:
        await self.command("join", "STARTED")


class PythonParticipant:
    """An aiocoord latch in a task of its own: joined and released on demand."""

    def __init__(self, coord: Coordinator, path: str, pid: str, layout: str) -> None:
        self.coord, self.path, self.id, self.layout = coord, path, pid, layout
        self.latch: LeaderLatch | None = None
        self.intervals: list[tuple[int, int]] = []
        self.leading_since: int | None = None
        self._release = anyio.Event()
        self._done = anyio.Event()

    @property
    def has_leadership(self) -> bool:
        return self.latch is not None and self.latch.has_leadership

    async def _hold(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        latch = leader_latch(self.coord, self.path, participant_id=self.id, layout=self.layout)
        try:
            async with anyio.create_task_group() as tg:
                await tg.start(self._record, latch)
                async with latch:
                    self.latch = latch
                    task_status.started()
                    await self._release.wait()
        finally:
            self._done.set()

    async def _record(self, latch: LeaderLatch, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        task_status.started()
        async for event in latch.changes():
            if event.state is ElectionState.ELECTED:
                self.leading_since = int(event.at * 1e9)
            elif event.state is ElectionState.LOST_LEADERSHIP and self.leading_since is not None:
                self.intervals.append((self.leading_since, int(event.at * 1e9)))
                self.leading_since = None

    async def join(self, tg: anyio.abc.TaskGroup) -> None:
        self._release, self._done = anyio.Event(), anyio.Event()
        await tg.start(self._hold)

    async def release(self) -> None:
        self._release.set()
        await self._done.wait()


@asynccontextmanager
async def java(
    tg: anyio.abc.TaskGroup, classpath: str, program: str, hosts: str, path: str, pid: str
) -> AsyncIterator[JavaParticipant]:
    process = await anyio.open_process(
        ["java", "-Xmx64m", "-cp", classpath, program, hosts, path, pid],
        stderr=subprocess.DEVNULL,
    )
    participant = JavaParticipant(process, pid)
    try:
        await tg.start(participant.read)
        await participant.expect("STARTED")
        yield participant
    finally:
        with anyio.CancelScope(shield=True):
            process.kill()
            await process.wait()


async def run_election(
    classpath: str,
    program: str,
    layout: str,
    server: ZooKeeperServer,
    chroot: str,
) -> None:
    path = "/interop"
    hosts = server.connect_string
    async with AsyncExitStack() as stack:
        coords = [
            await stack.enter_async_context(
                aiocoord.connect(hosts, namespace=chroot, session_timeout=10)
            )
            for _ in range(2)
        ]
        if layout == "zookeeper":  # the Java recipe does not create its parent
            await coords[0].client.create(path, mode=CreateMode.PERSISTENT)
        observer = LeaderLatch(coords[0], path, participant_id="observer", layout=layout)
        tg = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tg.cancel_scope.cancel)
        everyone: list[JavaParticipant | PythonParticipant] = []

        async def all_joined() -> bool:
            return len(await observer.participants()) == len(everyone)

        # Join order J1, P1, J2, P2, each once the previous node exists.
        for i in range(2):
            jp = await stack.enter_async_context(
                java(tg, classpath, program, hosts + chroot, path, f"java-{i + 1}")
            )
            everyone.append(jp)
            await eventually(all_joined, timeout=10)
            pp = PythonParticipant(coords[i], path, f"python-{i + 1}", layout)
            await pp.join(tg)
            everyone.append(pp)
            await eventually(all_joined, timeout=10)

        leaders_seen: list[str] = []
        for _ in range(HAND_OVERS):

            async def settled() -> bool:
                leading = [p for p in everyone if p.has_leadership]
                current = await observer.leader()
                return (
                    len(leading) == 1
                    and current is not None
                    and current.id == leading[0].id
                    and len(await observer.participants()) == 4
                )

            await eventually(settled, timeout=15)
            leader = next(p for p in everyone if p.has_leadership)
            leaders_seen.append(leader.id)
            # Each side lists the other's ids, in the same election order.
            python_view = [(p.id, p.is_leader) for p in await observer.participants()]
            java_view = await next(
                p for p in everyone if isinstance(p, JavaParticipant)
            ).participants()
            assert python_view == java_view
            assert {pid for pid, _ in python_view} == {p.id for p in everyone}
            assert python_view[0] == (leader.id, True)
            if isinstance(leader, JavaParticipant):
                assert await leader.command("leader", "LEADER_IS") == leader.id
                await leader.release()
                await leader.join()
            else:
                await leader.release()
                await leader.join(tg)

        assert leaders_seen[:4] == ["java-1", "python-1", "java-2", "python-2"], leaders_seen
        assert sum(len(p.intervals) for p in everyone) >= HAND_OVERS
        assert len(set(leaders_seen)) == 4
        # Exactly one leader at any time: the leadership intervals never overlap.
        now = time.monotonic_ns()
        intervals = sorted(
            (start, end, p.id)
            for p in everyone
            for start, end in [*p.intervals, *([(p.leading_since, now)] if p.leading_since else [])]
        )
        for (_, end, first), (start, _, second) in itertools.pairwise(intervals):
            assert end <= start, f"{first} still led when {second} was elected"
        assert all(not p.failures for p in everyone if isinstance(p, JavaParticipant))


async def test_curator_leader_latch_and_aiocoord_elect_one_leader_together(
    zk_server: ZooKeeperServer, zk_chroot: str, curator_classpath: str
) -> None:
    with anyio.fail_after(60):
        await run_election(curator_classpath, "CuratorLatch", "curator", zk_server, zk_chroot)


async def test_zookeeper_election_recipe_and_aiocoord_elect_one_leader_together(
    zk_server: ZooKeeperServer, zk_chroot: str, zookeeper_classpath: str
) -> None:
    with anyio.fail_after(60):
        await run_election(zookeeper_classpath, "ZkElection", "zookeeper", zk_server, zk_chroot)
