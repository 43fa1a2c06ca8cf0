"""The mutex's pure tables: Curator's lock order, and what loses a hold."""

from __future__ import annotations

from aiocoord import ConnectionState
from aiocoord.recipes._queue import LOCK
from aiocoord.recipes.mutex._hold import loss_reason

S = ConnectionState
U1 = "_c_11111111-1111-4111-8111-111111111111-lock-"
U2 = "_c_22222222-2222-4222-8222-222222222222-lock-"


def test_lock_order_is_curators_and_counts_foreign_children() -> None:
    names = [U1 + "0000000007", "zzz", U2 + "0000000003", "-blocker", "lock-x-lock-0000000005"]
    assert LOCK.sort(names) == [
        "-blocker",  # sorts by its whole name, before every digit: a contender, as in Curator
        U2 + "0000000003",
        "lock-x-lock-0000000005",  # the text after the *last* lock-
        U1 + "0000000007",
        "zzz",
    ]
    # A latch's names in a lock's parent sort by their whole name: "_c_..." after the digits.
    assert LOCK.sort(["_c_x-latch-0000000001", U1 + "0000000002"]) == [
        U1 + "0000000002",
        "_c_x-latch-0000000001",
    ]


def test_loss_reason_table() -> None:
    def reason(state: ConnectionState, sid: int | None = 5, strict: bool = True) -> str | None:
        return loss_reason(state, sid, owner=5, lose_on_suspend=strict)

    assert reason(S.LOST) == reason(S.LOST, strict=False) == "session lost"
    assert reason(S.SUSPENDED) == reason(S.READ_ONLY) == "suspended"
    assert reason(S.SUSPENDED, strict=False) is None
    assert reason(S.READ_ONLY, strict=False) is None
    # Connected again after the grant: the connection was lost in between.
    assert reason(S.RECONNECTED) == "suspended"
    assert reason(S.RECONNECTED, strict=False) is None
    assert reason(S.RECONNECTED, 6, strict=False) == "session lost"
    assert reason(S.CONNECTED, 6) == "session lost"
