"""A TCP proxy that injects network faults between a client and a server.

The proxy runs a ``selectors`` loop in its own thread, so it keeps (or stops)
forwarding whatever the test's event loop does, including when a test blocks
that loop on purpose. Control calls (``pause``, ``cut``, ...) run inside the
proxy thread and return once they have taken effect: after ``pause()`` returns
no further byte is forwarded. When one side of a connection closes, the rest of
its data is delivered and then both sides are closed (no half-close).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import queue
import selectors
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Self, TypeVar, cast

__all__ = ("FaultProxy",)

logger = logging.getLogger(__name__)

_CHUNK = 65536
_BUFFER_LIMIT = 1 << 20  # stop reading a side while this much waits to be written
_CALL_TIMEOUT = 5.0
_T = TypeVar("_T")


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


class FaultProxy:
    """Forward ``127.0.0.1:<port>`` to ``target_host:target_port``, with faults on demand.

    ``with FaultProxy(*zk.address) as proxy:`` then connect clients to
    ``proxy.connect_string``. Faults: ``pause``/``resume`` (silence, sockets kept
    open, like a frozen host), ``cut`` (close current connections), ``reject_new``,
    ``delay`` and ``retarget``. All methods are thread-safe.
    """

    def __init__(self, target_host: str, target_port: int, *, port: int = 0) -> None:
        self._target = (target_host, target_port)
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", port))
        self._listener.listen(128)
        self._port: int = self._listener.getsockname()[1]
        self._listener.setblocking(False)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._interest: dict[socket.socket, int] = {}
        self._links: list[_Link] = []
        self._calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._closed = False
        self._paused = False
        self._rejecting = False
        self._delay = 0.0
        self.accepted = 0  # connections accepted and forwarded, over the proxy's life

    # -- public API --------------------------------------------------------------------

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
    def target(self) -> tuple[str, int]:
        return self._target

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def connections(self) -> int:
        """How many proxied connections are open now."""
        return self._call(lambda: len(self._links))

    def start(self) -> Self:
        """Start forwarding in a background thread (idempotent)."""
        if self._closed:
            raise RuntimeError("a stopped FaultProxy cannot be started again")
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name=f"FaultProxy:{self.port}", daemon=True
            )
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Close every connection and the listener, and join the thread (bounded)."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            self._stopping = True
            self._wake()
            self._thread.join(timeout)
            if self._thread.is_alive():
                logger.warning("FaultProxy thread did not stop within %ss", timeout)
        else:
            self._close_all()

    close = stop

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

    def _call(self, fn: Callable[[], _T]) -> _T:
        """Run ``fn`` in the proxy thread between two loop turns; wait for its result."""
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
            raise TimeoutError("FaultProxy thread did not answer")
        if errors:
            raise errors[0]
        return result[0]

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    # -- the proxy thread ----------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stopping:
                while True:
                    try:
                        self._calls.get_nowait()()
                    except queue.Empty:
                        break
                now = time.monotonic()
                self._update_interest(now)
                for key, mask in self._sel.select(self._next_timeout(now)):
                    self._dispatch(cast(socket.socket, key.fileobj), mask)
                self._pump(time.monotonic())
        except Exception:
            logger.exception("FaultProxy %d failed", self.port)
        finally:
            self._close_all()
            # Let callers blocked in _call go on (the thread is gone, they run inline).
            while True:
                try:
                    self._calls.get_nowait()()
                except queue.Empty:
                    break

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
        if sock is self._wake_r:
            with contextlib.suppress(BlockingIOError):
                sock.recv(4096)
        elif sock is self._listener:
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
        try:
            client, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError):
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

    def _close_all(self) -> None:
        for link in self._links:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._unregister(link)
            link.close()
        self._links = []
        with contextlib.suppress(Exception):
            self._sel.close()
        self._listener.close()
        self._wake_r.close()
        self._wake_w.close()

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
        state = "paused" if self._paused else "stopped" if self._closed else "forwarding"
        host, port = self._target
        return f"<FaultProxy {self.connect_string} -> {host}:{port} {state}>"
