"""The soak's verdict on synthetic figures: growth, overlapping terms, token order, targets."""

from __future__ import annotations

import pytest

from benchmarks.soak_verdict import (
    Jobs,
    Sample,
    Term,
    format_samples,
    format_verdict,
    growth,
    overlaps,
    percentiles,
    token_disorder,
    verdict,
)


def sample(t: float, rss: int = 80_000, tasks: int = 3000, watches: int = 1000) -> Sample:
    return Sample(
        t=t,
        rss_kib=rss,
        blocks=500_000,
        fds=90,
        tasks=tasks,
        client_watches=watches,
        server_watches=watches,
        znodes=3800,
        terms=int(t) * 100,
        jobs_done=int(t) * 100,
        jobs_open=5,
        faults=int(t) // 10,
        job_ms=(60.0, 250.0),
        lock_ms=(130.0, 900.0),
        rtt_ms=(0.8, 12.0),
        lag_ms=120.0,
    )


def term(
    resource: str, holder: str, start: float, end: float, token: int, session: int = 0
) -> Term:
    return Term(resource, holder, session, token, start, end)


def test_percentiles_nearest_rank() -> None:
    assert percentiles([]) is None
    assert percentiles([5.0]) == (5.0, 5.0)
    values = [float(v) for v in range(1, 101)]
    assert percentiles(values) == (50.0, 99.0)


def test_growth_is_the_trend_not_the_end_points() -> None:
    flat = [(t, 100.0 + (5 if t % 20 else -5)) for t in range(0, 600, 10)]  # noise, no trend
    g = growth(flat)
    assert g is not None and abs(g) < 0.01
    rising = [(float(t), 100.0 + t / 60) for t in range(0, 600, 10)]  # +10 over the run
    g = growth(rising)
    assert g == pytest.approx((590 / 60) / 100)
    outage = [(float(t), 60.0 if t in (300, 310) else 100.0) for t in range(0, 600, 10)]
    assert growth(outage) == 0.0  # two samples in an outage do not make a trend
    assert growth([(0.0, 1.0)]) is None
    assert growth([(0.0, 0.0), (10.0, 0.0)]) is None  # nothing to grow from


def test_overlap_is_found_and_a_suspended_holder_is_excused() -> None:
    a = term("/soak/latch/1", "s1", 0.0, 5.0, 10, session=1)
    b = term("/soak/latch/1", "s2", 4.0, 9.0, 20, session=2)
    c = term("/soak/latch/2", "s3", 4.5, 6.0, 30, session=3)  # another resource
    found = overlaps([b, c, a], {}, grace=1.0)
    assert [(o.first, o.second) for o in found] == [(a, b)]
    assert found[0].length == pytest.approx(1.0) and found[0].excused_by is None
    # Its SUSPENDED arrived at 4.5 and it let go within the grace: it could not have known.
    assert overlaps([a, b], {1: [4.5]}, grace=1.0)[0].excused_by == 4.5
    # SUSPENDED long before the end, or outside the term, excuses nothing.
    assert overlaps([a, b], {1: [2.0, 7.0]}, grace=1.0)[0].excused_by is None
    # Another session's SUSPENDED is no excuse.
    assert overlaps([a, b], {2: [4.5]}, grace=1.0)[0].excused_by is None


def test_back_to_back_terms_do_not_overlap() -> None:
    terms = [term("task:t1", f"w{k}", k * 1.0, k * 1.0 + 1.0, k) for k in range(5)]
    assert overlaps(terms, {}, grace=1.0) == []
    long = term("task:t1", "w9", 0.5, 10.0, 99)
    assert len(overlaps([*terms, long], {}, grace=1.0)) == 5


def test_token_order() -> None:
    first = term("/soak/lock/0", "s1.c0", 0.0, 1.0, 10)
    regrant = term("/soak/lock/0", "s1.c0", 2.0, 3.0, 10)  # the same node again: fine
    later = term("/soak/lock/0", "s2.c1", 4.0, 5.0, 20)
    assert token_disorder([later, regrant, first]) == []
    stale = term("/soak/lock/0", "s3.c2", 6.0, 7.0, 15)
    same_other = term("/soak/lock/0", "s3.c2", 8.0, 9.0, 20)
    assert token_disorder([first, later, stale, same_other]) == [
        (later, stale),
        (later, same_other),
    ]


def test_verdict_passes_a_flat_clean_run() -> None:
    samples = [sample(t) for t in range(10, 610, 10)]
    terms = [term("task:t1", "w1", 0.0, 5.0, 1), term("task:t1", "w2", 5.1, 9.0, 2)]
    targets = verdict(samples, 60.0, terms, {}, Jobs(submitted=100, done=100), 0)
    assert all(t.ok for t in targets), format_verdict(targets)
    text = format_verdict(targets)
    assert text.endswith("verdict: PASS") and "jobs lost" in text


def test_verdict_fails_on_each_target() -> None:
    def failed(
        samples: list[Sample] | None = None,
        terms: list[Term] | None = None,
        jobs: Jobs | None = None,
        errors: int = 0,
    ) -> set[str]:
        if samples is None:
            samples = [sample(t) for t in range(10, 610, 10)]
        jobs = jobs or Jobs(submitted=10, done=10)
        targets = verdict(samples, 60.0, terms or [], {}, jobs, errors)
        return {t.name for t in targets if not t.ok}

    assert failed() == set()
    leaking = [sample(t, rss=80_000 + t * 10) for t in range(10, 610, 10)]  # +6 MiB of 78
    assert failed(samples=leaking) == {"RSS growth"}
    # Growth during the warm-up does not count.
    warming = [sample(t, tasks=3000 if t >= 60 else 1000 + 40 * t) for t in range(10, 610, 10)]
    assert failed(samples=warming) == set()
    more_tasks = [sample(t, tasks=3000 + t) for t in range(10, 610, 10)]
    assert failed(samples=more_tasks) == {"tasks growth"}
    more_watches = [sample(t, watches=1000 + t // 5) for t in range(10, 610, 10)]
    assert failed(samples=more_watches) == {
        "client watches growth",
        "server watches growth (wchs)",
    }
    both = [term("task:t1", "w1", 0.0, 5.0, 1), term("task:t1", "w2", 4.0, 9.0, 2)]
    assert failed(terms=both) == {"overlapping terms"}
    disorder = [term("task:t1", "w1", 0.0, 5.0, 2), term("task:t1", "w2", 6.0, 9.0, 1)]
    assert failed(terms=disorder) == {"fencing tokens out of order"}
    assert failed(jobs=Jobs(submitted=10, done=9, lost=["soak-3"])) == {"jobs lost"}
    assert failed(jobs=Jobs(submitted=10, done=9, failed=1)) == {"jobs failed or wrong"}
    assert failed(errors=1) == {"unexpected errors"}
    assert failed(samples=[sample(600.0)]) >= {"RSS growth"}  # too few samples: no verdict


def test_sample_table() -> None:
    text = format_samples([sample(10.0), sample(20.0)])
    header, first, _ = text.splitlines()
    assert header.split()[:3] == ["t", "s", "RSS"]
    assert first.split()[:5] == ["10", "78.1", "500", "90", "3000"]
    assert "1000/1000" in first and "60.0/250" in first
    assert len(format_samples([sample(10.0)], header=False).splitlines()) == 1
