"""One TCP connection to one ZooKeeper server: handshake, framing, in-order replies.

A `Connection` never reconnects; the session loop (`_session.py`) opens a new
one.  EOF, a reset, a malformed packet or silence longer than the read timeout
end it at once (aiozk waited for its next heartbeat), and every request still
waiting gets `ConnectionLostError`: its outcome is unknown.

The socket is driven by an asyncio protocol (`_framing.FrameProtocol`), not
by reader and writer tasks: frames are parsed, and replies handed to their
callers, in the event loop's receive callback; requests queued during one
step of the loop go out in one write from a loop callback.  A round trip then wakes one task (its caller)
instead of three, and task wake-ups are most of a round trip's CPU time.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import ssl
import struct
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import anyio.lowlevel

from ..errors import ConnectionLostError, ProtocolError, ReplyTooLargeError, SessionExpiredError
from . import _hosts, _wire
from ._framing import MAX_PACKET, FrameProtocol, NotZooKeeper
from ._replies import ConnectAnswer, reply_header
from ._timing import SessionTiming
from ._wire import OpCode, WireRequest

log = logging.getLogger(__name__)

_INT = struct.Struct("!i")
# The server drops the connection on a request longer than jute.maxbuffer (default
# 0xFFFFF, the whole packet, headers included), which suspends everything on the session.
_MAX_REQUEST = 0xFFFFF


@dataclass(slots=True, eq=False)
class _Pending:
    """A request waiting for its reply (replies come in request order).

    `parse` reads the body of a successful reply where the packet is read,
    into `value`; if the body is malformed the request fails with
    `ProtocolError` and the connection is dropped.
    """

    xid: int
    opcode: OpCode
    done: asyncio.Future[None]
    sent: float  # when it was queued (monotonic): no later than it left
    on_reply: Callable[[int, int, bytes], None] | None = None
    parse: Callable[[bytes], object] | None = None
    header: tuple[int, int] = (0, 0)  # zxid, err
    body: bytes = b""
    value: object = None
    error: BaseException | None = None


class Connection:
    """A live, handshaken connection; `run()` keeps it alive until it ends."""

    def __init__(
        self,
        protocol: FrameProtocol,
        address: tuple[str, int],
        answer: ConnectAnswer,
        timing: SessionTiming,
        on_notification: Callable[[bytes], None],
        on_zxid: Callable[[int], None],
        *,
        handshake_sent: float = -math.inf,
    ) -> None:
        assert protocol.transport is not None
        self.address = address
        self.answer = answer
        self.timing = timing
        self._loop = asyncio.get_running_loop()
        self._protocol = protocol
        self._transport = protocol.transport
        self._on_notification = on_notification
        self._on_zxid = on_zxid
        self._pending: deque[_Pending] = deque()
        self._outbox: list[bytes] = []
        self._flush_handle: asyncio.Handle | None = None
        self._scope: anyio.CancelScope | None = None
        self._xid = 0
        self.closed = False
        self.close_reason = ""
        self.last_send = time.monotonic()
        # The send time of the latest request the server answered (the handshake's first):
        # the server heard of the session then or later, so it cannot expire it before
        # this + the session timeout.  Monotonic clock; heartbeats count.
        self.answered_sent = handshake_sent
        self.read_timeout = timing.read_timeout
        protocol.on_end = self._lost
        protocol.on_frame = self._dispatch_safely
        protocol.on_oversize = self._oversized
        early, protocol.early = protocol.early, []
        for body in early:
            self._dispatch_safely(body)
        if protocol.end_reason is not None:
            self._lost(protocol.end_reason)

    @property
    def in_flight(self) -> int:
        """Requests sent and not answered yet (emptied when the connection ends)."""
        return len(self._pending)

    @property
    def last_recv(self) -> float:
        """When the server last sent a whole packet (monotonic clock)."""
        return self._protocol.last_recv

    # --- opening ---------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        address: tuple[str, int],
        *,
        timing: SessionTiming,
        last_zxid: int,
        timeout_ms: int,
        session_id: int,
        password: bytes,
        read_only: bool,
        ssl_context: ssl.SSLContext | None = None,
        tls_hostname: str | None = None,
        max_packet: int = MAX_PACKET,
        on_notification: Callable[[bytes], None],
        on_zxid: Callable[[int], None],
    ) -> Connection:
        """Connect and handshake within `timing.connect_attempt`, or raise `ConnectionLostError`.

        Raises `SessionExpiredError` when the server says the session is gone.
        The deadline covers the TCP connect and the ConnectResponse: a server
        that accepts but never answers (ZooKeeper 3.8.0 while it loads its
        database) costs one attempt, not the whole session.
        """
        host, port = address
        timeout = timing.connect_attempt
        loop = asyncio.get_running_loop()
        protocol = FrameProtocol(loop, max_packet)
        try:
            with anyio.fail_after(timeout):
                protocol = await _connect_any(
                    loop,
                    host,
                    port,
                    max_packet,
                    ssl=ssl_context,
                    server_hostname=(tls_hostname or host) if ssl_context is not None else None,
                )
                assert protocol.transport is not None
                handshake_sent = time.monotonic()
                protocol.transport.write(
                    _wire.connect_request(last_zxid, timeout_ms, session_id, password, read_only)
                )
                answer = ConnectAnswer.parse(await protocol.first)
        except TimeoutError as exc:
            _abort(protocol)
            raise ConnectionLostError(
                f"no handshake from {host}:{port} within {timeout:.2f}s"
            ) from exc
        except NotZooKeeper as exc:
            _abort(protocol)
            raise NotZooKeeper(f"{host}:{port} {exc}") from None
        except Exception as exc:  # refused, reset, EOF, or an answer that is not ZooKeeper's
            _abort(protocol)
            raise ConnectionLostError(f"cannot connect to {host}:{port}: {exc!r}") from exc
        except BaseException:
            _abort(protocol)
            raise
        if answer.expired:
            _abort(protocol)
            raise SessionExpiredError(f"session 0x{session_id:x} expired (told by {host}:{port})")
        return cls(
            protocol,
            address,
            answer,
            timing.negotiated(answer.timeout_ms),
            on_notification,
            on_zxid,
            handshake_sent=handshake_sent,
        )

    # --- running ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Keep the connection alive until it ends; never raises.

        Pings after a third of the session timeout without sending, and drops
        the connection after two thirds without hearing from the server (the
        Java client's read timeout), which also bounds every request in flight.
        Receiving and sending happen meanwhile in the event loop's callbacks.
        """
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                if self.closed:
                    scope.cancel()
                await self._keepalive()
        except ConnectionLostError as exc:
            self._end(str(exc))
        finally:
            if not self.closed:
                self._end("connection closed")
            self._transport.close()

    async def _keepalive(self) -> None:
        ping_after = self.timing.ping_interval
        while True:
            now = time.monotonic()
            last_recv = self._protocol.last_recv
            if now - last_recv >= self.read_timeout:
                raise ConnectionLostError(
                    f"no answer from {self.address[0]}:{self.address[1]} for {self.read_timeout:.2f}s"
                )
            if now - self.last_send >= ping_after and not self._outbox:
                self.queue(_PING_PACKET, _wire.PING_XID, OpCode.PING)
                self.last_send = now  # the flush refreshes it; don't ping twice meanwhile
            wake = min(last_recv + self.read_timeout, self.last_send + ping_after)
            await anyio.sleep(max(0.005, wake - now))

    def _dispatch_safely(self, body: bytes) -> None:
        """Hand one packet on; the one place where whatever a server sends is read.

        A packet that does not parse, or that answers no request, ends the
        connection: the request it answered (if any) fails with its
        `ProtocolError`, every other one in flight with `ConnectionLostError`.
        """
        try:
            self._dispatch(body)
        except Exception as exc:
            log.warning("dropping connection to %s:%s: %r", *self.address, exc)
            self._protocol.ended(f"sent a malformed packet: {exc!r}")
            self._transport.abort()

    def _dispatch(self, body: bytes) -> None:
        xid, zxid, err = reply_header(body)
        if zxid > 0:
            self._on_zxid(zxid)
        if xid == _wire.NOTIFICATION_XID:
            self._on_notification(body)
            return
        if not self._pending:
            raise ProtocolError(f"a reply (xid {xid}) with no request waiting")
        if xid == _wire.AUTH_XID and self._pending[0].xid != xid:
            pending = self._take_auth()
        else:
            pending = self._pending.popleft()
        pending.header = (zxid, err)
        pending.body = body
        if pending.sent > self.answered_sent:
            self.answered_sent = pending.sent
        try:
            if pending.xid != xid:
                raise ProtocolError(f"a reply to xid {xid} where xid {pending.xid} was next")
            if err == 0 and pending.parse is not None:
                pending.value = pending.parse(body)
            if pending.on_reply is not None:
                # Runs before the next packet is dispatched, so a watch is registered
                # before the notification that may follow its reply.
                pending.on_reply(err, zxid, body)
        except Exception as exc:
            # Its caller learns why (it is out of the pending queue: the connection's
            # end would not reach it); the others fail with the connection.
            if isinstance(exc, ProtocolError):
                pending.error = exc
            else:
                pending.error = ProtocolError(f"reading the reply to xid {xid} failed: {exc!r}")
                pending.error.__cause__ = exc
            if not pending.done.done():
                pending.done.set_result(None)
            raise
        if not pending.done.done():  # done already if its waiter was cancelled
            pending.done.set_result(None)

    def _take_auth(self) -> _Pending:
        """The oldest auth request waiting: ZooKeeper answers auth at once, not in its pipeline.

        Its reply may overtake the replies of requests sent before it (the Java
        client keeps auth packets out of its pending queue for this reason).
        """
        for i, pending in enumerate(self._pending):
            if pending.xid == _wire.AUTH_XID:
                del self._pending[i]
                return pending
        raise ProtocolError(f"an auth reply (xid {_wire.AUTH_XID}) with no auth request waiting")

    def _oversized(self, xid: int, zxid: int, size: int) -> None:
        """A reply too long to read (skipped by the protocol): only its request fails.

        Raises `ProtocolError` (the protocol then drops the connection) when it
        answers no request waiting, or is a notification, which cannot be lost.
        """
        if zxid > 0:
            self._on_zxid(zxid)
        if xid == _wire.NOTIFICATION_XID or not self._pending or self._pending[0].xid != xid:
            raise ProtocolError(f"a {size}-byte packet (xid {xid}) that answers no request next")
        pending = self._pending.popleft()
        log.warning(
            "a %d-byte reply from %s:%s is over the packet limit (%d): skipped, its request fails",
            size,
            *self.address,
            self._protocol.max_packet,
        )
        pending.error = ReplyTooLargeError(size, self._protocol.max_packet)
        if not pending.done.done():
            pending.done.set_result(None)

    def _lost(self, reason: str) -> None:
        self._end(f"connection to {self.address[0]}:{self.address[1]} {reason}")

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
            if not pending.done.done():
                pending.done.set_result(None)
        self._outbox.clear()
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        if self._scope is not None:
            self._scope.cancel()

    async def abort(self, reason: str) -> None:
        """End the connection and close the socket (after what is already written); `run()` ends."""
        self._end(reason)
        self._transport.close()
        await anyio.lowlevel.checkpoint()

    # --- sending ---------------------------------------------------------------------------

    def next_xid(self) -> int:
        self._xid = (self._xid + 1) & 0x7FFFFFFF or 1
        return self._xid

    def queue(
        self,
        packet: bytes,
        xid: int,
        opcode: OpCode,
        on_reply: Callable[[int, int, bytes], None] | None = None,
        parse: Callable[[bytes], object] | None = None,
    ) -> _Pending:
        """Queue a framed request; the entry completes with its reply (parsed by `parse`).

        Synchronous, so the order of `queue` calls is the order on the wire and
        of the replies.  The first request of a step of the event loop is
        written at once (a lone request does not wait for the callbacks already
        due, such as the tasks a hand-over wakes); the rest of that step goes
        out in one write after it (pipelined requests cost two syscalls).  Raises
        `ValueError` for a request the server would refuse by dropping the
        connection (longer than jute.maxbuffer).
        """
        if len(packet) - _INT.size > _MAX_REQUEST:
            raise ValueError(
                f"the request is {len(packet) - _INT.size} bytes; ZooKeeper accepts at most "
                f"{_MAX_REQUEST} (jute.maxbuffer) and would drop the connection"
            )
        if self.closed:
            raise ConnectionLostError(f"not connected ({self.close_reason})")
        pending = _Pending(
            xid, opcode, self._loop.create_future(), time.monotonic(), on_reply, parse
        )
        self._pending.append(pending)
        if self._flush_handle is None:
            self._write(packet)  # first: the flush's callback is not on the request's way
            if not self.closed:
                self._flush_handle = self._loop.call_soon(self._flush)
        else:
            self._outbox.append(packet)
        return pending

    def _flush(self) -> None:
        """Write everything queued since the step's first request, in order (a loop callback)."""
        self._flush_handle = None
        if self.closed or not self._outbox:
            return
        data = self._outbox[0] if len(self._outbox) == 1 else b"".join(self._outbox)
        self._outbox.clear()
        self._write(data)

    def _write(self, data: bytes) -> None:
        try:
            self._transport.write(data)
        except Exception as exc:  # the transport is closing: no reply will come
            self._end(f"send failed: {exc!r}")
            return
        self.last_send = time.monotonic()

    def submit(
        self,
        request: WireRequest,
        xid: int | None = None,
        on_reply: Callable[[int, int, bytes], None] | None = None,
        parse: Callable[[bytes], object] | None = None,
    ) -> _Pending:
        """Frame and `queue` a request object (under the next xid unless given; auth's own for auth)."""
        if xid is None:
            xid = _wire.AUTH_XID if request.opcode is OpCode.AUTH else self.next_xid()
        packet = _wire.request_packet(xid, request)
        return self.queue(packet, xid, request.opcode, on_reply, parse)

    async def call(
        self,
        request: WireRequest,
        xid: int | None = None,
        on_reply: Callable[[int, int, bytes], None] | None = None,
    ) -> tuple[int, int, bytes]:
        """Send `request` and wait for its reply: ``(err, zxid, body)``."""
        return await wait_reply(self.submit(request, xid, on_reply))


