"""A server's malformed reply: the caller gets a `CoordError`, the connection is made again.

Each test has a `FakeZooKeeper` answer one request with a reply broken in one
way (a negative or oversized length, text that is not UTF-8, a stat cut
short, results that do not match the request) and checks what the issue
asks: no hang and no builtin exception for the caller, the event loop never
blocked, the connection dropped (SUSPENDED) and re-made on the same session,
and the client usable after.  Reads are retried on the new connection, so
they return the right answer; writes and requests sent from synchronous code
raise `ProtocolError` (their outcome is unknown).
"""

from __future__ import annotations

import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import pytest

import aiocoord
from aiocoord import ConnectionState, ProtocolError
from aiocoord.testing import FakeRequest, FakeZooKeeper
from aiocoord.zk import CreateOp
from tests.helpers import recording

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

S = ConnectionState
HEADER = 16  # xid, zxid, err
OP_HEADER = 9  # a multi result's type, done, err
CREATE2, GET_DATA, EXISTS, SET_DATA, GET_CHILDREN, MULTI = 15, 4, 3, 5, 8, 14
WHO_AM_I, GET_EPHEMERALS = 107, 103


def put_int(packet: bytes, offset: int, value: int) -> bytes:
    return packet[:offset] + struct.pack("!i", value) + packet[offset + 4 :]


def bad_utf8(packet: bytes) -> bytes:
    """A children reply whose first name is not UTF-8."""
    size: int = struct.unpack_from("!i", packet, HEADER + 4)[0]
    start = HEADER + 8
    return packet[:start] + b"\xff" * size + packet[start + size :]


def multi_results(*results: bytes) -> Callable[[bytes], bytes]:
    """Replace a multi reply's results (the header is kept)."""
    end = struct.pack("!i?i", -1, True, -1)
    return lambda packet: packet[:HEADER] + b"".join(results) + end


def result(type_: int, body: bytes = b"") -> bytes:
    return struct.pack("!i?i", type_, False, 0) + body


class Once:
    """A script that breaks the first reply to `opcode` and lets everything else through."""

    def __init__(
        self, opcode: int, mutate: Callable[[bytes], bytes], *, framed: bool = True
    ) -> None:
        self.opcode = opcode
        self.mutate = mutate
        self.framed = framed  # False: `mutate` returns the bytes to send, length prefix included
        self.done = False

    def __call__(self, request: FakeRequest) -> bytes | None:
        if request.opcode != self.opcode or self.done:
            return None
        self.done = True
        data = self.mutate(request.reply)
        return FakeZooKeeper.frame(data) if self.framed else data


@dataclass
class Heartbeat:
    """How late a task that sleeps 10 ms at a time woke, at worst: the loop was blocked that long."""

    worst: float = 0.0

    async def run(self) -> None:
        while True:
            before = time.monotonic()
            await anyio.sleep(0.01)
            self.worst = max(self.worst, time.monotonic() - before - 0.01)


@asynccontextmanager
async def served(script: Once) -> AsyncIterator[tuple[aiocoord.Coordinator, FakeZooKeeper]]:
    """A coordinator on a fake server running `script`, with the loop watched."""
    heartbeat = Heartbeat()
    with FakeZooKeeper() as zk:
        async with anyio.create_task_group() as tg:
            tg.start_soon(heartbeat.run)
            async with aiocoord.connect(
                zk.connect_string, namespace="/ns", session_timeout=3
            ) as coord:
                await coord.client.create("/a", b"data")
                await coord.client.create("/a/child")
                zk.script = script
                yield coord, zk
            tg.cancel_scope.cancel()
    assert script.done, "the script never broke a reply"
    assert heartbeat.worst < 0.1, f"the event loop was blocked for {heartbeat.worst:.3f}s"


async def dropped_and_back(
    coord: aiocoord.Coordinator, run: Callable[[], Awaitable[object]]
) -> object:
    """Run the call whose reply is broken; check the connection was re-made on the same session."""
    session = coord.session_id
    async with recording(coord) as events:
        mark = events.mark()
        outcome: object
        try:
            outcome = await run()
        except aiocoord.CoordError as exc:
            outcome = exc
        await events.wait_for(S.SUSPENDED, after=mark, timeout=5)
        back = await events.wait_for(S.RECONNECTED, after=mark, timeout=5)
    assert back.session_id == session
    assert await coord.client.get("/a") is not None  # usable again
    return outcome


