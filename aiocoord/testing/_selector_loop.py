"""The loop behind the test servers: a loopback listener served by ``selectors`` in a thread.

`FakeZooKeeper`, `FaultProxy` and the misbehaving listeners each run one, so
they behave the same whatever the test's event loop does, even when a bug (or
the test, on purpose) blocks that loop.  Calls from other threads that touch
the loop's state go through `_call`, which runs them between two loop turns.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import selectors
import socket
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Self, TypeVar, cast

__all__ = ("SelectorServer",)

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
_CALL_TIMEOUT = 5.0


class SelectorServer:
    """A listening socket on ``127.0.0.1:port`` (0: a free one) and the thread serving it.

    Subclasses write `_turn` (one loop turn: `_select`, then act on what is
    ready) and `_close_connections`; the listener and the wake-up socket are
    registered for reading when the thread starts.
    """

    def __init__(self, *, port: int = 0) -> None:
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", port))
        self._listener.listen(128)
        self._listener.setblocking(False)
        self._port: int = self._listener.getsockname()[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._closed = False

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self._port)

    @property
    def port(self) -> int:
        return self._port

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self._port}"

    def start(self) -> Self:
        """Start serving in a background thread (idempotent); does not block."""
        if self._closed:
            raise RuntimeError(f"a stopped {type(self).__name__} cannot be started again")
        if self._thread is None:
            self._sel.register(self._listener, selectors.EVENT_READ)
            self._sel.register(self._wake_r, selectors.EVENT_READ)
            self._thread = threading.Thread(
                target=self._run, name=f"{type(self).__name__}:{self._port}", daemon=True
            )
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Close every connection and the listener; blocks joining the thread (bounded)."""
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
            logger.warning("%s thread did not stop within %ss", type(self).__name__, timeout)

    close = stop

    # --- calls into the loop thread ---------------------------------------------------------

    def _call(self, fn: Callable[[], _T]) -> _T:
        """Run `fn` in the loop thread between two loop turns; blocks for its result."""
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
            raise TimeoutError(f"{type(self).__name__} thread did not answer")
        if errors:
            raise errors[0]
        return result[0]

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    # --- the loop thread --------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stopping:
                self._run_calls()
                self._turn()
        except Exception:
            logger.exception("%s %d failed", type(self).__name__, self._port)
        finally:
            self._close_all()
            self._run_calls()  # callers blocked in _call go on (they run inline from now)

    def _run_calls(self) -> None:
        while True:
            try:
                self._calls.get_nowait()()
            except queue.Empty:
                return

    def _turn(self) -> None:
        raise NotImplementedError

    def _select(self, timeout: float | None = None) -> list[tuple[socket.socket, int]]:
        """Block until a socket is ready (or `timeout`); a wake-up is drained, not returned."""
        ready = []
        for key, mask in self._sel.select(timeout):
            sock = cast(socket.socket, key.fileobj)
            if sock is self._wake_r:
                with contextlib.suppress(BlockingIOError):
                    sock.recv(4096)
            else:
                ready.append((sock, mask))
        return ready

    def _accept_socket(self) -> socket.socket | None:
        """The next connection waiting on the listener, or None if there is none."""
        try:
            return self._listener.accept()[0]
        except (BlockingIOError, InterruptedError):
            return None

    def _close_connections(self) -> None:
        raise NotImplementedError

    def _close_all(self) -> None:
        self._close_connections()
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
