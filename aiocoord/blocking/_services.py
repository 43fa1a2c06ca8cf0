"""Async services from threads: caches, a persistent node, service discovery.

Each async part that has ``start()`` / ``aclose()`` (a `TreeCache`, a
`PersistentNode`, a `ServiceDiscovery`, a latch, a job worker) is `Started` in
the loop by ``with`` (or ``start()``) and closed by leaving (or ``close()``);
the blocking coordinator closes those still open when it closes.  Reads of
their state run in the loop too (`Loop.call`), so a thread never sees a state
half-way through a change.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Generic, Protocol, Self, TypeVar

import anyio

from ..recipes.cache import NodeCache, TreeCache
from ..recipes.membership import PersistentNode, ServiceDiscovery, ServiceInstance
from ..zk import Node, Stat
from ._loop import Loop, refuse_inside_event_loop

__all__ = (
    "BlockingNodeCache",
    "BlockingPersistentNode",
    "BlockingServiceDiscovery",
    "BlockingTreeCache",
    "Started",
)

T = TypeVar("T")


class _Service(Protocol):
    async def start(self) -> None: ...

    async def aclose(self) -> None: ...


S = TypeVar("S", bound=_Service)


class Started(Generic[S]):
    """An async service run in the loop for threads: ``with`` starts it, leaving closes it.

    `value` is the async object (built in the loop, so bad arguments fail
    here, naming the argument).  ``start()`` blocks as the async ``start()``
    does; ``close()`` as its ``aclose()``, and is safe to call twice.
    """

    def __init__(self, loop: Loop, build: Callable[[], S], *, what: str) -> None:
        self._loop = loop
        self._what = what
        self.value: S = loop.call(build, what=what)
        self._started = False

    def start(self) -> None:
        """Start the async service; blocks until it is ready (see the async ``start()``)."""
        refuse_inside_event_loop(f"{self._what} start()")
        if self._started:
            raise RuntimeError(f"{self._what} {self.value!r} was started already")
        self._started = True
        self._loop.add_service(self.value)
        try:
            self._loop.call(self.value.start, what=f"{self._what} start()")
        except BaseException:
            self._loop.remove_service(self.value)
            self._loop.call_soon(self.value.aclose)
            raise

    def close(self) -> None:
        """Close the async service (its ``aclose()``); blocks until it is done, idempotent."""
        if not self._started or self._loop.closed:
            return
        try:
            self._loop.call(self.value.aclose, what=f"{self._what} close()")
        finally:
            self._loop.remove_service(self.value)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class BlockingTreeCache(Started[TreeCache]):
    """A live copy of the subtree at `path` (see `aiocoord.TreeCache`), read from threads.

    Entering blocks until the first full read is held (`CacheOverflowError`
    past `max_nodes`).  `get`, `children` and `nodes` serve the last state
    read, also while `stale`; `wait_for` blocks until a condition holds.
    """

    def __init__(
        self, loop: Loop, build: Callable[[], TreeCache], what: str = "tree cache"
    ) -> None:
        super().__init__(loop, build, what=what)

    @property
    def path(self) -> str:
        return self.value.path

    @property
    def stale(self) -> bool:
        """Whether the cache may be behind the server (no connection, or a re-read under way)."""
        return self.value.stale

    def get(self, path: str) -> Node | None:
        """The node at `path` as last read, or None (absolute paths; the root included)."""
        return self._loop.call(self.value.get, path, what="get()")

    def children(self, path: str) -> list[str]:
        """Sorted names of the cached children of `path` ([] if none or unknown)."""
        return self._loop.call(self.value.children, path, what="children()")

    def nodes(self) -> dict[str, Node]:
        """Every cached node by path: a copy, as one state of the cache."""
        return self._loop.call(self.value.nodes, what="nodes()")

    def wait_for(
        self, predicate: Callable[[dict[str, Node]], bool], timeout: float | None = None
    ) -> dict[str, Node]:
        """Block until ``predicate(nodes)`` is true of the cached nodes; return them.

        Checked now and after each change (in the loop thread: keep it quick).
        `TimeoutError` after `timeout` seconds (None: no bound).
        """
        return self._loop.call(_wait_for, self.value, self.value.nodes, predicate, timeout)

    def __repr__(self) -> str:
        return f"<blocking {self.value!r}>"


class BlockingNodeCache(BlockingTreeCache):
    """A live copy of the node at `path` (see `aiocoord.NodeCache`), read from threads."""

    value: NodeCache

    def __init__(self, loop: Loop, build: Callable[[], NodeCache]) -> None:
        super().__init__(loop, build, what="node cache")

    @property
    def current(self) -> Node | None:
        """The node as last read (data and stat), or None if it does not exist."""
        return self._loop.call(lambda: self.value.current, what="current")

    def wait_for_node(
        self, predicate: Callable[[Node | None], bool], timeout: float | None = None
    ) -> Node | None:
        """Block until ``predicate(current)`` is true; return that node (None: absent).

        `TimeoutError` after `timeout` seconds (None: no bound).
        """
        cache = self.value
        node: Node | None = self._loop.call(
            _wait_for, cache, lambda: cache.current, predicate, timeout
        )
        return node


async def _wait_for(
    cache: TreeCache, read: Callable[[], T], predicate: Callable[[T], bool], timeout: float | None
) -> T:
    with anyio.fail_after(timeout):
        events = cache.events()  # subscribed before the first look: no change is missed
        try:
            value = read()
            if predicate(value):
                return value
            async for _ in events:
                value = read()
                if predicate(value):
                    return value
        finally:
            await events.aclose()  # type: ignore[attr-defined]
    raise TimeoutError(f"cache {cache.path} closed before the condition held")


class BlockingPersistentNode(Started[PersistentNode]):
    """A node kept at `path` while the ``with`` block runs (see `aiocoord.PersistentNode`)."""

    def __init__(self, loop: Loop, build: Callable[[], PersistentNode]) -> None:
        super().__init__(loop, build, what="persistent node")

    @property
    def path(self) -> str:
        return self.value.path

    @property
    def actual_path(self) -> str | None:
        return self.value.actual_path

    @property
    def present(self) -> bool:
        return self.value.present

    @property
    def stat(self) -> Stat | None:
        return self.value.stat

    def set_data(self, data: bytes) -> None:
        """Write new data to the node (blocks until written; see `PersistentNode.set_data`)."""
        self._loop.call(self.value.set_data, data, what="set_data()")

    def __repr__(self) -> str:
        return f"<blocking {self.value!r}>"


class BlockingServiceDiscovery(Started[ServiceDiscovery]):
    """Registration and discovery under `base` (curator-x-discovery's layout), from threads.

    See `aiocoord.ServiceDiscovery`: entering reads the services (with
    `watch`), leaving unregisters what was registered through it.
    """

    def __init__(self, loop: Loop, build: Callable[[], ServiceDiscovery]) -> None:
        super().__init__(loop, build, what="service discovery")

    @property
    def base(self) -> str:
        return self.value.base

    def register(self, instance: ServiceInstance) -> ServiceInstance:
        """Register `instance` (an ephemeral node, made again after a lost session)."""
        return self._loop.call(self.value.register, instance, what="register()")

    def update(self, instance: ServiceInstance) -> None:
        """Write a registered instance's new details."""
        self._loop.call(self.value.update, instance, what="update()")

    def unregister(self, instance: ServiceInstance) -> None:
        """Remove a registration made through this discovery."""
        self._loop.call(self.value.unregister, instance, what="unregister()")

    def names(self) -> list[str]:
        """The names of the services registered under `base`."""
        return self._loop.call(self.value.names, what="names()")

    def instances(self, name: str) -> list[ServiceInstance]:
        """The instances of service `name` (from the cache with `watch`)."""
        return self._loop.call(self.value.instances, name, what="instances()")

    def instance(self, name: str, instance_id: str) -> ServiceInstance | None:
        """One instance of service `name` by id, or None."""
        return self._loop.call(self.value.instance, name, instance_id, what="instance()")

    def __repr__(self) -> str:
        return f"<blocking {self.value!r}>"