MULTI_CASES = {
    # The defect of the issue: a length of -13 moved the parser back to the same header, for ever.
    "negative path length": multi_results(result(1, struct.pack("!i", -13))),
    "path length past the end": multi_results(result(1, struct.pack("!i", 10_000) + b"/ns/m")),
    "more results than operations": multi_results(
        result(1, struct.pack("!i", 5) + b"/ns/m"),
        struct.pack("!i?i", -1, False, -101) + struct.pack("!i", -101),
    ),
    "unknown result type": multi_results(result(99)),
    "no end marker": lambda packet: packet[: HEADER + OP_HEADER] + struct.pack("!i", 5) + b"/ns/m",
}


@pytest.mark.parametrize("mutate", MULTI_CASES.values(), ids=MULTI_CASES.keys())
async def test_malformed_multi_reply(mutate: Callable[[bytes], bytes]) -> None:
    with anyio.fail_after(15):
        async with served(Once(MULTI, mutate)) as (coord, _zk):
            outcome = await dropped_and_back(coord, lambda: coord.client.multi([CreateOp("/m")]))
            assert isinstance(outcome, ProtocolError), outcome


async def test_malformed_reply_to_a_multi_sent_from_a_callback() -> None:
    with anyio.fail_after(15):
        async with served(Once(MULTI, MULTI_CASES["negative path length"])) as (coord, _zk):
            sent = coord.client.send_multi([CreateOp("/m")])
            done = anyio.Event()
            sent.add_done_callback(lambda _sent: done.set())

            async def outcome() -> object:
                await done.wait()
                return sent.result()

            assert isinstance(await dropped_and_back(coord, outcome), ProtocolError)


READ_CASES: dict[str, tuple[int, Callable[[bytes], bytes], str]] = {
    "data length past the end": (GET_DATA, lambda p: put_int(p, HEADER, 0x7FFFFFFF), "get"),
    "data length below -1": (GET_DATA, lambda p: put_int(p, HEADER, -7), "get"),
    "stat cut short": (EXISTS, lambda p: p[:-8], "exists"),
    "child name not UTF-8": (GET_CHILDREN, bad_utf8, "children"),
    "child name null": (GET_CHILDREN, lambda p: put_int(p, HEADER + 4, -1), "children"),
    "child count past the end": (GET_CHILDREN, lambda p: put_int(p, HEADER, 1 << 30), "children"),
    "identity count negative": (WHO_AM_I, lambda p: put_int(p, HEADER, -9), "whoami"),
    "ephemeral path past the end": (
        GET_EPHEMERALS,
        lambda p: p[:HEADER] + struct.pack("!ii", 1, 40) + b"/ns/e",
        "ephemerals",
    ),
    "reply shorter than its header": (GET_DATA, lambda p: p[:10], "get"),
    # Before, the request whose reply had the wrong xid was failed by no one: its caller hung.
    "reply with another xid": (GET_DATA, lambda p: put_int(p, 0, 0x7000), "get"),
}


@pytest.mark.parametrize(("opcode", "mutate", "call"), READ_CASES.values(), ids=READ_CASES.keys())
async def test_malformed_read_reply_is_read_again(
    opcode: int, mutate: Callable[[bytes], bytes], call: str
) -> None:
    with anyio.fail_after(15):
        async with served(Once(opcode, mutate)) as (coord, _zk):
            client = coord.client
            if call == "ephemerals":
                await client.create("/e", mode=aiocoord.zk.CreateMode.EPHEMERAL)
            calls: dict[str, Callable[[], Awaitable[object]]] = {
                "get": lambda: client.get("/a"),
                "exists": lambda: client.exists("/a"),
                "children": lambda: client.children("/a"),
                "whoami": client.whoami,
                "ephemerals": client.ephemerals,
            }
            outcome = await dropped_and_back(coord, calls[call])
            # A read is idempotent: it was sent again on the new connection.
            expected: dict[str, Callable[[object], bool]] = {
                "get": lambda o: getattr(o, "data", None) == b"data",
                "exists": lambda o: getattr(o, "version", None) == 0,
                "children": lambda o: o == ["child"],
                "whoami": lambda o: isinstance(o, list) and ("ip", "127.0.0.1") in o,
                "ephemerals": lambda o: o == ["/e"],
            }
            assert expected[call](outcome), outcome


WRITE_CASES: dict[str, tuple[int, Callable[[bytes], bytes]]] = {
    "created path past the end": (CREATE2, lambda p: put_int(p, HEADER, 500)),
    "created path not UTF-8": (CREATE2, lambda p: p[: HEADER + 4] + b"\xfe" + p[HEADER + 5 :]),
    "set stat missing": (SET_DATA, lambda p: p[:HEADER]),
}


@pytest.mark.parametrize(("opcode", "mutate"), WRITE_CASES.values(), ids=WRITE_CASES.keys())
async def test_malformed_write_reply(opcode: int, mutate: Callable[[bytes], bytes]) -> None:
    with anyio.fail_after(15):
        async with served(Once(opcode, mutate)) as (coord, _zk):
            client = coord.client
            if opcode == CREATE2:
                outcome = await dropped_and_back(coord, lambda: client.create("/new"))
            else:
                outcome = await dropped_and_back(coord, lambda: client.set("/a", b"x"))
            assert isinstance(outcome, ProtocolError), outcome


