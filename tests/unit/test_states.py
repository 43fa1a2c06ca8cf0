"""The pure connection-state machine, table by table (no server needed)."""

from __future__ import annotations

import pytest

from aiocoord.zk.states import (
    Closed,
    ConnectionMachine,
    ConnectionState,
    Dropped,
    Established,
    Expired,
    LostTimeout,
    Observation,
)

S = ConnectionState


def run(*observations: Observation) -> list[tuple[ConnectionState, int | None, bool]]:
    machine = ConnectionMachine()
    out = []
    for obs in observations:
        out += [(e.state, e.session_id, e.new_session) for e in machine.feed(obs)]
    return out


def test_first_session_is_connected() -> None:
    assert run(Established(7, True)) == [(S.CONNECTED, 7, True)]


def test_first_session_on_read_only_server() -> None:
    assert run(Established(7, True, read_only=True)) == [(S.READ_ONLY, 7, True)]


def test_drop_and_same_session_back() -> None:
    assert run(Established(7, True), Dropped("eof"), Established(7, False)) == [
        (S.CONNECTED, 7, True),
        (S.SUSPENDED, 7, False),
        (S.RECONNECTED, 7, False),
    ]


def test_expiry_then_new_session() -> None:
    assert run(Established(7, True), Dropped("eof"), Expired(), Established(9, True)) == [
        (S.CONNECTED, 7, True),
        (S.SUSPENDED, 7, False),
        (S.LOST, 7, False),
        (S.RECONNECTED, 9, True),
    ]


def test_lost_timer_only_counts_while_suspended() -> None:
    assert run(Established(7, True), LostTimeout()) == [(S.CONNECTED, 7, True)]
    assert run(Established(7, True), Dropped("x"), LostTimeout(), LostTimeout()) == [
        (S.CONNECTED, 7, True),
        (S.SUSPENDED, 7, False),
        (S.LOST, 7, False),
    ]


def test_repeated_drops_publish_one_suspended() -> None:
    assert run(Established(7, True), Dropped("a"), Dropped("b")) == [
        (S.CONNECTED, 7, True),
        (S.SUSPENDED, 7, False),
    ]


def test_nothing_before_the_first_session() -> None:
    assert run(Dropped("refused"), Expired(), LostTimeout()) == []


def test_expired_while_connected_goes_straight_to_lost() -> None:
    assert run(Established(7, True), Expired()) == [(S.CONNECTED, 7, True), (S.LOST, 7, False)]


def test_read_only_then_read_write() -> None:
    assert run(Established(7, True, True), Dropped("probe"), Established(7, False)) == [
        (S.READ_ONLY, 7, True),
        (S.SUSPENDED, 7, False),
        (S.RECONNECTED, 7, False),
    ]


@pytest.mark.parametrize("obs", [Established(1, True), Dropped("x"), Expired(), LostTimeout()])
def test_closed_machine_is_silent(obs: Observation) -> None:
    machine = ConnectionMachine()
    machine.feed(Established(7, True))
    machine.feed(Closed())
    assert machine.feed(obs) == []
    assert machine.state is None
