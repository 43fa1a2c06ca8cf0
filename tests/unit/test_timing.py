"""The session timing policy: every timer derived from the session timeout, as a table.

Pure (no server).  Each value is checked twice: against a readable number,
and bit for bit against the expression the session loop and the connection
used before the policy gathered them, so moving them here changed nothing.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from aiocoord import Settings
from aiocoord._backoff import Backoff
from aiocoord.zk import ZkSession
from aiocoord.zk._timing import SessionTiming

# (T, hosts) -> read_timeout, ping_interval, connect_attempt, discard_bound, drain_bound
TABLE = [
    (10.0, 1, 6.667, 3.333, 3.333, 2.0, 10.0),
    (10.0, 5, 6.667, 3.333, 2.0, 2.0, 10.0),
    (4.0, 3, 2.667, 1.333, 1.333, 2.0, 4.0),
    (0.6, 1, 0.4, 0.2, 0.25, 0.6, 1.0),
    (30.0, 200, 20.0, 10.0, 0.25, 2.0, 30.0),
]


@pytest.mark.parametrize(("t", "hosts", "read", "ping", "attempt", "discard", "drain"), TABLE)
def test_the_table(
    t: float, hosts: int, read: float, ping: float, attempt: float, discard: float, drain: float
) -> None:
    timing = SessionTiming(t, hosts=hosts)
    assert timing.read_timeout == pytest.approx(read, abs=1e-3)
    assert timing.ping_interval == pytest.approx(ping, abs=1e-3)
    assert timing.stable_after == pytest.approx(ping, abs=1e-3)
    assert timing.connect_attempt == pytest.approx(attempt, abs=1e-3)
    assert timing.discard_bound == discard
    assert timing.drain_bound == drain
    assert timing.lost_after == t
    assert timing.request_timeout == t
    assert timing.close_bound == min(2.0, t)
    assert timing.retry_window == 2 * t
    assert timing.protected_create_window == 4 * t


def test_values_are_exactly_the_expressions_they_replace() -> None:
    for ms, hosts, fraction, configured in itertools.product(
        (100, 400, 1999, 4000, 6000, 10_000, 40_000, 3_600_000),
        (1, 2, 3, 5, 11),
        (0.33, 0.5, 2 / 3, 1.0),
        (None, 0.5, 1.0, 7.5),
    ):
        timing = SessionTiming(
            99.0, hosts=hosts, lost_fraction=fraction, configured_request_timeout=configured
        ).negotiated(ms)
        t = ms / 1000.0
        assert timing.session_timeout == t
        assert timing.read_timeout == ms / 1000.0 * 2 / 3  # _connection.Connection
        assert timing.ping_interval == ms / 1000.0 / 3  # _connection.Connection._keepalive
        assert timing.connect_attempt == max(0.25, t / max(3, hosts))  # per connect attempt
        assert timing.lost_after == fraction * t  # the SUSPENDED -> LOST watchdog
        assert timing.request_timeout == (configured or t)  # the request deadline's fallback
        assert timing.close_bound == min(2.0, configured or t)  # close()
        assert timing.discard_bound == min(2.0, t)  # closing a session declared LOST
        assert (
            timing.retry_window == (configured or t) * 2
        )  # reads, writes, releases across a reconnect
        assert timing.protected_create_window == (configured or t) * 4
        assert timing.drain_bound == max(t, 1.0)  # task leadership's cleanup
        for alive in (True, False):
            cap = t / 4 if alive else 1.0
            assert timing.reconnect_cap(session_alive=alive) == cap
            # The session's reconnects: one step per failed round over every host.
            reconnects = Backoff(0.1, 1.0, limit=8)
            for rounds in range(1, 12):
                reconnects.delay(most=cap)
                expected = min(cap, 0.05 * 2 ** min(rounds, 8))
                assert reconnects.bound(most=cap) == pytest.approx(expected, rel=1e-12)


def test_backoff_grows_then_stops_at_its_cap() -> None:
    timing = SessionTiming(10.0)
    cap = timing.reconnect_cap(session_alive=True)
    reconnects = Backoff(0.1, 1.0, limit=8)
    bounds = []
    for _ in range(11):
        reconnects.delay(most=cap)
        bounds.append(reconnects.bound(most=cap))
    assert bounds[:5] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6])
    assert max(bounds) == 2.5  # a quarter of the session, while the session may live
    assert timing.reconnect_cap(session_alive=False) == 1.0  # no session: 1 s at most


def test_negotiating_keeps_the_policy_and_changes_only_the_timeout() -> None:
    timing = SessionTiming(10.0, hosts=3, lost_fraction=0.5, configured_request_timeout=2.0)
    after = timing.negotiated(4000)
    assert after == dataclasses.replace(timing, session_timeout=4.0)
    assert after.lost_after == 2.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        after.session_timeout = 1.0  # type: ignore[misc]


def test_a_session_starts_from_its_settings() -> None:
    settings = Settings(
        hosts="h1:2181,h2:2181,h3:2181,h4:2181",
        session_timeout=8.0,
        session_lost_fraction=0.5,
        request_timeout=3.0,
    )
    timing = ZkSession(settings).timing
    assert timing == SessionTiming(8.0, hosts=4, lost_fraction=0.5, configured_request_timeout=3.0)
    assert timing.connect_attempt == 2.0
    assert timing.lost_after == 4.0
    assert timing.request_timeout == 3.0


def test_the_timers_are_private_to_aiocoord_zk() -> None:
    """No release ever exported `SessionTiming`: it has no public name."""
    import aiocoord.zk

    assert not hasattr(aiocoord.zk, "SessionTiming")
    assert "SessionTiming" not in aiocoord.zk.__all__
