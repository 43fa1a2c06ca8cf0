"""kazoo 2.x's lock order and rules (``recipes/_queue/_kazoo``), checked against kazoo itself."""

from __future__ import annotations

import re

from kazoo.recipe.lock import Lock, ReadLock, WriteLock

from aiocoord.recipes._queue import (
    KAZOO_LOCK,
    KAZOO_READ_WRITE,
    Granted,
    Ordering,
    Wait,
    decide,
    first,
    kazoo_reader,
)

A = "a" * 32
B = "b" * 32
C = "c" * 32
D = "d" * 32


def kazoo_predecessor(kind: type[Lock], children: list[str], node: str) -> str | None:
    """kazoo's own ``_get_predecessor`` rule, without a client (its regex and comparison)."""
    pattern = re.compile(r"(?:{})(-?\d{{10}})$".format("|".join(kind._EXCLUDE_NAMES)))
    ours = node[32 + len(kind._NODE_NAME) :]
    ahead = [m for c in children if (m := pattern.search(c)) and m.group(1) < ours]
    return max(ahead, key=lambda m: m.groups()).string if ahead else None


def our_predecessor(children: list[str], node: str, *, rw: bool) -> str | None:
    names = KAZOO_READ_WRITE if rw else KAZOO_LOCK
    rule = kazoo_reader if "__rlock__" in node else first
    move = decide(Ordering(children, names), node, rule, owner=1, session_id=1)
    if isinstance(move, Granted):
        return None
    assert isinstance(move, Wait)
    return move.node


CHILDREN = [
    f"{C}__lock__0000000007",
    f"{A}__rlock__0000000003",
    "_c_0b1c-lock-0000000001",  # a Curator node: not a kazoo contender
    f"{B}__lock__0000000002",
    f"{D}__rlock__0000000009",
    f"{A}__lock__0000000005",
    "something-else",
]


def test_kazoo_order_keeps_its_contenders_by_sequence_text() -> None:
    assert KAZOO_LOCK.sort(CHILDREN) == [
        f"{B}__lock__0000000002",
        f"{A}__lock__0000000005",
        f"{C}__lock__0000000007",
    ]
    assert KAZOO_READ_WRITE.sort(CHILDREN) == [
        f"{B}__lock__0000000002",
        f"{A}__rlock__0000000003",
        f"{A}__lock__0000000005",
        f"{C}__lock__0000000007",
        f"{D}__rlock__0000000009",
    ]
    # A sequence past 2**31 wraps negative; kazoo compares the text, so it sorts first.
    assert KAZOO_LOCK.sort([f"{A}__lock__0000000002", f"{B}__lock__-2147483647"])[0].startswith(B)


def test_every_node_waits_for_the_one_kazoo_would() -> None:
    for node in KAZOO_LOCK.sort(CHILDREN):
        assert our_predecessor(CHILDREN, node, rw=False) == kazoo_predecessor(Lock, CHILDREN, node)
    for node in KAZOO_READ_WRITE.sort(CHILDREN):
        kind = ReadLock if "__rlock__" in node else WriteLock
        assert our_predecessor(CHILDREN, node, rw=True) == kazoo_predecessor(kind, CHILDREN, node)
