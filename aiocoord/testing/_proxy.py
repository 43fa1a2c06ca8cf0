"""A TCP proxy that injects network faults between a client and a server.

The proxy runs the ``selectors`` loop of `_selector_loop` in its own thread,
so it keeps (or stops) forwarding whatever the test's event loop does,
including when a test blocks that loop on purpose. Control calls (``pause``, ``cut``, ...) run inside the
proxy thread and return once they have taken effect: after ``pause()`` returns
no further byte is forwarded. When one side of a connection closes, the rest of
its data is delivered and then both sides are closed (no half-close).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import selectors
import socket
import struct
import time
from collections import deque

from ._selector_loop import SelectorServer

__all__ = ("FaultProxy",)

logger = logging.getLogger(__name__)

_CHUNK = 65536
_BUFFER_LIMIT = 1 << 20  # stop reading a side while this much waits to be written


class _Direction:
    """Bytes read from ``src`` waiting (each until its due time) to be sent to ``dst``."""

    def __init__(self, src: socket.socket, dst: socket.socket) -> None:
        self.src = src
        self.dst = dst
        self.chunks: deque[tuple[float, bytes]] = deque()
        self.size = 0
        self.eof = False

    def due(self, now: float) -> bool:
        return bool(self.chunks) and self.chunks[0][0] <= now


class _Link:
    """One proxied connection: the accepted client socket and its upstream socket."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.connected = False  # upstream connect still in progress until True
        self.up = _Direction(client, upstream)
        self.down = _Direction(upstream, client)

    def close(self, reset: bool = False) -> None:
        for sock in (self.client, self.upstream):
            if reset:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()


