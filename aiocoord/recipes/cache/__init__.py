"""Caches: a node or a whole subtree kept up to date by one watch, read without a round trip.

kazoo's ``DataWatch`` / ``TreeCache`` and Curator's ``NodeCache`` /
``CuratorCache``, as async streams::

    async with aiocoord.tree_cache(coord, "/services") as tree:
        tree.get("/services/api/i-1")          # Node | None
        tree.children("/services/api")         # sorted names
        async for event in tree.events(): ...  # CacheEvent(type, path, node, previous)

    async with aiocoord.node_cache(coord, "/config/flags") as flags:
        flags.current                          # Node | None
        async for node in flags.changes(): ...

Node layout: none of its own.  The cache reads the subtree at its path as it
is and writes nothing; entering does not create the path (a missing root is
an empty cache, filled when the root appears).

How it keeps up:

- One persistent recursive watch per cache (ZooKeeper 3.6+ ``addWatch``; a
  plain persistent one for a `NodeCache`), never a watch per node, and no
  one-shot watch at all: on ZooKeeper 3.8.0 a one-shot watch set by the same
  session on the recursive watch's own path silences it (ZOOKEEPER-4466).
  Another recipe of the same coordinator that sets one there silences the
  cache too.
- A full read is pipelined: a node's data, then (if it has children) their
  names, then every child's data at once, level after level, all sent from
  where the answers are read.  After that, each notification costs one read
  of the node it names (a deletion costs none).
- Notifications and answers are applied in the connection's order, in
  which each is the truth at its place; so per path the versions reported
  only rise, and once writes stop the cache equals the server.  Changes may
  coalesce: a read shows the latest data, not each write.  A node's stat
  is as of its last read: children added or removed since do not change its
  ``num_children`` (use `children()`).

Failure handling:

- SUSPENDED (or LOST): the cache keeps serving what it last read, says
  `stale`, and publishes one STALE event.  It never serves a state older
  than one it served.
- Connected again, on the same session or a new one: a ``sync`` (the new
  server catches up with the leader), then a full re-read beside the served
  state, which is replaced once the re-read is complete, publishing exactly
  the differences (DELETED for each node gone, deepest first; CREATED and
  CHANGED parents first; a node deleted and created again is DELETED then
  CREATED; none for an unchanged node), then FRESH.  The watch itself is
  restored by the session (SetWatches2) or added again on a new session.
- A node the session may not read (ACL) is left out, logged once at
  WARNING naming it, and listed in `unreadable`; the rest is cached.
- More than ``max_nodes`` nodes: entering raises `CacheOverflowError`; past
  it later, the cache stops and its `events()` streams raise it.
- Each `events()` subscriber has its own bounded buffer; one that falls
  behind gets `SubscriberLagged` after the events it had, never silence.
"""

from __future__ import annotations

from ._cache import DEFAULT_MAX_NODES as DEFAULT_MAX_NODES
from ._cache import TreeCache as TreeCache
from ._cache import tree_cache as tree_cache
from ._node import NodeCache as NodeCache
from ._node import node_cache as node_cache
from ._tree import CacheEvent as CacheEvent
from ._tree import CacheEventType as CacheEventType

__all__ = (
    "DEFAULT_MAX_NODES",
    "CacheEvent",
    "CacheEventType",
    "NodeCache",
    "TreeCache",
    "node_cache",
    "tree_cache",
)
