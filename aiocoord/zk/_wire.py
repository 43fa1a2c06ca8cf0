"""Wire format: the one module that imports aiozk, for its jute request and response types.

Everything else in aiocoord sees typed values: `OpCode` and a `WireRequest`
(opcode and serialized body) built by the small functions below.  Added to
aiozk's types here: createContainer, createTTL, addWatch, setWatches2, whoAmI,
getEphemerals and the SASL token exchange; reconfig is aiozk's own type.  Replies are read by `_replies`, with bounds checks,
not by aiozk's parsers.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiozk import protocol as proto
from aiozk.protocol.primitives import Buffer, Int, Long, UString, Vector
from aiozk.protocol.request import Request

from .types import (
    ACL,
    OPEN_ACL_UNSAFE,
    CheckOp,
    CreateMode,
    CreateOp,
    DeleteOp,
    Op,
    SetDataOp,
)

__all__ = (
    "AUTH_XID",
    "NOTIFICATION_XID",
    "PING_XID",
    "SET_WATCHES_XID",
    "WATCHER_ANY",
    "OpCode",
    "WireRequest",
    "frame",
)


class OpCode(enum.IntEnum):
    """ZooKeeper's request types (``ZooDefs.OpCode``), as written in request and multi headers."""

    ERROR = -1  # a multi's per-operation error result
    CLOSE_SESSION = -11
    CREATE = 1
    DELETE = 2
    EXISTS = 3
    GET_DATA = 4
    SET_DATA = 5
    GET_ACL = 6
    SET_ACL = 7
    GET_CHILDREN = 8
    SYNC = 9
    PING = 11
    CHECK = 13
    MULTI = 14
    CREATE2 = 15
    RECONFIG = 16
    REMOVE_WATCHES = 18
    CREATE_CONTAINER = 19
    CREATE_TTL = 21
    AUTH = 100
    SASL = 102
    GET_EPHEMERALS = 103
    SET_WATCHES2 = 105
    ADD_WATCH = 106
    WHO_AM_I = 107


NOTIFICATION_XID = -1
PING_XID = -2
AUTH_XID = -4
SET_WATCHES_XID = -8

# WatcherType values used by removeWatches.
WATCHER_ANY = 3  # ZooKeeper 3.8 has no persistent WatcherType for removeWatches (4/5 are 3.9+)
# AddWatchMode values.
_ADD_WATCH_PERSISTENT = 0
_ADD_WATCH_PERSISTENT_RECURSIVE = 1

_INT = struct.Struct("!i")
_REQUEST_HEAD = struct.Struct("!iii")  # length, xid, opcode


# --- requests aiozk does not have ----------------------------------------------------------


class _CreateContainerRequest(proto.CreateRequest):  # type: ignore[misc]
    opcode = OpCode.CREATE_CONTAINER


class _CreateTTLRequest(Request):  # type: ignore[misc]
    opcode = OpCode.CREATE_TTL
    writes_data = True
    parts = (
        ("path", UString),
        ("data", Buffer),
        ("acl", Vector.of(proto.acl.ACL)),
        ("flags", Int),
        ("ttl", Long),
    )


class _SetWatches2Request(Request):  # type: ignore[misc]
    opcode = OpCode.SET_WATCHES2
    parts = (
        ("relative_zxid", Long),
        ("data_watches", Vector.of(UString)),
        ("exist_watches", Vector.of(UString)),
        ("child_watches", Vector.of(UString)),
        ("persistent_watches", Vector.of(UString)),
        ("persistent_recursive_watches", Vector.of(UString)),
    )


class _AddWatchRequest(Request):  # type: ignore[misc]
    opcode = OpCode.ADD_WATCH
    parts = (("path", UString), ("mode", Int))


class _WhoAmIRequest(Request):  # type: ignore[misc]
    opcode = OpCode.WHO_AM_I
    parts = ()


class _GetEphemeralsRequest(Request):  # type: ignore[misc]
    opcode = OpCode.GET_EPHEMERALS
    parts = (("prefix_path", UString),)


# --- building requests ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WireRequest:
    """One request ready to send: its opcode and serialized body (the xid comes at sending)."""

    opcode: OpCode
    body: bytes


def _render(opcode: OpCode, request: Any) -> WireRequest:
    fmt, values = request.render()
    return WireRequest(opcode, struct.pack("!" + fmt, *values))


def request_packet(xid: int, request: WireRequest) -> bytes:
    """A framed request: length, xid, opcode, body."""
    body = request.body
    return _REQUEST_HEAD.pack(8 + len(body), xid, request.opcode) + body


def _wire_acl(acl: Sequence[ACL]) -> list[Any]:
    """aiozk's ACL parts for ours."""
    return [proto.acl.ACL(perms=a.perms, id=proto.acl.ID(scheme=a.scheme, id=a.id)) for a in acl]


def _create_object(
    path: str, data: bytes, mode: CreateMode, ttl: int | None, acl: Sequence[ACL]
) -> Any:
    wire = _wire_acl(acl)
    if mode is CreateMode.CONTAINER:
        return _CreateContainerRequest(path=path, data=data, acl=wire, flags=int(mode))
    if mode.ttl:
        return _CreateTTLRequest(path=path, data=data, acl=wire, flags=int(mode), ttl=ttl)
    return proto.Create2Request(path=path, data=data, acl=wire, flags=int(mode))


def create_request(
    path: str, data: bytes, mode: CreateMode, ttl: int | None, acl: Sequence[ACL] = OPEN_ACL_UNSAFE
) -> WireRequest:
    """The right create for `mode`: create2, createContainer or createTTL."""
    request = _create_object(path, data, mode, ttl, acl)
    return _render(OpCode(request.opcode), request)


