"""`FakeTree`: ZooKeeper's data model in memory, answering requests as ZooKeeper 3.8 does.

The fake server hands it each request's opcode and body; it applies the
request and returns the error code, the reply body and the watch
notifications it fired.  Covered: create2, createContainer, createTTL,
delete, exists, getData, setData, getChildren, check, multi (atomic, with
ZooKeeper's per-operation results), sync, auth, setWatches2, addWatch,
removeWatches, whoAmI, getEphemerals and closeSession; sequence numbers from
the parent's cversion; one-shot, persistent and recursive watches.  Not
modelled: ACL checks, quotas, TTL and container reaping, and server-side
session expiry (the fake server expires a session only when told to).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ._fake_watches import (
    CHILDREN_CHANGED,
    CREATED,
    DATA_CHANGED,
    DELETED,
    KINDS,
    Event,
    WatchTable,
)
from ._jute import Reader, buffer, int32, strings, ustring

__all__ = ("FakeTree",)

# Error codes (ZooKeeper's KeeperException.Code).
OK = 0
RUNTIME_INCONSISTENCY = -2
UNIMPLEMENTED = -6
BAD_ARGUMENTS = -8
NO_NODE = -101
BAD_VERSION = -103
NO_CHILDREN_FOR_EPHEMERALS = -108
NODE_EXISTS = -110
NOT_EMPTY = -111
NO_WATCHER = -121

_STAT = struct.Struct("!qqqqiiiqiiq")
_CREATES = (1, 15, 19, 21)  # create, create2, createContainer, createTTL


class _Refused(Exception):
    """A request the server refuses with error `code`."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


@dataclass(slots=True)
class _Node:
    data: bytes
    czxid: int
    ctime: int
    ephemeral_owner: int = 0
    mzxid: int = 0
    mtime: int = 0
    version: int = 0
    cversion: int = 0
    pzxid: int = 0
    children: set[str] = field(default_factory=set)

    def stat(self) -> bytes:
        return _STAT.pack(
            self.czxid,
            self.mzxid,
            self.ctime,
            self.mtime,
            self.version,
            self.cversion,
            0,  # aversion: ACLs are not modelled
            self.ephemeral_owner,
            len(self.data),
            len(self.children),
            self.pzxid,
        )


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def _now_ms() -> int:
    return int(time.time() * 1000)


