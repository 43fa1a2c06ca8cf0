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
from ..recipes.cache import DEFAULT_MAX_NODES, NodeCache, TreeCache
from ..recipes.cas_lock import CasLock
from ..recipes.leader_latch import LeaderLatch
from ..recipes.membership import PersistentNode, ServiceDiscovery
from ..recipes.mutex import Mutex, ReadWriteLock, Semaphore
from ..scheduler import Scheduler, Strategy
from ..session import Coordinator
from ..zk import AclProvider, CreateMode
from ..zk.states import ConnectionState
from ._held import Right
from ._leader import BlockingLeaderLatch
from ._locks import (
    Claims,
    MutexRight,
    ReadWriteLockRight,
    SemaphoreRight,
    SlotRight,
    cas_right,
    slot_right,
)
from ._loop import Loop, LoopKind, refuse_inside_event_loop
from ._scheduler import BlockingScheduler
from ._services import (
    BlockingNodeCache,
    BlockingPersistentNode,
    BlockingServiceDiscovery,
    BlockingTreeCache,
)

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = ("BlockingCoordinator", "connect")

log = logging.getLogger("aiocoord.blocking")

T = TypeVar("T")

# How long closing waits for the rights still held by threads to be given up.
_RELEASE_BOUND = 10.0


class BlockingCoordinator:
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

    # --- locks -------------------------------------------------------------------------------

    def mutex(
        self,
        path: str,
        *,
        participant_id: str | None = None,
        lose_on_suspend: bool = True,
        timeout: float | None = None,
        revocable: bool = False,
    ) -> MutexRight:
        """A mutex (Curator ``InterProcessMutex`` layout): ``with coord.mutex(path) as held``.

        Entering blocks until held (at most `timeout` s, then `LockNotAcquired`);
        see `MutexRight` and `aiocoord.Mutex` for the rest.
        """
        c = self._coord
        return MutexRight(
            self._loop,
            self._claims,
            lambda: Mutex(
                c,
                path,
                participant_id=participant_id,
                lose_on_suspend=lose_on_suspend,
                timeout=timeout,
                revocable=revocable,
            ),
        )

    def semaphore(
        self,
        path: str,
        *,
        max_leases: int,
        participant_id: str | None = None,
        lose_on_suspend: bool = True,
        timeout: float | None = None,
    ) -> SemaphoreRight:
        """At most `max_leases` holders: ``with coord.semaphore(path, max_leases=3) as held``."""
        c = self._coord
        return SemaphoreRight(
            self._loop,
            self._claims,
            lambda: Semaphore(
                c,
                path,
                max_leases=max_leases,
                participant_id=participant_id,
                lose_on_suspend=lose_on_suspend,
                timeout=timeout,
            ),
        )

    def read_write_lock(
        self,
        path: str,
        *,
        participant_id: str | None = None,
        lose_on_suspend: bool = True,
        timeout: float | None = None,
        revocable: bool = False,
    ) -> ReadWriteLockRight:
        """A read/write lock: ``with rw.read() as held`` / ``with rw.write() as held``."""
        c = self._coord
        return ReadWriteLockRight(
            self._loop,
            self._claims,
            lambda: ReadWriteLock(
                c,
                path,
                participant_id=participant_id,
                lose_on_suspend=lose_on_suspend,
                timeout=timeout,
                revocable=revocable,
            ),
        )

    def cas_lock(
        self,
        path: str,
        *,
        owner: str | None = None,
        lease: float = 60.0,
        skew: float | None = None,
        blocking: bool = True,
    ) -> Right[CasLock]:
        """A version-CAS lock with a renewed lease: ``with coord.cas_lock(path) as held``.

        Entering blocks until it is ours (`blocking=False`: `LockNotAcquired`
        at once if held); see `aiocoord.cas_lock`.
        """
        return cas_right(
            self._loop, self._coord, path, owner=owner, lease=lease, skew=skew, blocking=blocking
        )

    def once_per(
        self,
        path: str,
        interval: float,
        *,
        owner: str | None = None,
        lease: float = 60.0,
        skew: float | None = None,
    ) -> SlotRight:
        """At most one run per schedule slot across the fleet: ``with coord.once_per(...) as slot``.

        Entering never waits: check ``slot.acquired``; a body that returns
        records the run, one that raises records a failure (see `aiocoord.once_per`).
        """
        return slot_right(
            self._loop, self._coord, path, interval, owner=owner, lease=lease, skew=skew
        )

    # --- election ----------------------------------------------------------------------------

    def leader_latch(
        self,
        path: str,
        *,
        participant_id: str | None = None,
        layout: str = "curator",
        lose_on_suspend: bool = True,
    ) -> BlockingLeaderLatch:
        """A participant in the election at `path`: ``with coord.leader_latch(path) as latch``."""
        c = self._coord
        return BlockingLeaderLatch(
            self._loop,
            lambda: LeaderLatch(
                c,
                path,
                participant_id=participant_id,
                layout=layout,
                lose_on_suspend=lose_on_suspend,
            ),
        )

    # --- caches and membership ---------------------------------------------------------------

    def node_cache(self, path: str) -> BlockingNodeCache:
        """A live copy of one node: ``with coord.node_cache(path) as node: node.current``."""
        c = self._coord
        return BlockingNodeCache(self._loop, lambda: NodeCache(c, path))

    def tree_cache(
        self, path: str, *, max_depth: int | None = None, max_nodes: int = DEFAULT_MAX_NODES
    ) -> BlockingTreeCache:
        """A live copy of a subtree: ``with coord.tree_cache(path) as tree: tree.get(...)``."""
        c = self._coord
        return BlockingTreeCache(
            self._loop, lambda: TreeCache(c, path, max_depth=max_depth, max_nodes=max_nodes)
        )

    def persistent_node(
        self,
        path: str,
        *,
        data: bytes = b"",
        mode: CreateMode = CreateMode.EPHEMERAL,
        ttl: int | None = None,
    ) -> BlockingPersistentNode:
        """A node kept while the ``with`` block runs (Curator ``PersistentNode``)."""
        c = self._coord
        return BlockingPersistentNode(
            self._loop, lambda: PersistentNode(c, path, data=data, mode=mode, ttl=ttl)
        )

    def service_discovery(self, base: str, *, watch: bool = True) -> BlockingServiceDiscovery:
        """Service registration and discovery (curator-x-discovery layout) under `base`."""
        c = self._coord
        return BlockingServiceDiscovery(self._loop, lambda: ServiceDiscovery(c, base, watch=watch))

    def scheduler(
        self, root: str, *, strategy: str | Strategy = "round-robin", result_ttl: float = 3600.0
    ) -> BlockingScheduler:
        """The job scheduler at `root`: ``submit``, ``result(job_id, timeout=)``, ``status``, ``cancel``."""
        c = self._coord
        return BlockingScheduler(
            self._loop, lambda: Scheduler(c, root, strategy=strategy, result_ttl=result_ttl)
        )

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
