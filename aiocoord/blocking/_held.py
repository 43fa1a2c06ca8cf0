"""A right of the async API held by a thread: `Held`, and the `Holding` that keeps it open.

The async recipes hold a right through ``async with``, whose body runs in a
task that is cancelled the moment the right is lost.  A thread's ``with``
body runs outside the event loop, so the async context manager is held open
for it by a task of the loop (the *holder*):

1. The thread's ``__enter__`` starts the holder and waits.  The holder enters
   the async context manager (waiting for the lock, the lease, the
   leadership, as the async API does) and hands the thread a `Held`.
2. The holder then waits, inside the async block, for the thread to leave.
   If the right is lost meanwhile, the recipe cancels that wait: the holder
   sets ``held.lost`` (a ``threading.Event``) at once, so ``held.check()``
   raises the recipe's loss error (`LockLost`, `LeadershipLost`) from then on,
   and the async block exits as it would for a task (releasing what it holds).
3. The thread's ``__exit__`` tells the holder to leave, with the body's
   exception if it raised one (so that the recipe sees what an async body
   would have raised: ``once_per`` records a failure), and waits until the
   async block has been left.  Leaving raises what the async exit raised
   (`LockLost` after a loss), except that the body's own exception wins.

A thread cannot be cancelled, so nothing interrupts the body: it learns of a
loss through ``lost`` and ``check()``, between steps of its work.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from types import TracebackType
from typing import Generic, TypeVar

import anyio

from ..errors import CoordError, CoordinatorClosedError
from ._loop import Loop, refuse_inside_event_loop, wait_done, wait_event

__all__ = ("Held", "Holding", "Kind", "LossError")

T = TypeVar("T")

LossError = Callable[[str, str], CoordError]
"""Builds a right's loss error from its path and the reason: ``LockLost``, ``LeadershipLost``."""


