"""Fake servers that misbehave: one never answers, one answers with junk.

``SilentListener`` is a server stuck before its database loads (ZooKeeper 3.8.0
right after a restart): connections are accepted, requests read and dropped,
nothing is ever sent. ``GarbageListener`` is the wrong service on the port: it
greets every connection with bytes that are no ZooKeeper frame (by default a
negative frame length) and keeps reading. Both run the ``selectors`` loop of
`_selector_loop` in a daemon thread.
"""

from __future__ import annotations

import contextlib
import selectors
import socket

from ._selector_loop import SelectorServer

__all__ = ("GarbageListener", "SilentListener")

# 0xdeadbeef as a signed big-endian length is negative: no valid frame starts so.
DEFAULT_GARBAGE = b"\xde\xad\xbe\xef" * 8


class _Listener(SelectorServer):
    """Accept loopback connections in a thread; read and drop what clients send."""

    greeting = b""

    def __init__(self, *, port: int = 0) -> None:
        super().__init__(port=port)
        self._conns: list[socket.socket] = []
        self.accepted = 0  # connections accepted so far
        self.received = 0  # bytes read from clients so far

    @property
    def connections(self) -> int:
        """How many client connections are open now."""
        return len(self._conns)

    def _turn(self) -> None:
        for sock, _ in self._select():
            if sock is self._listener:
                self._accept()
            else:
                self._read(sock)

    def _accept(self) -> None:
        conn = self._accept_socket()
        if conn is None:
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

    def _close_connections(self) -> None:
        for conn in self._conns:
            conn.close()
        self._conns = []

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
