"""`ServiceDiscovery` and `service_discovery()`: register services and find them.

curator-x-discovery's ``ServiceDiscovery``.  Node layout, Curator's:
``<base>/<service name>/<instance id>`` holds the instance's JSON (see
`ServiceInstance`; ``JsonInstanceSerializer``'s exact form), ephemeral for a
``DYNAMIC`` instance, persistent for ``STATIC`` and ``PERMANENT``; the
parents are containers.  No test runs a Java curator-x-discovery against it
yet (Debian ships no curator-x-discovery jar), so docs/compatibility.md marks
it as its own layout: do not count on a mixed fleet.

Each registration is a `PersistentNode`: it comes back by itself after a
lost session (Curator re-registers on RECONNECTED), and `update()` is kept
across reconnects.  Lookups (`instances`, `names`, `provider`) read a
`TreeCache` of depth 2 on the base (one persistent recursive watch), never
the network; made with ``watch=False`` (a process that only registers) it
watches nothing and lookups read the server.

Failure handling: while SUSPENDED or LOST lookups answer from the last state
read (`stale` says so); registrations are put back once connected again.  A
node whose data is not an instance (corrupt, foreign) is left out of the
listing and logged once at WARNING naming it; the rest is listed.  Leaving
unregisters every instance this discovery registered (as Curator's
``close()``), shielded and bounded.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any, cast

import anyio

from ..._checks import check_coordinator, check_node_name, check_root
from ..._lifecycle import Service
from ..._status_view import StatusView
from ...errors import ConfigError, NodeDataError, NoNodeError
from ...session import Coordinator
from ...zk import CreateMode, Node
from ...zk.paths import join
from ..cache import CacheEvent, CacheEventType, TreeCache, tree_cache
from ._instance import ServiceInstance, decode_instance, encode_instance
from ._persistent import PersistentNode
from ._provider import ServiceProvider, Strategy

__all__ = ("ServiceDiscovery", "service_discovery")

log = logging.getLogger("aiocoord.recipes.membership")

_MODES = {
    "DYNAMIC": CreateMode.EPHEMERAL,
    "STATIC": CreateMode.PERSISTENT,
    "PERMANENT": CreateMode.PERSISTENT,
}


class ServiceDiscovery(Service):
    """Service registration and discovery under `base` (curator-x-discovery's layout).

    Entering blocks until the services under `base` have been read (waiting
    for a connection if need be: bound it with `anyio.fail_after`); leaving
    unregisters what this discovery registered and stops watching.  With
    ``watch=False`` (a process that only registers, as Curator's
    ``ServiceDiscovery`` without a ``ServiceCache``) nothing is watched or
    read on entering, lookups read the server (a listing and a read per
    instance) and `changes()` is refused.  Raises `InvalidPathError` or
    `TypeError` for bad arguments.
    """

    def __init__(self, coord: Coordinator, base: str, *, watch: bool = True) -> None:
        self._coord = check_coordinator(coord)
        self._base = check_root(base, "base")
        if not isinstance(watch, bool):
            raise TypeError(f"watch must be a bool, not {type(watch).__name__}")
        self._watch = watch
        self._cache: TreeCache = tree_cache(coord, self._base, max_depth=2)
        self._registered: dict[str, tuple[ServiceInstance, PersistentNode]] = {}
        self._corrupt: dict[str, int] = {}  # path -> mzxid logged, so each state is logged once
        # path -> (czxid, mzxid, instance): each state of a node is decoded once, not at
        # every lookup (a watcher looking after each change would decode n nodes n times).
        self._decoded: dict[str, tuple[int, int, ServiceInstance | None]] = {}

    async def start(self) -> None:
        """Read the services under `base` (with `watch`); see the class docstring."""
        if self._watch:
            await self._cache.start()

    async def aclose(self) -> None:
        """Unregister this discovery's instances and stop watching; from any task, idempotent."""
        with anyio.CancelScope(shield=True):
            for instance, _ in list(self._registered.values()):
                await self.unregister(instance)
        await self._cache.aclose()

    @property
    def base(self) -> str:
        return self._base

    @property
    def stale(self) -> bool:
        """Whether lookups may be behind the server (no connection, or a re-read under way)."""
        return self._watch and self._cache.stale

    # --- registering -------------------------------------------------------------------------

    def _path(self, instance: ServiceInstance) -> str:
        check_node_name("instance.name", instance.name, protected=False)
        check_node_name("instance.id", instance.id, protected=False)
        return join(join(self._base, instance.name), instance.id)

    async def register(self, instance: ServiceInstance) -> ServiceInstance:
        """Register `instance`; returns it once its node is there.

        A ``DYNAMIC`` instance is ephemeral and comes back by itself after a
        lost session.  Registering an id again replaces the registration.
        Blocks until created (waiting for a connection if need be);
        cancelled, nothing is left registered.  Raises `ConfigError` for a
        ``DYNAMIC_SEQUENTIAL`` instance or a name or id that is not a node
        name, `TypeError` if `instance` is not a `ServiceInstance`.
        """
        if not isinstance(instance, ServiceInstance):
            raise TypeError(f"instance must be a ServiceInstance, not {type(instance).__name__}")
        mode = _MODES.get(instance.service_type)
        if mode is None:
            raise ConfigError(
                "instance.service_type", f"{instance.service_type} is not registered by aiocoord"
            )
        path = self._path(instance)
        if instance.id in self._registered:
            await self.unregister(self._registered[instance.id][0])
        node = PersistentNode(self._coord, path, data=encode_instance(instance), mode=mode)
        await node.start()
        self._registered[instance.id] = (instance, node)
        log.info("registered %s", path)
        return instance

    async def update(self, instance: ServiceInstance) -> None:
        """Write `instance` over its registration (same name and id); kept across reconnects.

        Blocks until the server holds it.  Raises `ConfigError` if it is not
        registered here.
        """
        if not isinstance(instance, ServiceInstance):
            raise TypeError(f"instance must be a ServiceInstance, not {type(instance).__name__}")
        entry = self._registered.get(instance.id)
        if entry is None or entry[0].name != instance.name:
            raise ConfigError("instance", f"{instance.name}/{instance.id} is not registered here")
        self._registered[instance.id] = (instance, entry[1])
        await entry[1].set_data(encode_instance(instance))

    async def unregister(self, instance: ServiceInstance) -> None:
        """Delete `instance`'s registration (shielded, bounded); nothing if it is not registered here."""
        entry = self._registered.pop(instance.id, None)
        if entry is not None:
            await entry[1].aclose()
            log.info("unregistered %s", entry[1].path)

    def registered(self) -> list[ServiceInstance]:
        """The instances this discovery has registered."""
        return [instance for instance, _ in self._registered.values()]

    # --- finding -----------------------------------------------------------------------------

    async def names(self) -> list[str]:
        """The names of the services under `base`, sorted, from the cache."""
        if not self._watch:
            return sorted(await self._children(self._base))
        return self._cache.children(self._base)

    async def _children(self, path: str) -> list[str]:
        try:
            return await self._coord.client.children(path)
        except NoNodeError:
            return []

    async def _node(self, path: str) -> Node | None:
        if self._watch:
            return self._cache.get(path)
        try:
            return await self._coord.client.get(path)
        except NoNodeError:
            return None

    async def instances(self, name: str) -> list[ServiceInstance]:
        """The instances of service `name` from the cache (corrupt nodes left out, logged once)."""
        parent = join(self._base, check_node_name("name", name, protected=False))
        found = []
        kids = self._cache.children(parent) if self._watch else sorted(await self._children(parent))
        for child in kids:
            path = join(parent, child)
            node = await self._node(path)
            if node is not None and (instance := self._decode(path, node)) is not None:
                found.append(instance)
        return found

    async def instance(self, name: str, instance_id: str) -> ServiceInstance | None:
        """The instance `instance_id` of service `name` from the cache, or None."""
        path = join(
            join(self._base, check_node_name("name", name, protected=False)),
            check_node_name("instance_id", instance_id, protected=False),
        )
        node = await self._node(path)
        return None if node is None else self._decode(path, node)

    def changes(self) -> AsyncIterator[None]:
        """Your own stream of one item after each change under `base`, from now on.

        Curator's ``ServiceCacheListener.cacheChanged()``: look again with
        `instances()` or `names()`.  Nothing is yielded while `stale`; once
        read again after a reconnect, one item.  Ends when the discovery is
        left.  Raises `ConfigError` without `watch`.
        """
        if not self._watch:
            raise ConfigError("watch", "changes() needs service_discovery(..., watch=True)")
        return self._changes(cast(AsyncGenerator[CacheEvent, None], self._cache.events()))

    async def _changes(self, events: AsyncGenerator[CacheEvent, None]) -> AsyncIterator[None]:
        async with aclosing(events):
            async for event in events:
                if event.type is not CacheEventType.STALE and not self._cache.stale:
                    yield None

    def _decode(self, path: str, node: Node) -> ServiceInstance | None:
        stat = node.stat
        known = self._decoded.get(path)
        if known is not None and known[0] == stat.czxid and known[1] == stat.mzxid:
            return _own_copy(known[2])
        instance: ServiceInstance | None
        try:
            instance = decode_instance(node.data, path)
        except NodeDataError as exc:
            instance = None
            if self._corrupt.get(path) != stat.mzxid:
                self._corrupt[path] = stat.mzxid
                log.warning("service discovery: skipped %s: %s", path, exc.reason)
        if len(self._decoded) > 2 * len(self._cache) + 1024:
            self._decoded.clear()  # nodes gone since: forget them all, the live ones come back
            self._corrupt.clear()  # the same (a node still corrupt is logged once more)
        self._decoded[path] = (stat.czxid, stat.mzxid, instance)
        return _own_copy(instance)

    def provider(
        self,
        name: str,
        strategy: Strategy = "round-robin",
        *,
        down_for: float = 30.0,
        error_threshold: int = 2,
    ) -> ServiceProvider:
        """A `ServiceProvider` of service `name`, reading this discovery's cache."""
        return ServiceProvider(
            check_node_name("name", name, protected=False),
            self.instances,
            strategy=strategy,
            down_for=down_for,
            error_threshold=error_threshold,
        )

    def status_view(self) -> StatusView:
        """This discovery for a status page, from memory: its registrations (service name and
        whether the node is there; id, address and port with detail) and its cache's state
        (FRESH, STALE or CLOSED; ``"NOT_WATCHING"`` with ``watch=False``)."""
        shown = []
        private = []
        for instance, node in self._registered.values():
            shown.append({"name": instance.name, "present": node.present})
            private.append(
                {
                    "name": instance.name,
                    "id": instance.id,
                    "address": instance.address,
                    "port": instance.port,
                }
            )
        state = self._cache.status_view().state if self._watch else "NOT_WATCHING"
        facts: dict[str, Any] = {"registered": shown}
        if self._watch:
            facts["services"] = len(self._cache.children(self._base))
        return StatusView("service_discovery", self._base, state, facts, {"instances": private})

    def __repr__(self) -> str:
        stale = " STALE" if self.stale else ""
        return f"<ServiceDiscovery {self._base} registered={len(self._registered)}{stale}>"


def service_discovery(coord: Coordinator, base: str, *, watch: bool = True) -> ServiceDiscovery:
    """A `ServiceDiscovery` under `base`, to use as ``async with``."""
    return ServiceDiscovery(coord, base, watch=watch)


def _own_copy(instance: ServiceInstance | None) -> ServiceInstance | None:
    """The kept decoding, with a payload dict of the caller's own (the rest is immutable)."""
    if instance is None or not isinstance(instance.payload, dict):
        return instance
    return dataclasses.replace(instance, payload=copy.deepcopy(instance.payload))
