"""`Loop`: the one event loop of a blocking coordinator, in a thread of its own.

It runs anyio's blocking portal (``anyio.from_thread.start_blocking_portal``)
on asyncio, with uvloop if asked for.  Every call of the façade goes through
`call` (run a function or coroutine function in the loop, wait for its
result) or `spawn` (start a task there, for a right held across a ``with``).
Both first refuse a caller that runs an event loop itself
(`BlockingInEventLoopError`): waiting in that thread would stop its loop, and
in the loop thread itself it would never end.  After `close` they raise
`CoordinatorClosedError`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import CancelledError, Future, wait
from contextlib import AbstractContextManager, suppress
from typing import Any, Literal, Protocol, TypeVar, overload

import sniffio
from anyio.from_thread import BlockingPortal, start_blocking_portal

from ..errors import BlockingInEventLoopError, CoordinatorClosedError

__all__ = (
    "Loop",
    "LoopKind",
    "Service",
    "Stoppable",
    "refuse_inside_event_loop",
    "wait_done",
    "wait_event",
)

T = TypeVar("T")

LoopKind = Literal["asyncio", "uvloop"]


class Stoppable(Protocol):
    """A right held for a thread (`Holding`): told to stop, then waited for."""

    def stop(self) -> None: ...

    def wait(self, timeout: float | None = None) -> bool: ...


class Service(Protocol):
    """An async part with ``aclose()`` (a latch, a cache, a worker, the coordinator)."""

    async def aclose(self) -> None: ...


# How often a wait in the main thread wakes up to let a pending Ctrl-C (KeyboardInterrupt)
# through: a signal's handler runs only between bytecodes, never inside a lock's wait.
_POLL = 0.1

# How long closing waits for each of anyio's worker threads of the loop to end (they are
# idle by then, told to stop).
_WORKER_JOIN = 5.0


def wait_done(future: Future[Any]) -> None:
    """Block until `future` is done; in the main thread, interruptible by Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        wait([future])
        return
    while not future.done():
        wait([future], timeout=_POLL)


def wait_event(event: threading.Event) -> None:
    """Block until `event` is set; in the main thread, interruptible by Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        event.wait()
        return
    while not event.wait(_POLL):
        pass


def _running_event_loop() -> bool:
    """Whether this thread runs an event loop right now (asyncio, uvloop, or trio)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        return True
    try:
        sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return False
    return True


def refuse_inside_event_loop(what: str) -> None:
    """Raise `BlockingInEventLoopError` naming `what` if this thread runs an event loop."""
    if _running_event_loop():
        raise BlockingInEventLoopError(
            f"aiocoord.blocking: {what} blocks its thread, and this thread runs an event loop "
            "(async code, or a callback of one): use the async API there "
            "(`async with aiocoord.connect(...)` and the recipes' `async with`), "
            "or call it from another thread (`await anyio.to_thread.run_sync(...)`)"
        )


