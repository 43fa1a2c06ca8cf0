"""The one loss rule (`recipes._loss`): its policies, and a right's `LossWatch`."""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
import pytest

from aiocoord import ConnectionState
from aiocoord.recipes._loss import (
    KEEP_FRACTION,
    LossPolicy,
    LossWatch,
    check_lose_on_suspend,
    suspended_deadline,
)
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


class _Timing:
    session_timeout = 9.0


class FakeSession:
    """The part of the session port the deadline policy uses, with a hand-driven clock."""

    def __init__(self, answered_at: float) -> None:
        self.answered_at = answered_at
        self.timing = _Timing()
        self.timers: dict[float, list[Callable[[], None]]] = {}

    def call_at(self, when: float, callback: Callable[[], None]) -> Callable[[], None]:
        self.timers.setdefault(when, []).append(callback)

        def cancel() -> None:
            if callback in self.timers.get(when, []):
                self.timers[when].remove(callback)
                if not self.timers[when]:
                    del self.timers[when]

        return cancel

    def ring(self) -> None:
        for when in sorted(self.timers):
            for callback in self.timers.pop(when):
                callback()


def test_not_given_is_the_deadline_policy() -> None:
    assert LossPolicy.of(None) is LossPolicy.DEADLINE
    assert KEEP_FRACTION == 2 / 3
    # Ends a third of the session timeout before the earliest expiry: over three times
    # the promised tenth, the rest being room for a stalled loop.
    assert suspended_deadline(100.0, 9.0) == 106.0
    assert (100.0 + 9.0) - suspended_deadline(100.0, 9.0) >= 9.0 / 10 * 3
    assert check_lose_on_suspend(None) is None and check_lose_on_suspend(True) is True
    with pytest.raises(TypeError, match="lose_on_suspend"):
        check_lose_on_suspend("yes")


def test_the_policy_table_keeps() -> None:
    rows = {
        LossPolicy.STRICT: (True, False, False, False),
        LossPolicy.LOST_ONLY: (True, True, True, False),
        LossPolicy.DEADLINE: (True, True, True, False),  # until the deadline: the watch ends it
    }
    for policy, expected in rows.items():
        got = tuple(policy.keeps(s) for s in (S.RECONNECTED, S.SUSPENDED, S.READ_ONLY, S.LOST))
        assert got == expected, policy
        assert not policy.keeps(None)


def test_deadline_keeps_through_a_short_suspension_on_the_same_session() -> None:
    now = time.monotonic()
    session = FakeSession(answered_at=now - 1.0)
    ended: list[str] = []
    watch = LossWatch(LossPolicy.DEADLINE, 5, ended.append, session=session)  # type: ignore[arg-type]
    watch.on_event(event(S.SUSPENDED))
    assert ended == []
    assert list(session.timers) == [now - 1.0 + 6.0]  # answered_at + 2/3 of 9 s
    watch.on_event(event(S.RECONNECTED, 5))
    assert ended == [] and session.timers == {}  # same session: disarmed, kept
    watch.on_event(event(S.READ_ONLY))  # read-only: as SUSPENDED for a writer
    assert len(session.timers) == 1
    watch.on_event(event(S.RECONNECTED, 6))  # a new session holds nothing of ours
    assert ended == ["session lost"] and session.timers == {}


def test_deadline_ends_the_right_when_it_rings_or_if_already_past() -> None:
    now = time.monotonic()
    session = FakeSession(answered_at=now - 1.0)
    ended: list[str] = []
    watch = LossWatch(LossPolicy.DEADLINE, 5, ended.append, session=session)  # type: ignore[arg-type]
    watch.on_event(event(S.SUSPENDED))
    session.answered_at = now - 7.0  # as if the deadline had passed by the time it rings
    session.ring()
    assert ended == ["suspended"] and session.timers == {}
    # Suspended after the deadline already passed (a read timeout): ends at once.
    ended.clear()
    late = LossWatch(LossPolicy.DEADLINE, 5, ended.append, session=session)  # type: ignore[arg-type]
    late.on_event(event(S.SUSPENDED))
    assert ended == ["suspended"] and session.timers == {}


def test_deadline_moves_on_when_a_reconnect_was_answered_meanwhile() -> None:
    now = time.monotonic()
    session = FakeSession(answered_at=now - 5.9)
    ended: list[str] = []
    watch = LossWatch(LossPolicy.DEADLINE, 5, ended.append, session=session)  # type: ignore[arg-type]
    watch.on_event(event(S.SUSPENDED))
    session.answered_at = now  # a handshake on the same session was answered
    session.ring()
    assert ended == [] and list(session.timers) == [now + 6.0]
    watch.drop()
    assert session.timers == {}


def test_deadline_arms_for_a_right_granted_while_suspended_and_without_a_session_is_strict() -> (
    None
):
    session = FakeSession(answered_at=time.monotonic())
    ended: list[str] = []
    watch = LossWatch(LossPolicy.DEADLINE, 5, ended.append, session=session)  # type: ignore[arg-type]
    watch.on_event(event(S.SUSPENDED, at=0.0))  # history (the replayed current state)
    assert ended == [] and len(session.timers) == 1
    watch.on_closed()
    assert ended == ["coordinator closed"] and session.timers == {}
    ended.clear()
    alone = LossWatch(LossPolicy.DEADLINE, 5, ended.append)
    alone.on_event(event(S.SUSPENDED))
    assert ended == ["suspended"]


@pytest.mark.anyio
async def test_the_session_rings_one_shared_timer_for_every_right_with_that_deadline() -> None:
    from aiocoord.settings import Settings
    from aiocoord.zk._session import ZkSession

    session = ZkSession(Settings(hosts="127.0.0.1:1"))
    assert session.answered_at == float("-inf")  # no session yet: nothing is provable
    fired: list[int] = []
    when = time.monotonic() + 0.05

    def ring(i: int) -> Callable[[], None]:
        return lambda: fired.append(i)

    cancels = [session.call_at(when, ring(i)) for i in range(300)]
    assert len(session._timers) == 1  # one loop timer, not one per right
    cancels[0]()
    cancels[0]()  # safe twice
    with anyio.fail_after(5):
        while len(fired) < 299:  # noqa: ASYNC110 - a loop timer, no event to wait on
            await anyio.sleep(0.01)
    assert sorted(fired) == list(range(1, 300)) and session._timers == {}
