"""What a `BlockingCoordinator` makes: its locks, election, caches, membership and scheduler.

`Recipes` is the half of `BlockingCoordinator` that builds the blocking side of
each recipe over the async coordinator it holds; each factory takes the
async factory's arguments and checks them at the call.
"""

from __future__ import annotations

from typing import Unpack

from ..recipes.cache import DEFAULT_MAX_NODES, NodeCache, TreeCache
from ..recipes.cas_lock import CasLock, CasLockOptions, OncePerOptions, cas_lock, once_per
from ..recipes.leader_latch import LatchOptions, LeaderLatch
from ..recipes.membership import PersistentNode, ServiceDiscovery
from ..recipes.mutex import Mutex, MutexOptions, ReadWriteLock, Semaphore, SemaphoreOptions
from ..scheduler import Scheduler, Strategy
from ..session import Coordinator
from ..zk import CreateMode
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
from ._loop import Loop
from ._right import Right
from ._scheduler import BlockingScheduler
from ._services import (
    BlockingNodeCache,
    BlockingPersistentNode,
    BlockingServiceDiscovery,
    BlockingTreeCache,
)

__all__ = ("Recipes",)


class Recipes:
    """The recipes of one blocking coordinator (see `BlockingCoordinator`)."""

    _loop: Loop
    _coord: Coordinator
    _claims: Claims

    # --- locks -------------------------------------------------------------------------------

    def mutex(self, path: str, **options: Unpack[MutexOptions]) -> MutexRight:
        """A mutex (Curator ``InterProcessMutex`` layout): ``with coord.mutex(path) as held``.

        Entering blocks until held (at most `timeout` s, then `LockNotAcquired`);
        see `MutexRight` and `aiocoord.Mutex` for the rest (and the arguments).
        """
        c = self._coord
        return MutexRight(self._loop, self._claims, lambda: Mutex(c, path, **options))

    def semaphore(self, path: str, **options: Unpack[SemaphoreOptions]) -> SemaphoreRight:
        """At most `max_leases` holders: ``with coord.semaphore(path, max_leases=3) as held``.

        See `SemaphoreRight` and `aiocoord.Semaphore` (the arguments).
        """
        c = self._coord
        return SemaphoreRight(self._loop, self._claims, lambda: Semaphore(c, path, **options))

    def read_write_lock(self, path: str, **options: Unpack[MutexOptions]) -> ReadWriteLockRight:
        """A read/write lock: ``with rw.read() as held`` / ``with rw.write() as held``.

        See `ReadWriteLockRight` and `aiocoord.ReadWriteLock` (the arguments).
        """
        c = self._coord
        return ReadWriteLockRight(
            self._loop, self._claims, lambda: ReadWriteLock(c, path, **options)
        )

    def cas_lock(
        self, path: str, *, blocking: bool = True, **options: Unpack[CasLockOptions]
    ) -> Right[CasLock]:
        """A version-CAS lock with a renewed lease: ``with coord.cas_lock(path) as held``.

        Entering blocks until it is ours (at most `timeout` s, then
        `LockNotAcquired`; ``blocking=False`` is ``timeout=0``); see
        `aiocoord.cas_lock` for the arguments.
        """
        c = self._coord
        return cas_right(self._loop, lambda: cas_lock(c, path, blocking=blocking, **options))

    def once_per(self, path: str, interval: float, **options: Unpack[OncePerOptions]) -> SlotRight:
        """At most one run per schedule slot across the fleet: ``with coord.once_per(...) as slot``.

        Entering never waits: check ``slot.acquired``; a body that returns
        records the run, one that raises records a failure (see `aiocoord.once_per`).
        """
        c = self._coord
        return slot_right(self._loop, lambda: once_per(c, path, interval, **options), path)

    # --- election ----------------------------------------------------------------------------

    def leader_latch(self, path: str, **options: Unpack[LatchOptions]) -> BlockingLeaderLatch:
        """A participant in the election at `path`: ``with coord.leader_latch(path) as latch``.

        See `BlockingLeaderLatch` and `aiocoord.LeaderLatch` (the arguments).
        """
        c = self._coord
        return BlockingLeaderLatch(self._loop, lambda: LeaderLatch(c, path, **options))

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
