"""The one loss rule (`recipes._loss`): its policies, and a right's `LossWatch`."""

from __future__ import annotations

import time
from collections.abc import Callable

from aiocoord import ConnectionState
from aiocoord.recipes._loss import LossPolicy, LossWatch
from aiocoord.zk.states import ConnectionEvent

S = ConnectionState


def event(
    state: ConnectionState, session: int | None = 5, *, at: float | None = None
) -> ConnectionEvent:
    return ConnectionEvent(state, session, at=time.monotonic() if at is None else at)


def test_policy_of_lose_on_suspend() -> None:
    assert LossPolicy.of(True) is LossPolicy.STRICT
    assert LossPolicy.of(False) is LossPolicy.LOST_ONLY


def test_strict_ends_on_suspended_and_lost_only_keeps_until_lost() -> None:
    for policy, suspended in ((LossPolicy.STRICT, ["suspended"]), (LossPolicy.LOST_ONLY, [])):
        ended: list[str] = []
        watch = LossWatch(policy, 5, ended.append)
        watch.on_event(event(S.SUSPENDED))
        watch.on_event(event(S.READ_ONLY))
        assert ended == suspended * 2
        ended.clear()
        watch.on_event(event(S.LOST))
        assert ended == ["session lost"]


def test_states_before_the_grant_are_history() -> None:
    ended: list[str] = []
    before = time.monotonic()
    watch = LossWatch(LossPolicy.STRICT, 5, ended.append)
    watch.on_event(event(S.SUSPENDED, at=before))
    assert ended == []
    watch.on_event(event(S.SUSPENDED))
    assert ended == ["suspended"]


def test_a_new_session_ends_the_right_under_either_policy() -> None:
    ended: list[str] = []
    watch = LossWatch(LossPolicy.LOST_ONLY, 5, ended.append)
    watch.on_event(event(S.RECONNECTED, 5))
    assert ended == []
    watch.on_event(event(S.RECONNECTED, 6))
    assert ended == ["session lost"]


def test_follow_owner_owns_the_latest_connected_session_history_included() -> None:
    ended: list[str] = []
    watch = LossWatch(LossPolicy.LOST_ONLY, None, ended.append, follow_owner=True)
    watch.on_event(event(S.CONNECTED, 7, at=0.0))  # a replayed state: history, but it owns
    watch.on_event(event(S.SUSPENDED, 7))
    watch.on_event(event(S.RECONNECTED, 7))
    assert ended == []
    watch.on_event(event(S.RECONNECTED, 8))
    assert ended == ["session lost"]
    watch.on_event(event(S.SUSPENDED, 8))
    watch.on_event(event(S.RECONNECTED, 8))
    assert ended == ["session lost"]  # the new session is the owner now


def test_follow_calls_back_until_dropped_and_closing_ends_the_right() -> None:
    ended: list[str] = []
    listeners: list[tuple[Callable[[ConnectionEvent], None], Callable[[], None]]] = []

    def follow_states(
        on_event: Callable[[ConnectionEvent], None], on_close: Callable[[], None]
    ) -> Callable[[], None]:
        listeners.append((on_event, on_close))
        return listeners.clear

    watch = LossWatch(LossPolicy.STRICT, 5, ended.append, closed="closed").follow(follow_states)
    on_event, on_close = listeners[0]
    on_event(event(S.SUSPENDED))
    on_close()
    assert ended == ["suspended", "closed"]
    watch.drop()
    watch.drop()  # twice is fine
    assert listeners == []


def test_keeps_says_which_states_a_held_right_lives_through() -> None:
    assert [LossPolicy.STRICT.keeps(state) for state in S] == [
        state in (S.CONNECTED, S.RECONNECTED) for state in S
    ]
    assert [LossPolicy.LOST_ONLY.keeps(state) for state in S] == [
        state is not S.LOST for state in S
    ]
    assert not LossPolicy.STRICT.keeps(None) and not LossPolicy.LOST_ONLY.keeps(None)
