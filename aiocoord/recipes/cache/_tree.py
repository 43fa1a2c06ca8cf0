"""The pure half of the caches: snapshots, the events between two, and what a read changes.

`TreeState` is fed, in the connection's order, with what the I/O half saw (a
watch notification, the answer to a read) and returns the `CacheEvent`s to
publish and the reads to send.  It never awaits and does no I/O, so its
rules (versions only rise, a full re-read yields exactly the differences)
are tested directly.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from ...errors import CacheOverflowError, NoAuthError, NoNodeError, ZooKeeperError
from ...zk import EventType, Node
from ...zk.paths import join, parent

__all__ = (
    "CacheEvent",
    "CacheEventType",
    "Read",
    "Snapshot",
    "Step",
    "TreeState",
    "diff",
)

log = logging.getLogger("aiocoord.recipes.cache")


class CacheEventType(enum.Enum):
    """What happened to a cached node; STALE and FRESH are about the whole cache.

    STALE: the connection is gone and the cache may be behind the server (it
    keeps serving what it last read).  FRESH: it has read the tree again and
    published the differences: it is current.  Both carry the cache's root as
    `path` and no node.
    """

    CREATED = "CREATED"
    CHANGED = "CHANGED"
    DELETED = "DELETED"
    STALE = "STALE"
    FRESH = "FRESH"


@dataclass(frozen=True, slots=True)
class CacheEvent:
    """One change seen by a cache: `node` after it (None: deleted), `previous` before it."""

    type: CacheEventType
    path: str
    node: Node | None = None
    previous: Node | None = None


@dataclass(frozen=True, slots=True)
class Read:
    """A read to send: a node's data, or (`children`) its child names.

    `generation` ties a full re-read's reads to it (0: a read after a notification).
    """

    path: str
    children: bool = False
    generation: int = 0


@dataclass(slots=True)
class Step:
    """What one observation calls for: events to publish, reads to send, a re-read finished."""

    events: list[CacheEvent] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    fresh: bool = False


def _order(path: str) -> list[str]:
    return path.split("/")  # a parent sorts right before its subtree


class Snapshot:
    """Nodes by path, with each node's cached children."""

    __slots__ = ("kids", "nodes", "root")

    def __init__(self, root: str, nodes: Mapping[str, Node] | None = None) -> None:
        self.root = root
        self.nodes: dict[str, Node] = {}
        self.kids: dict[str, set[str]] = {}
        for path, node in (nodes or {}).items():
            self.put(path, node)

    def put(self, path: str, node: Node) -> None:
        if path not in self.nodes and path != self.root:
            self.kids.setdefault(parent(path), set()).add(path.rsplit("/", 1)[1])
        self.nodes[path] = node

    def subtree(self, path: str) -> list[str]:
        """`path` (if cached) and every cached node below it, deepest first."""
        found: list[str] = []
        todo = [path]
        while todo:
            here = todo.pop()
            if here in self.nodes:
                found.append(here)
            todo.extend(join(here, name) for name in self.kids.get(here, ()))
        return sorted(found, key=_order, reverse=True)

    def drop(self, path: str) -> list[tuple[str, Node]]:
        """Remove `path` and its subtree; the removed nodes, deepest first."""
        removed = []
        for here in self.subtree(path):
            removed.append((here, self.nodes.pop(here)))
            self.kids.pop(here, None)
            if here != self.root:
                up = parent(here)
                names = self.kids.get(up)
                if names is not None:
                    names.discard(here.rsplit("/", 1)[1])
                    if not names:
                        del self.kids[up]
        return removed


def _older(new: Node, old: Node) -> bool:
    """Whether `new` is an earlier state of the path than `old` (never reported)."""
    a, b = new.stat, old.stat
    return a.czxid < b.czxid or (a.czxid == b.czxid and a.mzxid < b.mzxid)


def diff(
    old: Mapping[str, Node], new: Mapping[str, Node]
) -> tuple[list[CacheEvent], dict[str, Node]]:
    """The events that turn `old` into `new`, and the state to keep.

    Deletions come first, deepest first; then creations and changes, parents
    first.  A node whose czxid differs was deleted and created again: DELETED
    then CREATED.  A node `new` holds in an older version than `old` keeps
    `old`'s (versions only rise), with no event.
    """
    events: list[CacheEvent] = []
    kept = dict(new)
    gone = [p for p, node in old.items() if p not in new or new[p].stat.czxid > node.stat.czxid]
    for path in sorted(gone, key=_order, reverse=True):
        events.append(CacheEvent(CacheEventType.DELETED, path, None, old[path]))
    for path in sorted(new, key=_order):
        node, was = new[path], old.get(path)
        if was is None or node.stat.czxid > was.stat.czxid:
            events.append(CacheEvent(CacheEventType.CREATED, path, node, None))
        elif _older(node, was):
            kept[path] = was
        elif node.stat.mzxid > was.stat.mzxid:
            events.append(CacheEvent(CacheEventType.CHANGED, path, node, was))
    return events, kept


