"""Cron without a server: schedules (time zones, DST), the leader's plan, the record codec."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from aiocoord import ConfigError, NodeDataError
from aiocoord.recipes.cron._plan import Fenced, Me, Options, Wait, Write, plan
from aiocoord.recipes.cron._record import Claim, Entry, JobRecord, decode, encode
from aiocoord.recipes.cron._schedule import CronExpr, Every, resolve_timezone, schedule_of

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def at(tz: ZoneInfo, *fields: int, fold: int = 0) -> float:
    return datetime(*fields, tzinfo=tz, fold=fold).timestamp()  # type: ignore[arg-type, misc]


def local(t: float, tz: ZoneInfo) -> str:
    return datetime.fromtimestamp(t, tz).isoformat()


def run(expr: str, tz: ZoneInfo, start: float, n: int) -> list[str]:
    schedule = CronExpr(expr, tz)
    out = []
    for _ in range(n):
        nxt = schedule.after(start)
        assert nxt is not None
        out.append(local(nxt, tz))
        start = nxt
    return out


# --- schedules: time zones and daylight saving ---------------------------------------------

DST = [
    # Spring forward in Berlin (2024-03-31, 02:00 -> 03:00): a fixed time in the gap runs at 03:00.
    (
        "30 2 * * *",
        BERLIN,
        (2024, 3, 30, 12),
        [
            "2024-03-31T03:00:00+02:00",
            "2024-04-01T02:30:00+02:00",
        ],
    ),
    # Fall back (2024-10-27, 03:00 -> 02:00): the repeated 02:30 runs once, the first time.
    (
        "30 2 * * *",
        BERLIN,
        (2024, 10, 26, 12),
        [
            "2024-10-27T02:30:00+02:00",
            "2024-10-28T02:30:00+01:00",
        ],
    ),
    # Hourly follows real time: the skipped hour does not fire, the repeated one fires twice.
    (
        "30 * * * *",
        BERLIN,
        (2024, 3, 31, 0, 40),
        [
            "2024-03-31T01:30:00+01:00",
            "2024-03-31T03:30:00+02:00",
        ],
    ),
    (
        "30 * * * *",
        BERLIN,
        (2024, 10, 27, 1, 40),
        [
            "2024-10-27T02:30:00+02:00",
            "2024-10-27T02:30:00+01:00",
            "2024-10-27T03:30:00+01:00",
        ],
    ),
    # Six fields (seconds first) follow real time too.
    (
        "0 30 2 * * *",
        BERLIN,
        (2024, 3, 30, 12),
        [
            "2024-04-01T02:30:00+02:00",
        ],
    ),
    (
        "0 30 2 * * *",
        BERLIN,
        (2024, 10, 26, 12),
        [
            "2024-10-27T02:30:00+02:00",
            "2024-10-27T02:30:00+01:00",
        ],
    ),
    # The same wall time is another instant in another zone; New York changes on other days.
    ("0 */6 * * *", NEW_YORK, (2024, 3, 10, 0, 30), ["2024-03-10T06:00:00-04:00"]),
    ("0 9 * * MON-FRI", BERLIN, (2024, 6, 7, 10), ["2024-06-10T09:00:00+02:00"]),
    ("*/20 * * * * *", BERLIN, (2024, 1, 1, 0, 0, 50), ["2024-01-01T00:01:00+01:00"]),
]


@pytest.mark.parametrize(("expr", "tz", "start", "want"), DST)
def test_cron_expression_times(
    expr: str, tz: ZoneInfo, start: tuple[int, ...], want: list[str]
) -> None:
    assert run(expr, tz, at(tz, *start), len(want)) == want


@pytest.mark.parametrize(("expr", "tz", "start", "want"), DST)
def test_back_finds_the_same_times_as_after(
    expr: str, tz: ZoneInfo, start: tuple[int, ...], want: list[str]
) -> None:
    schedule = CronExpr(expr, tz)
    times = [datetime.fromisoformat(w).timestamp() for w in want]
    for i, t in enumerate(times):
        assert schedule.back(t, 1) == t
        assert schedule.back(t + 0.5, 1) == t
        if i:
            assert schedule.back(t, 2) == times[i - 1]
    assert schedule.count(at(tz, *start), times[-1], 100) == len(times)


def test_every_is_aligned_to_the_epoch_whatever_the_zone() -> None:
    six = schedule_of(None, timedelta(hours=6), BERLIN)
    t = at(BERLIN, 2024, 3, 31, 1, 0)  # 00:00 UTC
    assert six.after(t - 1) == t
    assert local(six.after(t) or 0, UTC) == "2024-03-31T06:00:00+00:00"  # type: ignore[arg-type]
    half = Every(0.5)
    assert half.after(10.0) == 10.5 and half.after(10.2) == 10.5
    assert half.back(10.2, 1) == 10.0 and half.back(10.2, 3) == 9.0
    assert half.count(10.0, 12.0, 100) == 4 and half.count(10.0, 12.0, 3) == 3
    assert half.count(12.0, 10.0, 100) == 0
    # Times stored as floats come back to the same index (no float drift).
    step = Every(0.1)
    t = 1_700_000_000.3
    assert step.after(step.back(t, 1) or 0) == pytest.approx(t + 0.1)


@pytest.mark.parametrize(
    ("expr", "every", "error", "field"),
    [
        ("61 * * * *", None, ConfigError, "expression"),
        ("* * *", None, ConfigError, "expression"),
        ("0 0 31 2 *", None, ConfigError, "expression"),
        ("not cron", None, ConfigError, "expression"),
        (None, 0, ConfigError, "every"),
        (None, -1.0, ConfigError, "every"),
        (None, math.nan, ConfigError, "every"),
        (None, math.inf, ConfigError, "every"),
        (None, timedelta(0), ConfigError, "every"),
        (None, 1e300, ConfigError, "every"),
        (None, timedelta(days=999_999_999), ConfigError, "every"),
        (None, "30s", TypeError, None),
        (None, True, TypeError, None),
        (None, None, TypeError, None),
        ("* * * * *", 5, TypeError, None),
    ],
)
def test_bad_schedules_name_the_argument(
    expr: str | None, every: object, error: type[Exception], field: str | None
) -> None:
    with pytest.raises(error) as info:
        schedule_of(expr, every, UTC)  # type: ignore[arg-type]
    if field is not None:
        assert isinstance(info.value, ConfigError) and info.value.field == field


def test_time_zones() -> None:
    assert resolve_timezone(None) is UTC
    assert resolve_timezone("Europe/Berlin") == BERLIN
    assert resolve_timezone(BERLIN) is BERLIN
    for bad in ("Mars/Olympus", "", "../etc/passwd", "Europe/"):
        with pytest.raises(ConfigError) as info:
            resolve_timezone(bad)
        assert info.value.field == "timezone"
    with pytest.raises(TypeError):
        resolve_timezone(1)  # type: ignore[arg-type]


# --- the plan ------------------------------------------------------------------------------

EVERY = Every(10.0)
ME = Me("w2", "1.1", token=500)
OLD = Claim(at=100.0, token=400, worker="w1", version="1.0", started=100.1)


def rec(last: float = 100.0, **kw: object) -> JobRecord:
    return replace(JobRecord(last=last, token=400), **kw)  # type: ignore[arg-type]


def test_nothing_due_waits_for_the_next_time() -> None:
    assert plan(rec(), EVERY, 105.0, Options(), ME) == Wait(110.0)


def test_a_due_time_is_claimed_with_our_token() -> None:
    step = plan(rec(), EVERY, 110.2, Options(), ME)
    assert isinstance(step, Write) and step.run is not None
    assert step.run == Claim(110.0, 500, "w2", "1.1", 110.2, 1, False)
    assert step.record.claim == step.run and step.record.last == 110.0
    assert step.record.token == 500 and step.record.schedule == EVERY.text


def test_late_within_grace_runs_each_time_in_order() -> None:
    step = plan(rec(), EVERY, 145.0, Options(grace=60.0), ME)
    assert isinstance(step, Write) and step.run is not None
    assert (step.run.at, step.run.catch_up) == (110.0, False)


def test_a_newer_token_fences_us_off() -> None:
    assert plan(rec(token=600), EVERY, 200.0, Options(), ME) == Fenced(600)


@pytest.mark.parametrize("retry", [False, True])
def test_a_claim_without_outcome_was_interrupted(retry: bool) -> None:
    step = plan(rec(claim=OLD), EVERY, 130.0, Options(retry_interrupted=retry), ME)
    assert isinstance(step, Write)
    entry = step.record.history[-1]
    assert (entry.status, entry.at, entry.token, entry.worker) == ("interrupted", 100.0, 400, "w1")
    if retry:
        assert step.run == Claim(100.0, 500, "w2", "1.1", 130.0, 2, False)
        assert step.record.claim == step.run
    else:
        assert step.run is None and step.record.claim is None
    assert step.record.last == 100.0


def test_our_own_claim_after_a_suspension_is_interrupted_too() -> None:
    mine = replace(OLD, token=500, worker="w2")
    step = plan(rec(claim=mine, token=500), EVERY, 103.0, Options(), ME)
    assert isinstance(step, Write) and step.record.history[-1].status == "interrupted"


# 100 handled; now 200 with grace 25: 110..170 missed (7 times), 180..200 within grace.
MISSED_NOW = 200.0


def test_missed_skip_records_them_then_resumes() -> None:
    step = plan(rec(), EVERY, MISSED_NOW, Options(missed="skip", grace=25.0), ME)
    assert isinstance(step, Write) and step.run is None
    assert step.record.history[-1] == Entry(at=170.0, status="missed", count=7)
    assert step.record.last == 170.0
    nxt = plan(step.record, EVERY, MISSED_NOW, Options(missed="skip", grace=25.0), ME)
    assert isinstance(nxt, Write) and nxt.run is not None and nxt.run.at == 180.0


def test_missed_run_once_runs_the_latest_as_a_catch_up() -> None:
    step = plan(rec(), EVERY, MISSED_NOW, Options(missed="run_once", grace=25.0), ME)
    assert isinstance(step, Write) and step.run is not None
    assert (step.run.at, step.run.catch_up) == (170.0, True)
    assert step.record.history[-1] == Entry(at=160.0, status="missed", count=6)
    one = plan(rec(last=160.0), EVERY, MISSED_NOW, Options(missed="run_once", grace=25.0), ME)
    assert isinstance(one, Write) and one.run is not None and one.run.at == 170.0
    assert not one.record.history


def test_missed_run_all_runs_each_up_to_the_bound() -> None:
    options = Options(missed="run_all", grace=25.0, max_catch_up=3)
    step = plan(rec(), EVERY, MISSED_NOW, options, ME)
    assert isinstance(step, Write) and step.run is None
    assert step.record.history[-1] == Entry(at=140.0, status="missed", count=4)
    record = step.record
    ran = []
    for _ in range(3):
        step = plan(replace(record, claim=None), EVERY, MISSED_NOW, options, ME)
        assert isinstance(step, Write) and step.run is not None and step.run.catch_up
        ran.append(step.run.at)
        record = step.record
    assert ran == [150.0, 160.0, 170.0]


def test_missed_cron_expression_counts_and_finds_the_latest() -> None:
    hourly = CronExpr("0 * * * *", UTC)
    last = datetime(2024, 1, 1, 0, 0, tzinfo=UTC).timestamp()
    now = last + 10 * 3600 + 60  # 01:00 .. 10:00 due, grace 2 h: 01:00 .. 08:00 missed
    step = plan(rec(last=last), hourly, now, Options(grace=7200.0), ME)
    assert isinstance(step, Write)
    assert step.record.history[-1] == Entry(at=last + 8 * 3600, status="missed", count=8)


def test_history_is_bounded() -> None:
    record = rec(history=tuple(Entry(at=float(i), status="ok") for i in range(5)))
    step = plan(replace(record, claim=OLD), EVERY, 130.0, Options(keep=3), ME)
    assert isinstance(step, Write)
    assert [e.at for e in step.record.history] == [3.0, 4.0, 100.0]


# --- the record ----------------------------------------------------------------------------


def test_record_round_trip() -> None:
    record = JobRecord(
        last=170.0,
        schedule="0 */6 * * *",
        timezone="Europe/Berlin",
        token=2**40,
        claim=OLD,
        history=(
            Entry.of_claim(OLD, "failed", ended=101.5, error="x" * 500),
            Entry(at=160.0, status="missed", count=6),
        ),
    )
    back = decode("/c/jobs/j", encode(record))
    assert back == replace(
        record, history=(replace(record.history[0], error=back.history[0].error), record.history[1])
    )
    assert back.history[0].error is not None and len(back.history[0].error) == 300


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"garbage",
        b"[]",
        b'{"last": 1}',
        b'{"format": "other/1", "last": 1}',
        b'{"format": "aiocoord.cron/2", "last": 1}',
        b'{"format": "aiocoord.cron/1"}',
        b'{"format": "aiocoord.cron/1", "last": "soon"}',
        b'{"format": "aiocoord.cron/1", "last": 1, "claim": {"at": 1}}',
        b'{"format": "aiocoord.cron/1", "last": 1, "history": [{"at": 1, "status": "great"}]}',
        b'{"format": "aiocoord.cron/1", "last": 1, "history": [1]}',
        b'{"format": "aiocoord.cron/1", "last": 1, "token": -1}',
        b'{"format": "aiocoord.cron/1", "last": 1' + b"0" * 400 + b"}",
        b'{"format": "aiocoord.cron/1", "last": 1e400}',
        b'{"format": "aiocoord.cron/1", "last": 1, "history": '
        + b"[" * 10**5
        + b"]" * 10**5
        + b"}",
        b'{"format": "aiocoord.cron/1", "last": 1, "claim": {"at": 1, "token": 1, '
        b'"worker": "\\ud800", "version": "1", "started": 1}}',
        b"\xff\xfe",
    ],
)
def test_bad_records_are_node_data_errors(data: bytes) -> None:
    with pytest.raises(NodeDataError) as info:
        decode("/c/jobs/j", data)
    assert info.value.path == "/c/jobs/j"


def test_an_error_text_with_a_lone_surrogate_is_stored_escaped() -> None:
    entry = Entry.of_claim(OLD, "failed", ended=101.0, error="bad \ud800 text")
    back = decode("/p", encode(JobRecord(last=1.0, history=(entry,))))
    assert back.history[0].error == "bad \\ud800 text"


def test_a_record_from_a_newer_writer_keeps_unknown_fields_readable() -> None:
    data = b'{"format": "aiocoord.cron/1", "last": 5, "extra": [1, 2], "history": []}'
    assert decode("/p", data) == JobRecord(last=5.0)