class FaultProxy(SelectorServer):
    """Forward ``127.0.0.1:<port>`` to ``target_host:target_port``, with faults on demand.

    ``with FaultProxy(*zk.address) as proxy:`` then connect clients to
    ``proxy.connect_string``. Faults: ``pause``/``resume`` (silence, sockets kept
    open, like a frozen host), ``cut`` (close current connections), ``reject_new``,
    ``delay`` and ``retarget``. All methods are thread-safe.
    """

    def __init__(self, target_host: str, target_port: int, *, port: int = 0) -> None:
        super().__init__(port=port)
        self._target = (target_host, target_port)
        # What the selector watches each socket for; `start` registers these two.
        self._interest = {self._listener: selectors.EVENT_READ, self._wake_r: selectors.EVENT_READ}
        self._links: list[_Link] = []
        self._paused = False
        self._rejecting = False
        self._delay = 0.0
        self.accepted = 0  # connections accepted and forwarded, over the proxy's life

    # -- public API --------------------------------------------------------------------

    @property
    def target(self) -> tuple[str, int]:
        return self._target

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def connections(self) -> int:
        """How many proxied connections are open now."""
        return self._call(lambda: len(self._links))

    def pause(self) -> None:
        """Stop forwarding in both directions and stop accepting; keep sockets open.

        Connections attempted meanwhile wait in the listen backlog, as they would
        on a frozen host, and are forwarded after ``resume``.
        """
        self._set(_paused=True)

    def resume(self) -> None:
        """Forward again everything that waited while paused."""
        self._set(_paused=False)

    def cut(self, *, reset: bool = False) -> int:
        """Close every current connection (RST with ``reset``); returns how many.

        New connections are still accepted and forwarded.
        """

        def cut_all() -> int:
            links, self._links = self._links, []
            for link in links:
                self._unregister(link)
                link.close(reset)
            return len(links)

        count = self._call(cut_all)
        logger.info("FaultProxy %d cut %d connection(s)", self.port, count)
        return count

    def reject_new(self, reject: bool = True) -> None:
        """Close new connections as soon as they are accepted (until called with False)."""
        self._set(_rejecting=reject)

    def delay(self, seconds: float) -> None:
        """Hold data read from now on for ``seconds`` before forwarding it (0 to stop)."""
        if not 0 <= seconds < math.inf:  # NaN too: it would hold data forever
            raise ValueError(f"delay must be a finite number of seconds >= 0: {seconds}")
        self._set(_delay=float(seconds))

    def retarget(self, host: str, port: int) -> None:
        """Send connections accepted from now on to ``host:port``; current ones stay."""
        self._set(_target=(host, port))

    # -- calls into the proxy thread ---------------------------------------------------

    def _set(self, **state: object) -> None:
        """Change fault settings between two loop turns of the proxy thread."""

        def apply() -> None:
            for name, value in state.items():
                setattr(self, name, value)

        self._call(apply)
        logger.debug("FaultProxy %d: %s", self.port, state)

    # -- the proxy thread ----------------------------------------------------------------

    def _turn(self) -> None:
        now = time.monotonic()
        self._update_interest(now)
        for sock, mask in self._select(self._next_timeout(now)):
            self._dispatch(sock, mask)
        self._pump(time.monotonic())

    def _next_timeout(self, now: float) -> float | None:
        if self._paused:
            return None
        dues = [d.chunks[0][0] for link in self._links for d in (link.up, link.down) if d.chunks]
        return max(0.0, min(dues) - now) if dues else None

    def _want(self, sock: socket.socket, events: int) -> None:
        current = self._interest.get(sock, 0)
        if events == current:
            return
        if not events:
            self._sel.unregister(sock)
            del self._interest[sock]
        elif not current:
            self._sel.register(sock, events)
            self._interest[sock] = events
        else:
            self._sel.modify(sock, events)
            self._interest[sock] = events

    def _unregister(self, link: _Link) -> None:
        self._want(link.client, 0)
        self._want(link.upstream, 0)

    def _update_interest(self, now: float) -> None:
        self._want(self._wake_r, selectors.EVENT_READ)
        self._want(self._listener, 0 if self._paused else selectors.EVENT_READ)
        for link in self._links:
            if self._paused:
                self._unregister(link)
                continue
            if not link.connected:
                self._want(link.client, 0)
                self._want(link.upstream, selectors.EVENT_WRITE)
                continue
            for d, other in ((link.up, link.down), (link.down, link.up)):
                events = 0
                if not d.eof and d.size < _BUFFER_LIMIT:
                    events |= selectors.EVENT_READ
                if other.due(now):
                    events |= selectors.EVENT_WRITE
                self._want(d.src, events)

    def _dispatch(self, sock: socket.socket, mask: int) -> None:
        if sock is self._listener:
            self._accept()
        else:
            link = next((k for k in self._links if sock in (k.client, k.upstream)), None)
            if link is None:
                return
            if not link.connected:
                self._finish_connect(link)
            elif mask & selectors.EVENT_READ:
                self._read(link, link.up if sock is link.client else link.down)

    def _accept(self) -> None:
        client = self._accept_socket()
        if client is None:
            return
        if self._rejecting:
            client.close()
            logger.debug("FaultProxy %d rejected a connection", self.port)
            return
        client.setblocking(False)
        upstream = socket.socket()
        upstream.setblocking(False)
        err = upstream.connect_ex(self._target)
        if err not in (0, errno.EINPROGRESS):
            client.close()
            upstream.close()
            return
        self._links.append(_Link(client, upstream))
        self.accepted += 1

    def _finish_connect(self, link: _Link) -> None:
        err = link.upstream.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            logger.debug("FaultProxy %d: upstream connect failed: %s", self.port, err)
            self._drop(link)
        else:
            link.connected = True

    def _read(self, link: _Link, d: _Direction) -> None:
        try:
            data = d.src.recv(_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(link)
            return
        if not data:
            d.eof = True
            return
        d.chunks.append((time.monotonic() + self._delay, data))
        d.size += len(data)

    def _pump(self, now: float) -> None:
        """Send every due chunk that the sockets take; drop links that are done."""
        if self._paused:
            return
        for link in list(self._links):
            if not link.connected:
                continue
            for d in (link.up, link.down):
                while d.due(now):
                    _, data = d.chunks[0]
                    try:
                        sent = d.dst.send(data)
                    except (BlockingIOError, InterruptedError):
                        break
                    except OSError:
                        self._drop(link)
                        break
                    d.size -= sent
                    if sent < len(data):
                        d.chunks[0] = (d.chunks[0][0], data[sent:])
                        break
                    d.chunks.popleft()
                if link not in self._links:
                    break
            else:
                if (link.up.eof and not link.up.chunks) or (link.down.eof and not link.down.chunks):
                    self._drop(link)

    def _drop(self, link: _Link) -> None:
        if link in self._links:
            self._links.remove(link)
            self._unregister(link)
            link.close()

    def _close_connections(self) -> None:
        for link in self._links:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._unregister(link)
            link.close()
        self._links = []

    def __repr__(self) -> str:
        state = "paused" if self._paused else "stopped" if self._closed else "forwarding"
        host, port = self._target
        return f"<FaultProxy {self.connect_string} -> {host}:{port} {state}>"
