"""The multi serializer and parser against aiozk's: the same bytes, the same results.

Recipes batch hundreds of creates and deletes in one multi, so `multi_packet`
packs plain creates and deletes itself; it must write exactly what aiozk's
serializer writes for every kind of operation, mode and ACL.  Notifications
come in hundreds at a hand-over too, and `parse_watch_event` must read them
as aiozk does; the connection cuts them from the byte stream by offset, which
must give the same frames however the reads split it.
"""

from __future__ import annotations

import asyncio
import random
import struct

import pytest
from aiozk import protocol as proto

from aiocoord.errors import ProtocolError
from aiocoord.zk import (
    ACL,
    CheckOp,
    CreateMode,
    CreateOp,
    DeleteOp,
    SetDataOp,
    _multi,
    _replies,
    _wire,
)
from aiocoord.zk.types import CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, Op


def _random_ops(rng: random.Random) -> list[tuple[Op, str]]:
    ops: list[tuple[Op, str]] = []
    for i in range(rng.randint(0, 8)):
        path = "/a/" + rng.choice(["x", "ünï", f"t-{i}", "long" * 20])
        kind = rng.randint(0, 3)
        op: Op
        if kind == 0:
            mode = rng.choice(list(CreateMode))
            acl = rng.choice([None, (ACL(ACL.READ, "digest", "u:p"),), CREATOR_ALL_ACL])
            data = rng.choice([b"", b"x" * 50, "é".encode()])
            op = CreateOp(path, data, mode, 1000 if mode.ttl else None, acl)
        elif kind == 1:
            op = DeleteOp(path, rng.choice([-1, 0, 7]))
        elif kind == 2:
            op = SetDataOp(path, b"d", 3)
        else:
            op = CheckOp(path, 2)
        ops.append((op, "/chroot" + path))
    return ops


def test_multi_packet_writes_what_aiozk_writes() -> None:
    rng = random.Random(5)
    for _ in range(300):
        ops = _random_ops(rng)
        acl = rng.choice([OPEN_ACL_UNSAFE, CREATOR_ALL_ACL])
        xid = rng.randint(1, 2**31 - 1)
        assert _multi.multi_packet(xid, ops, acl) == _wire.multi_packet_aiozk(xid, ops, acl)


def test_parse_multi_reads_paths_errors_and_the_end() -> None:
    def ustring(text: str) -> bytes:
        raw = text.encode()
        return struct.pack("!i", len(raw)) + raw

    body = struct.pack("!iqi", 5, 0x100, 0)
    body += struct.pack("!i?i", 1, False, 0) + ustring("/a/ünï")
    body += struct.pack("!i?i", 2, False, 0)
    body += struct.pack("!i?i", -1, False, -101) + struct.pack("!i", -101)
    body += struct.pack("!i?i", 13, False, 0)
    body += struct.pack("!i?i", -1, True, -1)
    assert _multi.parse_multi(body) == [(1, ("/a/ünï", None)), (2, None), (-1, -101), (13, None)]


def test_parse_watch_event_reads_what_aiozk_reads() -> None:
    rng = random.Random(7)
    for _ in range(300):
        path = rng.choice(["/", "/a", f"/chroot/leaders/t-{rng.randint(0, 999)}", "/ünï/é" * 9])
        type_, state = rng.choice([1, 2, 3, 4, -1]), rng.choice([3, 0, -112])
        raw = path.encode()
        body = struct.pack("!iqi", -1, rng.randint(-1, 2**40), 0)
        body += struct.pack("!iii", type_, state, len(raw)) + raw
        event, _ = proto.WatchEvent.parse(body, 16)
        assert _replies.parse_watch_event(body) == (event.type, event.state, event.path)
    null_path = struct.pack("!iqi", -1, 5, 0) + struct.pack("!iii", -1, 3, -1)
    assert _replies.parse_watch_event(null_path) == (-1, 3, "")


def test_parse_watch_event_refuses_a_cut_path() -> None:
    body = struct.pack("!iqi", -1, 5, 0) + struct.pack("!iii", 2, 3, 10) + b"/short"
    with pytest.raises(ProtocolError, match="length 10 with 6 bytes left"):
        _replies.parse_watch_event(body)


def test_frames_are_cut_the_same_however_the_bytes_arrive() -> None:
    """A read may hold many frames, or end inside a length or a body: same frames, same order."""
    from aiocoord.zk._framing import FrameProtocol

    rng = random.Random(5)
    bodies = [
        bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 3, 16, 300]))) for _ in range(40)
    ]
    stream = b"".join(struct.pack("!i", len(b)) + b for b in bodies)
    cuts_by_name = {
        "all at once": [len(stream)],
        "byte by byte": list(range(1, len(stream) + 1)),
        "random": sorted({*rng.sample(range(1, len(stream)), 60), len(stream)}),
    }
    loop = asyncio.new_event_loop()
    try:
        for name, cuts in cuts_by_name.items():
            got: list[bytes] = []
            protocol = FrameProtocol(loop)
            protocol.on_frame = got.append
            start = 0
            for cut in cuts:
                protocol.data_received(stream[start:cut])
                start = cut
            assert got == bodies, name
            assert protocol.end_reason is None, name
    finally:
        loop.close()
