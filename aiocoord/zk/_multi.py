"""Multi: the packet, the reply, and the typed results of a transaction.

Recipes batch hundreds of creates and deletes in one multi, so plain creates
and deletes are packed here directly (about ten times faster than through
aiozk's serializer, byte for byte the same: tests/unit/test_wire_multi.py); the
other operations use the request builders of `_wire`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any, cast

from ..errors import ProtocolError, TransactionFailed
from . import _errors
from ._arguments import check_data, check_mode, check_version
from ._connection import _Pending
from ._replies import Reader, reply_header
from ._wire import OpCode, check_request, create_request, set_data_request
from .paths import validate_path
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
)

__all__ = (
    "MultiResults",
    "SentMulti",
    "multi_packet",
    "outcome",
    "parse_multi",
    "results_parser",
    "validate_ops",
)

_INT = struct.Struct("!i")
_MULTI_HEADER = struct.Struct("!i?i")  # a multi's per-operation header: type, done, err
_MULTI_END = _MULTI_HEADER.pack(-1, True, -1)
_MULTI_OPCODE = _INT.pack(OpCode.MULTI)
_DELETE_HEADER = _MULTI_HEADER.pack(OpCode.DELETE, False, -1)
_CREATE2_HEADER = _MULTI_HEADER.pack(OpCode.CREATE2, False, -1)
# Plain ints for the per-operation loops (an enum member costs a lookup each time).
_ERROR, _CREATE, _CREATE2, _DELETE, _SET_DATA, _CHECK = (
    int(OpCode.ERROR),
    int(OpCode.CREATE),
    int(OpCode.CREATE2),
    int(OpCode.DELETE),
    int(OpCode.SET_DATA),
    int(OpCode.CHECK),
)
_CREATED_WITH_STAT = frozenset(
    int(o) for o in (OpCode.CREATE2, OpCode.CREATE_CONTAINER, OpCode.CREATE_TTL)
)


def _ustring(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _INT.pack(len(raw)) + raw


def _acl_bytes(acl: Sequence[ACL]) -> bytes:
    return _INT.pack(len(acl)) + b"".join(
        _INT.pack(a.perms) + _ustring(a.scheme) + _ustring(a.id) for a in acl
    )


def _multi_op(op: Op, path: str, acl: Sequence[ACL], acls: dict[tuple[ACL, ...], bytes]) -> bytes:
    """One operation of a multi: its header and body, as aiozk's serializer writes them."""
    if isinstance(op, DeleteOp):
        return _DELETE_HEADER + _ustring(path) + _INT.pack(op.version)
    if isinstance(op, CreateOp) and op.mode is not CreateMode.CONTAINER and not op.mode.ttl:
        use = tuple(op.acl or acl)
        wire_acls = acls.get(use)
        if wire_acls is None:
            wire_acls = acls[use] = _acl_bytes(use)
        return b"".join(
            (
                _CREATE2_HEADER,
                _ustring(path),
                _INT.pack(len(op.data)),
                op.data,
                wire_acls,
                _INT.pack(int(op.mode)),
            )
        )
    if isinstance(op, CreateOp):
        request = create_request(path, op.data, op.mode, op.ttl, op.acl or acl)
    elif isinstance(op, SetDataOp):
        request = set_data_request(path, op.data, op.version)
    elif isinstance(op, CheckOp):
        request = check_request(path, op.version)
    else:  # pragma: no cover - guarded by the caller
        raise TypeError(f"not a multi operation: {op!r}")
    return _MULTI_HEADER.pack(request.opcode, False, -1) + request.body


def multi_packet(
    xid: int, ops: list[tuple[Op, str]], acl: Sequence[ACL] = OPEN_ACL_UNSAFE
) -> bytes:
    """A framed multi of `(op, server_path)` pairs."""
    acls: dict[tuple[ACL, ...], bytes] = {}
    body = [_INT.pack(xid), _MULTI_OPCODE]
    body.extend(_multi_op(op, path, acl, acls) for op, path in ops)
    body.append(_MULTI_END)
    packet = b"".join(body)
    return _INT.pack(len(packet)) + packet


