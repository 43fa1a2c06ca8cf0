"""The one way a recipe runs a user body while a right lasts: `Tenure` and its `Body`.

A tenure is one period during which a right is held: a leadership term of a
latch, a task's term in task leadership, a hold of a CAS lock.  The recipe
that holds the right creates the tenure when it gains it and calls
`Tenure.end` with a reason the moment it is lost; user code runs as
``async with tenure.body():`` (or, in a recipe's own ``__aenter__``, the body
`Tenure.enter` returns).  Which connection state ends a right is decided by
the one loss rule beside this module (`_loss`).  Every recipe gets the same guarantees:

- The body runs in a cancel scope of its own.  `end()` cancels every body of
  the tenure; a body entered after the end is cancelled at its first
  checkpoint, so it never runs as if the right still held.
- The error that says so (`LeadershipLost`, `LockLost`: the recipe chooses) is
  raised only after the body's scope has exited, never inside it, so the
  body's own ``finally`` blocks run cancelled, as they would for any
  cancellation.
- An exception raised by the body itself propagates unchanged, and a
  cancellation from outside (the caller's own scope) wins over the loss:
  it is never swallowed.

Cleanup after the body (deleting a node, releasing a lock) is the recipe's,
run shielded and bounded; `Tenure.drained` tells it when no body runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType

import anyio
import anyio.lowlevel

from ..errors import CoordError

__all__ = ("Body", "LossError", "Tenure")

LossError = Callable[[str, str], CoordError]
"""Builds the error a body raises after the right was lost: ``(path, reason) -> error``."""


class Tenure:
    """One period during which a right is held; see the module docstring.

    `path` names the right in the error; `error` builds it from the path and
    the reason.  `on_body` (optional) is called with +1 when a body enters and
    -1 when it exits, for recipes that wait for their bodies to drain across
    tenures.
    """

    __slots__ = ("_bodies", "_drained", "_error", "_on_body", "lost", "path")

    def __init__(
        self,
        path: str,
        error: LossError,
        *,
        on_body: Callable[[int], None] | None = None,
    ) -> None:
        self.path = path
        self.lost: str | None = None  # None while the right lasts, then why it ended
        self._error = error
        self._on_body = on_body
        self._bodies: set[Body] = set()
        self._drained: list[Callable[[], None]] = []

    @property
    def active(self) -> bool:
        """True until `end()`."""
        return self.lost is None

    @property
    def running(self) -> int:
        """How many bodies are inside right now."""
        return len(self._bodies)

    def body(self) -> Body:
        """An async context manager that runs its block as one body of this tenure.

        Entering does not block (it checkpoints only if the tenure has already
        ended, so that the cancellation lands at once).  Leaving raises the
        recipe's loss error if the tenure ended while the block ran, after the
        block's cancel scope has exited.
        """
        return Body(self)

    async def enter(self) -> Body:
        """Enter one body of this tenure by hand, for a recipe's own ``__aenter__``.

        Returns the entered `Body`; the recipe's ``__aexit__`` hands the block's
        outcome to its ``__aexit__``.  Does not block; if the tenure has already
        ended, the body's scope is cancelled at once (the caller's block sees
        the cancellation at its first checkpoint).
        """
        body = Body(self)
        await body.__aenter__()
        return body

    def end(self, reason: str, *, soon: bool = False) -> None:
        """The right is lost: cancel every body; they raise the loss error once out.

        The first reason wins.  With `soon`, the scopes are cancelled from a
        loop callback instead of here: recipes that end hundreds of tenures in
        one pass use it, since anyio's ``cancel()`` builds a message naming the
        calling task, which costs more than the rest of the pass; the bodies
        see the cancellation at their next checkpoint either way.
        """
        if self.lost is not None:
            return
        self.lost = reason
        if not self._bodies:
            return
        scopes = [body.scope for body in self._bodies]
        if soon:
            asyncio.get_running_loop().call_soon(_cancel_all, scopes)
        else:
            _cancel_all(scopes)

    def when_drained(self, callback: Callable[[], None]) -> None:
        """Call `callback` once no body runs (now, if none does)."""
        if not self._bodies:
            callback()
        else:
            self._drained.append(callback)

    def _enter(self, body: Body) -> None:
        self._bodies.add(body)
        if self._on_body is not None:
            self._on_body(1)
        if self.lost is not None:
            body.scope.cancel()

    def _exit(self, body: Body) -> None:
        self._bodies.discard(body)
        if self._on_body is not None:
            self._on_body(-1)
        if not self._bodies and self._drained:
            callbacks, self._drained = self._drained, []
            for callback in callbacks:
                callback()

    def __repr__(self) -> str:
        state = "active" if self.lost is None else f"lost: {self.lost}"
        return f"<Tenure {self.path} {state} bodies={len(self._bodies)}>"


def _cancel_all(scopes: list[anyio.CancelScope]) -> None:
    for scope in scopes:
        scope.cancel()


class Body:
    """One block run under a `Tenure` (``async with tenure.body():``).

    A class rather than a generator-based context manager: task leadership
    enters and leaves hundreds of these at once, and each generator layer
    costs as much as the rest of the work.

    The block may be left from another task than the one that entered it
    (a pytest-asyncio fixture, a framework's start and stop hooks): the right
    is still given up and the loss still raised, but the cancel scope, which
    belongs to the entering task, is then left to that task (anyio cannot
    exit it elsewhere), so cancellation on loss reaches only code that runs
    in the entering task.
    """

    __slots__ = ("_task", "_tenure", "scope")

    def __init__(self, tenure: Tenure) -> None:
        self._tenure = tenure
        self.scope = anyio.CancelScope()
        self._task: asyncio.Task[object] | None = None

    async def __aenter__(self) -> Body:
        self._task = asyncio.current_task()
        self.scope.__enter__()
        self._tenure._enter(self)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        tenure = self._tenure
        try:
            if asyncio.current_task() is self._task:
                swallowed = bool(self.scope.__exit__(exc_type, exc, tb))
            else:
                swallowed = False  # see the class docstring
        finally:
            tenure._exit(self)
        if exc is not None and not swallowed:
            return False  # the block's own exception (or an outer cancellation) goes on
        if tenure.lost is not None:
            await anyio.lowlevel.checkpoint_if_cancelled()  # an outer cancellation wins
            raise tenure._error(tenure.path, tenure.lost) from None
        return swallowed