_PING_PACKET = _wire.request_packet(_wire.PING_XID, _wire.ping_request())


async def wait_reply(pending: _Pending) -> tuple[int, int, bytes]:
    """Wait for a queued request's reply: ``(err, zxid, body)``."""
    if not pending.done.done():
        await pending.done
    if pending.error is not None:
        raise pending.error
    zxid, err = pending.header
    return err, zxid, pending.body


async def _connect_any(
    loop: asyncio.AbstractEventLoop,
    host: str,
    port: int,
    max_packet: int,
    *,
    ssl: ssl.SSLContext | None,
    server_hostname: str | None,
) -> FrameProtocol:
    """Connect to the first of `host`'s addresses (resolved now) that accepts.

    Raises `socket.gaierror` when the name does not resolve; when every address
    fails, the first refusal if all refused, else the first other error.
    """
    errors: list[OSError] = []
    for ip in await _hosts.resolve(host, port):
        protocol = FrameProtocol(loop, max_packet)
        try:
            await loop.create_connection(
                functools.partial(_same, protocol),
                ip,
                port,
                ssl=ssl,
                server_hostname=server_hostname,
            )
        except OSError as exc:
            _abort(protocol)
            errors.append(exc)
            continue
        except BaseException:
            _abort(protocol)
            raise
        return protocol
    other = [e for e in errors if not isinstance(e, ConnectionRefusedError)]
    raise (other or errors)[0]


def _same(protocol: FrameProtocol) -> FrameProtocol:
    return protocol


def _abort(protocol: FrameProtocol) -> None:
    """Drop an attempt's socket; nobody will read its handshake's answer (or the end's error)."""
    if not protocol.first.done():
        protocol.first.cancel()
    if protocol.transport is not None:
        protocol.transport.abort()
