"""The job system's pure parts: backoff schedule, option checks, records, status, due-time heap."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from aiocoord import Backoff, JobStatus
from aiocoord.scheduler._policy import JobOptions, check_delay, check_run_at
from aiocoord.scheduler._records import (
    JobRecord,
    ResultRecord,
    decode_job,
    decode_result,
    encode_job,
    encode_job_record,
    encode_outcome,
    encode_result,
    job_key,
)
from aiocoord.scheduler._state import AssignerState, Fetch, Fetched
from aiocoord.scheduler._status import assigned_info, pending_info, result_info
from aiocoord.scheduler._strategies import RoundRobin

# --- backoff -------------------------------------------------------------------------------------


def test_backoff_grows_exponentially_up_to_its_cap() -> None:
    backoff = Backoff(initial=1.0, maximum=60.0, factor=2.0, jitter=0.0)
    assert [backoff.delay(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert backoff.ceiling(10_000) == 60.0  # no overflow far out


def test_backoff_jitter_takes_off_at_most_its_share() -> None:
    backoff = Backoff(initial=2.0, maximum=10.0, jitter=0.5)
    assert backoff.delay(1, rand=lambda: 0.0) == 2.0
    assert backoff.delay(1, rand=lambda: 1.0) == 1.0
    assert backoff.delay(3, rand=lambda: 0.5) == 8.0 * 0.75
    waits = [backoff.delay(2) for _ in range(200)]
    assert all(2.0 <= w <= 4.0 for w in waits)
    assert len(set(waits)) > 100  # spread, not one value


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"initial": -1.0}, ValueError, "initial"),
        ({"initial": math.nan}, ValueError, "initial"),
        ({"maximum": math.inf}, ValueError, "maximum"),
        ({"initial": 5.0, "maximum": 1.0}, ValueError, "maximum"),
        ({"factor": 0.5}, ValueError, "factor"),
        ({"jitter": 2.0}, ValueError, "jitter"),
        ({"initial": "1"}, TypeError, "initial"),
    ],
)
def test_backoff_refuses_bad_numbers(kwargs: dict[str, object], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        Backoff(**kwargs)  # type: ignore[arg-type]


# --- options and times ---------------------------------------------------------------------------


def _options(**kwargs: object) -> JobOptions:
    base: dict[str, object] = {
        "timeout": None,
        "retries": 0,
        "backoff": Backoff(),
        "retry_on": (Exception,),
        "max_deliveries": 5,
    }
    return JobOptions.build(**{**base, **kwargs})


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"timeout": -1}, "timeout"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": math.nan}, "timeout"),
        ({"timeout": math.inf}, "timeout"),
        ({"retries": -1}, "retries"),
        ({"retries": 1.5}, "retries"),
        ({"retries": True}, "retries"),
        ({"backoff": 3}, "backoff"),
        ({"retry_on": "ValueError"}, "retry_on"),
        ({"retry_on": (ValueError, 3)}, "retry_on"),
        ({"max_deliveries": 0}, "max_deliveries"),
    ],
)
def test_job_options_name_the_bad_argument(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises((TypeError, ValueError), match=match):
        _options(**kwargs)


def test_retries_follow_retry_on_and_the_count() -> None:
    options = _options(retries=2, retry_on=TimeoutError)
    assert options.retry_on == (TimeoutError,)
    assert options.retries_after(TimeoutError(), 1)
    assert options.retries_after(TimeoutError(), 2)
    assert not options.retries_after(TimeoutError(), 3)  # retries used up
    assert not options.retries_after(ValueError(), 1)  # not retried for


def test_delays_and_run_at_are_checked() -> None:
    assert check_delay(2.5, 100.0) == 102.5
    for bad in (-1.0, math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match="delay"):
            check_delay(bad, 100.0)
    with pytest.raises(TypeError, match="delay"):
        check_delay("5", 100.0)
    when = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert check_run_at(when) == when.timestamp()
    with pytest.raises(ValueError, match=r"run_at.*timezone-aware"):
        check_run_at(datetime(2030, 1, 2))
    with pytest.raises(TypeError, match="run_at"):
        check_run_at(1234.0)
    for far in (datetime(1, 1, 2, tzinfo=UTC), datetime(9999, 12, 31, tzinfo=UTC)):
        with pytest.raises(ValueError, match="run_at must be between"):
            check_run_at(far)  # outside what a record's timestamp holds


# --- records and status --------------------------------------------------------------------------


def test_a_job_record_round_trips_its_run() -> None:
    job = JobRecord(
        "resize",
        {"w": 1},
        100.0,
        run_at=160.0,
        attempts=3,
        failures=2,
        deliveries=1,
        max_deliveries=4,
        started=150.0,
        error_type="TimeoutError",
        error_message="slow",
        key=job_key("resize", {"w": 1}),
    )
    assert decode_job("/j", encode_job_record(job)) == job
    plain = decode_job("/j", encode_job("resize", {"w": 1}))
    assert (plain.run_at, plain.attempts, plain.max_deliveries, plain.key) == (None, 0, 5, "")
    assert job_key("a", {"x": 1, "y": 2}) == job_key("a", {"y": 2, "x": 1})
    assert job_key("a", {"x": 1}) != job_key("a", {"x": 2}) != job_key("b", {"x": 2})
    long = replace(job, error_message="x" * 10_000)
    assert len(decode_job("/j", encode_job_record(long)).error_message) <= 100


def test_a_cancelled_result_round_trips_and_reads_as_cancelled() -> None:
    job = JobRecord("resize", {}, 100.0, attempts=1, started=110.0, key="k")
    cancelled = ResultRecord(
        "resize", False, type="JobCancelled", message="by request", finished=120.0, cancelled=True
    ).with_job(job)
    back = decode_result("/r", encode_result(cancelled))
    assert back == cancelled
    info = result_info("j1", back)
    assert info.status is JobStatus.CANCELLED and info.status.final
    assert info.attempts == 1 and info.error == "JobCancelled: by request"
    assert info.started_at == datetime.fromtimestamp(110.0, tz=UTC)


def test_a_result_too_big_with_its_bookkeeping_drops_the_bookkeeping() -> None:
    job = JobRecord("make", {}, 100.0, attempts=1, started=110.0, key="k" * 32)
    outcome = ResultRecord("make", True, "x" * 500, finished=120.0).with_job(job)
    bare = len(encode_result(outcome, bookkeeping=False))
    data = encode_outcome(outcome, bare)
    assert decode_result("/r", data).value == "x" * 500
    assert decode_result("/r", data).key == ""


def test_status_follows_where_the_job_is() -> None:
    job = JobRecord("j", {}, 100.0, run_at=200.0)
    assert pending_info("a", job, now=150.0).status is JobStatus.SCHEDULED
    assert pending_info("a", job, now=200.0).status is JobStatus.PENDING
    assert assigned_info("a", "w1", job).status is JobStatus.ASSIGNED
    running = assigned_info("a", "w1", JobRecord("j", {}, 100.0, started=201.0, attempts=1))
    assert (running.status, running.worker, running.attempts) == (JobStatus.RUNNING, "w1", 1)
    failed = result_info("a", ResultRecord("j", False, type="E", message="m", finished=300.0))
    assert failed.status is JobStatus.FAILED and failed.error == "E: m"
    assert not JobStatus.RUNNING.final
    assert {s for s in JobStatus if s.final} == {
        JobStatus.DONE,
        JobStatus.FAILED,
        JobStatus.CANCELLED,
    }


# --- the assigner's due-time heap ---------------------------------------------------------------


def _fetched(run_at: float | None) -> Fetched:
    return Fetched(JobRecord("square", {}, 0.0, run_at=run_at), b"{}", 0)


def test_scheduled_jobs_wait_for_their_time_then_are_read_again() -> None:
    state = AssignerState(RoundRobin())
    for job_id in ("late", "soon", "now"):
        state.job_created(job_id)
    assert {a.job_id for a in state.plan(now=100.0) if isinstance(a, Fetch)} == {
        "late",
        "soon",
        "now",
    }
    state.fetched("late", _fetched(300.0), now=100.0)
    state.fetched("soon", _fetched(150.0), now=100.0)
    state.fetched("now", _fetched(50.0), now=100.0)
    assert set(state.ready) == {"now"}
    assert state.scheduled == {"late": 300.0, "soon": 150.0}
    assert state.next_due() == 150.0
    state.job_created("soon")  # a replayed event changes nothing
    assert state.plan(now=149.0) == [] and state.next_due() == 150.0
    assert [a for a in state.plan(now=150.0) if isinstance(a, Fetch)] == [Fetch("soon")]
    assert state.next_due() == 300.0
    state.job_deleted("late")  # cancelled while it waited
    assert state.next_due() is None
    assert state.plan(now=1000.0) == []


def test_without_a_clock_every_job_is_due() -> None:
    state = AssignerState(RoundRobin())
    state.job_created("j")
    state.plan()
    state.fetched("j", _fetched(10.0**9))
    assert set(state.ready) == {"j"} and not state.scheduled


def test_a_job_rescheduled_keeps_only_its_new_time() -> None:
    state = AssignerState(RoundRobin())
    state.job_created("j")
    state.plan(now=0.0)
    state.fetched("j", _fetched(100.0), now=0.0)
    state.job_deleted("j")  # rewritten (data changed): read again
    state.job_created("j")
    state.plan(now=0.0)
    state.fetched("j", _fetched(500.0), now=0.0)
    assert state.next_due() == 500.0
    assert [a for a in state.plan(now=100.0) if isinstance(a, Fetch)] == []


def test_run_at_far_ahead_is_still_a_due_time() -> None:
    later = datetime.now(UTC) + timedelta(days=365)
    assert check_run_at(later) > check_delay(0, 0.0)


def test_job_ids_made_in_one_millisecond_keep_their_order() -> None:
    """Ids had the time in ms then random digits: two submits in one millisecond (a round
    trip on a quiet machine is a quarter of one) sorted at random, so jobs of one priority
    could run out of submission order."""
    from aiocoord.scheduler._layout import new_job_id

    ids = [new_job_id() for _ in range(2000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
