"""The sequential-node queue's pure table: Curator's order, the rules, the decision (no server)."""

from __future__ import annotations

from typing import cast

import pytest

from aiocoord.recipes._queue import CreatedNode, OurNode
from aiocoord.recipes._queue._table import (
    LATCH,
    LEASE,
    LOCK,
    READ_WRITE,
    Gone,
    Granted,
    Move,
    Ordering,
    Rule,
    Stale,
    Wait,
    decide,
    fewer_than,
    first,
    may_take,
    reader,
    sort_key,
)
from aiocoord.zk import ZkClient

U = "_c_11111111-1111-4111-8111-111111111111-"


def names(marker: str, *seqs: int) -> list[str]:
    return [f"{U}{marker}{seq:010d}" for seq in seqs]


def moves(children: list[str], rule: Rule, layout: object = LOCK) -> list[Move]:
    """Each node's decision, in queue order, as its own session sees it."""
    order = Ordering(children, layout)  # type: ignore[arg-type]
    return [decide(order, n, rule, owner=1, session_id=1) for n in order.names]


# --- order -------------------------------------------------------------------------------------


def test_sort_key_takes_the_text_after_the_last_of_each_marker_in_turn() -> None:
    assert sort_key(U + "lock-0000000007", "lock-") == "0000000007"
    assert sort_key("lock-x-lock-0000000002", "lock-") == "0000000002"
    assert sort_key("foreign", "lock-") == "foreign"
    # InterProcessReadWriteLock's driver: after __READ__, then after __WRIT__.
    assert sort_key(U + "__READ__0000000003", "__READ__", "__WRIT__") == "0000000003"
    assert sort_key(U + "__WRIT__0000000004", "__READ__", "__WRIT__") == "0000000004"


def test_read_write_nodes_share_one_order() -> None:
    reads, writes = names("__READ__", 2, 5), names("__WRIT__", 1, 4)
    assert READ_WRITE.sort([reads[1], writes[1], reads[0], writes[0]]) == [
        writes[0],
        reads[0],
        writes[1],
        reads[1],
    ]
    assert READ_WRITE.marker == "__READ__" and LATCH.marker == "latch-" and LEASE.marker == "lease-"


def test_order_compares_utf16_code_units_as_java_does() -> None:
    # U+1F600 is a surrogate pair starting 0xD83D: Java orders it before U+FF5E.
    assert LOCK.sort(["\uff5e", "\U0001f600"]) == ["\U0001f600", "\uff5e"]


# --- the decision --------------------------------------------------------------------------------


def test_first_rule_latch_mutex_and_writer() -> None:
    a, b, c = names("lock-", 1, 2, 3)
    assert moves([c, a, b], first) == [Granted(), Wait(a, last=True), Wait(b, last=False)]


def test_our_node_gone_or_of_an_earlier_session() -> None:
    a, b, c = names("lock-", 1, 2, 3)
    order = Ordering([b, c], LOCK)
    assert decide(order, a, first, owner=1, session_id=1) == Gone()
    # CURATOR-696: created by another session, even when the rule lets it go: never taken.
    assert decide(order, b, first, owner=1, session_id=2) == Stale()
    assert decide(order, b, first, owner=1, session_id=None) == Stale()
    assert decide(order, a, first, owner=1, session_id=2) == Stale()


def test_a_foreign_name_counts_as_a_contender() -> None:
    a, b = names("lock-", 1, 2)
    assert moves([b, "-blocker", a], first) == [Granted(), Wait("-blocker", True), Wait(a, False)]


def test_semaphore_rule_leases_go_while_fewer_than_n_precede() -> None:
    l1, l2, l3, l4, l5 = names("lease-", 1, 2, 3, 4, 5)
    # InterProcessSemaphoreV2: the node max_leases places ahead is the one to watch.
    assert moves([l1, l2, l3, l4, l5], fewer_than(2), LEASE) == [
        Granted(),
        Granted(),
        Wait(l1, last=True),
        Wait(l2, last=False),  # l1 must go too (l3 goes first)
        Wait(l3, last=False),
    ]
    assert moves([l1, l2], fewer_than(3), LEASE) == [Granted(), Granted()]
    assert moves([l1, l2], fewer_than(1), LEASE) == moves([l1, l2], first, LEASE)


def test_read_write_rules() -> None:
    w1, w4 = names("__WRIT__", 1, 4)
    r2, r3, r5 = names("__READ__", 2, 3, 5)
    order = Ordering([w1, r2, r3, w4, r5], READ_WRITE)

    def move(node: str) -> Move:
        rule = first if "__WRIT__" in node else reader
        return decide(order, node, rule, owner=1, session_id=1)

    assert move(w1) == Granted()  # a writer goes when first
    assert move(r2) == Wait(w1, last=True)  # a reader watches the first writer ahead
    assert move(r3) == Wait(w1, last=True)
    assert move(w4) == Wait(r3, last=False)  # a writer watches the node just ahead
    assert move(r5) == Wait(w1, last=False)  # w4 is ahead too
    order = Ordering([r2, r3, w4, r5], READ_WRITE)
    assert move(r2) == move(r3) == Granted()  # readers share it while no writer precedes
    assert move(w4) == Wait(r3, last=False)
    assert move(r5) == Wait(w4, last=True)


def test_a_rule_naming_a_node_not_ahead_is_a_bug() -> None:
    a, b = names("lock-", 1, 2)
    with pytest.raises(AssertionError):
        decide(Ordering([a, b], LOCK), a, lambda ns, i: ns[1], owner=1, session_id=1)


def test_may_take_is_the_owner_check_on_grant() -> None:
    assert may_take(owner=5, session_id=5, connected=True, node_gone=False)
    assert not may_take(owner=5, session_id=6, connected=True, node_gone=False)
    assert not may_take(owner=5, session_id=None, connected=True, node_gone=False)
    assert not may_take(owner=5, session_id=5, connected=False, node_gone=False)
    assert not may_take(owner=5, session_id=5, connected=True, node_gone=True)


def test_a_withdraw_deletes_only_what_was_ours_when_it_began() -> None:
    """The selector's requeue joins again while its old node is being deleted: the
    withdraw under way must not take the new node (nor a new create in doubt) with it."""
    ours = OurNode(cast(ZkClient, None), "/q", "mutex")  # `ours` sends no request
    old = CreatedNode("/q/a", "a", 1, 7)
    ours.node, ours.pending = old, "uuid-1"
    began = ours.ours()
    assert began == (old, "uuid-1")
    ours.node, ours.pending = CreatedNode("/q/b", "b", 2, 7), "uuid-2"  # joined meanwhile
    assert ours.ours(began) == (None, None)
    ours.node = old
    assert ours.ours(began) == (old, None)
    assert ours.log.name == "aiocoord.recipes.mutex"
    assert OurNode(cast(ZkClient, None), "/q", "leader latch").log.name.endswith("leader_latch")
