"""`Lifecycle`: a component whose background work runs in a task it owns.

An anyio task group, like any cancel scope, must be left by the task that
entered it, in the reverse order of entering.  A component that kept its task
group open across an ``async with`` could only be left by the task that
entered it: not by a pytest-asyncio fixture's teardown (another task than its
set-up), a framework's start-up and shutdown hooks, a supervisor task that
stops what another started, nor ``asyncio.wait_for`` around the exit.  No task
group of the caller's can host that work either, since none may outlive the
caller's block.  So `start()` spawns one plain asyncio task, the *owner* (the
one place in aiocoord that does), which opens the component's task group and
holds it until `aclose()`, called from any task of the same event loop, tells
it to stop.  Everything else stays structured inside that task group.

The owner's life, with the component's hooks:

1. ``setup(tg)`` starts the background tasks (``await tg.start(...)``) and
   returns once the component is ready; `start()` returns then.
2. The owner waits for `aclose()`, or for a background task to crash.
3. ``stopping()``, shielded, while the background tasks still run (a latch
   deletes its node here, a worker drains).
4. The task group is cancelled and awaited.
5. ``stopped()``, shielded, once everything has stopped (final state, waiters woken).

Steps 3-5 run however steps 1-2 ended: `aclose()`, a start-up error, a
cancelled `start()`, a crash.  The hooks keep their own bounds (a request
timeout, a drain timeout): a shield only keeps cancellation out.

A background task that crashes while the component is in use stops the
component as `aclose()` would (steps 3-5); the component then shows closed,
so that waiters on it give up as they do when it is closed, and the error
(the task group's ``ExceptionGroup``) is logged and raised by the next
`aclose()` (the exit of the ``async with``).  The code inside the ``async
with`` is not cancelled: the task that entered may no longer be the one that
leaves.
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import logging
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Self

import anyio
import anyio.abc
import anyio.lowlevel
import sniffio

from .errors import CoordinatorClosedError

__all__ = ("Lifecycle", "Phase", "Service")

log = logging.getLogger(__name__)

Hook = Callable[[], Awaitable[None]]

# The lifecycles whose owner task the current task runs under (their background tasks
# inherit the owner's context): their aclose() must not wait for an end that waits for us.
_owners: contextvars.ContextVar[tuple[Lifecycle, ...]] = contextvars.ContextVar(
    "aiocoord_owners", default=()
)


# The owner tasks alive: the event loop keeps only weak references to tasks.
_alive: set[asyncio.Task[None]] = set()


class Phase(enum.Enum):
    NEW = "NEW"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    CLOSING = "CLOSING"
    CLOSED = "CLOSED"


async def _nothing() -> None:
    pass


class Lifecycle:
    """The owner task of one component, and the `start()` / `aclose()` pair it offers.

    `name` names the task and the log lines.  `setup(tg)`, `stopping()` and
    `stopped()` are the hooks of the module docstring; `hurry()`, if given, is
    called (without awaiting) when a caller of `start()` or `aclose()` is
    cancelled, so that the component skips what it may skip (a drain) while
    the rest of its cleanup runs.
    """

    def __init__(
        self,
        name: str,
        setup: Callable[[anyio.abc.TaskGroup], Awaitable[None]],
        *,
        stopping: Hook | None = None,
        stopped: Hook | None = None,
        hurry: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self._setup = setup
        self._stopping = stopping or _nothing
        self._stopped = stopped or _nothing
        self._hurry = hurry
        self.phase = Phase.NEW
        self._owner: asyncio.Task[None] | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        # Made by `_begin`, in the event loop (anyio's need one).
        self._setup_scope: anyio.CancelScope
        self._stop: anyio.Event
        self._settled: anyio.Event  # ready, or ended
        self._ended: anyio.Event
        self._error: BaseException | None = None
        self._ready = False

    @property
    def started(self) -> bool:
        """Whether `start()` (or `aclose()`) was ever called: neither may start it again."""
        return self.phase is not Phase.NEW

    @property
    def task_group(self) -> anyio.abc.TaskGroup | None:
        """The owner's task group while it is open (also in ``stopping``), else None."""
        return self._tg

    async def start(self) -> None:
        """Spawn the owner and block until the component is ready.

        Raises the start-up error as ``setup`` raised it, once the cleanup has
        run; `CoordinatorClosedError` if `aclose()` was called meanwhile (or
        before).  If the caller is cancelled while starting, the start-up is
        cancelled, the cleanup runs (shielded), and the cancellation propagates.
        """
        if self.phase is not Phase.NEW:
            raise CoordinatorClosedError(f"{self.name} can be started only once")
        self._begin(Phase.STARTING)
        owner = asyncio.get_running_loop().create_task(self._own(), name=f"aiocoord: {self.name}")
        self._owner = owner
        _alive.add(owner)
        owner.add_done_callback(_alive.discard)
        try:
            await self._settled.wait()
        except BaseException:
            if self._hurry is not None:
                self._hurry()
            self._request_stop()
            await self._wait_ended()
            raise
        if not self._ready:
            await self._wait_ended()
            error, self._error = self._error, None
            if error is not None:
                raise error
            raise CoordinatorClosedError(f"{self.name} was closed while starting")

    async def aclose(self) -> None:
        """Stop the component from any task and block until its owner task has ended.

        Idempotent; a no-op before `start()` (which then refuses to start).
        Cancelling the caller does not cut the cleanup short (it is bounded):
        ``hurry`` is called, the owner's end is still awaited, then the
        cancellation propagates; asyncio's own cancellation too (``Task.cancel``,
        ``asyncio.wait_for``), which anyio's shields do not keep out.  Raises,
        once, the error of a background task that crashed.  Called from one of
        the component's own background tasks, it only signals (it cannot wait
        for its own end).
        """
        if self.phase is Phase.NEW:
            self._begin(Phase.CLOSED)
            self._ended.set()
            self._settled.set()
        self._request_stop()
        if self in _owners.get():
            await anyio.lowlevel.checkpoint()
            return
        try:
            await self._ended.wait()
        except anyio.get_cancelled_exc_class():
            if self._hurry is not None:
                self._hurry()
            await self._wait_ended()
            raise
        error, self._error = self._error, None
        if error is not None:
            raise error

    def _begin(self, phase: Phase) -> None:
        self.phase = phase
        self._setup_scope = anyio.CancelScope()
        self._stop = anyio.Event()
        self._settled = anyio.Event()
        self._ended = anyio.Event()

    def _request_stop(self) -> None:
        setting_up = self.phase is Phase.STARTING
        if self.phase in (Phase.STARTING, Phase.RUNNING):
            self.phase = Phase.CLOSING
        self._stop.set()
        if setting_up:
            # Only while setting up: anyio's cancel() formats the calling task's repr,
            # which a latch pays on every leave (its successor waits on that delete).
            self._setup_scope.cancel()

    async def _wait_ended(self) -> None:
        """Wait for the owner's end, even through cancellation; then re-raise that."""
        cancelled: BaseException | None = None
        while not self._ended.is_set():
            try:
                with anyio.CancelScope(shield=True):
                    await self._ended.wait()
            except anyio.get_cancelled_exc_class() as exc:  # asyncio's own passes a shield
                cancelled = exc
        if cancelled is not None:
            raise cancelled

    # --- the owner task ----------------------------------------------------------------------

    async def _own(self) -> None:
        _owners.set((*_owners.get(), self))
        # The background tasks' loop callbacks (replies, notifications, batched
        # writes) run in copies of their context and call anyio there, where anyio
        # learns the library only from this variable; `asyncio.run()` never sets it.
        sniffio.current_async_library_cvar.set("asyncio")
        failure: BaseException | None = None
        try:
            try:
                async with anyio.create_task_group() as tg:
                    self._tg = tg
                    try:
                        if await self._set_up(tg):
                            self._ready = True
                            self.phase = Phase.RUNNING
                            self._settled.set()
                            await self._stop.wait()
                    finally:
                        self.phase = Phase.CLOSING
                        failure = await self._run_hook(self._stopping, failure)
                        tg.cancel_scope.cancel()
            except Exception as exc:  # a background task crashed (an ExceptionGroup)
                failure = exc
                if self._ready:
                    log.error("%s: a background task failed; closed", self.name, exc_info=exc)
            finally:
                self._tg = None
                failure = await self._run_hook(self._stopped, failure)
        finally:
            if failure is not None and self._error is None:
                self._error = failure
            self.phase = Phase.CLOSED
            self._ended.set()
            self._settled.set()

    async def _set_up(self, tg: anyio.abc.TaskGroup) -> bool:
        """Run ``setup``; False if it failed (the error kept for `start()`) or was stopped."""
        with self._setup_scope:
            try:
                await self._setup(tg)
            except Exception as exc:
                self._error = exc
                return False
            return not self._stop.is_set()
        return False  # `aclose()` or a cancelled `start()` cancelled the set-up

    async def _run_hook(self, hook: Hook, failure: BaseException | None) -> BaseException | None:
        """Run a cleanup hook shielded; its error is kept unless an earlier one is."""
        with anyio.CancelScope(shield=True):
            try:
                await hook()
            except Exception as exc:
                return failure or exc
        return failure

    def __repr__(self) -> str:
        return f"<Lifecycle {self.name} {self.phase.value}>"


class Service:
    """A component used as ``async with``: entering is `start()`, leaving is `aclose()`.

    Both come from the component (usually around a `Lifecycle`), so the block
    may be left from another task than the one that entered it.  Leaving by
    an exception calls `_hurry()` first.
    """

    async def start(self) -> None:
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError

    def _hurry(self) -> None:
        """Called when the block is left by an exception, before `aclose()`: nothing here.

        A component that may cut its cleanup short then overrides it (a job
        worker skips its drain).
        """

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self._hurry()
        await self.aclose()
