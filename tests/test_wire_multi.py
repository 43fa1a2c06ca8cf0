"""The multi serializer and parser against aiozk's: the same bytes, the same results.

Recipes batch hundreds of creates and deletes in one multi, so `multi_packet`
packs plain creates and deletes itself; it must write exactly what aiozk's
serializer writes for every kind of operation, mode and ACL.
"""

from __future__ import annotations

import random
import struct

from aiocoord.zk import ACL, CheckOp, CreateMode, CreateOp, DeleteOp, SetDataOp, _wire
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
        assert _wire.multi_packet(xid, ops, acl) == _wire.multi_packet_aiozk(xid, ops, acl)


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
    assert _wire.parse_multi(body) == [(1, ("/a/ünï", None)), (2, None), (-1, -101), (13, None)]
