"""`FrameProtocol`: the asyncio protocol under a `Connection`, cutting the byte stream into packets.

Frames are cut in the event loop's receive callback and handed on at once
(no reader task): a round trip then wakes only its caller.  A negative length
ends the connection; only a whole packet counts as word from the server.

A reply longer than `max_packet` (the Java client's ``jute.maxbuffer``) is
not read into memory: its header (xid, zxid, err) goes to `on_oversize`, and
exactly its length is skipped, so the stream stays framed and the connection
stays up; the one request it answers fails (the Java client drops the
connection instead, and a retried listing drops it again, for ever).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Callable
from typing import cast

from ..errors import ConnectionLostError, ProtocolError

__all__ = ("MAX_PACKET", "FrameProtocol", "NotZooKeeper")

log = logging.getLogger(__name__)

_INT = struct.Struct("!i")
_HEADER = struct.Struct("!iqi")  # a reply's xid, zxid, err
MAX_PACKET = 0xFFFFF + 1024 * 16  # jute.maxbuffer (1 MiB) plus headers, as the Java client allows


class NotZooKeeper(ConnectionLostError):
    """The peer's answer to our handshake is not ZooKeeper's: no use retrying that host."""


def _not_zookeeper(head: bytes) -> NotZooKeeper:
    """What answered, from its first bytes: ``HTTP/1.1 400`` and the like say which protocol."""
    text = head.split(b"\r\n", 1)[0][:40]
    named = " (an HTTP server)" if text.startswith(b"HTTP/") else ""
    return NotZooKeeper(f"does not speak ZooKeeper{named}: it answered {text!r}")


class FrameProtocol(asyncio.Protocol):
    """Frames the byte stream and hands each packet to `on_frame`, the end to `on_end`.

    Until a `Connection` takes it over, the first packet (the handshake's
    answer) resolves `first` and any later ones wait in `early`; an oversized
    packet before then is malformed.  `on_oversize(xid, zxid, size)` hears of
    each packet over `max_packet`, which is then skipped.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, max_packet: int = MAX_PACKET) -> None:
        self.transport: asyncio.Transport | None = None
        self.first: asyncio.Future[bytes] = loop.create_future()
        self.early: list[bytes] = []
        self.on_frame: Callable[[bytes], None] | None = None
        self.on_end: Callable[[str], None] | None = None
        self.on_oversize: Callable[[int, int, int], None] | None = None
        self.max_packet = max_packet
        self.end_reason: str | None = None
        self.last_recv = time.monotonic()
        self._buf = bytearray()
        self._skip = 0  # bytes of an oversized packet still to discard

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        if self._skip:
            if len(data) <= self._skip:
                self._skip -= len(data)
                if not self._skip:
                    self.last_recv = now
                return
            data = data[self._skip :]
            self._skip = 0
            self.last_recv = now
        buf = self._buf
        if buf:  # the start of a frame came before: carry on from it
            buf += data
            data = bytes(buf)
            buf.clear()
        # Frames are cut from `data` by offset, one copy each: a hand-over brings
        # hundreds of notifications in one read.
        pos, end = 0, len(data)
        try:
            while end - pos >= 4:
                size = _INT.unpack_from(data, pos)[0]
                if size < 0:
                    raise ProtocolError(f"a packet length of {size}")
                start = pos + 4
                if size > self.max_packet:
                    if end - start < _HEADER.size:
                        break  # its header is still to come
                    if self.end_reason is not None:
                        return
                    if self.on_oversize is None:
                        raise ProtocolError(f"a packet length of {size} before the handshake")
                    xid, zxid, _err = _HEADER.unpack_from(data, start)
                    self.last_recv = now
                    self.on_oversize(xid, zxid, size)
                    if end - start < size:
                        self._skip = size - (end - start)
                        pos = end
                        break
                    pos = start + size
                    continue
                if end - start < size:
                    break
                pos = start + size
                body = data[start:pos]
                if self.end_reason is not None:
                    return  # a packet before this one ended the connection
                # Only a whole packet is word from the server (as in the Java client):
                # bytes trickling into a frame that never completes are silence.
                self.last_recv = now
                if self.on_frame is not None:
                    self.on_frame(body)
                elif not self.first.done():
                    self.first.set_result(body)
                else:
                    self.early.append(body)
            if pos < end:
                buf += data[pos:]
        except Exception as exc:  # malformed packet: this connection is unusable
            if self.on_frame is None and not self.first.done() and pos == 0:
                # The very first bytes of the handshake's answer: not a ZooKeeper server.
                self.first.set_exception(_not_zookeeper(data))
            else:
                log.warning("dropping a connection: %r", exc)
            self.ended(f"sent a malformed packet: {exc!r}")
            if self.transport is not None:
                self.transport.abort()

    def eof_received(self) -> bool:
        self.ended("closed by the server")
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended("closed" if exc is None else f"lost: {exc!r}")

    def ended(self, reason: str) -> None:
        if self.end_reason is not None:
            return
        self.end_reason = reason
        if not self.first.done():
            self.first.set_exception(ConnectionLostError(reason))
        if self.on_end is not None:
            self.on_end(reason)
