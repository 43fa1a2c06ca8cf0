"""`WatchTable`: the fake server's watches, and the notifications each change fires.

Keyed by (kind, path) as ZooKeeper keeps them: one-shot data, exist and child
watches go when they fire; persistent and recursive ones stay until removed.
A recursive watch sees every event at or below its path except
children-changed, as in ZooKeeper 3.8.
"""

from __future__ import annotations

__all__ = ("CHILDREN_CHANGED", "CREATED", "DATA_CHANGED", "DELETED", "Event", "WatchTable")

# Event types of notifications.
CREATED, DELETED, DATA_CHANGED, CHILDREN_CHANGED = 1, 2, 3, 4

Event = tuple[int, int, str]
"""A notification to send: (session id, event type, path)."""

KINDS = ("data", "exist", "child", "persistent", "recursive")  # setWatches2's order
# removeWatches' WatcherType: 1 children, 2 data, 3 any.
_REMOVES = {1: ("child",), 2: ("data", "exist"), 3: KINDS}


class WatchTable:
    """Sessions watching each (kind, path); `events` collects what fired since it was emptied."""

    def __init__(self) -> None:
        self.table: dict[tuple[str, str], set[int]] = {}
        self.events: list[Event] = []

    def add(self, kind: str, path: str, session: int) -> None:
        self.table.setdefault((kind, path), set()).add(session)

    def remove(self, session: int, path: str, watcher_type: int) -> bool:
        """removeWatches: False if the session had no such watch."""
        removed = False
        for kind in _REMOVES.get(watcher_type, ()):
            sessions = self.table.get((kind, path), set())
            removed |= session in sessions
            sessions.discard(session)
        return removed

    def forget(self, session: int) -> None:
        for key, sessions in list(self.table.items()):
            sessions.discard(session)
            if not sessions:
                del self.table[key]

    def fire(self, path: str, event_type: int, kinds: tuple[str, ...]) -> None:
        """A change at `path`: notify the one-shot watches of `kinds`, and the lasting ones."""
        fired: set[int] = set()
        for kind in kinds:
            fired |= self.table.pop((kind, path), set())
        fired |= self.table.get(("persistent", path), set())
        if event_type != CHILDREN_CHANGED:
            for (kind, base), sessions in self.table.items():
                if kind == "recursive" and (
                    path == base or path.startswith(base.rstrip("/") + "/")
                ):
                    fired |= sessions
        self.events.extend((session, event_type, path) for session in sorted(fired))

    def restore(
        self, session: int, kind: str, path: str, node: tuple[int, int] | None, zxid: int
    ) -> None:
        """setWatches2 for one watch: fire it if its node (mzxid, pzxid) changed since `zxid`."""
        if kind == "exist" and node is not None:
            self.events.append((session, CREATED, path))
        elif kind in ("data", "child") and node is None:
            self.events.append((session, DELETED, path))
        elif kind == "data" and node is not None and node[0] > zxid:
            self.events.append((session, DATA_CHANGED, path))
        elif kind == "child" and node is not None and node[1] > zxid:
            self.events.append((session, CHILDREN_CHANGED, path))
        else:
            self.add(kind, path, session)
