"""The queue's pure half: Curator's order, the "may I go" rules and the decision.

Nothing here awaits or talks to ZooKeeper; tests/unit/test_queue_table.py
tests it directly.  See the package docstring for the table itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

__all__ = (
    "LATCH",
    "LEASE",
    "LOCK",
    "READ_WRITE",
    "WRITE_MARKER",
    "CuratorNames",
    "Gone",
    "Granted",
    "Move",
    "Ordering",
    "Rule",
    "Sorts",
    "Stale",
    "Wait",
    "curator_sorted",
    "decide",
    "fewer_than",
    "first",
    "may_take",
    "reader",
    "sort_key",
)


# --- Curator's order -------------------------------------------------------------------------


def sort_key(name: str, *markers: str) -> str:
    """Curator's ``fixForSorting``: for each marker in turn, the text after its last
    occurrence (the whole text where it does not occur)."""
    for marker in markers:
        index = name.rfind(marker)
        if index >= 0:
            name = name[index + len(marker) :]
    return name


def curator_sorted(names: Sequence[str], *markers: str) -> list[str]:
    """Children in Curator's order for `markers` (ties broken by the whole name)."""
    keys = [sort_key(n, *markers) for n in names]
    if all(k.isascii() for k in keys):
        # Code-point order is Java's UTF-16 order for ASCII (the only case in practice).
        order = sorted(range(len(names)), key=lambda i: (keys[i], names[i]))
    else:
        utf16: Callable[[str], bytes] = lambda s: s.encode("utf-16-be", "surrogatepass")  # noqa: E731
        order = sorted(range(len(names)), key=lambda i: (utf16(keys[i]), utf16(names[i])))
    return [names[i] for i in order]


class Sorts(Protocol):
    """A layout of queue nodes: how its Java recipe orders them."""

    def sort(self, names: Sequence[str]) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class CuratorNames:
    """A Curator recipe's node names: created as ``_c_<uuid>-<markers[0]><seq>``, sorted
    by `sort_key` over every marker."""

    markers: tuple[str, ...]

    @property
    def marker(self) -> str:
        return self.markers[0]

    def sort(self, names: Sequence[str]) -> list[str]:
        return curator_sorted(names, *self.markers)


LATCH: Final = CuratorNames(("latch-",))  # LeaderLatch
LOCK: Final = CuratorNames(("lock-",))  # InterProcessMutex; LeaderSelector (a mutex)
LEASE: Final = CuratorNames(("lease-",))  # InterProcessSemaphoreV2's leases
READ_WRITE: Final = CuratorNames(("__READ__", "__WRIT__"))  # InterProcessReadWriteLock
WRITE_MARKER: Final = "__WRIT__"


class Ordering:
    """Children in queue order, with each name's position; built once per listing."""

    __slots__ = ("_position", "names")

    def __init__(self, children: Sequence[str], layout: Sorts) -> None:
        self.names = layout.sort(children)
        self._position = {name: i for i, name in enumerate(self.names)}

    def position(self, name: str) -> int | None:
        return self._position.get(name)


# --- the rules ---------------------------------------------------------------------------------

Rule = Callable[[Sequence[str], int], str | None]
"""May the node at `index` of the sorted names go?  None: yes; else the node to watch.

A rule looks only at the nodes ahead of ours (later nodes sort after it) and
must never get worse when one of them goes.
"""


def first(names: Sequence[str], index: int) -> str | None:
    """Latch, mutex, write lock: the first node goes; the others watch the one just ahead."""
    return None if index == 0 else names[index - 1]


def fewer_than(leases: int) -> Rule:
    """Semaphore (``InterProcessSemaphoreV2``): a lease goes while fewer than `leases` nodes
    precede it; else it watches the node `leases` places ahead, the next whose going lets it."""

    def rule(names: Sequence[str], index: int) -> str | None:
        return None if index < leases else names[index - leases]

    return rule


def reader(names: Sequence[str], index: int) -> str | None:
    """Read lock (``InterProcessReadWriteLock``): goes when no writer precedes it, as
    Curator's ``readLockPredicate``; else it watches the nearest writer ahead.

    Curator watches the first writer instead, so that every reader behind it
    wakes when it goes, those behind later writers too, only to list and wait
    again: a herd that grows with the queue.  The nearest writer goes last of
    the writers ahead (a writer waits for every node ahead of it), so its
    going wakes only the readers it lets go.
    """
    return next((name for name in reversed(names[:index]) if WRITE_MARKER in name), None)


# --- the decision ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Granted:
    """The rule lets our node go: the right is ours (once `may_take` agrees)."""


@dataclass(frozen=True, slots=True)
class Wait:
    """Watch `node`, the one the rule names.  `last`: its deletion alone lets ours go.

    Nodes created after the listing sort after ours, so the nodes ahead can only
    go: when `last`, the deletion grants ours with no listing in between.
    """

    node: str
    last: bool


@dataclass(frozen=True, slots=True)
class Gone:
    """Our node is not among the children: someone deleted it (or its parent); join again."""


@dataclass(frozen=True, slots=True)
class Stale:
    """Our node belongs to an earlier session: delete it and join again at the tail."""


Move = Granted | Wait | Gone | Stale


def decide(order: Ordering, ours: str, rule: Rule, *, owner: int, session_id: int | None) -> Move:
    """What to do given a listing in queue order, our node's name and owner, and the session.

    `owner` is the ephemeral owner our node was created with.  A node owned by
    another session is never taken on, even when the rule lets it go: the
    server deletes it as soon as it expires that session, and the next in
    line would take the right too (Curator's CURATOR-696).
    """
    if session_id is None or owner != session_id:
        return Stale()
    index = order.position(ours)
    if index is None:
        return Gone()
    names = order.names
    watched = rule(names, index)
    if watched is None:
        return Granted()
    at = order.position(watched)
    assert at is not None and at < index, f"a rule must name a node ahead of ours: {watched}"
    without = [*names[:at], *names[at + 1 : index + 1]]
    return Wait(watched, rule(without, index - 1) is None)


def may_take(*, owner: int, session_id: int | None, connected: bool, node_gone: bool) -> bool:
    """The last check before the right is taken, made with no await after it.

    Our node must have been created by the session we are connected on right
    now (CURATOR-696), and must not have been reported deleted.
    """
    return connected and not node_gone and session_id is not None and owner == session_id
