"""`NodeCache` and `node_cache()`: one node, kept by one persistent watch."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

from ..._broadcast import SUBSCRIBER_BACKLOG
from ..._status_view import StatusView
from ...session import Coordinator
from ...zk import Node
from ._cache import TreeCache
from ._tree import CacheEvent, CacheEventType

__all__ = ("NodeCache", "node_cache")


class NodeCache(TreeCache):
    """A live copy of the node at `path` (kazoo's ``DataWatch``, Curator's ``NodeCache``).

    A `TreeCache` of the node alone (``max_depth=0``), on a persistent
    watch that is not recursive, so changes below it cost nothing.  Entering
    blocks until the node has been read once (absent is a fine answer: it
    is not created).  `current` is the node as last read, or None.
    """

    def __init__(self, coord: Coordinator, path: str, *, backlog: int = SUBSCRIBER_BACKLOG) -> None:
        super().__init__(coord, path, max_depth=0, max_nodes=1, backlog=backlog)

    @property
    def current(self) -> Node | None:
        """The node as last read (data and stat), or None if it does not exist."""
        return self.get(self.path)

    def changes(self) -> AsyncIterator[Node | None]:
        """Your own stream of the node after each change (None: deleted), from now on.

        A node deleted and created again yields None then the new node.  What
        `events()` says of subscribing, lagging and ending holds here too;
        `stale` tells whether `current` may be behind the server.
        """
        return _changes(self._subscribe())

    def status_view(self) -> StatusView:
        """This cache for a status page: FRESH, STALE or CLOSED, whether the node exists."""
        node = self.current
        facts = {"exists": node is not None, "version": None if node is None else node.stat.version}
        return StatusView("node_cache", self.path, self._state_word(), facts)

    def __repr__(self) -> str:
        node = self.current
        shown = f"version={node.stat.version}" if node is not None else "absent"
        return f"{super().__repr__()[:-1]} {shown}>"


async def _changes(events: AsyncGenerator[CacheEvent, None]) -> AsyncIterator[Node | None]:
    try:
        async for event in events:
            if event.type in (CacheEventType.CREATED, CacheEventType.CHANGED):
                yield event.node
            elif event.type is CacheEventType.DELETED:
                yield None
    finally:
        await events.aclose()  # unsubscribes


def node_cache(coord: Coordinator, path: str, *, backlog: int = SUBSCRIBER_BACKLOG) -> NodeCache:
    """A `NodeCache` of the node at `path`, to use as ``async with``; it is not created."""
    return NodeCache(coord, path, backlog=backlog)