class Held(Generic[T]):
    """A right a thread holds: a lock, a lease, a leadership term, a once-per slot.

    `token` is the fencing token (a later holder's is larger); `value` the
    async API's object for it (the `Mutex`, `Lease`, `LeadershipTerm`, ...),
    for reading only.  `lost` is a ``threading.Event`` set the moment the
    right is lost (SUSPENDED past what the session provably lives, LOST, a
    new session, revoked, the coordinator closed); `reason` then says why.
    `check()` raises the loss error once it is set: call it between steps of
    the work, or ``held.lost.wait(timeout)`` to sleep until a loss.
    """

    __slots__ = ("_error", "_holding", "lost", "path", "reason", "token", "value")

    def __init__(
        self, holding: Holding[T], value: T, path: str, token: int | None, error: LossError
    ) -> None:
        self._holding = holding
        self.value = value
        self.path = path
        self.token = token
        self._error = error
        self.reason: str | None = None
        self.lost = threading.Event()

    def check(self) -> None:
        """Raise the loss error (`LockLost`, `LeadershipLost`) if the right is lost; else nothing."""
        if self.lost.is_set():
            raise self._error(self.path, self.reason or "lost")

    def release(self) -> None:
        """Give the right up, as leaving its ``with`` block does (for code that cannot use ``with``).

        Blocks until released.  Raises the loss error if the right was lost
        meanwhile; safe to call from any thread, once.
        """
        self._holding.leave(None)

    def _lose(self, reason: str | None) -> None:
        if reason is not None and (self.reason is None or self.reason == "lost"):
            self.reason = reason
        elif self.reason is None:
            self.reason = "lost"
        self.lost.set()

    def __enter__(self) -> Held[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        return self._holding.leave(exc)

    def __repr__(self) -> str:
        token = f" token=0x{self.token:x}" if self.token is not None else ""
        state = f"LOST ({self.reason})" if self.lost.is_set() else "HELD"
        return f"<Held {self.path}{token} {state}>"


def _no_reason(value: object) -> str | None:
    return None


@dataclass(frozen=True, slots=True)
class Kind(Generic[T]):
    """What every hold of one right shares: how to take it and what its loss looks like.

    `open` builds the async context manager, in the loop; `token` reads the
    fencing token from its value, `reason` the loss reason (None if it has
    none); `error` builds the loss error; `held` is the `Held` type handed to
    the thread; `what` names the right in errors.
    """

    loop: Loop
    open: Callable[[], AbstractAsyncContextManager[T]]
    path: str
    error: LossError
    token: Callable[[T], int | None]
    reason: Callable[[T], str | None] = _no_reason
    held: type[Held[T]] = Held
    what: str = "holding"


class Holding(Generic[T]):
    """One hold of a right (its `Kind`) on behalf of a thread; see the module docstring.

    `on_end` is called once the hold is over, from whichever thread saw it end.
    """

    def __init__(
        self, kind: Kind[T], on_end: Callable[[Holding[T]], None] = lambda holding: None
    ) -> None:
        self._kind = kind
        self._loop, self._path, self._what = kind.loop, kind.path, kind.what
        self._on_end = on_end
        self._entered: Future[Held[T]] = Future()
        self._finished = threading.Event()
        self._leaving = threading.Lock()
        self._left = False
        self._release: anyio.Event | None = None  # made in the loop
        self._scope: anyio.CancelScope | None = None
        self._stopping = False  # the coordinator is closing: stop waiting, leave
        self._body_error: BaseException | None = None
        self._error: BaseException | None = None  # what the async block's exit raised
        self._held: Held[T] | None = None

    # --- the thread's side -------------------------------------------------------------------

    def enter(self) -> Held[T]:
        """Start the holder and wait until the right is held; raise what entering raised."""
        try:
            self._loop.spawn(self._run, what=self._what)
        except BaseException:
            self._end()
            raise
        try:
            wait_done(self._entered)
            return self._entered.result()
        except BaseException:
            # An interrupted wait (KeyboardInterrupt) must not leave the holder to take the
            # right later for nobody: it stops, and releases if it got there first.
            self._loop.call_soon(self._stop)
            self._end()
            raise

    def leave(self, exc: BaseException | None) -> bool:
        """Leave the async block (with the body's exception `exc`) and wait until it is left.

        Returns True if the async exit swallowed `exc`; raises what the exit
        raised, except that the body's own exception wins over an aiocoord
        error (a loss, a release not confirmed), as it does in the async API.
        """
        refuse_inside_event_loop(f"leaving {self._what} {self._path}")
        with self._leaving:
            if self._left:
                raise RuntimeError(f"{self._what} {self._path} was already released")
            self._left = True
        saved = (exc.__traceback__, exc.__context__) if exc is not None else None
        self._body_error = exc
        if not self._finished.is_set():
            self._loop.call_soon(self._stop)
        wait_event(self._finished)  # interrupted, the holder still leaves the block
        self._end()
        error, self._error = self._error, None
        if exc is not None and saved is not None:
            # The exception went through the loop's frames: give it back as the body raised it.
            exc.__traceback__, exc.__context__ = saved
            if error is None:
                return True
            if error is exc or isinstance(error, CoordError):
                return False  # the loss, if any, is in `held.lost`
        if error is not None:
            raise error
        return False

    def stop(self) -> None:
        """From `close`: stop waiting for the right, or leave it; returns at once (see `wait`)."""
        self._loop.call_soon(self._stop)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the holder has ended; True if it has."""
        return self._finished.wait(timeout)

    def _end(self) -> None:
        self._on_end(self)

    # --- the loop's side ---------------------------------------------------------------------

    def _stop(self) -> None:
        """In the loop: leave the block if it is entered, else stop entering it."""
        self._stopping = True
        if self._held is not None:
            if self._release is not None:
                self._release.set()
        elif self._scope is not None:
            self._scope.cancel()

    async def _run(self) -> None:
        self._release = anyio.Event()
        try:
            with anyio.CancelScope() as self._scope:
                if self._stopping:
                    self._scope.cancel()
                await self._hold()
        except BaseException as exc:
            if exc is self._body_error or isinstance(exc, Exception):
                self._error = exc
            else:
                raise  # a cancellation of the whole portal, or worse: never swallowed
        finally:
            self._scope = None
            held = self._held
            if not self._entered.done():
                self._entered.set_exception(
                    self._error
                    or CoordinatorClosedError(
                        f"{self._what} {self._path}: the coordinator closed before it was held"
                    )
                )
            elif held is not None:
                ended = self._error
                if ended is not None and ended is not self._body_error:
                    reason = getattr(ended, "reason", None)
                    held._lose(reason if isinstance(reason, str) else None)
                elif self._stopping and not self._left:
                    # Left by `close` while the thread's body runs: that is a loss too.
                    held._lose("coordinator closed")
                    self._error = self._kind.error(self._path, "coordinator closed")
            self._finished.set()

    async def _hold(self) -> None:
        release = self._release
        assert release is not None
        kind = self._kind
        async with kind.open() as value:
            held = self._held = kind.held(self, value, self._path, kind.token(value), kind.error)
            self._entered.set_result(held)
            try:
                await release.wait()
            except anyio.get_cancelled_exc_class():
                held._lose(kind.reason(value))  # the moment the recipe cancels the body
                raise
            body_error = self._body_error
            if body_error is not None:
                raise body_error  # the async exit sees what the body raised
