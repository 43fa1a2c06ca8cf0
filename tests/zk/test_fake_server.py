"""`FakeZooKeeper`: answers as real ZooKeeper does, and its script can make it misbehave.

The same sequence of client calls runs against the real server and the fake
one, and must give the same outcomes (values, versions, errors, sequence
numbers, notifications); then each lever of the script (replaced bytes,
silence, hang-ups, notifications, expiry) is checked against a real client.
"""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

import aiocoord
from aiocoord import ConnectionState
from aiocoord.testing import Answer, FakeRequest, FakeZooKeeper, ZooKeeperServer
from aiocoord.zk import CreateMode, CreateOp, DeleteOp, EventType, SetDataOp, Stat
from tests.helpers import recording

pytestmark = pytest.mark.anyio
S = ConnectionState


def _shape(value: Any) -> Any:
    """What must match between servers: zxids, times and session ids differ."""
    if isinstance(value, Stat):
        return ("stat", value.version, value.cversion, value.data_length, value.num_children)
    if isinstance(value, list | tuple):
        return [_shape(v) for v in value]
    if isinstance(value, BaseException):
        return type(value).__name__
    if hasattr(value, "__dataclass_fields__"):
        return (
            type(value).__name__,
            *(_shape(getattr(value, f)) for f in value.__dataclass_fields__),
        )
    return value


async def _story(coord: aiocoord.Coordinator) -> list[Any]:
    """Every kind of call aiocoord makes, with its errors; the outcomes in order."""
    c = coord.client
    out: list[Any] = []

    async def step(call: Any) -> None:
        try:
            out.append(_shape(await call))
        except aiocoord.CoordError as exc:
            out.append(_shape(exc))

    await step(c.create("/a", b"one"))
    await step(c.create("/a", b"again"))
    await step(c.create("/missing/child"))
    await step(c.create("/a/e", b"eph", mode=CreateMode.EPHEMERAL))
    await step(c.create("/a/e/below"))
    await step(c.create("/a/s-", mode=CreateMode.PERSISTENT_SEQUENTIAL))
    await step(c.create("/a/s-", mode=CreateMode.EPHEMERAL_SEQUENTIAL))
    await step(c.create("/box", mode=CreateMode.CONTAINER))
    await step(c.get("/a"))
    await step(c.set("/a", b"two", 0))
    await step(c.set("/a", b"three", 0))
    await step(c.exists("/a"))
    await step(c.exists("/nothing"))
    await step(c.get("/nothing"))
    out.append(sorted(await c.children("/a")))
    await step(c.delete("/a"))
    await step(c.delete("/a/e", 3))
    await step(c.multi([CreateOp("/m", b"m"), SetDataOp("/a", b"four", 2), DeleteOp("/m")]))
    await step(c.multi([CreateOp("/n"), DeleteOp("/nothing")]))
    await step(c.exists("/n"))
    await step(c.set_and_get("/a", b"five", 0))
    out.append(sorted(await c.ephemerals("/a")))
    await step(c.sync("/a"))
    _, data_watch = await c.get_watch("/a")
    _, exist_watch = await c.exists_watch("/later")
    _, child_watch = await c.children_watch("/a")
    await c.set("/a", b"six")
    await c.create("/later")
    await c.delete("/a/e")
    out += [(await w.wait()).type for w in (data_watch, exist_watch, child_watch)]
    async with c.watch("/later", recursive=True) as pwatch:
        await c.create("/later/x")
        await c.set("/later/x", b"x")
        out += [(await pwatch.events.receive()).type for _ in range(2)]
    return out


async def test_the_fake_answers_as_zookeeper_does(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    outcomes = []
    with anyio.fail_after(30), FakeZooKeeper() as fake:
        for server in (zk_server.connect_string, fake.connect_string):
            async with aiocoord.connect(server, namespace=zk_chroot, session_timeout=4) as coord:
                outcomes.append(await _story(coord))
    real, fake_outcome = outcomes
    assert fake_outcome == real
    assert "NodeExistsError" in real and "BadVersionError" in real  # the story covers errors


async def test_a_script_replaces_replies_and_can_hang_up() -> None:
    seen: list[tuple[int | None, int | None]] = []

    def script(request: FakeRequest) -> Answer | bytes | None:
        seen.append((request.xid, request.opcode))
        if request.opcode == 4 and len([s for s in seen if s[1] == 4]) == 1:
            return Answer(b"\x00\x00\x00\x04junk", hang_up=False)  # a 4-byte frame: no header
        return None

    with anyio.fail_after(20), FakeZooKeeper(script) as fake:
        # Not following the ensemble's config: the script counts the test's own reads (the
        # tracker's read would be the first, and the create in flight beside it would fail
        # with the connection the broken reply ends: a write's outcome is then unknown).
        async with aiocoord.connect(
            fake.connect_string, session_timeout=3, follow_ensemble=False
        ) as coord:
            await coord.client.create("/x", b"x")
            async with recording(coord) as events:
                assert (await coord.client.get("/x")).data == b"x"  # read again after the drop
                await events.wait_for(S.RECONNECTED)
            assert fake.handshakes == 2
            assert seen[0] == (None, None)  # the handshake goes through the script too
            # The reply to setData is lost with the connection.
            fake.script = lambda r: Answer(hang_up=True) if r.opcode == 5 else None
            with pytest.raises(aiocoord.ConnectionLostError):
                await coord.client.set("/x", b"y")
            assert fake.data("/x") == b"y"  # applied before its reply was lost
            fake.script = None
            await coord.wait_connected()
            assert (await coord.client.get("/x")).data == b"y"


async def test_notify_send_hang_up_and_expire() -> None:
    with anyio.fail_after(20), FakeZooKeeper() as fake:
        async with aiocoord.connect(fake.connect_string, session_timeout=3) as coord:
            async with coord.client.watch("/w") as pwatch:
                fake.notify(EventType.DATA_CHANGED, "/w")
                assert (await pwatch.events.receive()).type is EventType.DATA_CHANGED
            async with recording(coord) as events:
                assert fake.hang_up() == 1
                back = await events.wait_for(S.RECONNECTED)
                assert back.session_id == coord.session_id
                mark = events.mark()
                fake.send(b"\xff\xff\xff\xff")  # a negative frame length
                await events.wait_for(S.RECONNECTED, after=mark)
                mark = events.mark()
                old = coord.session_id
                await coord.client.create("/eph", mode=CreateMode.EPHEMERAL)
                assert fake.expire() == [old]
                await events.wait_for(S.LOST, after=mark)
                new = await events.wait_for(S.RECONNECTED, after=mark)
                assert new.session_id not in (None, old)
                assert fake.data("/eph") is None  # ephemerals went with the session
                assert fake.sessions == [new.session_id]


def test_stop_leaks_nothing() -> None:
    before = threading.active_count()
    fake = FakeZooKeeper().start()
    assert threading.active_count() == before + 1
    fake.stop()
    fake.stop()  # idempotent
    assert threading.active_count() == before
    with pytest.raises(RuntimeError, match="cannot be started again"):
        fake.start()
    assert "stopped" in repr(fake)
