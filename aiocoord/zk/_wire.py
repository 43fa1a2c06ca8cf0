"""Wire format: aiozk's jute request/response types, plus the requests aiozk lacks.

Only this module and the rest of `aiocoord.zk` touch aiozk.  It frames and
parses packets and maps ZooKeeper error codes to `CoordError` subclasses in
one place.  Added here: createContainer (19), createTTL (21), addWatch (106),
setWatches2 (105), removeWatches with persistent kinds, whoAmI (107),
getEphemerals (103), and a ConnectResponse that reads the readOnly flag.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiozk import protocol as proto
from aiozk.protocol.primitives import Buffer, Int, Long, UString, Vector
from aiozk.protocol.request import Request
from aiozk.protocol.response import Response, response_xref
from aiozk.protocol.stat import Stat as _WireStat

from .. import errors
from .types import (
    ACL,
    OPEN_ACL_UNSAFE,
    CheckOp,
    CheckResult,
    CreateMode,
    CreateOp,
    CreateResult,
    DeleteOp,
    DeleteResult,
    ErrorResult,
    Op,
    OpResult,
    SetDataOp,
    SetDataResult,
    Stat,
)

__all__ = (
    "proto",
    "NOTIFICATION_XID",
    "PING_XID",
    "AUTH_XID",
    "SET_WATCHES_XID",
    "ConnectAnswer",
    "error_for",
    "frame",
)

NOTIFICATION_XID = -1
PING_XID = -2
AUTH_XID = -4
SET_WATCHES_XID = -8

_INT = struct.Struct("!i")
_HEADER = struct.Struct("!iqi")  # reply header: xid, zxid, err


# --- requests aiozk does not have ----------------------------------------------------------


class CreateContainerRequest(proto.CreateRequest):  # type: ignore[misc]
    opcode = 19


class CreateContainerResponse(Response):  # type: ignore[misc]
    opcode = 19
    parts = (("path", UString), ("stat", _WireStat))


class CreateTTLRequest(Request):  # type: ignore[misc]
    opcode = 21
    writes_data = True
    parts = (
        ("path", UString),
        ("data", Buffer),
        ("acl", Vector.of(proto.acl.ACL)),
        ("flags", Int),
        ("ttl", Long),
    )


class CreateTTLResponse(Response):  # type: ignore[misc]
    opcode = 21
    parts = (("path", UString), ("stat", _WireStat))


class SetWatches2Request(Request):  # type: ignore[misc]
    opcode = 105
    parts = (
        ("relative_zxid", Long),
        ("data_watches", Vector.of(UString)),
        ("exist_watches", Vector.of(UString)),
        ("child_watches", Vector.of(UString)),
        ("persistent_watches", Vector.of(UString)),
        ("persistent_recursive_watches", Vector.of(UString)),
    )


class SetWatches2Response(Response):  # type: ignore[misc]
    opcode = 105
    parts = ()


class AddWatchRequest(Request):  # type: ignore[misc]
    opcode = 106
    parts = (("path", UString), ("mode", Int))


class AddWatchResponse(Response):  # type: ignore[misc]
    opcode = 106
    parts = ()


class _ClientInfo(proto.part.Part):  # type: ignore[misc]
    parts = (("auth_scheme", UString), ("user", UString))


class WhoAmIRequest(Request):  # type: ignore[misc]
    opcode = 107
    parts = ()


class WhoAmIResponse(Response):  # type: ignore[misc]
    opcode = 107
    parts = (("client_info", Vector.of(_ClientInfo)),)


class GetEphemeralsRequest(Request):  # type: ignore[misc]
    opcode = 103
    parts = (("prefix_path", UString),)


class GetEphemeralsResponse(Response):  # type: ignore[misc]
    opcode = 103
    parts = (("ephemerals", Vector.of(UString)),)


# WatcherType values used by removeWatches.
WATCHER_ANY = 3  # ZooKeeper 3.8 has no persistent WatcherType for removeWatches (4/5 are 3.9+)


# --- building requests ---------------------------------------------------------------------


def wire_acl(acl: Sequence[ACL]) -> list[Any]:
    """aiozk's ACL parts for ours."""
    return [proto.acl.ACL(perms=a.perms, id=proto.acl.ID(scheme=a.scheme, id=a.id)) for a in acl]


def create_request(
    path: str, data: bytes, mode: CreateMode, ttl: int | None, acl: Sequence[ACL] = OPEN_ACL_UNSAFE
) -> Any:
    """The right create request for `mode`: create2, createContainer or createTTL."""
    wire = wire_acl(acl)
    if mode is CreateMode.CONTAINER:
        req: Any = CreateContainerRequest(path=path, data=data, acl=wire, flags=int(mode))
    elif mode.ttl:
        req = CreateTTLRequest(path=path, data=data, acl=wire, flags=int(mode), ttl=ttl)
    else:
        req = proto.Create2Request(path=path, data=data, acl=wire, flags=int(mode))
    return req


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


