"""The queue's first listing, sent right behind its create: round trips, and cuts in between.

Every request the client writes is counted at the connection (`Wire`): a
request queued while another non-ping request of its connection is still
unanswered rides in that round trip; the others each start one.
"""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

import aiocoord
from aiocoord import Coordinator, mutex
from aiocoord.testing import FaultProxy, ZooKeeperServer
from aiocoord.zk import _connection
from aiocoord.zk._wire import OpCode
from tests.helpers import eventually

pytestmark = pytest.mark.anyio

Connection = _connection.Connection


@dataclass(frozen=True)
class Sent:
    conn: Connection
    opcode: OpCode
    xid: int
    behind: bool  # queued while a request of its connection was unanswered: no round trip


class Wire:
    """The requests written while recording, in order (pings left out)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: list[Sent] = []
        self.recording = True
        queue = Connection.queue

        def counted(
            conn: Connection, packet: bytes, xid: int, opcode: OpCode, *args: Any, **kwargs: Any
        ) -> Any:
            if self.recording and opcode is not OpCode.PING:
                behind = any(p.opcode is not OpCode.PING for p in conn._pending)
                self.sent.append(Sent(conn, opcode, xid, behind))
            return queue(conn, packet, xid, opcode, *args, **kwargs)

        monkeypatch.setattr(Connection, "queue", counted)

    def of(self, conn: Connection) -> list[Sent]:
        return [s for s in self.sent if s.conn is conn]

    def first(self, opcode: OpCode) -> Sent:
        return next(s for s in self.sent if s.opcode is opcode)


def through(wire: Wire, proxy: FaultProxy) -> list[Sent]:
    """What went through `proxy`, but the new connection's priming (its watches set again)."""
    return [
        s
        for s in wire.sent
        if s.conn.address[1] == proxy.address[1] and s.opcode is not OpCode.SET_WATCHES2
    ]


def ops(sent: list[Sent]) -> list[str]:
    return [s.opcode.name for s in sent]


def round_trips(sent: list[Sent]) -> int:
    return sum(1 for s in sent if not s.behind)


async def persistent(coord: Coordinator, path: str) -> None:
    """The queue's parent, made persistent: a container emptied is soon reaped, and a
    child watch on it would fire for that."""
    await coord.client.create(path, make_parents=True)


async def children(coord: Coordinator, path: str) -> list[str]:
    try:
        return await coord.client.children(path)
    except aiocoord.NoNodeError:
        return []


def watching(coord: Coordinator) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return coord.client.watch_counts()["kept"] >= 1

    return check


