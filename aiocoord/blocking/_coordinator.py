"""`BlockingCoordinator` and `connect()`: one session and its event loop, for threaded code."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

import anyio

from .._checks import check_timeout
from ..session import Coordinator
from ..zk import AclProvider
from ..zk.states import ConnectionState
from ._locks import Claims
from ._loop import Loop, LoopKind, refuse_inside_event_loop
from ._recipes import Recipes

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = ("BlockingCoordinator", "connect")

log = logging.getLogger("aiocoord.blocking")

T = TypeVar("T")

# How long closing waits for the rights still held by threads to be given up.
_RELEASE_BOUND = 10.0


class BlockingCoordinator(Recipes):
    """One ZooKeeper session for threaded code: its event loop runs in a thread of its own.

    Made by `connect` (connected on return); use it as ``with`` or call
    `close()`.  Every method blocks the calling thread and may be called from
    any number of threads at once; each runs the async API (`coordinator`,
    the recipes) in the loop thread.  From a thread that runs an event loop,
    every method raises `BlockingInEventLoopError` at once: use the async API there.
    """

    def __init__(self, loop: Loop, coord: Coordinator) -> None:
        self._loop = loop
        self._coord = coord
        self._claims = Claims()

    # --- the session -------------------------------------------------------------------------

    @property
    def coordinator(self) -> Coordinator:
        """The async `Coordinator` (for `run`: its methods must run in the loop thread)."""
        return self._coord

    @property
    def state(self) -> ConnectionState | None:
        """The current connection state (None before the first session or after close)."""
        return self._coord.state

    @property
    def session_id(self) -> int | None:
        return self._coord.session_id

    @property
    def session_password(self) -> bytes | None:
        return self._coord.session_password

    @property
    def session_timeout(self) -> float:
        return self._coord.session_timeout

    @property
    def connected_address(self) -> tuple[str, int] | None:
        return self._coord.connected_address

    @property
    def closed(self) -> bool:
        return self._loop.closed or self._coord.closed

    @property
    def loop_thread(self) -> threading.Thread:
        """The thread the event loop runs in (joined by `close`)."""
        return self._loop.thread

    def wait_connected(self, timeout: float | None = None) -> None:
        """Block until CONNECTED, RECONNECTED or READ_ONLY; `TimeoutError` after `timeout` s.

        `CoordinatorClosedError` if the coordinator closes meanwhile.
        """
        seconds = check_timeout(timeout)

        async def wait() -> None:
            with anyio.fail_after(seconds):
                await self._coord.wait_connected()

        self._loop.call(wait, what="wait_connected()")

    def run(self, func: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """Run the coroutine function ``func(*args, **kwargs)`` in the loop; block for its result.

        The escape hatch to the whole async API: ``coord.run(coord.coordinator.client.get, "/a")``.
        Raises what it raises.
        """
        what = getattr(func, "__qualname__", "run()")
        return self._loop.call(functools.partial(func, *args, **kwargs), what=what)

    # --- closing -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close everything this coordinator started, then the session, then join the loop thread.

        Rights still held by threads are given up first (their ``lost`` is set
        and their ``with`` exit raises the loss error), then the services still
        open (latches, caches, nodes, workers) are closed, then the session
        (its ephemeral nodes vanish at once).  Blocks until done; safe to call
        twice and from any thread but the loop's.
        """
        refuse_inside_event_loop("close()")
        if self._loop.closed:
            return
        holdings, services = self._loop.open_parts()
        for holding in holdings:
            holding.stop()
        for holding in holdings:
            if not holding.wait(_RELEASE_BOUND):
                log.warning(
                    "aiocoord.blocking: a right was not given up within %.0f s", _RELEASE_BOUND
                )
        try:
            for service in reversed(services):
                try:
                    self._loop.call(service.aclose, what="closing")
                except Exception as exc:
                    log.warning("aiocoord.blocking: closing %r failed: %r", service, exc)
                self._loop.remove_service(service)
            self._loop.call(self._coord.aclose, what="closing the session")
        finally:
            self._loop.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<blocking {self._coord!r}>"


def connect(
    settings: Settings | str | None = None,
    /,
    *,
    acl_provider: AclProvider | None = None,
    loop: LoopKind = "asyncio",
    **overrides: Any,
) -> BlockingCoordinator:
    """Connect from threaded code: a `BlockingCoordinator`, connected when this returns.

    Takes what `aiocoord.connect` takes (a `Settings`, a host string, or
    nothing for ``AIOCOORD_*``; keyword overrides of any Settings field,
    `acl_provider`), validated the same way before anything starts
    (`ConfigError` naming the field).  `loop` is ``"asyncio"`` (default) or
    ``"uvloop"``.  Starts the event loop's thread, then blocks until the
    first session is established (`ConnectionLostError` after the connect
    timeout, with the thread stopped again).  `BlockingInEventLoopError` from
    a thread that runs an event loop.
    """
    refuse_inside_event_loop("connect()")
    from ..settings import Settings

    built = Settings.build(settings, **overrides)
    if loop not in ("asyncio", "uvloop"):
        raise ValueError(f"loop must be 'asyncio' or 'uvloop', not {loop!r}")
    runner = Loop(loop)
    try:
        coord = runner.call(lambda: Coordinator(built, acl_provider=acl_provider), what="connect()")
        runner.call(coord.start, what="connect()")
    except BaseException:
        runner.close()
        raise
    return BlockingCoordinator(runner, coord)
