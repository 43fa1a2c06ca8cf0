"""jute, ZooKeeper's wire encoding, for the fake server: what its requests and replies use.

Written here rather than taken from ``aiocoord.zk`` so that the fake server
checks the client against an encoding of its own, not against itself.
Integers are big-endian; a buffer or string is its length then its bytes
(length -1: null); a vector is its count then its items.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

__all__ = (
    "Reader",
    "boolean",
    "buffer",
    "connect_packet",
    "frame",
    "int32",
    "int64",
    "notification_packet",
    "reply_packet",
    "strings",
    "ustring",
)

_INT = struct.Struct("!i")
_LONG = struct.Struct("!q")
_BOOL = struct.Struct("!?")
_REPLY_HEADER = struct.Struct("!iqi")  # xid, zxid, err
_NOTIFICATION_XID = -1


def int32(value: int) -> bytes:
    return _INT.pack(value)


def int64(value: int) -> bytes:
    return _LONG.pack(value)


def boolean(value: bool) -> bytes:
    return _BOOL.pack(value)


def buffer(data: bytes | None) -> bytes:
    return _INT.pack(-1) if data is None else _INT.pack(len(data)) + data


def ustring(text: str | None) -> bytes:
    return buffer(None if text is None else text.encode("utf-8"))


def strings(items: Iterable[str]) -> bytes:
    """A vector of strings."""
    encoded = [ustring(item) for item in items]
    return _INT.pack(len(encoded)) + b"".join(encoded)


def frame(packet: bytes) -> bytes:
    """A packet with its length in front, as it goes on the wire."""
    return _INT.pack(len(packet)) + packet


def reply_packet(xid: int, zxid: int, err: int, body: bytes = b"") -> bytes:
    """A reply (unframed): header, then body (an error reply has none)."""
    return _REPLY_HEADER.pack(xid, zxid, err) + body


def notification_packet(event_type: int, state: int, path: str, zxid: int = -1) -> bytes:
    """A watch notification (unframed): xid -1, then the event's type, state and path."""
    return reply_packet(
        _NOTIFICATION_XID, zxid, 0, _INT.pack(event_type) + _INT.pack(state) + ustring(path)
    )


def connect_packet(
    timeout_ms: int, session_id: int, password: bytes, read_only: bool = False
) -> bytes:
    """A ConnectResponse (unframed); session id 0 and timeout 0 say "expired"."""
    return int32(0) + int32(timeout_ms) + int64(session_id) + buffer(password) + boolean(read_only)


class Reader:
    """Reads jute values from a packet in order; `ValueError` when the packet is too short."""

    def __init__(self, data: bytes, offset: int = 0) -> None:
        self.data = data
        self.offset = offset

    @property
    def remaining(self) -> int:
        return len(self.data) - self.offset

    def _take(self, size: int) -> bytes:
        if size < 0 or size > self.remaining:
            raise ValueError(f"{size} bytes wanted at offset {self.offset}, {self.remaining} left")
        start = self.offset
        self.offset += size
        return self.data[start : self.offset]

    def int32(self) -> int:
        value: int = _INT.unpack(self._take(4))[0]
        return value

    def int64(self) -> int:
        value: int = _LONG.unpack(self._take(8))[0]
        return value

    def boolean(self) -> bool:
        return self._take(1) != b"\x00"

    def buffer(self) -> bytes | None:
        size = self.int32()
        return None if size == -1 else self._take(size)

    def ustring(self) -> str:
        raw = self.buffer()
        return "" if raw is None else raw.decode("utf-8")

    def strings(self) -> list[str]:
        count = self.int32()
        return [self.ustring() for _ in range(max(count, 0))]