class Loop:
    """An event loop in a background thread, and the portal into it; see the module docstring."""

    def __init__(self, loop: LoopKind = "asyncio", *, name: str = "aiocoord-blocking") -> None:
        refuse_inside_event_loop("connect()")
        if loop not in ("asyncio", "uvloop"):
            raise ValueError(f"loop must be 'asyncio' or 'uvloop', not {loop!r}")
        self._cm: AbstractContextManager[BlockingPortal] = start_blocking_portal(
            "asyncio", {"use_uvloop": loop == "uvloop"}, name=name
        )
        self._portal: BlockingPortal | None = self._cm.__enter__()
        self._lock = threading.Lock()
        self._closed = False
        # What the threads hold or run through this loop, for `close` to end first.
        self._holdings: set[Stoppable] = set()
        self._services: dict[int, Service] = {}
        self._thread: threading.Thread = self.call(threading.current_thread, what="starting")
        self._event_loop = self.call(asyncio.get_running_loop, what="starting")

    # --- what runs here ----------------------------------------------------------------------

    def adopt(self, holding: Stoppable) -> None:
        """Track a holding until `disown`: closing stops it first."""
        with self._lock:
            self._holdings.add(holding)

    def disown(self, holding: Stoppable) -> None:
        with self._lock:
            self._holdings.discard(holding)

    def add_service(self, service: Service) -> None:
        """Track a started async service until `remove_service`: closing closes it first."""
        with self._lock:
            self._services[id(service)] = service

    def remove_service(self, service: Service) -> None:
        with self._lock:
            self._services.pop(id(service), None)

    def open_parts(self) -> tuple[list[Stoppable], list[Service]]:
        """The holdings and services still open (newest service last)."""
        with self._lock:
            return list(self._holdings), list(self._services.values())

    @property
    def thread(self) -> threading.Thread:
        """The thread the event loop runs in."""
        return self._thread

    @property
    def closed(self) -> bool:
        return self._closed

    def _open_portal(self, what: str) -> BlockingPortal:
        refuse_inside_event_loop(what)
        portal = self._portal
        if portal is None or self._closed:
            raise CoordinatorClosedError(
                f"aiocoord.blocking: {what}: the coordinator is closed; "
                "open a new one with aiocoord.blocking.connect()"
            )
        return portal

    @overload
    def call(self, func: Callable[..., Awaitable[T]], *args: Any, what: str = "") -> T: ...

    @overload
    def call(self, func: Callable[..., T], *args: Any, what: str = "") -> T: ...

    def call(self, func: Callable[..., Any], *args: Any, what: str = "") -> Any:
        """Run `func(*args)` in the loop (awaited if it returns an awaitable) and return its result.

        Blocks the calling thread until it is done; the exception it raised is
        raised here.  Interrupted (Ctrl-C in the main thread), it cancels the
        call in the loop and lets the KeyboardInterrupt through.  `BlockingInEventLoopError` from a thread that runs an
        event loop; `CoordinatorClosedError` after `close`, or if the call was
        cancelled by it.
        """
        what = what or getattr(func, "__qualname__", "a call")
        future: Future[Any] = self.spawn(func, *args, what=what)
        try:
            wait_done(future)
        except BaseException:
            future.cancel()  # interrupted (Ctrl-C): the call is cancelled in the loop too
            raise
        try:
            return future.result()
        except CancelledError:
            raise CoordinatorClosedError(
                f"aiocoord.blocking: {what}: the coordinator closed while it ran"
            ) from None

    @overload
    def spawn(self, func: Callable[..., Awaitable[T]], *args: Any, what: str = "") -> Future[T]: ...

    @overload
    def spawn(self, func: Callable[..., T], *args: Any, what: str = "") -> Future[T]: ...

    def spawn(self, func: Callable[..., Any], *args: Any, what: str = "") -> Future[Any]:
        """Start `func(*args)` in the loop; a future of its result (cancelling it cancels the task)."""
        portal = self._open_portal(what or getattr(func, "__qualname__", "a call"))
        try:
            return portal.start_task_soon(func, *args)
        except RuntimeError as exc:  # the portal stopped between the check and the call
            raise CoordinatorClosedError(
                f"aiocoord.blocking: {what}: the coordinator is closed"
            ) from exc

    def call_soon(self, func: Callable[[], object]) -> None:
        """Run `func()` in the loop without waiting for it; nothing if the loop has stopped."""
        portal = self._portal
        if portal is None:
            return
        with suppress(RuntimeError):
            portal.start_task_soon(func)

    def close(self) -> None:
        """Stop the portal (cancelling what still runs in it) and join the loop thread.

        Safe to call twice.  `BlockingInEventLoopError` from the loop thread.
        """
        refuse_inside_event_loop("closing the coordinator")
        with self._lock:
            portal = self._portal
            if portal is None:
                return
            self._closed = True
            self._portal = None
        # What still runs is cancelled rather than waited for (the coordinator has already
        # closed what it started); leaving the portal's context then joins the thread.
        with suppress(RuntimeError):
            portal.call(portal.stop, True)
        self._cm.__exit__(None, None, None)
        self._thread.join()
        # anyio's worker threads (plain-function job handlers run in them) are told to stop
        # when the loop ends, but not waited for: wait, so that closing leaves no thread.
        for thread in threading.enumerate():
            if getattr(thread, "loop", None) is self._event_loop:
                thread.join(_WORKER_JOIN)
