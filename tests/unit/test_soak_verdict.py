"""The soak's verdict on synthetic figures: growth, overlaps, token order, recipes, per-fault limits."""

from __future__ import annotations

from dataclasses import replace

import pytest

from benchmarks.soak_limits import (
    Limits,
    Recovery,
    format_recoveries,
    per_fault,
    recoveries,
    recovery_targets,
)
from benchmarks.soak_verdict import (
    Fault,
    Firing,
    Jobs,
    Sample,
    Term,
    WindowRun,
    double_firings,
    double_windows,
    format_samples,
    format_verdict,
    growth,
    missing_firings,
    overlaps,
    percentiles,
    recipe_targets,
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


LIMITS = Limits(timeout=5.0, interval=10.0)


def states(*events: tuple[float, str]) -> dict[int, list[tuple[float, str]]]:
    return {1: list(events)}


def latch_terms(*spans: tuple[float, float]) -> list[Term]:
    return [
        term("/soak/latch/0", f"s{k}", a, b, k + 1, session=k) for k, (a, b) in enumerate(spans)
    ]


def test_double_windows_and_firings() -> None:
    runs = [
        WindowRun("/soak/once/0", "a", 100.0, True, 1.0),
        WindowRun("/soak/once/0", "b", 100.0, False, 1.5),  # failed to record: may run again
        WindowRun("/soak/once/0", "c", 100.0, True, 2.0),
        WindowRun("/soak/once/1", "a", 100.0, True, 1.0),
        WindowRun("/soak/once/0", "a", 101.0, True, 3.0),
    ]
    assert double_windows(runs) == [("/soak/once/0", 100.0, 2)]
    assert double_windows(runs[:2] + runs[3:]) == []
    firings = [Firing("j0", "c0", 10.0, 10.1), Firing("j1", "c1", 10.0, 10.2)]
    assert double_firings(firings) == []
    assert double_firings([*firings, Firing("j0", "c2", 10.0000001, 17.0)]) == [("j0", 10.0, 2)]


def test_missing_firings_and_their_excuse() -> None:
    every = [Firing("j0", "c0", float(t), float(t)) for t in range(10, 41)]
    assert missing_firings(every, 1.0, 40.0, [], after=20.0) == ([], 0)
    gap = [f for f in every if f.scheduled not in (20.0, 21.0, 30.0)]
    # With no fault, each missing time fails.
    assert missing_firings(gap, 1.0, 40.0, [], after=20.0) == (
        [("j0", 20.0), ("j0", 21.0), ("j0", 30.0)],
        0,
    )
    # A fault excuses at most two times of the job near it: the third fails.
    fault = Fault(3, "cut", 19.5, 19.6)
    assert missing_firings(gap, 1.0, 40.0, [fault], after=20.0) == ([("j0", 30.0)], 2)
    # Far from the fault, nothing is excused.
    assert missing_firings(gap, 1.0, 40.0, [Fault(3, "cut", 60.0, 61.0)], after=20.0)[1] == 0
    # Times after `until` are not checked.
    assert missing_firings(gap, 1.0, 19.0, [], after=20.0) == ([], 0)
    # A job that never fired misses every time from `since` on (no firing is no excuse).
    missing, _ = missing_firings(every, 1.0, 40.0, [], after=20.0, jobs=["j0", "j1"], since=35.0)
    assert missing == [("j1", float(t)) for t in range(35, 41)]


def test_recoveries_within_the_limits() -> None:
    faults = [
        Fault(1, "cut", 20.0, 20.1),
        Fault(1, "pause", 40.0, 41.0),
        Fault(1, "expire", 60.0, 67.0),
    ]
    events = states(
        (20.15, "SUSPENDED"),
        (20.9, "RECONNECTED"),
        # the pause stayed under the client's timer: no SUSPENDED
        (63.0, "SUSPENDED"),
        (67.5, "LOST"),
        (68.0, "RECONNECTED"),
    )
    leaders = latch_terms((0.0, 20.1), (20.9, 60.0), (65.2, 100.0))
    samples = [sample(float(t)) for t in range(10, 101, 10)]
    recs = recoveries(faults, events, leaders, samples, 10.0, 100.0, LIMITS)
    assert [r.reconnect for r in recs] == pytest.approx([0.8, 0.0, 1.0])
    # The pause is charged with the gap the expiry after it caused: it began within 4 T of it.
    assert [r.leaderless for r in recs] == pytest.approx([0.8, 5.2, 5.2])
    assert recs[2].leaderless_path == "/soak/latch/0"
    assert [r.watches_back for r in recs] == pytest.approx([10.0 - 0.1, 9.0, 3.0])
    targets = recovery_targets(recs, samples, 10.0, LIMITS)
    assert all(t.ok for t in targets), format_verdict(targets)
    text = format_recoveries(recs, LIMITS)
    assert "long" in text and "OVER LIMIT" not in text


def test_recovery_fails_each_limit() -> None:
    samples = [sample(float(t)) for t in range(10, 201, 10)]

    def failed(
        fault: Fault,
        events: list[tuple[float, str]],
        leaders: list[Term] | None = None,
        run: list[Sample] | None = None,
    ) -> set[str]:
        leaders = leaders if leaders is not None else latch_terms((0.0, 200.0))
        run = run or samples
        recs = recoveries([fault], states(*events), leaders, run, 10.0, 200.0, LIMITS)
        return {t.name for t in recovery_targets(recs, run, 10.0, LIMITS) if not t.ok}

    ok = [(50.1, "SUSPENDED"), (50.5, "RECONNECTED")]
    assert failed(Fault(1, "cut", 50.0, 50.05), ok) == set()
    slow = [(50.1, "SUSPENDED"), (56.0, "RECONNECTED")]  # 5.95 s after the cut > T
    assert failed(Fault(1, "cut", 50.0, 50.05), slow) == {"reconnect after a cut"}
    never = [(50.1, "SUSPENDED")]
    assert failed(Fault(1, "pause", 50.0, 52.0), never) == {"reconnect after a pause <= T"}
    late = [(53.0, "SUSPENDED"), (57.0, "LOST"), (68.0, "CONNECTED")]  # 11 s after > 2 T
    assert failed(Fault(1, "expire", 50.0, 57.0), late) == {"reconnect after a pause > T"}
    # A pause planned short that lasted beyond T (the process was starved) gets 2 T, as
    # measured; 9 s after it is within that, 11 s is not.
    slow_pause = [(53.0, "SUSPENDED"), (57.0, "LOST"), (66.0, "CONNECTED")]
    assert failed(Fault(1, "pause", 50.0, 57.0), slow_pause) == set()
    assert failed(Fault(1, "pause", 50.0, 57.0), late) == {"reconnect after a pause > T"}
    leaderless = latch_terms((0.0, 50.0), (71.0, 200.0))  # 21 s > 4 T
    assert failed(Fault(1, "cut", 50.0, 50.05), ok, leaders=leaderless) == {
        "latch leaderless per fault"
    }
    # A gap that begins long after the fault is another fault's business.
    later = latch_terms((0.0, 75.0), (100.0, 200.0))
    assert failed(Fault(1, "cut", 50.0, 50.05), ok, leaders=later) == set()
    dip = [sample(float(t), watches=600 if 50 < t < 100 else 1000) for t in range(10, 201, 10)]
    assert failed(Fault(1, "cut", 50.0, 50.05), ok, run=dip) == {"watches back after a fault"}


def test_memory_per_fault() -> None:
    limits = Limits(timeout=5.0, interval=10.0, min_faults=20)
    faults = [Fault(k % 10, "cut", 15.0 + 10 * k, 15.1 + 10 * k) for k in range(58)]
    recs = [Recovery(f, 0.0, 0.0, None, 0.0) for f in faults]

    def failed(run: list[Sample]) -> set[str]:
        return {t.name for t in recovery_targets(recs, run, 10.0, limits) if not t.ok}

    flat = [sample(float(t)) for t in range(10, 601, 10)]
    assert failed(flat) == set()
    # 100 KiB more RSS per fault (one every 10 s): over the 64 KiB limit.
    leaking = [sample(float(t), rss=80_000 + 10 * t) for t in range(10, 601, 10)]
    assert failed(leaking) == {"RSS per fault"}
    blocks = [replace(s, blocks=500_000 + 30 * int(s.t)) for s in flat]  # 300 blocks per fault
    assert failed(blocks) == {"heap blocks per fault"}
    # Too few faults to divide by: not judged.
    few = {
        t.name: t.value
        for t in recovery_targets(recs[:5], leaking, 10.0, limits)
        if "per" in t.name
    }
    assert few["RSS per fault"].startswith("n/a")
    assert per_fault([(0.0, 0.0), (100.0, 1000.0)], 10) == pytest.approx(100.0)
    assert per_fault([(0.0, 0.0)], 10) is None


def test_recipe_targets() -> None:
    runs = [WindowRun("/soak/once/0", "a", 100.0, True, 1.0)]
    firings = [Firing("j0", "c0", float(t), float(t)) for t in range(10, 31)]

    def failed(r: list[WindowRun], f: list[Firing]) -> set[str]:
        targets = recipe_targets(r, f, every=1.0, until=30.0, cron_faults=[], after=20.0)
        return {t.name for t in targets if not t.ok}

    assert failed(runs, firings) == set()
    assert failed(runs * 2, firings) == {"once_per windows run twice"}
    assert failed(runs, [*firings, firings[3]]) == {"cron times begun twice"}
    assert failed(runs, firings[:5] + firings[6:]) == {"cron times never begun"}
    assert failed(runs, []) == set()  # no job expected
    quiet = recipe_targets(
        runs, [], every=1.0, until=30.0, cron_faults=[], after=20.0, jobs=["j0"], since=10.0
    )
    assert {t.name for t in quiet if not t.ok} == {"cron times never begun"}