# The requests a hand-over sends (a path, then a version or a watch flag) are packed
# here directly: aiozk's generic rendering costs more than the rest of sending them.


def _path_only(opcode: OpCode, path: str, tail: bytes = b"") -> WireRequest:
    raw = path.encode("utf-8")
    return WireRequest(opcode, _INT.pack(len(raw)) + raw + tail)


def get_data_request(path: str, watch: bool) -> WireRequest:
    return _path_only(OpCode.GET_DATA, path, b"\x01" if watch else b"\x00")


def exists_request(path: str, watch: bool) -> WireRequest:
    return _path_only(OpCode.EXISTS, path, b"\x01" if watch else b"\x00")


def get_children_request(path: str, watch: bool) -> WireRequest:
    return _path_only(OpCode.GET_CHILDREN, path, b"\x01" if watch else b"\x00")


def set_data_request(path: str, data: bytes, version: int) -> WireRequest:
    return _render(OpCode.SET_DATA, proto.SetDataRequest(path=path, data=data, version=version))


def delete_request(path: str, version: int) -> WireRequest:
    return _path_only(OpCode.DELETE, path, _INT.pack(version))


def check_request(path: str, version: int) -> WireRequest:
    return _path_only(OpCode.CHECK, path, _INT.pack(version))


def sync_request(path: str) -> WireRequest:
    return _path_only(OpCode.SYNC, path)


def add_watch_request(path: str, recursive: bool) -> WireRequest:
    mode = _ADD_WATCH_PERSISTENT_RECURSIVE if recursive else _ADD_WATCH_PERSISTENT
    return _render(OpCode.ADD_WATCH, _AddWatchRequest(path=path, mode=mode))


def remove_watches_request(path: str, watcher_type: int = WATCHER_ANY) -> WireRequest:
    return _render(OpCode.REMOVE_WATCHES, proto.RemoveWatchesRequest(path=path, type=watcher_type))


def set_watches2_request(
    relative_zxid: int,
    data: list[str],
    exist: list[str],
    child: list[str],
    persistent: list[str],
    persistent_recursive: list[str],
) -> WireRequest:
    """Restore watches on a new connection: each kind with the last zxid the client saw."""
    return _render(
        OpCode.SET_WATCHES2,
        _SetWatches2Request(
            relative_zxid=relative_zxid,
            data_watches=data,
            exist_watches=exist,
            child_watches=child,
            persistent_watches=persistent,
            persistent_recursive_watches=persistent_recursive,
        ),
    )


def auth_request(scheme: str, auth: bytes) -> WireRequest:
    return _render(OpCode.AUTH, proto.AuthRequest(type=0, scheme=scheme, auth=auth))


def get_acl_request(path: str) -> WireRequest:
    return _path_only(OpCode.GET_ACL, path)


def set_acl_request(path: str, acl: Sequence[ACL], version: int) -> WireRequest:
    return _render(
        OpCode.SET_ACL, proto.SetACLRequest(path=path, acl=_wire_acl(acl), version=version)
    )


def sasl_request(token: bytes) -> WireRequest:
    """One SASL token to the server (``GetSASLRequest``); the reply carries the next challenge."""
    return WireRequest(OpCode.SASL, _INT.pack(len(token)) + token)


def reconfig_request(
    joining: str | None, leaving: str | None, new_members: str | None, from_config: int
) -> WireRequest:
    """A reconfig (ZooKeeper 3.5+): comma-separated specs or ids; None is sent as null."""
    return _render(
        OpCode.RECONFIG,
        proto.ReconfigRequest(
            joining_servers=joining,
            leaving_servers=leaving,
            new_members=new_members,
            current_config_id=from_config,
        ),
    )


def close_request() -> WireRequest:
    return _render(OpCode.CLOSE_SESSION, proto.CloseRequest())


def ping_request() -> WireRequest:
    return _render(OpCode.PING, proto.PingRequest())


def who_am_i_request() -> WireRequest:
    return _render(OpCode.WHO_AM_I, _WhoAmIRequest())


def get_ephemerals_request(prefix: str) -> WireRequest:
    return _render(OpCode.GET_EPHEMERALS, _GetEphemeralsRequest(prefix_path=prefix))


def connect_request(
    last_zxid: int, timeout_ms: int, session_id: int, password: bytes, read_only: bool
) -> bytes:
    """A framed ConnectRequest (no xid or opcode precede it)."""
    req = proto.ConnectRequest(
        protocol_version=0,
        last_seen_zxid=last_zxid,
        timeout=timeout_ms,
        session_id=session_id,
        password=password,
        read_only=read_only,
    )
    return frame(req.serialize())


def frame(body: bytes) -> bytes:
    """Prefix a packet with its length, as the protocol wants."""
    return _INT.pack(len(body)) + body


def multi_packet_aiozk(
    xid: int, ops: list[tuple[Op, str]], acl: Sequence[ACL] = OPEN_ACL_UNSAFE
) -> bytes:
    """A framed multi through aiozk's serializer alone (the reference `_multi.multi_packet` must match)."""
    txn = proto.TransactionRequest()
    for op, path in ops:
        if isinstance(op, CreateOp):
            txn.add(_create_object(path, op.data, op.mode, op.ttl, op.acl or acl))
        elif isinstance(op, DeleteOp):
            txn.add(proto.DeleteRequest(path=path, version=op.version))
        elif isinstance(op, SetDataOp):
            txn.add(proto.SetDataRequest(path=path, data=op.data, version=op.version))
        elif isinstance(op, CheckOp):
            txn.add(proto.CheckVersionRequest(path=path, version=op.version))
        else:  # pragma: no cover - guarded by the caller
            raise TypeError(f"not a multi operation: {op!r}")
    return frame(txn.serialize(xid))
