"""Requests built by `_wire`'s typed functions are the bytes aiozk's serializer writes.

`_wire` renders each request's body once and frames it with its xid and named
opcode at sending; this pins the result to aiozk's own ``serialize`` for every
request aiocoord sends, and the opcodes to ZooKeeper's numbers.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from aiozk import protocol as proto

from aiocoord.zk import ACL, CreateMode, _wire
from aiocoord.zk._wire import OpCode, WireRequest
from aiocoord.zk.types import CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE


def _aiozk_packet(xid: int, request: Any) -> bytes:
    body: bytes = request.serialize(xid)
    return struct.pack("!i", len(body)) + body


def _acl(acl: tuple[ACL, ...]) -> list[Any]:
    return [proto.acl.ACL(perms=a.perms, id=proto.acl.ID(scheme=a.scheme, id=a.id)) for a in acl]


CASES: list[tuple[str, WireRequest, Any]] = [
    (
        "getData",
        _wire.get_data_request("/a/ünï", True),
        proto.GetDataRequest(path="/a/ünï", watch=True),
    ),
    ("exists", _wire.exists_request("/a", False), proto.ExistsRequest(path="/a", watch=False)),
    (
        "getChildren",
        _wire.get_children_request("/a", True),
        proto.GetChildrenRequest(path="/a", watch=True),
    ),
    (
        "setData",
        _wire.set_data_request("/a", b"\x00data", 7),
        proto.SetDataRequest(path="/a", data=b"\x00data", version=7),
    ),
    ("delete", _wire.delete_request("/a", -1), proto.DeleteRequest(path="/a", version=-1)),
    ("check", _wire.check_request("/a", 3), proto.CheckVersionRequest(path="/a", version=3)),
    ("sync", _wire.sync_request("/"), proto.SyncRequest(path="/")),
    (
        "removeWatches",
        _wire.remove_watches_request("/a"),
        proto.RemoveWatchesRequest(path="/a", type=3),
    ),
    (
        "auth",
        _wire.auth_request("digest", b"u:p"),
        proto.AuthRequest(type=0, scheme="digest", auth=b"u:p"),
    ),
    ("close", _wire.close_request(), proto.CloseRequest()),
    ("getACL", _wire.get_acl_request("/a/b"), proto.GetACLRequest(path="/a/b")),
    (
        "setACL",
        _wire.set_acl_request("/a", CREATOR_ALL_ACL + READ_ACL_UNSAFE, 3),
        proto.SetACLRequest(path="/a", acl=_acl(CREATOR_ALL_ACL + READ_ACL_UNSAFE), version=3),
    ),
    ("ping", _wire.ping_request(), proto.PingRequest()),
    (
        "create2",
        _wire.create_request("/a", b"x", CreateMode.EPHEMERAL_SEQUENTIAL, None, CREATOR_ALL_ACL),
        proto.Create2Request(path="/a", data=b"x", acl=_acl(CREATOR_ALL_ACL), flags=3),
    ),
]


@pytest.mark.parametrize(("name", "ours", "theirs"), CASES, ids=[c[0] for c in CASES])
def test_requests_frame_what_aiozk_writes(name: str, ours: WireRequest, theirs: Any) -> None:
    assert isinstance(ours.opcode, OpCode)
    assert ours.opcode == theirs.opcode
    for xid in (1, 0x7FFFFFFF, _wire.AUTH_XID):
        assert _wire.request_packet(xid, ours) == _aiozk_packet(xid, theirs)


def test_requests_aiozk_lacks_carry_their_opcodes() -> None:
    container = _wire.create_request("/c", b"", CreateMode.CONTAINER, None, OPEN_ACL_UNSAFE)
    ttl = _wire.create_request("/t", b"", CreateMode.PERSISTENT_WITH_TTL, 5000, OPEN_ACL_UNSAFE)
    plain = proto.Create2Request(path="/c", data=b"", acl=_acl(OPEN_ACL_UNSAFE), flags=4)
    assert (container.opcode, ttl.opcode) == (OpCode.CREATE_CONTAINER, OpCode.CREATE_TTL)
    assert container.body == _wire.create_request("/c", b"", CreateMode.CONTAINER, None).body
    assert container.body == plain.serialize()[4:]  # createContainer is create2's body
    assert ttl.body.endswith(struct.pack("!iq", int(CreateMode.PERSISTENT_WITH_TTL), 5000))
    assert _wire.add_watch_request("/p", True) == WireRequest(
        OpCode.ADD_WATCH, struct.pack("!i", 2) + b"/p" + struct.pack("!i", 1)
    )
    assert _wire.who_am_i_request() == WireRequest(OpCode.WHO_AM_I, b"")
    # GetSASLRequest: the token as one buffer (ZooKeeper's jute, kazoo's SASL packet).
    assert _wire.sasl_request(b"tok") == WireRequest(OpCode.SASL, struct.pack("!i", 3) + b"tok")
    watches = _wire.set_watches2_request(9, ["/d"], [], [], [], ["/r"])
    assert watches.opcode == OpCode.SET_WATCHES2
    assert watches.body.startswith(struct.pack("!qi", 9, 1))


def test_reconfig_is_zookeepers_reconfig_request() -> None:
    """ReconfigRequest: three strings (null when not given) and the config version, opcode 16."""
    req = _wire.reconfig_request("server.4=h:1:2:participant;h:3", None, None, -1)
    spec = b"server.4=h:1:2:participant;h:3"
    assert req.opcode is OpCode.RECONFIG and int(OpCode.RECONFIG) == 16
    assert req.body == struct.pack("!i", len(spec)) + spec + struct.pack("!iiq", -1, -1, -1)
    assert _wire.reconfig_request(None, "1,2", None, 0x100000000).body == (
        struct.pack("!i", -1) + struct.pack("!i", 3) + b"1,2" + struct.pack("!iq", -1, 1 << 32)
    )


def test_opcodes_are_zookeepers() -> None:
    assert {op.name: int(op) for op in OpCode} == {
        "ERROR": -1,
        "CLOSE_SESSION": -11,
        "CREATE": 1,
        "DELETE": 2,
        "EXISTS": 3,
        "GET_DATA": 4,
        "SET_DATA": 5,
        "GET_ACL": 6,
        "SET_ACL": 7,
        "GET_CHILDREN": 8,
        "SYNC": 9,
        "PING": 11,
        "CHECK": 13,
        "MULTI": 14,
        "CREATE2": 15,
        "RECONFIG": 16,
        "REMOVE_WATCHES": 18,
        "CREATE_CONTAINER": 19,
        "CREATE_TTL": 21,
        "AUTH": 100,
        "SASL": 102,
        "GET_EPHEMERALS": 103,
        "SET_WATCHES2": 105,
        "ADD_WATCH": 106,
        "WHO_AM_I": 107,
    }