class FakeTree:
    """The nodes, watches and identities of a fake server; see the module docstring."""

    def __init__(self) -> None:
        now = _now_ms()
        self.zxid = 0
        self._nodes: dict[str, _Node] = {
            "/": _Node(b"", 0, now, children={"zookeeper"}),
            "/zookeeper": _Node(b"", 0, now),
        }
        self._watches = WatchTable()
        self._identities: dict[int, list[tuple[str, str]]] = {}
        self._txn: int | None = None  # the zxid of the multi being applied
        self._undo: dict[str, _Node | None] | None = None  # its nodes as they were
        self._handlers: dict[int, Callable[[int, Reader], bytes]] = {
            2: self._delete,
            3: self._exists,
            4: self._get_data,
            5: self._set_data,
            8: self._get_children,
            9: lambda _s, r: ustring(r.ustring()),
            13: self._check,
            14: self._multi,
            18: self._remove_watches,
            100: self._auth,
            103: self._ephemerals,
            105: self._set_watches,
            106: self._add_watch,
            107: self._who_am_i,
        }

    # --- the one entry point ----------------------------------------------------------------

    def answer(self, session: int, opcode: int, body: bytes) -> tuple[int, bytes, list[Event]]:
        """Apply one request: ``(error code, reply body, notifications fired)``.

        Raises `ValueError` for a request that does not decode (the server
        then drops the connection, as ZooKeeper does).
        """
        events: list[Event] = []
        self._watches.events = events
        reader = Reader(body)
        try:
            if opcode in _CREATES:
                reply = self._create(session, opcode, reader)
            elif opcode == -11:
                reply = self._end(session)
            elif opcode == 11:
                reply = b""
            else:
                handler = self._handlers.get(opcode)
                if handler is None:
                    raise _Refused(UNIMPLEMENTED)
                reply = handler(session, reader)
        except _Refused as refused:
            return refused.code, b"", events
        return OK, reply, events

    def close_session(self, session: int) -> list[Event]:
        """End a session: its ephemerals go, its watches are forgotten; the notifications fired."""
        events: list[Event] = []
        self._watches.events = events
        self._end(session)
        return events

    def _end(self, session: int) -> bytes:
        for path in sorted(self._ephemerals_of(session, "/"), reverse=True):
            self._remove(path)
        self._watches.forget(session)
        self._identities.pop(session, None)
        return b""

    def data(self, path: str) -> bytes | None:
        node = self._nodes.get(path)
        return None if node is None else node.data

    # --- writes -----------------------------------------------------------------------------

    def _commit(self) -> int:
        """The zxid of this write: a new one, or the multi's (one transaction)."""
        if self._txn is not None:
            return self._txn
        self.zxid += 1
        return self.zxid

    def _touch(self, *paths: str) -> None:
        """Within a multi, keep each node as it was before its first change (None: absent)."""
        if self._undo is None:
            return
        for path in paths:
            if path not in self._undo:
                node = self._nodes.get(path)
                self._undo[path] = (
                    None if node is None else replace(node, children=set(node.children))
                )

    def _create(self, session: int, opcode: int, r: Reader) -> bytes:
        path, data, flags, ttl = _read_create(opcode, r)
        if (
            flags < 0
            or flags > 6
            or (opcode == 21) != (flags in (5, 6))
            or (opcode == 21 and ttl <= 0)
        ):
            raise _Refused(BAD_ARGUMENTS)
        created = self._add(session, path, data, flags, self._commit())
        return ustring(created) if opcode == 1 else ustring(created) + self._nodes[created].stat()

    def _add(self, session: int, path: str, data: bytes, flags: int, zxid: int) -> str:
        parent = self._nodes.get(_parent(path))
        if parent is None:
            raise _Refused(NO_NODE)
        if parent.ephemeral_owner:
            raise _Refused(NO_CHILDREN_FOR_EPHEMERALS)
        if flags in (2, 3, 6):
            path += f"{parent.cversion:010d}"
        if not path.startswith("/") or path.endswith("/") or "//" in path:
            raise _Refused(BAD_ARGUMENTS)
        if path in self._nodes:
            raise _Refused(NODE_EXISTS)
        now = _now_ms()
        self._touch(path, _parent(path))
        owner = session if flags in (1, 3) else 0
        self._nodes[path] = _Node(data, zxid, now, owner, zxid, now, pzxid=zxid)
        parent.children.add(path.rsplit("/", 1)[1])
        parent.cversion += 1
        parent.pzxid = zxid
        self._watches.fire(path, CREATED, ("data", "exist"))
        self._watches.fire(_parent(path), CHILDREN_CHANGED, ("child",))
        return path

    def _delete(self, _session: int, r: Reader) -> bytes:
        path, version = r.ustring(), r.int32()
        node = self._node(path)
        if version not in (-1, node.version):
            raise _Refused(BAD_VERSION)
        if node.children:
            raise _Refused(NOT_EMPTY)
        self._commit()
        self._remove(path)
        return b""

    def _remove(self, path: str) -> None:
        self._touch(path, _parent(path))
        del self._nodes[path]
        parent = self._nodes[_parent(path)]
        parent.children.discard(path.rsplit("/", 1)[1])
        parent.cversion += 1
        parent.pzxid = self.zxid
        self._watches.fire(path, DELETED, ("data", "exist", "child"))
        self._watches.fire(_parent(path), CHILDREN_CHANGED, ("child",))

    def _set_data(self, _session: int, r: Reader) -> bytes:
        path, data, version = r.ustring(), r.buffer() or b"", r.int32()
        node = self._node(path)
        if version not in (-1, node.version):
            raise _Refused(BAD_VERSION)
        self._touch(path)
        node.data, node.version = data, node.version + 1
        node.mzxid, node.mtime = self._commit(), _now_ms()
        self._watches.fire(path, DATA_CHANGED, ("data", "exist"))
        return node.stat()

    def _check(self, _session: int, r: Reader) -> bytes:
        path, version = r.ustring(), r.int32()
        if version not in (-1, self._node(path).version):
            raise _Refused(BAD_VERSION)
        return b""

    def _multi(self, session: int, r: Reader) -> bytes:
        """All or nothing, one zxid; the results as ZooKeeper 3.8 writes them (creates without stat)."""
        ops: list[tuple[int, bytes]] = []
        while True:
            type_, done, _err = r.int32(), r.boolean(), r.int32()
            if done:
                break
            start = r.offset
            _skip_op(type_, r)
            ops.append((type_, r.data[start : r.offset]))
        # Undone on failure: the nodes it touched (`_touch`), the one-shot watches it fired.
        zxid, watches, fired = self.zxid, dict(self._watches.table), len(self._watches.events)
        self._undo = {}
        self._txn = self._commit()
        results: list[bytes] = []
        try:
            for type_, body in ops:
                results.append(self._multi_op(session, type_, Reader(body)))
        except _Refused as refused:
            for path, node in self._undo.items():
                if node is None:
                    self._nodes.pop(path, None)
                else:
                    self._nodes[path] = node
            self.zxid, self._watches.table = zxid, watches
            del self._watches.events[fired:]  # nothing happened: no notification
            i = len(results)  # the operation that failed
            codes = [0] * i + [refused.code] + [RUNTIME_INCONSISTENCY] * (len(ops) - i - 1)
            return b"".join(_multi_header(-1, code) + int32(code) for code in codes) + _MULTI_END
        finally:
            self._txn = self._undo = None
        return b"".join(results) + _MULTI_END

    def _multi_op(self, session: int, type_: int, r: Reader) -> bytes:
        if type_ in _CREATES:
            # ZooKeeper 3.8 answers every create of a multi as a plain create: path, no stat.
            created = self._create(session, type_, r)
            return _multi_header(1) + ustring(Reader(created).ustring())
        return _multi_header(type_) + self._handlers[type_](session, r)

    # --- reads ------------------------------------------------------------------------------

    def _node(self, path: str) -> _Node:
        node = self._nodes.get(path)
        if node is None:
            raise _Refused(NO_NODE)
        return node

    def _exists(self, session: int, r: Reader) -> bytes:
        path, watch = r.ustring(), r.boolean()
        node = self._nodes.get(path)
        if watch:
            self._watches.add("data" if node is not None else "exist", path, session)
        if node is None:
            raise _Refused(NO_NODE)
        return node.stat()

    def _get_data(self, session: int, r: Reader) -> bytes:
        path, watch = r.ustring(), r.boolean()
        node = self._node(path)
        if watch:
            self._watches.add("data", path, session)
        return buffer(node.data) + node.stat()

    def _get_children(self, session: int, r: Reader) -> bytes:
        path, watch = r.ustring(), r.boolean()
        node = self._node(path)
        if watch:
            self._watches.add("child", path, session)
        return strings(sorted(node.children))

    def _ephemerals_of(self, session: int, prefix: str) -> list[str]:
        return [
            path
            for path, node in self._nodes.items()
            if node.ephemeral_owner == session and path.startswith(prefix)
        ]

    def _ephemerals(self, session: int, r: Reader) -> bytes:
        return strings(sorted(self._ephemerals_of(session, r.ustring())))

    def _auth(self, session: int, r: Reader) -> bytes:
        r.int32()
        scheme, auth = r.ustring(), (r.buffer() or b"").decode("utf-8", "replace")
        self._identities.setdefault(session, []).append((scheme, auth.split(":", 1)[0]))
        return b""

    def _who_am_i(self, session: int, _r: Reader) -> bytes:
        ids = [("ip", "127.0.0.1"), *self._identities.get(session, [])]
        return int32(len(ids)) + b"".join(ustring(s) + ustring(i) for s, i in ids)

    # --- watches ----------------------------------------------------------------------------

    def _add_watch(self, session: int, r: Reader) -> bytes:
        path, mode = r.ustring(), r.int32()
        self._watches.add("recursive" if mode == 1 else "persistent", path, session)
        return b""

    def _remove_watches(self, session: int, r: Reader) -> bytes:
        path, watcher_type = r.ustring(), r.int32()
        if not self._watches.remove(session, path, watcher_type):
            raise _Refused(NO_WATCHER)
        return b""

    def _set_watches(self, session: int, r: Reader) -> bytes:
        """Restore a reconnected session's watches; fire those whose node changed since `zxid`."""
        zxid = r.int64()
        for kind in KINDS:
            for path in r.strings():
                node = self._nodes.get(path)
                changes = None if node is None else (node.mzxid, node.pzxid)
                self._watches.restore(session, kind, path, changes, zxid)
        return b""


_MULTI_END = int32(-1) + b"\x01" + int32(-1)


def _multi_header(type_: int, err: int = 0) -> bytes:
    return int32(type_) + b"\x00" + int32(err)


def _read_create(opcode: int, r: Reader) -> tuple[str, bytes, int, int]:
    """(path, data, flags, ttl) of a create request."""
    path, data = r.ustring(), r.buffer() or b""
    for _ in range(max(r.int32(), 0)):  # the ACL: read, not checked
        r.int32()
        r.ustring()
        r.ustring()
    flags = r.int32()
    return path, data, flags, r.int64() if opcode == 21 else 0


def _skip_op(type_: int, r: Reader) -> None:
    """Step over one operation of a multi request."""
    if type_ in _CREATES:
        _read_create(type_, r)
    elif type_ in (2, 5, 13):  # delete, setData, check: path, [data], version
        r.ustring()
        if type_ == 5:
            r.buffer()
        r.int32()
    else:
        raise ValueError(f"operation type {type_} in a multi")