def parse_multi(body: bytes, expected: int | None = None) -> list[tuple[int, Any]]:
    """Per-operation results of a multi reply: ``(type, value)``; type ERROR carries the code.

    `expected` is the number of operations sent: a reply with another number
    of results is malformed.  Every result consumes bytes, so a reply of any
    content ends within its length (`ProtocolError` if it is malformed).
    """
    reader = Reader(body)
    out: list[tuple[int, Any]] = []
    while True:
        type_ = reader.int32("a result type")
        done = reader.boolean()
        reader.int32("a result error")
        if done:
            break
        if type_ == _ERROR:
            out.append((_ERROR, reader.int32("an error code")))
        elif type_ == _CREATE:
            out.append((_CREATE, (reader.text(), None)))
        elif type_ in _CREATED_WITH_STAT:
            path = reader.text()
            out.append((_CREATE2, (path, reader.stat())))
        elif type_ == _SET_DATA:
            out.append((_SET_DATA, reader.stat()))
        elif type_ in (_DELETE, _CHECK):
            out.append((type_, None))
        else:
            raise reader.fail(f"result type {type_}")
    if expected is not None and len(out) != expected:
        raise reader.fail(f"{len(out)} results for {expected} operations")
    return out


def _typed(raw: list[tuple[int, Any]], strip: Callable[[str], str]) -> list[OpResult]:
    """Typed results of a multi; `strip` turns a server path into a client path."""
    results: list[OpResult] = []
    for kind, value in raw:
        if kind == _ERROR:
            results.append(ErrorResult(_errors.error_for(value, None), value))
        elif kind in (_CREATE, _CREATE2):
            path, stat = value
            results.append(CreateResult(strip(path), stat))
        elif kind == _SET_DATA:
            results.append(SetDataResult(value))
        elif kind == _DELETE:
            results.append(DeleteResult())
        else:
            results.append(CheckResult())
    return results


class MultiResults(list[OpResult]):
    """The per-operation results of a `multi`, plus the transaction's `zxid`.

    Every node the transaction created has that zxid as its czxid, and every
    node it changed as its mzxid (ZooKeeper 3.8 returns creates without a stat).
    """

    zxid: int = 0


def validate_ops(ops: Sequence[Op], server_path: Callable[[str], str]) -> list[tuple[Op, str]]:
    """Validated operations with their server paths."""
    if isinstance(ops, str | bytes) or not isinstance(ops, Sequence):
        raise TypeError("ops must be a sequence of CreateOp/DeleteOp/SetDataOp/CheckOp")
    pairs: list[tuple[Op, str]] = []
    for op in ops:
        if isinstance(op, CreateOp):
            validate_path(op.path, sequential=op.mode.sequential)
            check_data(op.data, "CreateOp.data")
            check_mode(op.mode, op.ttl)
        elif isinstance(op, SetDataOp):
            validate_path(op.path)
            check_data(op.data, "SetDataOp.data")
            check_version(op.version)
        elif isinstance(op, DeleteOp | CheckOp):
            validate_path(op.path)
            check_version(op.version)
        else:
            raise TypeError(f"not a multi operation: {op!r}")
        pairs.append((op, server_path(op.path)))
    return pairs


def results_parser(
    count: int, client_path: Callable[[str], str]
) -> Callable[[bytes], MultiResults]:
    """The parser of the reply to a multi of `count` operations (run where the reply is read)."""

    def parse(body: bytes) -> MultiResults:
        results = MultiResults(_typed(parse_multi(body, count), client_path))
        results.zxid = reply_header(body)[1]
        return results

    return parse


def outcome(ops: Sequence[Op], err: int, results: MultiResults | None) -> MultiResults:
    """The results of a multi, or the error they stand for."""
    if err or results is None:
        # A whole-request error (connection, session) rather than an operation's.
        _errors.check(err, None)
        raise ProtocolError("a multi reply without results")
    for i, result in enumerate(results):
        if isinstance(result, ErrorResult) and result.code not in (0, -2):
            cause = result.error
            cause.path = ops[i].path
            raise TransactionFailed(list(results), i, cause)
    return results


class SentMulti:
    """A `multi` already written (`ZkClient.send_multi`): its outcome once the reply is in."""

    def __init__(self, pending: _Pending, ops: Sequence[Op]) -> None:
        self._pending = pending
        self._ops = ops

    def done(self) -> bool:
        return self._pending.done.done()

    def add_done_callback(self, callback: Callable[[SentMulti], None]) -> None:
        """Call `callback(self)` from the event loop once the reply (or the connection's end) is in."""
        self._pending.done.add_done_callback(lambda _future: callback(self))

    def result(self) -> MultiResults:
        """What `multi` would have returned or raised; only once `done()`."""
        if not self.done():
            raise RuntimeError("the multi has no reply yet")
        pending = self._pending
        if pending.error is not None:
            raise pending.error
        return outcome(self._ops, pending.header[1], cast(MultiResults | None, pending.value))
