"""Fake servers that misbehave: one never answers, one answers with junk.

``SilentListener`` is a server stuck before its database loads (ZooKeeper 3.8.0
right after a restart): connections are accepted, requests read and dropped,
nothing is ever sent. ``GarbageListener`` is the wrong service on the port: it
greets every connection with bytes that are no ZooKeeper frame (by default a
negative frame length) and keeps reading. Both run a ``selectors`` loop in a
daemon thread, so they behave the same whatever the test's event loop does.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
from types import TracebackType
from typing import Self, cast

__all__ = ("GarbageListener", "SilentListener")

logger = logging.getLogger(__name__)

# 0xdeadbeef as a signed big-endian length is negative: no valid frame starts so.
DEFAULT_GARBAGE = b"\xde\xad\xbe\xef" * 8


class _Listener:
    """Accept loopback connections in a thread; read and drop what clients send."""

    greeting = b""

    def __init__(self, *, port: int = 0) -> None:
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))
        self._sock.listen(128)
        self._port: int = self._sock.getsockname()[1]
        self._sock.setblocking(False)
        self._wake_r, self._wake_w = socket.socketpair()
        self._sel = selectors.DefaultSelector()
        self._conns: list[socket.socket] = []
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._closed = False
        self.accepted = 0  # connections accepted so far
        self.received = 0  # bytes read from clients so far

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    @property
    def port(self) -> int:
        return self._port

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def connections(self) -> int:
        """How many client connections are open now."""
        return len(self._conns)

    def start(self) -> Self:
        """Start accepting in a background thread (idempotent)."""
        if self._closed:
            raise RuntimeError(f"a stopped {type(self).__name__} cannot be started again")
        if self._thread is None:
            self._sel.register(self._sock, selectors.EVENT_READ)
            self._sel.register(self._wake_r, selectors.EVENT_READ)
            self._thread = threading.Thread(
                target=self._run, name=f"{type(self).__name__}:{self.port}", daemon=True
            )
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Close every connection and the listening socket; join the thread (bounded)."""
        if self._closed:
            return
        self._closed = True
        if self._thread is None:
            self._close_all()
            return
        self._stopping = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._thread.join(timeout)
        if self._thread.is_alive():
            logger.warning("%s thread did not stop within %ss", type(self).__name__, timeout)

    close = stop

    def _run(self) -> None:
        try:
            while not self._stopping:
                for key, _ in self._sel.select():
                    sock = cast(socket.socket, key.fileobj)
                    if sock is self._wake_r:
                        continue
                    if sock is self._sock:
                        self._accept()
                    else:
                        self._read(sock)
        except Exception:
            logger.exception("%s failed", type(self).__name__)
        finally:
            self._close_all()

    def _accept(self) -> None:
        try:
            conn, _ = self._sock.accept()
        except (BlockingIOError, InterruptedError):
            return
        self.accepted += 1
        if self.greeting:
            with contextlib.suppress(OSError):
                conn.sendall(self.greeting)  # small: fits the socket buffer at once
        conn.setblocking(False)
        self._sel.register(conn, selectors.EVENT_READ)
        self._conns.append(conn)

    def _read(self, conn: socket.socket) -> None:
        try:
            data = conn.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if data:
            self.received += len(data)
            return
        self._sel.unregister(conn)
        self._conns.remove(conn)
        conn.close()

    def _close_all(self) -> None:
        for conn in self._conns:
            conn.close()
        self._conns = []
        with contextlib.suppress(Exception):
            self._sel.close()
        for sock in (self._sock, self._wake_r, self._wake_w):
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
        return f"<{type(self).__name__} {self.connect_string} accepted={self.accepted}>"


class SilentListener(_Listener):
    """Accepts TCP connections and never answers (a server stuck while starting).

    ``with SilentListener() as silent:`` then point a client at
    ``silent.connect_string``: its connect succeeds and its handshake hangs, which
    is what a per-attempt deadline in the client must survive.
    """


class GarbageListener(_Listener):
    """Answers every connection with junk bytes, then keeps reading.

    ``payload`` defaults to bytes whose first four, read as a ZooKeeper frame
    length, are negative; a client must treat that as a protocol error.
    """

    def __init__(self, payload: bytes = DEFAULT_GARBAGE, *, port: int = 0) -> None:
        super().__init__(port=port)
        self.greeting = payload
