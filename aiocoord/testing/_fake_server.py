"""`FakeZooKeeper`: a scripted ZooKeeper server, to test a client against a server that misbehaves.

It speaks enough of the protocol to serve aiocoord (or any ZooKeeper client):
the handshake, sessions kept across connections (expired only on demand),
and every request aiocoord sends, answered from an in-memory tree as
ZooKeeper 3.8 answers (`_fake_tree`).  A `script` sees each packet a client
sends together with the reply the server would give, and may send something
else instead: other bytes (mutated, truncated, oversized, garbage, an extra
notification), nothing, or a hang-up.  Like the other servers here it runs the
``selectors`` loop of `_selector_loop` in a daemon thread.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import socket

from . import _jute
from ._fake_script import Answer, FakeRequest, Script
from ._fake_tree import FakeTree
from ._fake_watches import Event
from ._selector_loop import SelectorServer

__all__ = ("Answer", "FakeRequest", "FakeZooKeeper", "Script")

logger = logging.getLogger(__name__)

_MAX_REQUEST = 1 << 21  # a client frame longer than this is a broken client: hang up
_CLOSE_SESSION = -11
_SYNC_CONNECTED = 3  # a notification's keeper state


class _Client:
    def __init__(self, sock: socket.socket, number: int) -> None:
        self.sock = sock
        self.number = number
        self.inbox = bytearray()
        self.outbox = bytearray()
        self.session = 0
        self.handshaken = False
        self.closing = False  # hang up once the outbox is written


class FakeZooKeeper(SelectorServer):
    """A scripted ZooKeeper server on ``127.0.0.1``; see the module docstring.

    ``with FakeZooKeeper(script) as zk:`` then connect a client to
    ``zk.connect_string``.  `script` (settable at any time, None: behave) is
    called in the server thread for every packet with a `FakeRequest` and
    returns None (send the reply), bytes or an `Answer`.  `notify`, `send`,
    `hang_up` and `expire` act on live connections; `handshakes` and
    `requests` count what clients sent.  All methods are thread-safe.
    Sessions never expire by themselves; ACLs are stored but not enforced.
    """

    frame = staticmethod(_jute.frame)
    reply_packet = staticmethod(_jute.reply_packet)
    notification_packet = staticmethod(_jute.notification_packet)
    connect_packet = staticmethod(_jute.connect_packet)

    def __init__(
        self, script: Script | None = None, *, port: int = 0, session_timeout: float | None = None
    ) -> None:
        super().__init__(port=port)
        self.script = script
        self._timeout_ms = None if session_timeout is None else int(session_timeout * 1000)
        self._clients: dict[socket.socket, _Client] = {}
        self._tree = FakeTree()
        self._sessions: dict[int, bytes] = {}  # session id: password
        self._next_session = 1 << 56
        self.accepted = 0
        """Connections accepted so far."""
        self.handshakes = 0
        """ConnectRequests answered so far."""
        self.requests = 0
        """Requests (pings included) answered so far."""

    # --- public API --------------------------------------------------------------------------

    @property
    def sessions(self) -> list[int]:
        """Ids of the sessions the server keeps."""
        return self._call(lambda: sorted(self._sessions))

    @property
    def connections(self) -> int:
        """How many client connections are open now."""
        return self._call(lambda: len(self._clients))

    def data(self, path: str) -> bytes | None:
        """The data of the node at server path `path`, or None if there is none."""
        return self._call(lambda: self._tree.data(path))

    def notify(self, event_type: int, path: str, *, state: int = _SYNC_CONNECTED) -> None:
        """Send a watch notification for server path `path` on every connection with a session."""
        packet = _jute.frame(_jute.notification_packet(event_type, state, path))
        self._call(lambda: self._send_all(packet, sessions_only=True))

    def send(self, data: bytes) -> None:
        """Write `data` as is on every open connection (handshaken or not)."""
        self._call(lambda: self._send_all(data, sessions_only=False))

    def hang_up(self) -> int:
        """Close every client connection now; returns how many.  Sessions are kept."""

        def hang_up_all() -> int:
            clients = list(self._clients.values())
            for client in clients:
                self._drop(client)
            return len(clients)

        return self._call(hang_up_all)

    def expire(self, session_id: int | None = None) -> list[int]:
        """Expire one session (all with None): its ephemerals go, its connections close."""

        def expire_now() -> list[int]:
            ids = sorted(self._sessions) if session_id is None else [session_id]
            for sid in ids:
                if self._sessions.pop(sid, None) is not None:
                    self._deliver(self._tree.close_session(sid))
                for client in [c for c in self._clients.values() if c.session == sid]:
                    self._drop(client)
            return ids

        return self._call(expire_now)

    # --- the server thread -------------------------------------------------------------------

    def _turn(self) -> None:
        for sock, mask in self._select():
            if sock is self._listener:
                self._accept()
            elif sock in self._clients:
                client = self._clients[sock]
                if mask & selectors.EVENT_WRITE:
                    self._flush(client)
                if mask & selectors.EVENT_READ and sock in self._clients:
                    self._read(client)

    def _accept(self) -> None:
        sock = self._accept_socket()
        if sock is None:
            return
        sock.setblocking(False)
        self.accepted += 1
        self._clients[sock] = _Client(sock, self.accepted)
        self._sel.register(sock, selectors.EVENT_READ)

    def _read(self, client: _Client) -> None:
        try:
            data = client.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(client)
            return
        inbox = client.inbox
        inbox += data
        while len(inbox) >= 4 and client.sock in self._clients and not client.closing:
            size = int.from_bytes(inbox[:4], "big", signed=True)
            if size < 0 or size > _MAX_REQUEST:
                logger.warning("FakeZooKeeper %d: client frame length %d", self._port, size)
                self._drop(client)
                return
            if len(inbox) < 4 + size:
                break
            packet = bytes(inbox[4 : 4 + size])
            del inbox[: 4 + size]
            try:
                self._handle(client, packet)
            except Exception as exc:  # a request that does not decode, or a failing script
                logger.warning("FakeZooKeeper %d: hanging up: %r", self._port, exc)
                self._drop(client)
                return

    def _handle(self, client: _Client, packet: bytes) -> None:
        if not client.handshaken:
            client.handshaken = True
            self.handshakes += 1
            reply = self._handshake(client, packet)
            self._answer(
                client, FakeRequest(client.number, client.session, None, None, packet, reply)
            )
            return
        reader = _jute.Reader(packet)
        xid, opcode = reader.int32(), reader.int32()
        body = packet[8:]
        err, reply_body, events = self._tree.answer(client.session, opcode, body)
        self.requests += 1
        self._deliver(events)  # before the reply, as ZooKeeper orders them
        reply = _jute.reply_packet(xid, self._tree.zxid, err, reply_body)
        self._answer(client, FakeRequest(client.number, client.session, xid, opcode, body, reply))
        if opcode == _CLOSE_SESSION:
            self._sessions.pop(client.session, None)
            client.closing = True

    def _handshake(self, client: _Client, packet: bytes) -> bytes:
        reader = _jute.Reader(packet)
        reader.int32()  # protocol version
        reader.int64()  # last zxid seen
        requested, session_id, password = reader.int32(), reader.int64(), reader.buffer() or b""
        timeout = self._timeout_ms if self._timeout_ms is not None else max(requested, 1)
        if session_id == 0:
            session_id, self._next_session = self._next_session, self._next_session + 1
            password = os.urandom(16)
            self._sessions[session_id] = password
        elif self._sessions.get(session_id) != password:
            return self.connect_packet(0, 0, b"\x00" * 16)  # expired (or never was)
        client.session = session_id
        return self.connect_packet(timeout, session_id, password)

    def _answer(self, client: _Client, request: FakeRequest) -> None:
        script = self.script
        answer = None if script is None else script(request)
        if answer is None:
            answer = Answer(_jute.frame(request.reply))
        elif isinstance(answer, bytes | bytearray):
            answer = Answer(bytes(answer))
        self._write(client, answer.data)
        if answer.hang_up:
            client.closing = True
            self._flush(client)

    def _deliver(self, events: list[Event]) -> None:
        for session, event_type, path in events:
            packet = _jute.frame(_jute.notification_packet(event_type, _SYNC_CONNECTED, path))
            for client in list(self._clients.values()):
                if client.session == session and client.handshaken and not client.closing:
                    self._write(client, packet)

    def _send_all(self, data: bytes, *, sessions_only: bool) -> None:
        for client in list(self._clients.values()):
            if not client.closing and (client.session or not sessions_only):
                self._write(client, data)

    def _write(self, client: _Client, data: bytes) -> None:
        if data:
            client.outbox += data
            self._flush(client)

    def _flush(self, client: _Client) -> None:
        if client.sock not in self._clients:
            return
        try:
            while client.outbox:
                sent = client.sock.send(client.outbox)
                del client.outbox[:sent]
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self._drop(client)
            return
        if client.closing and not client.outbox:
            self._drop(client)
            return
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if client.outbox else 0)
        self._sel.modify(client.sock, events)

    def _drop(self, client: _Client) -> None:
        if self._clients.pop(client.sock, None) is None:
            return
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(client.sock)
        client.sock.close()

    def _close_connections(self) -> None:
        for client in list(self._clients.values()):
            self._drop(client)

    def __repr__(self) -> str:
        state = "stopped" if self._closed else "serving"
        return f"<FakeZooKeeper {self.connect_string} {state} sessions={len(self._sessions)}>"