async def test_an_uncontended_acquisition_lists_in_its_create_s_round_trip(
    coordinator: Coordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Create and listing in one round trip, then the release: two round trips, not three."""
    with anyio.fail_after(20):
        await persistent(coordinator, "/m/uncontended")
        wire = Wire(monkeypatch)
        async with mutex(coordinator, "/m/uncontended"):
            pass
        wire.recording = False
        assert ops(wire.sent) == ["CREATE2", "GET_CHILDREN", "DELETE"]
        assert [s.behind for s in wire.sent] == [False, True, False]
        assert round_trips(wire.sent) == 2


async def test_a_contended_acquisition_takes_three_round_trips_to_its_turn(
    zk_server: ZooKeeperServer, zk_chroot: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Create and listing, the predecessor's watch, the listing once it goes (four before)."""
    path = "/m/contended"
    connect = zk_server.connect_string
    with anyio.fail_after(30):
        async with (
            aiocoord.connect(connect, namespace=zk_chroot, session_timeout=4) as a,
            aiocoord.connect(connect, namespace=zk_chroot, session_timeout=4) as b,
        ):
            await persistent(a, path)
            held = anyio.Event()

            async def wait_for_it() -> None:
                async with mutex(b, path):
                    held.set()

            async with anyio.create_task_group() as tg:
                async with mutex(a, path):
                    wire = Wire(monkeypatch)
                    tg.start_soon(wait_for_it)
                    await eventually(watching(b))
                    mine = wire.first(OpCode.CREATE2).conn
                    before = len(wire.of(mine))
                await held.wait()
            wire.recording = False
            sent = wire.of(mine)
            assert before == 3
            assert ops(sent) == ["CREATE2", "GET_CHILDREN", "GET_DATA", "GET_CHILDREN", "DELETE"]
            assert round_trips(sent[:4]) == 3


async def test_a_cut_between_the_create_s_reply_and_the_listing_s_lists_again(
    zk_server: ZooKeeperServer, zk_chroot: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The create's outcome stands (no second create, no find); the listing is sent again."""
    path = "/m/cut-between"
    with anyio.fail_after(30), FaultProxy(*zk_server.address) as proxy:
        async with (
            aiocoord.connect(proxy.connect_string, namespace=zk_chroot, session_timeout=4) as coord,
            aiocoord.connect(
                zk_server.connect_string, namespace=zk_chroot, session_timeout=4
            ) as observer,
        ):
            await persistent(observer, path)
            wire = Wire(monkeypatch)
            cut: list[Connection] = []
            dispatch = Connection._dispatch

            def cutting(conn: Connection, body: bytes) -> None:
                dispatch(conn, body)
                create = next((s for s in wire.sent if s.opcode is OpCode.CREATE2), None)
                xid = struct.unpack_from("!i", body)[0]
                if not cut and create is not None and create.conn is conn and create.xid == xid:
                    cut.append(conn)  # the listing's reply, if already read, is dropped with it
                    conn._protocol.ended("cut between the create's reply and the listing's")
                    conn._transport.abort()

            monkeypatch.setattr(Connection, "_dispatch", cutting)
            async with mutex(coord, path) as held:
                assert cut, "the connection was not cut"
                assert held.is_held
                names = await observer.client.children(path)
                assert len(names) == 1 and names[0].startswith("_c_")
                assert held.node == f"{path}/{names[0]}"
            wire.recording = False
            mine = through(wire, proxy)
            assert ops(mine) == ["CREATE2", "GET_CHILDREN", "GET_CHILDREN", "DELETE"]
            assert mine[1].conn is cut[0] and mine[2].conn is not cut[0]  # listed again
            assert await children(observer, path) == []


async def test_a_create_cut_off_before_its_reply_is_found_with_the_listing_that_finds_it(
    zk_server: ZooKeeperServer, zk_chroot: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Create and listing both unanswered, the create applied: found by its uuid, and the
    listing that found it decides (no third listing); one node, ours."""
    path = "/m/cut-before"
    with anyio.fail_after(30), FaultProxy(*zk_server.address) as proxy:
        async with (
            aiocoord.connect(proxy.connect_string, namespace=zk_chroot, session_timeout=4) as coord,
            aiocoord.connect(
                zk_server.connect_string, namespace=zk_chroot, session_timeout=4
            ) as observer,
        ):
            await persistent(observer, path)
            names, appeared = await observer.client.children_watch(path)
            assert names == []
            wire = Wire(monkeypatch)
            proxy.delay(0.6)  # the replies are still in flight when the connection is cut
            held = anyio.Event()
            done = anyio.Event()
            nodes: list[str | None] = []

            async def acquire() -> None:
                async with mutex(coord, path) as m:
                    nodes.append(m.node)
                    held.set()
                    await done.wait()

            async with anyio.create_task_group() as tg:
                tg.start_soon(acquire)
                await appeared.wait()  # the server has applied the create...
                # ...and the client gets neither reply: the cut drops them before the
                # delay ends (ended first, a reply read meanwhile would be let through).
                proxy.pause()
                assert proxy.cut() == 1
                proxy.delay(0)
                proxy.resume()
                await held.wait()
                names = await observer.client.children(path)
                assert len(names) == 1 and nodes == [f"{path}/{names[0]}"]
                done.set()
            wire.recording = False
            mine = through(wire, proxy)
            assert ops(mine) == ["CREATE2", "GET_CHILDREN", "GET_CHILDREN", "EXISTS", "DELETE"]
            assert await children(observer, path) == []
