"""Reading what a server sends: every reply body and notification is parsed here.

A packet comes from the network and may hold anything.  `Reader` checks each
length against what is left of the packet, decodes text strictly and refuses
nulls where a value is required; anything else raises `ProtocolError`, never
a builtin error, and no loop here can run longer than the packet (each step
consumes bytes).  The connection runs these parsers where the packet is read
(`Connection._dispatch`), so a malformed reply drops the connection at once
and only its caller sees the error.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import ProtocolError
from .types import ACL, Node, Stat

__all__ = (
    "HEADER_SIZE",
    "ConnectAnswer",
    "Reader",
    "parse_acl",
    "parse_children",
    "parse_created",
    "parse_ephemerals",
    "parse_node",
    "parse_sasl",
    "parse_stat",
    "parse_watch_event",
    "parse_who_am_i",
    "reply_header",
)

_INT = struct.Struct("!i")
_LONG = struct.Struct("!q")
_HEADER = struct.Struct("!iqi")  # reply header: xid, zxid, err
_STAT = struct.Struct("!qqqqiiiqiiq")
_WATCH_EVENT = struct.Struct("!ii")  # type, state
HEADER_SIZE = _HEADER.size


class Reader:
    """Reads jute values from a packet in order, each checked against the packet's end."""

    __slots__ = ("body", "pos")

    def __init__(self, body: bytes, pos: int = HEADER_SIZE) -> None:
        self.body = body
        self.pos = pos

    def fail(self, what: str) -> ProtocolError:
        return ProtocolError(f"malformed reply: {what} at byte {self.pos} of {len(self.body)}")

    def unpack(self, fmt: struct.Struct, what: str) -> tuple[int, ...]:
        pos = self.pos
        if pos + fmt.size > len(self.body):
            raise self.fail(f"{what} cut short")
        self.pos = pos + fmt.size
        return fmt.unpack_from(self.body, pos)

    def int32(self, what: str = "an int") -> int:
        return self.unpack(_INT, what)[0]

    def int64(self, what: str = "a long") -> int:
        return self.unpack(_LONG, what)[0]

    def boolean(self) -> bool:
        if self.pos >= len(self.body):
            raise self.fail("a bool cut short")
        self.pos += 1
        return self.body[self.pos - 1] != 0

    def buffer(self) -> bytes | None:
        """A length-prefixed byte string; length -1 is null."""
        size = self.int32("a length")
        if size == -1:
            return None
        if size < 0 or size > len(self.body) - self.pos:
            self.pos -= _INT.size
            raise self.fail(f"length {size} with {len(self.body) - self.pos - 4} bytes left")
        start = self.pos
        self.pos += size
        return self.body[start : self.pos]

    def text(self, *, null: str | None = None) -> str:
        """A UTF-8 string; a null one is `null` if given, else malformed."""
        raw = self.buffer()
        if raw is None:
            if null is None:
                raise self.fail("a null string")
            return null
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(f"text that is not UTF-8 ({exc.reason})") from exc

    def count(self, item_size: int) -> int:
        """A vector's length, checked against the room its items need; -1 (null) is 0."""
        count = self.int32("a count")
        if count == -1:
            return 0
        if count < 0 or count * item_size > len(self.body) - self.pos:
            self.pos -= _INT.size
            raise self.fail(f"count {count} with {len(self.body) - self.pos - 4} bytes left")
        return count

    def texts(self) -> list[str]:
        return [self.text() for _ in range(self.count(_INT.size))]

    def stat(self) -> Stat:
        return Stat(*self.unpack(_STAT, "a stat"))


def reply_header(body: bytes) -> tuple[int, int, int]:
    """(xid, zxid, err) of a reply packet."""
    if len(body) < HEADER_SIZE:
        raise ProtocolError(f"malformed reply: a {len(body)}-byte packet has no reply header")
    xid, zxid, err = _HEADER.unpack_from(body, 0)
    return xid, zxid, err


def parse_stat(body: bytes) -> Stat:
    """The stat of an exists or setData reply."""
    return Reader(body).stat()


def parse_node(body: bytes) -> Node:
    """The data and stat of a getData reply (null data reads as b"")."""
    reader = Reader(body)
    data = reader.buffer() or b""
    return Node(data, reader.stat())


def parse_children(body: bytes) -> list[str]:
    """The child names of a getChildren reply."""
    return Reader(body).texts()


def parse_created(body: bytes) -> tuple[str, Stat]:
    """The server path and stat of a create2, createContainer or createTTL reply."""
    reader = Reader(body)
    path = reader.text()
    return path, reader.stat()


def parse_who_am_i(body: bytes) -> list[tuple[str, str]]:
    """The (scheme, id) pairs of a whoAmI reply."""
    reader = Reader(body)
    return [(reader.text(), reader.text()) for _ in range(reader.count(2 * _INT.size))]


def parse_acl(body: bytes) -> tuple[list[ACL], Stat]:
    """The ACL entries and stat of a getACL reply."""
    reader = Reader(body)
    entries = [
        ACL(reader.int32("the permissions"), reader.text(), reader.text())
        for _ in range(reader.count(3 * _INT.size))
    ]
    return entries, reader.stat()


def parse_sasl(body: bytes) -> bytes:
    """The server's next SASL challenge (``SetSASLResponse``; null reads as b"")."""
    return Reader(body).buffer() or b""


def parse_ephemerals(body: bytes) -> list[str]:
    """The server paths of a getEphemerals reply."""
    return Reader(body).texts()


def parse_watch_event(body: bytes) -> tuple[int, int, str]:
    """(type, state, server_path) of a notification packet (a null path reads as "").

    Parsed by hand rather than with aiozk's `WatchEvent`: a hand-over brings
    hundreds of notifications at once, and this is several times cheaper.
    """
    reader = Reader(body)
    type_, state = reader.unpack(_WATCH_EVENT, "an event")
    return type_, state, reader.text(null="")


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
            raise ProtocolError(
                f"the server refused the session ({len(body)}-byte answer: {body.hex()})"
            )
        reader = Reader(body, 0)
        reader.int32("the protocol version")
        timeout_ms = reader.int32("the timeout")
        session_id = reader.int64("the session id")
        password = reader.buffer() or b""
        read_only = reader.boolean() if reader.pos < len(body) else False  # older servers omit it
        return cls(timeout_ms, session_id, password, read_only)
