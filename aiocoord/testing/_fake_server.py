"""`FakeZooKeeper`: a scripted ZooKeeper server, to test a client against a server that misbehaves.

It speaks enough of the protocol to serve aiocoord (or any ZooKeeper client):
the handshake, sessions kept across connections (expired only on demand),
and every request aiocoord sends, answered from an in-memory tree as
ZooKeeper 3.8 answers (`_fake_tree`).  A `script` sees each packet a client
sends together with the reply the server would give, and may send something
else instead: other bytes (mutated, truncated, oversized, garbage, an extra
notification), nothing, or a hang-up.  Like the other servers here it runs a
``selectors`` loop in a daemon thread, so it behaves the same whatever the
test's event loop does, even when a bug blocks that loop.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import selectors
import socket
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Self, TypeVar, cast

from . import _jute
from ._fake_script import Answer, FakeRequest, Script
from ._fake_tree import FakeTree
from ._fake_watches import Event

__all__ = ("Answer", "FakeRequest", "FakeZooKeeper", "Script")

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
_CALL_TIMEOUT = 5.0
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


class FakeZooKeeper:
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
        self.script = script
        self._timeout_ms = None if session_timeout is None else int(session_timeout * 1000)
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", port))
        self._listener.listen(128)
        self._listener.setblocking(False)
        self._port: int = self._listener.getsockname()[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._clients: dict[socket.socket, _Client] = {}
        self._calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._closed = False
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
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self._port)

    @property
    def port(self) -> int:
        return self._port

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self._port}"

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

    def start(self) -> Self:
        """Start serving in a background thread (idempotent)."""
        if self._closed:
            raise RuntimeError("a stopped FakeZooKeeper cannot be started again")
        if self._thread is None:
            self._sel.register(self._listener, selectors.EVENT_READ)
            self._sel.register(self._wake_r, selectors.EVENT_READ)
            self._thread = threading.Thread(
                target=self._run, name=f"FakeZooKeeper:{self._port}", daemon=True
            )
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Close every connection and the listener; join the thread (bounded)."""
        if self._closed:
            return
        self._closed = True
        if self._thread is None:
            self._close_all()
            return
        self._stopping = True
        self._wake()
        self._thread.join(timeout)
        if self._thread.is_alive():
            logger.warning("FakeZooKeeper thread did not stop within %ss", timeout)

    close = stop

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

    # --- calls into the server thread --------------------------------------------------------

    def _call(self, fn: Callable[[], _T]) -> _T:
        """Run `fn` in the server thread between two loop turns; wait for its result."""
        if self._thread is None or not self._thread.is_alive():
            return fn()  # not started (or stopped): no concurrent access
        done = threading.Event()
        result: list[_T] = []
        errors: list[BaseException] = []

        def run() -> None:
            try:
                result.append(fn())
            except BaseException as exc:  # re-raised in the caller's thread
                errors.append(exc)
            finally:
                done.set()

        self._calls.put(run)
        self._wake()
        if not done.wait(_CALL_TIMEOUT):
            raise TimeoutError("FakeZooKeeper thread did not answer")
        if errors:
            raise errors[0]
        return result[0]

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    # --- the server thread -------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stopping:
                self._run_calls()
                for key, mask in self._sel.select():
                    sock = cast(socket.socket, key.fileobj)
                    if sock is self._wake_r:
                        with contextlib.suppress(BlockingIOError):
                            sock.recv(4096)
                    elif sock is self._listener:
                        self._accept()
                    elif sock in self._clients:
                        client = self._clients[sock]
                        if mask & selectors.EVENT_WRITE:
                            self._flush(client)
                        if mask & selectors.EVENT_READ and sock in self._clients:
                            self._read(client)
        except Exception:
            logger.exception("FakeZooKeeper %d failed", self._port)
        finally:
            self._close_all()
            self._run_calls()  # callers blocked in _call go on (they run inline from now)

    def _run_calls(self) -> None:
        while True:
            try:
                self._calls.get_nowait()()
            except queue.Empty:
                return

    def _accept(self) -> None:
        try:
            sock, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError):
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

    def _close_all(self) -> None:
        for client in list(self._clients.values()):
            self._drop(client)
        with contextlib.suppress(Exception):
            self._sel.close()
        for sock in (self._listener, self._wake_r, self._wake_w):
            sock.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "stopped" if self._closed else "serving"
        return f"<FakeZooKeeper {self.connect_string} {state} sessions={len(self._sessions)}>"