async def test_malformed_reply_to_a_pipelined_read() -> None:
    with anyio.fail_after(15):
        async with served(Once(GET_DATA, lambda p: put_int(p, HEADER, 1 << 20))) as (coord, _zk):
            outcome = await dropped_and_back(
                coord, lambda: coord.client.set_and_get("/a", b"new", 0)
            )
            assert isinstance(outcome, ProtocolError), outcome


async def test_malformed_reply_to_a_listing_sent_from_a_callback() -> None:
    with anyio.fail_after(15):
        async with served(Once(GET_CHILDREN, bad_utf8)) as (coord, _zk):
            seen: list[list[str]] = []
            result = coord.client.children_now("/a", seen.append)
            outcome = await dropped_and_back(coord, result)
            assert isinstance(outcome, ProtocolError), outcome
            assert seen == []  # the callback never saw a listing that does not parse


async def test_a_frame_that_never_completes_drops_the_connection() -> None:
    """A reply announcing more bytes than come: silence, though the server answers pings.

    The ping replies fill the announced frame a few bytes at a time; counting
    them as "heard from the server" kept the connection, and the request, up
    for as long as the frame took to fill (here about a minute), with no
    deadline configured.  Only a whole packet counts.
    """

    def announce_more(packet: bytes) -> bytes:
        return struct.pack("!i", len(packet) + 4000) + packet

    with anyio.fail_after(15):
        async with served(Once(GET_DATA, announce_more, framed=False)) as (coord, _zk):
            started = time.monotonic()
            node = await dropped_and_back(coord, lambda: coord.client.get("/a"))
            assert getattr(node, "data", None) == b"data"  # read again on the new connection
            # Dropped once the server was silent for the read timeout (2/3 of 3 s).
            assert time.monotonic() - started < coord.client._session.timing.read_timeout + 1.5


async def test_requests_in_flight_behind_a_malformed_reply() -> None:
    """The connection must go (what else the server sent on it cannot be trusted, as the
    Java client judges): the malformed reply fails its own request with `ProtocolError`,
    the requests sent after it on that connection with `ConnectionLostError`.  Reads, its
    own included, are read again on the new connection and return the right answer; a
    write's outcome is unknown (the server may or may not have read it before the hang-up),
    as after any lost connection."""
    with anyio.fail_after(15):
        async with served(Once(GET_DATA, lambda p: put_int(p, HEADER, 0x7FFFFFFF))) as (
            coord,
            _zk,
        ):
            client = coord.client
            outcomes: dict[str, object] = {}

            async def run(name: str, call: Callable[[], Awaitable[object]]) -> None:
                try:
                    outcomes[name] = await call()
                except aiocoord.CoordError as exc:
                    outcomes[name] = exc

            async def pipelined() -> None:
                async with anyio.create_task_group() as tg:  # one write: all in flight at once
                    tg.start_soon(run, "broken", lambda: client.get("/a"))
                    tg.start_soon(run, "read", lambda: client.get("/a/child"))
                    tg.start_soon(run, "write", lambda: client.set("/a/child", b"w"))
                    tg.start_soon(run, "listing", lambda: client.children("/a"))

            await dropped_and_back(coord, pipelined)
    assert getattr(outcomes["broken"], "data", None) == b"data", outcomes
    assert getattr(outcomes["read"], "data", None) in (b"", b"w"), outcomes
    assert type(outcomes["write"]) is aiocoord.ConnectionLostError, outcomes
    assert outcomes["listing"] == ["child"], outcomes


async def test_a_reply_whose_reading_fails_unexpectedly_fails_its_own_request(
    coordinator: aiocoord.Coordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading a reply that raises something other than `ProtocolError` still ends its request.

    The request is out of the pending queue by then, so the connection's end
    does not reach it: it waited for ever.  Now it fails with `ProtocolError`
    (the cause chained) and, a read, is sent again on the new connection.
    """
    from aiocoord.zk import _replies

    real = _replies.parse_stat
    broken = {"left": 1}

    def parse_stat(body: bytes) -> object:
        if broken["left"]:
            broken["left"] -= 1
            raise ValueError("a reader's own bug")
        return real(body)

    client = coordinator.client
    await client.create("/r", b"x")
    monkeypatch.setattr(_replies, "parse_stat", parse_stat)
    with anyio.fail_after(10):
        stat = await client.exists("/r")
    assert stat is not None and stat.version == 0
    assert broken["left"] == 0
