"""`Right`: what threads take (``with right as held``), each entry a `Holding` of its own."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Generic, TypeVar

from ._held import Held, Holding, Kind, LossError
from ._loop import Loop

__all__ = ("Claim", "Right")

T = TypeVar("T")


Claim = Callable[[], Callable[[], None]]
"""Called in the entering thread before a hold starts; returns what undoes it (see `Right`)."""


class Right(Generic[T]):
    """A right that threads take: ``with right as held`` or ``held = right.acquire()``.

    Each entry is a hold of its own (a new async context manager from `open`),
    so one `Right` may be shared by any number of threads, each entering it
    in turn or at once as the recipe allows.  `claim`, if given, runs in the
    entering thread first: it refuses (`RuntimeError`) a thread that would
    wait for a right it holds itself.
    """

    def __init__(
        self,
        loop: Loop,
        open: Callable[[], AbstractAsyncContextManager[T]],
        *,
        path: str,
        error: LossError,
        token: Callable[[T], int | None],
        reason: Callable[[T], str | None] = lambda value: None,
        claim: Claim | None = None,
        held: type[Held[T]] = Held,
        what: str,
    ) -> None:
        self._kind = Kind(loop, open, path, error, token, reason, held, what)
        self._loop = loop
        self._claim = claim
        self._entered = threading.local()  # this thread's `with` blocks, innermost last

    @property
    def path(self) -> str:
        return self._kind.path

    def acquire(self) -> Held[T]:
        """Take the right, blocking until it is held; give it back with ``held.release()``.

        Blocks as entering the async API's ``async with`` does (its `timeout`,
        then its error: `LockNotAcquired`, `TimeoutError`).  An interrupted wait
        (KeyboardInterrupt) withdraws.  `BlockingInEventLoopError` from a thread
        that runs an event loop, `CoordinatorClosedError` once closed.
        """
        loop = self._loop
        unclaim = self._claim() if self._claim is not None else None

        def ended(holding: Holding[T]) -> None:
            loop.disown(holding)
            if unclaim is not None:
                unclaim()

        holding = Holding(self._kind, on_end=_once(ended))
        try:
            loop.adopt(holding)
        except BaseException:
            ended(holding)
            raise
        return holding.enter()

    def __enter__(self) -> Held[T]:
        held = self.acquire()
        stack: list[Held[T]] = self._entered.__dict__.setdefault("stack", [])
        stack.append(held)
        return held

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        stack: list[Held[T]] = self._entered.__dict__.get("stack", [])
        if not stack:
            raise RuntimeError(
                f"{self._kind.what} {self.path}: left in a thread that did not enter it "
                "(use held = acquire() and held.release() to hand a right between threads)"
            )
        return stack.pop().__exit__(exc_type, exc, tb)

    def __repr__(self) -> str:
        return f"<blocking {self._kind.what} {self.path}>"


def _once(func: Callable[[Holding[T]], None]) -> Callable[[Holding[T]], None]:
    done: list[bool] = []
    lock = threading.Lock()

    def call(holding: Holding[T]) -> None:
        with lock:
            if done:
                return
            done.append(True)
        func(holding)

    return call