def request_packet(xid: int, request: Any) -> bytes:
    """A framed request: xid, opcode, body."""
    return frame(request.serialize(xid))


_MULTI_HEADER = struct.Struct("!i?i")  # a multi's per-operation header: type, done, err
_MULTI_END = _MULTI_HEADER.pack(-1, True, -1)


def _ustring(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _INT.pack(len(raw)) + raw


def _acl_bytes(acl: Sequence[ACL]) -> bytes:
    return _INT.pack(len(acl)) + b"".join(
        _INT.pack(a.perms) + _ustring(a.scheme) + _ustring(a.id) for a in acl
    )


def _multi_op(op: Op, path: str, acl: Sequence[ACL], acls: dict[tuple[ACL, ...], bytes]) -> bytes:
    """One operation of a multi: its header and body, as aiozk's serializer writes them.

    Plain creates and deletes (what recipes batch by the hundred) are packed
    directly, which is about ten times faster; the rest goes through aiozk.
    """
    if isinstance(op, DeleteOp):
        return _MULTI_HEADER.pack(2, False, -1) + _ustring(path) + _INT.pack(op.version)
    if isinstance(op, CreateOp) and op.mode is not CreateMode.CONTAINER and not op.mode.ttl:
        use = tuple(op.acl or acl)
        wire_acls = acls.get(use)
        if wire_acls is None:
            wire_acls = acls[use] = _acl_bytes(use)
        return b"".join(
            (
                _MULTI_HEADER.pack(15, False, -1),
                _ustring(path),
                _INT.pack(len(op.data)),
                op.data,
                wire_acls,
                _INT.pack(int(op.mode)),
            )
        )
    if isinstance(op, CreateOp):
        request: Any = create_request(path, op.data, op.mode, op.ttl, op.acl or acl)
    elif isinstance(op, SetDataOp):
        request = proto.SetDataRequest(path=path, data=op.data, version=op.version)
    elif isinstance(op, CheckOp):
        request = proto.CheckVersionRequest(path=path, version=op.version)
    else:  # pragma: no cover - guarded by the caller
        raise TypeError(f"not a multi operation: {op!r}")
    fmt, values = request.render()
    return _MULTI_HEADER.pack(request.opcode, False, -1) + struct.pack("!" + fmt, *values)


def multi_packet(
    xid: int, ops: list[tuple[Op, str]], acl: Sequence[ACL] = OPEN_ACL_UNSAFE
) -> bytes:
    """A framed multi (opcode 14) of `(op, server_path)` pairs."""
    acls: dict[tuple[ACL, ...], bytes] = {}
    body = [_INT.pack(xid), _INT.pack(14)]
    body.extend(_multi_op(op, path, acl, acls) for op, path in ops)
    body.append(_MULTI_END)
    return frame(b"".join(body))


def multi_packet_aiozk(
    xid: int, ops: list[tuple[Op, str]], acl: Sequence[ACL] = OPEN_ACL_UNSAFE
) -> bytes:
    """`multi_packet` through aiozk's serializer alone (the reference the fast one must match)."""
    txn = proto.TransactionRequest()
    for op, path in ops:
        if isinstance(op, CreateOp):
            txn.add(create_request(path, op.data, op.mode, op.ttl, op.acl or acl))
        elif isinstance(op, DeleteOp):
            txn.add(proto.DeleteRequest(path=path, version=op.version))
        elif isinstance(op, SetDataOp):
            txn.add(proto.SetDataRequest(path=path, data=op.data, version=op.version))
        elif isinstance(op, CheckOp):
            txn.add(proto.CheckVersionRequest(path=path, version=op.version))
        else:  # pragma: no cover - guarded by the caller
            raise TypeError(f"not a multi operation: {op!r}")
    return frame(txn.serialize(xid))


# --- parsing replies -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConnectAnswer:
    """The server's ConnectResponse.  `session_id == 0` or `timeout_ms <= 0` means expired."""

    timeout_ms: int
    session_id: int
    password: bytes
    read_only: bool

    @property
    def expired(self) -> bool:
        return self.session_id == 0 or self.timeout_ms <= 0

    @classmethod
    def parse(cls, body: bytes) -> ConnectAnswer:
        if len(body) < 20:
            # Not a ConnectResponse: a read-only server that cannot make a session
            # (no local sessions) answers with a bare error reply instead.
            raise ValueError(
                f"the server refused the session ({len(body)}-byte answer: {body.hex()})"
            )
        resp, offset = proto.ConnectResponse.parse(body, 0)
        read_only = bool(body[offset]) if len(body) > offset else False
        return cls(resp.timeout, resp.session_id, resp.password or b"", read_only)


def reply_header(body: bytes) -> tuple[int, int, int]:
    """(xid, zxid, err) of a reply packet."""
    xid, zxid, err = _HEADER.unpack_from(body, 0)
    return xid, zxid, err


def parse_body(opcode: int, body: bytes) -> Any:
    """Parse the body after the reply header for a request of `opcode`."""
    cls = response_xref.get(opcode)
    if cls is None or not cls.parts:
        return None
    value, _ = cls.parse(body, _HEADER.size)
    return value


_WATCH_EVENT = struct.Struct("!iii")  # type, state, path length


def parse_watch_event(body: bytes) -> tuple[int, int, str]:
    """(type, state, server_path) of a notification packet (a null path reads as "").

    Parsed here rather than with aiozk's `WatchEvent`: a hand-over brings
    hundreds of notifications at once, and this is several times cheaper.
    """
    type_, state, size = _WATCH_EVENT.unpack_from(body, _HEADER.size)
    if size <= 0:
        return type_, state, ""
    start = _HEADER.size + _WATCH_EVENT.size
    if start + size > len(body):
        raise ValueError("notification shorter than its path")
    return type_, state, body[start : start + size].decode("utf-8")


def parse_multi(body: bytes) -> list[tuple[int, Any]]:
    """Per-operation results of a multi reply: ``(type, value)``, type -1 carries an error code."""
    offset = _HEADER.size
    out: list[tuple[int, Any]] = []
    while True:
        type_, done, _err = _MULTI_HEADER.unpack_from(body, offset)
        offset += _MULTI_HEADER.size
        if done:
            return out
        if type_ == -1:
            code = _INT.unpack_from(body, offset)[0]
            offset += _INT.size
            out.append((-1, int(code)))
        elif type_ == 1:
            path, offset = _parse_ustring(body, offset)
            out.append((1, (path, None)))
        elif type_ in (15, 19, 21):
            path, offset = _parse_ustring(body, offset)
            stat, offset = _WireStat.parse(body, offset)
            out.append((15, (path, Stat._from_wire(stat))))
        elif type_ == 5:
            stat, offset = _WireStat.parse(body, offset)
            out.append((5, Stat._from_wire(stat)))
        else:
            out.append((int(type_), None))


def _parse_ustring(body: bytes, offset: int) -> tuple[str | None, int]:
    """A length-prefixed UTF-8 string (length -1: None), as aiozk's `UString.parse`."""
    size = _INT.unpack_from(body, offset)[0]
    offset += _INT.size
    if size == -1:
        return None, offset
    return body[offset : offset + size].decode("utf-8"), offset + size


def multi_results(raw: list[tuple[int, Any]], strip: Any) -> list[OpResult]:
    """Typed results of a multi; `strip` turns a server path into a client path."""
    results: list[OpResult] = []
    for kind, value in raw:
        if kind == -1:
            results.append(ErrorResult(error_for(value, None), value))
        elif kind in (1, 15):
            path, stat = value
            results.append(CreateResult(strip(path), stat))
        elif kind == 5:
            results.append(SetDataResult(value))
        elif kind == 2:
            results.append(DeleteResult())
        else:
            results.append(CheckResult())
    return results


# --- errors --------------------------------------------------------------------------------

_ERRORS: dict[int, type[errors.ZooKeeperError]] = {
    cls.code: cls
    for cls in (
        errors.NoNodeError,
        errors.NoAuthError,
        errors.BadVersionError,
        errors.NoChildrenForEphemeralsError,
        errors.NodeExistsError,
        errors.NotEmptyError,
        errors.AuthFailedError,
        errors.NotReadOnlyError,
    )
}

_NAMES = {
    0: "rolled back",
    -1: "system error",
    -2: "runtime inconsistency",
    -3: "data inconsistency",
    -5: "marshalling error",
    -6: "unimplemented (does the server enable this feature?)",
    -7: "operation timeout",
    -8: "bad arguments",
    -13: "new config has no quorum",
    -14: "reconfig in progress",
    -100: "API error",
    -113: "invalid callback",
    -114: "invalid ACL",
    -118: "session moved",
    -120: "ephemeral on local session",
    -121: "no watcher",
    -122: "request timeout",
    -123: "reconfig disabled",
    -124: "session closed because client failed to authenticate",
    -125: "quota exceeded",
    -127: "throttled",
}


def error_for(code: int, path: str | None) -> errors.ZooKeeperError:
    """The `CoordError` for a ZooKeeper error code, carrying the client path."""
    cls = _ERRORS.get(code)
    if cls is not None:
        return cls(path=path)
    return errors.ZooKeeperError(
        f"ZooKeeper error {code}: {_NAMES.get(code, 'unknown')}", path=path, code=code
    )
