"""Interop, for real: Curator's ``LeaderSelector`` and aiocoord's selector form one election.

Curator 5.4 builds its ``LeaderSelector`` on an ``InterProcessMutex`` at the
path (nodes ``_c_<uuid>-lock-<seq>``, the participant id as data).  Two Java
processes running it with ``autoRequeue`` (Debian ``libcurator-recipes-java``;
``tests/interop/CuratorSelector.java``, compiled with ``javac`` at test time)
and two aiocoord selectors (``requeue=True``), each on a session of its own,
share one path for more than ten seconds with terms of 150 ms: on one clock
(Java's ``System.nanoTime`` and Python's ``time.monotonic_ns`` are both
CLOCK_MONOTONIC) no two terms overlap, and each of the four leads.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import anyio.abc
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

import aiocoord
from aiocoord import LeadershipTerm
from aiocoord.testing import ZooKeeperServer
from tests.helpers import compile_java, eventually

pytestmark = pytest.mark.anyio

PATH = "/interop/selector"
TERM = 0.150  # seconds each term lasts, on both sides
RUN = 10.5  # seconds the four share the election
JARS = [
    "curator-framework.jar",
    "curator-client.jar",
    "curator-recipes.jar",
    "guava.jar",
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-nop.jar",
]
NODE = re.compile(r"_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-lock-\d{10}")

Interval = tuple[int, int, str]  # start, end (ns, CLOCK_MONOTONIC), leader


@pytest.fixture(scope="module")
def curator_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    return compile_java("CuratorSelector", JARS, tmp_path_factory.mktemp("curator-selector"))


class JavaSelector:
    """A Java process with one ``LeaderSelector``: its terms, and a command channel."""

    def __init__(self, process: anyio.abc.Process, pid: str) -> None:
        self.process = process
        self.id = pid
        self.leading_since: int | None = None
        self.intervals: list[Interval] = []
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
                    return
                line = raw.decode().strip()
                kind, _, rest = line.partition(" ")
                if kind == "LEADER":
                    self.leading_since = int(rest)
                elif kind == "NOTLEADER" and self.leading_since is not None:
                    self.intervals.append((self.leading_since, int(rest), self.id))
                    self.leading_since = None
                else:
                    await self._replies.send(line)

    async def command(self, command: str, reply: str) -> str:
        """Send a command; the text after `reply` in its answer."""
        assert self.process.stdin is not None
        await self.process.stdin.send(command.encode() + b"\n")
        return await self.expect(reply)

    async def expect(self, reply: str) -> str:
        """The text after `reply` in the next answer that starts with it."""
        with anyio.fail_after(15):
            async for line in self._reply_box:
                if line.startswith(reply):
                    return line[len(reply) :].strip()
                assert not line.startswith("ERROR"), line
        raise AssertionError(f"{self.id}: the program ended before {reply}")

    async def participant_ids(self) -> list[str]:
        text = await self.command("participants", "PARTICIPANTS")
        return [item.rsplit("=", 1)[0] for item in text.split(",") if item]


@asynccontextmanager
async def java(
    tg: anyio.abc.TaskGroup, classpath: str, hosts: str, pid: str
) -> AsyncIterator[JavaSelector]:
    term_ms = str(int(TERM * 1000))
    process = await anyio.open_process(
        ["java", "-Xmx64m", "-cp", classpath, "CuratorSelector", hosts, PATH, pid, term_ms],
        stderr=subprocess.DEVNULL,
    )
    participant = JavaSelector(process, pid)
    try:
        await tg.start(participant.read)
        await participant.expect("STARTED")
        yield participant
    finally:
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(ProcessLookupError):  # it may have quit
                process.kill()
            await process.wait()


def leading(pid: str, intervals: list[Interval]) -> Callable[[LeadershipTerm], Awaitable[None]]:
    """A `lead` that holds each term for `TERM` seconds and records it (cancelled too)."""

    async def lead(term: LeadershipTerm) -> None:
        start = time.monotonic_ns()
        try:
            await anyio.sleep(TERM)
        finally:
            intervals.append((start, time.monotonic_ns(), pid))

    return lead


def overlaps(intervals: list[Interval]) -> list[tuple[str, str, float]]:
    """Each term that began while an earlier one still ran: (earlier, later, overlap in ms)."""
    found = []
    latest: Interval | None = None  # the term, of those begun so far, that ends last
    for interval in sorted(intervals):
        if latest is not None and interval[0] < latest[1]:
            found.append((latest[2], interval[2], (latest[1] - interval[0]) / 1e6))
        if latest is None or interval[1] > latest[1]:
            latest = interval
    return found


async def test_java_and_aiocoord_selectors_share_one_election(
    zk_server: ZooKeeperServer, zk_chroot: str, curator_classpath: str
) -> None:
    hosts = zk_server.connect_string
    python_intervals: list[Interval] = []
    with anyio.fail_after(75):
        async with AsyncExitStack() as stack:
            coords = [
                await stack.enter_async_context(
                    aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=10)
                )
                for _ in range(3)
            ]
            tg = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(tg.cancel_scope.cancel)
            javas = [
                await stack.enter_async_context(java(tg, curator_classpath, hosts + zk_chroot, pid))
                for pid in ("java-1", "java-2")
            ]
            # One clock on both sides, or the overlap check below would mean nothing.
            before = time.monotonic_ns()
            assert before <= int(await javas[0].command("now", "NOW")) <= time.monotonic_ns()
            for coord, pid in zip(coords[1:], ("python-1", "python-2"), strict=True):
                await stack.enter_async_context(
                    aiocoord.leader_selector(
                        coord, PATH, leading(pid, python_intervals), participant_id=pid
                    )
                )
            everyone = {"java-1", "java-2", "python-1", "python-2"}
            started = time.monotonic()

            # Curator reads our nodes as its own participants, ids and all.
            async def java_sees_python() -> bool:
                ids = await javas[0].participant_ids()
                assert set(ids) <= everyone, ids
                return {"python-1", "python-2"} <= set(ids)

            await eventually(java_sees_python, timeout=10)
            # What the nodes under the path are (Java's and ours), checked below.
            client = coords[0].client
            nodes: dict[str, str] = {}
            for name in await client.children(PATH):
                with contextlib.suppress(aiocoord.NoNodeError):  # released meanwhile
                    nodes[name] = (await client.get(f"{PATH}/{name}")).data.decode()
            await anyio.sleep(max(0.0, RUN - (time.monotonic() - started)))
            for jc in javas:
                await jc.command("quit", "BYE")  # a running term ends (NOTLEADER) first

    intervals = python_intervals + [i for jc in javas for i in jc.intervals]
    assert [jc.id for jc in javas if jc.leading_since is not None] == []
    terms = {pid: sum(1 for i in intervals if i[2] == pid) for pid in sorted(everyone)}
    seen = overlaps(intervals)
    assert not seen, f"{len(seen)} terms began while another ran, e.g. {seen[:5]}; terms {terms}"
    assert all(terms.values()), terms  # every participant led
    # Every node is the mutex's (Curator LeaderSelector's), the participant id as data.
    assert nodes and all(NODE.fullmatch(name) for name in nodes), nodes
    assert set(nodes.values()) <= everyone, nodes
