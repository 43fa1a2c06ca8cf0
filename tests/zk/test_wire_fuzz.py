"""Wire fuzzing: a real client against a `FakeZooKeeper` whose replies hypothesis mutates.

Each example draws a plan of mutations, each for the next reply to one
request type (the handshake included): an int overwritten anywhere (lengths,
counts, xids, error codes), the error code or xid replaced, the packet cut,
a frame that announces more than it sends, garbage framed or not, an
oversized frame, silence, a hang-up, a duplicate, flipped bytes, or a
mutated watch notification slipped in before the reply.  The client then
makes every kind of request.  The properties: every call returns or raises
a `CoordError` within its deadline; the event loop is never blocked for
more than 100 ms (counted in its thread's CPU time, so that a busy machine
is not mistaken for a blocked loop); memory stays bounded; once the server
behaves again the session recovers and serves a request.

CI runs 15 examples on each event loop; ``AIOCOORD_FUZZ_EXAMPLES=550`` (per
loop) is the long local run.  docs/reliability.md, "Wire fuzzing", has the
figures and what the fuzzer found.
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import struct
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

import anyio
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import aiocoord
from aiocoord import AuthFailedError, CoordError
from aiocoord.testing import Answer, FakeRequest, FakeZooKeeper
from aiocoord.zk import CreateMode, CreateOp, DeleteOp, SetDataOp, ZkClient

EXAMPLES = int(os.environ.get("AIOCOORD_FUZZ_EXAMPLES", "15"))  # per event loop
T = 0.6  # session timeout: a silent server costs 0.4 s (the read timeout)
SLACK = 1.0  # a reconnect's backoff, on a busy machine
LATE = 0.1  # the event loop may be blocked this long at most
MEMORY = 64 << 20  # bytes of RSS growth allowed in one example
pytestmark = pytest.mark.timeout(120 + EXAMPLES * 20)

# What the client sends: None is the handshake; then create2, createContainer, delete,
# exists, getData, setData, getChildren, sync, ping, multi, removeWatches, auth,
# getEphemerals, setWatches2, addWatch, whoAmI, closeSession.
TARGETS = [None, 15, 19, 2, 3, 4, 5, 8, 9, 11, 14, 18, 100, 103, 105, 106, 107, -11]
KINDS = [
    "int", "err", "xid", "truncate", "short frame", "trailing", "garbage", "unframed",
    "oversize", "silence", "hang up", "duplicate", "flip", "notification",
]  # fmt: skip
INTS = st.sampled_from([-13, -2, -1, 0, 1, 3, 16, 0x7FFFFFFF, 0x103FFF, 1 << 24]) | st.integers(
    -(2**31), 2**31 - 1
)
WATCHED = ["/a", "/a/c", "/w", ""]  # under the example's namespace; then two outside it
STATS: collections.Counter[str] = collections.Counter()
NAMESPACES = itertools.count()


@dataclass
class Mutation:
    target: int | None
    kind: str
    value: int
    at: float  # where in the packet, as a fraction of its length
    data: bytes
    used: bool = False
    namespace: str = ""  # the example's, for the paths of notifications

    def apply(self, reply: bytes) -> Answer | bytes:
        frame, n = FakeZooKeeper.frame, len(reply)
        pos, value = int(self.at * n), struct.pack("!i", self.value)
        if self.kind == "int":
            return frame(reply[:pos] + value + reply[pos + 4 :])
        if self.kind == "err":
            return frame(reply[:12] + value + reply[16:])
        if self.kind == "xid":
            return frame(value + reply[4:])
        if self.kind == "truncate":
            return frame(reply[:pos])
        if self.kind == "short frame":  # announces more than it sends: what follows fills it
            return struct.pack("!i", n + 1 + self.value % 4096) + reply
        if self.kind == "trailing":
            return frame(reply + self.data)
        if self.kind == "garbage":
            return frame(self.data)
        if self.kind == "unframed":
            return self.data
        if self.kind == "oversize":
            return struct.pack("!i", 0x103FFF + 1 + self.value % (1 << 24)) + self.data
        if self.kind == "silence":
            return b""
        if self.kind == "hang up":
            return Answer(hang_up=True)
        if self.kind == "duplicate":
            return frame(reply) * 2
        if self.kind == "flip":
            flipped = bytes(b ^ k for b, k in zip(reply[pos:], self.data or b"\xff", strict=False))
            return frame(reply[:pos] + flipped + reply[pos + len(flipped) :])
        return self._notification() + frame(reply)

    def _notification(self) -> bytes:
        kind = [1, 2, 3, 4, -1, 0, 5, 99][self.value % 8]
        paths = [self.namespace + p for p in WATCHED] + ["/", "/elsewhere"]
        path = paths[self.value % len(paths)]
        packet = FakeZooKeeper.notification_packet(kind, [3, -112, 0][self.value % 3], path)
        if self.data:  # and mutated too: its path, type, lengths
            pos = int(self.at * len(packet))
            packet = packet[:pos] + self.data[:8] + packet[pos + len(self.data[:8]) :]
        return FakeZooKeeper.frame(packet)


@dataclass
class Plan:
    mutations: list[Mutation]
    auth: bool
    request_timeout: float | None
    applied: list[str] = field(default_factory=list)

    def script(self, request: FakeRequest) -> Answer | bytes | None:
        for m in self.mutations:
            if not m.used and m.target == request.opcode:
                m.used = True
                self.applied.append(m.kind)
                return m.apply(request.reply)
        return None


mutations = st.builds(
    Mutation,
    target=st.sampled_from(TARGETS),
    kind=st.sampled_from(KINDS),
    value=INTS,
    at=st.floats(0, 1, exclude_max=True),
    data=st.binary(max_size=48),
)
plans = st.builds(
    Plan,
    mutations=st.lists(mutations, min_size=1, max_size=5),
    auth=st.booleans(),
    request_timeout=st.sampled_from([None, T]),
)


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@dataclass
class Monitor:
    """How late a task that sleeps 10 ms at a time woke, at worst, and the peak RSS.

    Lateness is measured in the event loop thread's CPU time: the loop was
    blocked by our code that long.  Wall-clock lateness also counts a machine
    too busy to run the process; it is kept for the record (`wall`).
    """

    late: float = 0.0
    wall: float = 0.0
    peak: int = 0

    async def run(self) -> None:
        while True:
            wall, cpu = time.monotonic(), time.thread_time()
            await anyio.sleep(0.01)
            self.late = max(self.late, time.thread_time() - cpu)
            self.wall = max(self.wall, time.monotonic() - wall - 0.01)
            self.peak = max(self.peak, _rss())


def _calls(c: ZkClient) -> list[tuple[str, int, Callable[[], Awaitable[object]]]]:
    """(name, request deadlines it may take, call): every request type the client makes."""

    async def watched() -> None:
        async with c.watch("/w", recursive=True):
            await c.create("/w", b"w")

    async def sent_multi() -> object:
        sent = c.send_multi([CreateOp("/m2"), DeleteOp("/m2")])
        done = anyio.Event()
        sent.add_done_callback(lambda _s: done.set())
        await done.wait()
        return sent.result()

    async def children_now() -> object:
        return await c.children_now("/a", lambda _names: None)()

    # Reads are tried again after a connection loss within two deadlines (three in all);
    # a create with parents makes each missing one, existence checked first.
    return [
        ("create", 1, lambda: c.create("/a", b"x")),
        ("create sequential", 1, lambda: c.create("/a/s-", mode=CreateMode.EPHEMERAL_SEQUENTIAL)),
        ("create parents", 25, lambda: c.create("/d/e/f", make_parents=True)),
        ("get", 3, lambda: c.get("/a")),
        ("get watch", 3, lambda: c.get_watch("/a")),
        ("exists", 3, lambda: c.exists("/a")),
        ("exists watch", 3, lambda: c.exists_watch("/later")),
        ("children", 3, lambda: c.children("/a")),
        ("children watch", 3, lambda: c.children_watch("/a")),
        ("set", 1, lambda: c.set("/a", b"y")),
        ("set and get", 1, lambda: c.set_and_get("/a", b"z", 0, watch=True)),
        ("multi", 1, lambda: c.multi([CreateOp("/m"), SetDataOp("/m", b"m"), DeleteOp("/m")])),
        ("failing multi", 1, lambda: c.multi([CreateOp("/n"), DeleteOp("/none")])),
        ("send multi", 1, sent_multi),
        ("children now", 1, children_now),
        ("sync", 3, lambda: c.sync("/a")),
        ("whoami", 3, c.whoami),
        ("ephemerals", 3, c.ephemerals),
        ("persistent watch", 3, watched),
        ("create child", 1, lambda: c.create("/a/c", b"c")),
        ("delete", 1, lambda: c.delete("/a/c")),
        ("delete missing", 1, lambda: c.delete("/a/none")),
    ]


async def _exercise(coord: aiocoord.Coordinator, fake: FakeZooKeeper, plan: Plan) -> None:
    """Every call under the plan, each within its deadline; then the server behaves again."""
    deadline = plan.request_timeout or T
    if any(m.target == 11 for m in plan.mutations):
        await anyio.sleep(coord.client._session.timing.ping_interval * 1.2)  # let a ping go out
    for name, deadlines, call in _calls(coord.client):
        bound = deadlines * deadline + 2 * SLACK
        with anyio.move_on_after(bound) as scope:
            try:
                await call()
                STATS[f"returned: {name}"] += 1
            except CoordError as exc:
                STATS[f"raised {type(exc).__name__}"] += 1
        assert not scope.cancelled_caught, f"{name}: no answer within {bound:.1f}s"
    fake.script = None
    with anyio.fail_after(T + 2 * SLACK + 3 * deadline):
        try:
            await coord.wait_connected()
        except AuthFailedError:
            # Refused credentials end a session for good, by design (a mutated auth
            # reply looks just like it): recovery is a new coordinator.
            STATS["auth refused for good"] += 1
            return
        assert await coord.client.exists("/") is not None
        STATS["recovered"] += 1


async def _example(fake: FakeZooKeeper, plan: Plan) -> None:
    namespace = f"/fz{next(NAMESPACES)}"  # a fresh tree: creates succeed, watches are new
    for mutation in plan.mutations:
        mutation.namespace = namespace
    fake.script = plan.script
    monitor = Monitor(peak=_rss())
    start_rss = monitor.peak
    settings = aiocoord.Settings(
        hosts=fake.connect_string,
        namespace=namespace,
        session_timeout=T,
        request_timeout=plan.request_timeout,
        auth="fuzz:secret" if plan.auth else None,
        connect_timeout=3.0,
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(monitor.run)
        entered = False
        try:
            async with aiocoord.connect(settings) as coord:
                entered = True
                await _exercise(coord, fake, plan)
        except CoordError as exc:
            if entered:
                raise  # only connect() may fail: calls are checked one by one
            # No first session within connect_timeout, or a broken priming refused for
            # good: a server that behaves gives one at once.
            STATS[f"connect raised {type(exc).__name__}"] += 1
            fake.script = None
            with anyio.fail_after(5):
                async with aiocoord.connect(settings) as coord:
                    assert await coord.client.exists("/") is not None
        tg.cancel_scope.cancel()
    STATS["examples"] += 1
    for kind in plan.applied:
        STATS[f"mutation: {kind}"] += 1
    STATS["worst wall-clock lateness (ms)"] = max(
        STATS["worst wall-clock lateness (ms)"], int(monitor.wall * 1000)
    )
    assert monitor.late < LATE, f"the event loop was blocked for {monitor.late:.3f}s"
    assert monitor.peak - start_rss < MEMORY, f"RSS grew by {(monitor.peak - start_rss) >> 20} MiB"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeZooKeeper]:
    # Every example drops connections on purpose: their warnings would fill the report.
    quiet = logging.getLogger("aiocoord")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with FakeZooKeeper() as server:
            yield server
    finally:
        quiet.setLevel(level)
    if os.environ.get("AIOCOORD_FUZZ_EXAMPLES"):
        print("\nwire fuzzing:", dict(sorted(STATS.items())))


@pytest.mark.parametrize("use_uvloop", [False, True], ids=["asyncio", "uvloop"])
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    # An example takes up to seconds: shrinking one would take minutes, and a plan is short.
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow],
)
@given(plan=plans)
def test_a_client_survives_any_reply(fake: FakeZooKeeper, use_uvloop: bool, plan: Plan) -> None:
    started = time.monotonic()
    anyio.run(_example, fake, plan, backend_options={"use_uvloop": use_uvloop})
    STATS["milliseconds"] += int((time.monotonic() - started) * 1000)
