"""The one backoff (`aiocoord._backoff`): its formula, its counting, and the waits of each user."""

from __future__ import annotations

import math

import pytest

from aiocoord import Backoff as PublicBackoff
from aiocoord import RetryBackoff
from aiocoord._backoff import Backoff, grown
from aiocoord.integrations._leader_tasks import MAX_BACKOFF


def test_grown_doubles_up_to_its_cap_and_never_overflows() -> None:
    assert [grown(1.0, n, 30.0) for n in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert grown(1.0, 10**6, 30.0) == 30.0
    assert grown(1.0, 10**6, 60.0, factor=3.0) == 60.0
    assert grown(2.0, -1, 9.0) == 2.0  # before the first failure: the first wait


def test_each_failure_doubles_the_wait_and_a_success_starts_again() -> None:
    backoff = Backoff(1.0, MAX_BACKOFF, jitter=0.0)
    assert [backoff.delay() for _ in range(7)] == [1, 2, 4, 8, 16, 30, 30]  # a leader task's
    backoff.reset()
    assert backoff.failures == 0 and backoff.delay() == 1.0


def test_the_count_stops_at_its_limit_and_eases_back_one_step() -> None:
    backoff = Backoff(1.0, math.inf, jitter=0.0, limit=3)
    assert [backoff.delay() for _ in range(5)] == [1, 2, 4, 4, 4]
    backoff.ease()
    assert backoff.failures == 2 and backoff.delay() == 4.0
    for _ in range(9):
        backoff.ease()
    assert backoff.failures == 0


def test_jitter_takes_off_at_most_its_share() -> None:
    backoff = Backoff(8.0, 8.0, jitter=0.5)
    waits = [backoff.delay() for _ in range(300)]
    assert all(4.0 <= w <= 8.0 for w in waits)
    assert len(set(waits)) > 1
    full = Backoff(8.0, 8.0)  # the default: anywhere from zero
    assert all(0.0 <= full.delay() <= 8.0 for _ in range(300))


def test_a_lost_compare_and_set_waits_as_it_did() -> None:
    """The shared values' window: ``round_trip * 2**(losses + 1)``, at most 50 ms, six losses."""
    backoff = Backoff(0.0, 0.05, limit=6)
    for round_trip in (0.0001, 0.001, 0.004):
        backoff.reset()
        for losses in range(1, 10):
            backoff.delay(first=4 * round_trip)
            window = min(round_trip * 2 ** (min(losses, 6) + 1), 0.05)
            assert backoff.bound(first=4 * round_trip) == pytest.approx(window, rel=1e-12)


def test_the_public_job_policy_is_a_retry_backoff_under_its_old_name_too() -> None:
    assert PublicBackoff is RetryBackoff
    policy = RetryBackoff(initial=1.0, maximum=60.0, jitter=0.0)
    assert [policy.ceiling(n) for n in range(1, 9)] == [
        grown(1.0, n - 1, 60.0) for n in range(1, 9)
    ]