class TreeState:
    """A cache's state: what it serves, and the full re-read in progress (if any).

    Observations must come in the connection's order (notifications and
    replies interleaved as read): each is then the truth at its place, and
    applying them in turn keeps the cache a state the server went through,
    per path.  Outside a re-read they change the served snapshot and yield
    events; during one they build the next snapshot, which replaces the
    served one (with the events of `diff`) once its last read is answered.
    """

    def __init__(self, root: str, *, max_depth: int | None, max_nodes: int) -> None:
        self.root = root
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        self.served = Snapshot(root)
        self.building: Snapshot | None = None
        self.generation = 0
        self.unreadable: set[str] = set()
        self._outstanding = 0
        self._below = root.rstrip("/") + "/"

    # --- where a path stands ----------------------------------------------------------------

    def depth(self, path: str) -> int | None:
        """Levels below the root (0: the root); None outside the tree or past `max_depth`."""
        if path == self.root:
            return 0
        if not path.startswith(self._below):
            return None
        depth = path.count("/", len(self._below)) + 1
        if self.max_depth is not None and depth > self.max_depth:
            return None
        return depth

    # --- full re-reads ----------------------------------------------------------------------

    def begin(self) -> list[Read]:
        """Start a full re-read: the root's read to send (its answers lead to the rest)."""
        self.generation += 1
        self.building = Snapshot(self.root)
        self._outstanding = 1
        return [Read(self.root, False, self.generation)]

    def abort(self) -> None:
        """The connection is gone, and the re-read's pending answers with it."""
        self.building = None
        self._outstanding = 0

    def _finish(self, step: Step) -> None:
        assert self.building is not None
        events, kept = diff(self.served.nodes, self.building.nodes)
        self.served = Snapshot(self.root, kept)
        self.building = None
        step.events.extend(events)
        step.fresh = True

    # --- observations -----------------------------------------------------------------------

    def on_event(self, type_: EventType, path: str) -> Step:
        """A watch notification about `path`."""
        step = Step()
        if self.depth(path) is None:
            return step
        if type_ is EventType.DELETED:
            self._drop(path, step)
        elif type_ in (EventType.CREATED, EventType.DATA_CHANGED):
            step.reads.append(Read(path))
        return step

    def on_answer(self, read: Read, answer: Node | list[str] | ZooKeeperError) -> Step:
        """The answer to `read`: a node, child names, or the error the read met.

        Raises `CacheOverflowError` once more than `max_nodes` nodes are held.
        """
        step = Step()
        if read.generation and (read.generation != self.generation or self.building is None):
            return step  # a re-read given up (its answers normally die with the connection)
        if isinstance(answer, Node):
            self.unreadable.discard(read.path)
            self._put(read.path, answer, step)
            depth = self.depth(read.path)
            deeper = depth is not None and (self.max_depth is None or depth < self.max_depth)
            if read.generation and answer.stat.num_children and deeper:
                step.reads.append(Read(read.path, True, read.generation))
                self._outstanding += 1
        elif isinstance(answer, list):
            self._children(read, answer, step)
        elif isinstance(answer, NoNodeError):
            self._drop(read.path, step)
        elif isinstance(answer, NoAuthError):
            if read.path not in self.unreadable:
                self.unreadable.add(read.path)
                log.warning("cache of %s: no permission to read %s; left out", self.root, read.path)
        else:
            log.warning("cache of %s: reading %s failed: %s", self.root, read.path, answer)
        if read.generation:
            self._outstanding -= 1
            if not self._outstanding:
                self._finish(step)
        return step

    def _children(self, read: Read, names: list[str], step: Step) -> None:
        target = self.building
        assert target is not None
        listed = set(names)
        for name in sorted(target.kids.get(read.path, set()) - listed):
            self._drop(join(read.path, name), step)  # gone since its notification's read
        for name in names:
            step.reads.append(Read(join(read.path, name), False, read.generation))
        self._outstanding += len(names)

    def _target(self) -> tuple[Snapshot, bool]:
        """The snapshot observations change now, and whether its changes are published."""
        return (self.served, True) if self.building is None else (self.building, False)

    def _put(self, path: str, node: Node, step: Step) -> None:
        target, publish = self._target()
        was = target.nodes.get(path)
        if was is not None and (_older(node, was) or node.stat.mzxid == was.stat.mzxid):
            if node.stat.czxid == was.stat.czxid and node.stat.pzxid > was.stat.pzxid:
                target.nodes[path] = node  # the same data, newer child counts: no event
            return
        if was is not None and node.stat.czxid != was.stat.czxid:
            self._drop(path, step)  # deleted and created again
            was = None
        target.put(path, node)
        if len(target.nodes) > self.max_nodes:
            raise CacheOverflowError(self.root, self.max_nodes)
        if publish:
            kind = CacheEventType.CREATED if was is None else CacheEventType.CHANGED
            step.events.append(CacheEvent(kind, path, node, was))

    def _drop(self, path: str, step: Step) -> None:
        target, publish = self._target()
        removed = target.drop(path)
        if publish:
            step.events.extend(
                CacheEvent(CacheEventType.DELETED, p, None, node) for p, node in removed
            )
