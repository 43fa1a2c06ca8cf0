"""One TCP connection to one ZooKeeper server: handshake, framing, in-order replies.

A `Connection` never reconnects; the session loop (`_session.py`) opens a new
one.  EOF, a reset, a malformed packet or silence longer than the read timeout
end it at once (aiozk waited for its next heartbeat), and every request still
waiting gets `ConnectionLostError`: its outcome is unknown.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
import struct
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from ..errors import ConnectionLostError, SessionExpiredError
from . import _wire
from ._wire import ConnectAnswer

log = logging.getLogger(__name__)

_INT = struct.Struct("!i")
_MAX_PACKET = 0xFFFFF + 1024 * 16  # jute.maxbuffer (1 MiB) plus headers, as the Java client allows
# The server drops the connection on a request longer than jute.maxbuffer (default
# 0xFFFFF, the whole packet, headers included), which suspends everything on the session.
_MAX_REQUEST = 0xFFFFF


@dataclass(slots=True, eq=False)
class _Pending:
    """A request waiting for its reply (replies come in request order)."""

    xid: int
    opcode: int
    on_reply: Callable[[int, int, bytes], None] | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    header: tuple[int, int] = (0, 0)  # zxid, err
    body: bytes = b""
    error: BaseException | None = None


class Connection:
    """A live, handshaken connection; `run()` reads until it ends."""

    def __init__(
        self,
        stream: anyio.abc.ByteStream,
        address: tuple[str, int],
        answer: ConnectAnswer,
        on_notification: Callable[[bytes], None],
        on_zxid: Callable[[int], None],
    ) -> None:
        self.address = address
        self.answer = answer
        self._stream = stream
        self._on_notification = on_notification
        self._on_zxid = on_zxid
        self._pending: deque[_Pending] = deque()
        self._outbox: list[bytes] = []
        self._outbox_ready = anyio.Event()
        self._writing = False
        self._scope: anyio.CancelScope | None = None
        self._leftover = b""
        self._xid = 0
        self.closed = False
        self.close_reason = ""
        self.last_recv = time.monotonic()
        self.last_send = time.monotonic()
        self.read_timeout = answer.timeout_ms / 1000.0 * 2 / 3

    # --- opening ---------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        address: tuple[str, int],
        *,
        timeout: float,
        last_zxid: int,
        timeout_ms: int,
        session_id: int,
        password: bytes,
        read_only: bool,
        ssl_context: ssl.SSLContext | None = None,
        tls_hostname: str | None = None,
        on_notification: Callable[[bytes], None],
        on_zxid: Callable[[int], None],
    ) -> Connection:
        """Connect and handshake within `timeout` seconds, or raise `ConnectionLostError`.

        Raises `SessionExpiredError` when the server says the session is gone.
        The deadline covers the TCP connect and the ConnectResponse: a server
        that accepts but never answers (ZooKeeper 3.8.0 while it loads its
        database) costs one attempt, not the whole session.
        """
        host, port = address
        stream: anyio.abc.ByteStream | None = None
        try:
            with anyio.fail_after(timeout):
                if ssl_context is None:
                    stream = await anyio.connect_tcp(host, port)
                else:
                    stream = await anyio.connect_tcp(
                        host,
                        port,
                        ssl_context=ssl_context,
                        tls_hostname=tls_hostname or host,
                        tls_standard_compatible=False,
                    )
                await stream.send(
                    _wire.connect_request(last_zxid, timeout_ms, session_id, password, read_only)
                )
                reader = BufferedByteReceiveStream(stream)
                body = await _read_frame(reader)
                answer = ConnectAnswer.parse(body)
        except TimeoutError as exc:
            await _close_quietly(stream)
            raise ConnectionLostError(
                f"no handshake from {host}:{port} within {timeout:.2f}s"
            ) from exc
        except Exception as exc:  # refused, reset, EOF, or an answer that is not ZooKeeper's
            await _close_quietly(stream)
            raise ConnectionLostError(f"cannot connect to {host}:{port}: {exc!r}") from exc
        except BaseException:
            await _close_quietly(stream)
            raise
        if answer.expired:
            await _close_quietly(stream)
            raise SessionExpiredError(f"session 0x{session_id:x} expired (told by {host}:{port})")
        conn = cls(stream, address, answer, on_notification, on_zxid)
        conn._leftover = bytes(reader.buffer)
        return conn

    # --- running ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Read, write and keep the connection alive until it ends; never raises.

        Three tasks: the reader parses every complete frame of each chunk it
        receives; the writer sends everything queued since its last write in one
        go (pipelined requests cost one syscall); the keepalive pings after a
        third of the session timeout without sending and drops the connection
        after two thirds without hearing from the server (the Java client's read
        timeout), which also bounds every request in flight.
        """
        try:
            async with anyio.create_task_group() as tg:
                self._scope = tg.cancel_scope
                if self.closed:
                    tg.cancel_scope.cancel()
                tg.start_soon(self._guard, self._read_loop)
                tg.start_soon(self._guard, self._write_loop)
                tg.start_soon(self._guard, self._keepalive)
        finally:
            if not self.closed:
                self._end("connection closed")
            with anyio.CancelScope(shield=True):
                await _close_quietly(self._stream)

    async def _guard(self, loop: Callable[[], Awaitable[None]]) -> None:
        try:
            await loop()
        except ConnectionLostError as exc:
            self._end(str(exc))
        except (
            OSError,
            anyio.EndOfStream,
            anyio.IncompleteRead,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
        ) as exc:
            what = (
                "closed by the server"
                if isinstance(exc, anyio.EndOfStream | anyio.IncompleteRead)
                else repr(exc)
            )
            self._end(f"connection to {self.address[0]}:{self.address[1]} {what}")
        except Exception as exc:  # malformed packet or a parse error: this connection is unusable
            log.warning("dropping connection to %s:%s: %r", *self.address, exc)
            self._end(f"malformed packet from {self.address[0]}:{self.address[1]}: {exc!r}")
        finally:
            if not self.closed:
                self._end("connection closed")
            if self._scope is not None:
                self._scope.cancel()

    async def _read_loop(self) -> None:
        buf = bytearray(self._leftover)
        while True:
            while len(buf) >= 4:
                size = _INT.unpack_from(buf, 0)[0]
                if size < 0 or size > _MAX_PACKET:
                    raise ValueError(f"packet length {size} out of range")
                if len(buf) < 4 + size:
                    break
                body = bytes(buf[4 : 4 + size])
                del buf[: 4 + size]
                self._dispatch(body)
            buf += await self._stream.receive(65536)
            self.last_recv = time.monotonic()

    async def _write_loop(self) -> None:
        while True:
            await self._outbox_ready.wait()
            self._outbox_ready = anyio.Event()
            if not self._writing:
                await self._flush()

    async def _flush(self) -> None:
        """Send everything queued, in order; one flusher at a time (the writer or a caller)."""
        self._writing = True
        try:
            while self._outbox:
                count = len(self._outbox)
                data = b"".join(self._outbox)
                await self._stream.send(data)
                # Dropped only once written: a packet must never be lost while its reply
                # is awaited, or every later reply would be matched to the wrong request.
                del self._outbox[:count]
                self.last_send = time.monotonic()
        finally:
            self._writing = False
            if self._outbox:
                self._outbox_ready.set()  # hand what is left to the writer

    async def _keepalive(self) -> None:
        ping_after = self.answer.timeout_ms / 1000.0 / 3
        while True:
            now = time.monotonic()
            if now - self.last_recv >= self.read_timeout:
                raise ConnectionLostError(
                    f"no answer from {self.address[0]}:{self.address[1]} for {self.read_timeout:.2f}s"
                )
            if now - self.last_send >= ping_after and not self._outbox:
                self.queue(_PING_PACKET, _wire.PING_XID, 11)
                self.last_send = now  # the writer refreshes it; don't ping twice meanwhile
            wake = min(self.last_recv + self.read_timeout, self.last_send + ping_after)
            await anyio.sleep(max(0.005, wake - now))

    def _dispatch(self, body: bytes) -> None:
        xid, zxid, err = _wire.reply_header(body)
        if zxid > 0:
            self._on_zxid(zxid)
        if xid == _wire.NOTIFICATION_XID:
            self._on_notification(body)
            return
        if not self._pending:
            raise ValueError(f"reply xid {xid} with no request waiting")
        pending = self._pending.popleft()
        if pending.xid != xid:
            raise ValueError(f"reply xid {xid} does not match request xid {pending.xid}")
        pending.header = (zxid, err)
        pending.body = body
        if pending.on_reply is not None:
            # Runs before the next packet is dispatched, so a watch is registered
            # before the notification that may follow its reply.
            pending.on_reply(err, zxid, body)
        pending.done.set()

    def _end(self, reason: str) -> None:
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        log.debug("connection to %s:%s ended: %s", self.address[0], self.address[1], reason)
        while self._pending:
            pending = self._pending.popleft()
            pending.error = ConnectionLostError(
                f"connection lost with the request in flight: {reason}"
            )
            pending.done.set()
        self._outbox.clear()
        if self._scope is not None:
            self._scope.cancel()

    async def abort(self, reason: str) -> None:
        """Close the socket now; `run()` then ends."""
        self._end(reason)
        await _close_quietly(self._stream)

    # --- sending ---------------------------------------------------------------------------

    def next_xid(self) -> int:
        self._xid = (self._xid + 1) & 0x7FFFFFFF or 1
        return self._xid

    def queue(
        self,
        packet: bytes,
        xid: int,
        opcode: int,
        on_reply: Callable[[int, int, bytes], None] | None = None,
    ) -> _Pending:
        """Queue a framed request for the writer; the entry completes with its reply.

        Synchronous, so the order of `queue` calls is the order on the wire and
        of the replies.  Raises `ValueError` for a request the server would
        refuse by dropping the connection (longer than jute.maxbuffer).
        """
        if len(packet) - _INT.size > _MAX_REQUEST:
            raise ValueError(
                f"the request is {len(packet) - _INT.size} bytes; ZooKeeper accepts at most "
                f"{_MAX_REQUEST} (jute.maxbuffer) and would drop the connection"
            )
        if self.closed:
            raise ConnectionLostError(f"not connected ({self.close_reason})")
        pending = _Pending(xid, opcode, on_reply)
        self._pending.append(pending)
        self._outbox.append(packet)
        self._outbox_ready.set()
        return pending

    async def call(
        self,
        request: Any,
        xid: int | None = None,
        on_reply: Callable[[int, int, bytes], None] | None = None,
    ) -> tuple[int, int, bytes]:
        """Send `request` and wait for its reply: ``(err, zxid, body)``."""
        xid = self.next_xid() if xid is None else xid
        pending = self.queue(_wire.request_packet(xid, request), xid, request.opcode, on_reply)
        if not self._writing:
            # Nobody is sending: write from this task rather than wake the writer (one
            # task switch less per request); a failed write ends the connection.
            try:
                with anyio.CancelScope(shield=True):
                    await self._flush()
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                self._end(f"send failed: {exc!r}")
        return await wait_reply(pending)


_PING_PACKET = _wire.request_packet(_wire.PING_XID, _wire.proto.PingRequest())


async def wait_reply(pending: _Pending) -> tuple[int, int, bytes]:
    """Wait for a queued request's reply: ``(err, zxid, body)``."""
    await pending.done.wait()
    if pending.error is not None:
        raise pending.error
    zxid, err = pending.header
    return err, zxid, pending.body


async def _read_frame(reader: BufferedByteReceiveStream) -> bytes:
    size = _INT.unpack(await reader.receive_exactly(4))[0]
    if size < 0 or size > _MAX_PACKET:
        raise ValueError(f"packet length {size} out of range")
    return await reader.receive_exactly(size)


async def _close_quietly(stream: anyio.abc.ByteStream | None) -> None:
    if stream is None:
        return
    with anyio.CancelScope(shield=True), anyio.move_on_after(1):
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await stream.aclose()
