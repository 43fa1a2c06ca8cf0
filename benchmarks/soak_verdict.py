"""The soak's verdict: pure functions over what it sampled and recorded, no I/O.

- `growth`: the trend of a series over the samples after the warm-up, as a
  fraction of its level at the first of them.  A robust trend rather than
  last-over-first, because watch and task counts move with faults and jobs
  in flight: one sample taken during a reconnect says little, the trend
  over all of them says whether something accumulates.
- `overlaps`: two terms of one resource (latch path, lock path, task) whose
  bodies ran at the same time.  An overlap is excused only when the earlier
  holder could not have known: its session's SUSPENDED (or LOST) arrived
  during its term, and its body ended within `grace` of that.
- `token_disorder`: by start time, a term's fencing token must be larger than
  every earlier term's, or equal to the largest for the same holder (a latch
  or a task re-granted on the same node after SUSPENDED).
- `double_windows` / `double_firings`: a `once_per` window with more than
  one successful run, a cron job's scheduled time whose function began more
  than once.
- `missing_firings`: a cron job's scheduled time that never began, unless a
  fault excuses it (see there).
- `recipe_targets`: the three above as targets.  (The absolute limits per
  fault are in `soak_limits`.)
- `verdict`: one `Target` per goal of the soak, each pass or fail.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = (
    "GROWTH_LIMIT",
    "Fault",
    "Firing",
    "Jobs",
    "Overlap",
    "Sample",
    "Target",
    "Term",
    "WindowRun",
    "double_firings",
    "double_windows",
    "format_samples",
    "format_verdict",
    "growth",
    "missing_firings",
    "overlaps",
    "percentiles",
    "recipe_targets",
    "token_disorder",
    "trend",
    "verdict",
)

GROWTH_LIMIT = 0.05  # RSS, watches, tasks and fds may grow less than this over the run


@dataclass(frozen=True, slots=True)
class Sample:
    """What the soak measured at `t` seconds; latencies are (p50, p99) over the last interval."""

    t: float
    rss_kib: int
    blocks: int  # memory blocks the interpreter has allocated (sys.getallocatedblocks)
    fds: int
    tasks: int
    client_watches: int
    server_watches: int | None  # None: the server did not answer `wchs`
    znodes: int | None
    terms: int  # terms begun since the start (latches, locks and tasks)
    jobs_done: int  # jobs with a result since the start
    jobs_open: int  # submitted, no result yet
    faults: int  # faults injected since the start
    job_ms: tuple[float, float] | None = None
    lock_ms: tuple[float, float] | None = None
    rtt_ms: tuple[float, float] | None = None
    lag_ms: float = 0.0  # the event loop's longest lateness over the interval
    load: float = 0.0  # the machine's 1-minute load average


@dataclass(frozen=True, slots=True)
class Term:
    """One holder's term of one resource, on the run's monotonic clock (seconds)."""

    resource: str
    holder: str
    session: int
    token: int
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class Overlap:
    first: Term
    second: Term
    excused_by: float | None  # when the first holder's SUSPENDED arrived, if that excuses it

    @property
    def length(self) -> float:
        return min(self.first.end, self.second.end) - self.second.start


@dataclass(slots=True)
class Jobs:
    """The scheduler's books at the end of the run."""

    submitted: int = 0
    done: int = 0
    failed: int = 0  # a JobFailed result: the job was not lost, but it should not fail
    wrong: int = 0  # a result that is not what the job computes
    lost: list[str] = field(default_factory=list)  # submitted, no result by the end


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    value: str
    limit: str
    ok: bool


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault the soak injected into one session's connection (run's clock, seconds)."""

    session: int
    kind: str  # cut, pause (shorter than the session timeout) or expire (longer)
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class WindowRun:
    """One `once_per` run: `window` is the window's start (wall clock, epoch seconds)."""

    resource: str
    holder: str
    window: float
    ok: bool  # the run was recorded (the block exited without an error): the window is closed
    start: float


@dataclass(frozen=True, slots=True)
class Firing:
    """A cron job's function began: `scheduled` on the run's clock (seconds), `at` when it began."""

    job: str
    holder: str
    scheduled: float
    at: float


def percentiles(values: Sequence[float]) -> tuple[float, float] | None:
    """(p50, p99) of `values` (nearest rank), or None if there are none."""
    if not values:
        return None
    ordered = sorted(values)

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]

    return rank(0.50), rank(0.99)


def growth(points: Sequence[tuple[float, float]]) -> float | None:
    """The trend across `points` (t, value) over their time span, as a fraction of its start.

    The trend is Theil-Sen's: the median of the slopes between every two
    points, through the median intercept, so that a sample or two taken in an
    outage (a session's watches gone until it reconnects) do not tilt it.
    None with fewer than two points, or when the trend starts at zero or below.
    """
    line = trend(points)
    if line is None:
        return None
    slope, intercept = line
    first, last = points[0][0], points[-1][0]
    base = intercept + slope * first
    if base <= 0:
        return None
    return slope * (last - first) / base


def trend(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """Theil-Sen's (slope, intercept) of `points`, None with fewer than two distinct times."""
    slopes = [
        (v2 - v1) / (t2 - t1)
        for i, (t1, v1) in enumerate(points)
        for t2, v2 in points[i + 1 :]
        if t2 != t1
    ]
    if not slopes:
        return None
    slope = statistics.median(slopes)
    return slope, statistics.median(v - slope * t for t, v in points)


def overlaps(
    terms: Iterable[Term], suspended: Mapping[int, Sequence[float]], grace: float
) -> list[Overlap]:
    """Every pair of terms of one resource that ran at once (excused or not), by start time.

    `suspended` gives, per session, the times its SUSPENDED or LOST arrived.
    """
    by_resource: dict[str, list[Term]] = defaultdict(list)
    for term in terms:
        by_resource[term.resource].append(term)
    found: list[Overlap] = []
    for resource in sorted(by_resource):
        active: list[Term] = []
        for term in sorted(by_resource[resource], key=lambda x: (x.start, x.end)):
            active = [a for a in active if a.end > term.start]
            for earlier in active:
                found.append(Overlap(earlier, term, _excuse(earlier, suspended, grace)))
            active.append(term)
    return found


def _excuse(term: Term, suspended: Mapping[int, Sequence[float]], grace: float) -> float | None:
    """When `term`'s session was suspended during it, if it ended within `grace` of that."""
    for at in suspended.get(term.session, ()):
        if term.start <= at <= term.end and term.end - at <= grace:
            return at
    return None


def token_disorder(terms: Iterable[Term]) -> list[tuple[Term, Term]]:
    """(earlier, later) pairs where the later term's token does not come after the earlier's."""
    by_resource: dict[str, list[Term]] = defaultdict(list)
    for term in terms:
        by_resource[term.resource].append(term)
    found: list[tuple[Term, Term]] = []
    for resource in sorted(by_resource):
        top: Term | None = None
        for term in sorted(by_resource[resource], key=lambda x: (x.start, x.end)):
            if top is None or term.token > top.token:
                top = term
            elif term.token < top.token or term.holder != top.holder:
                found.append((top, term))
    return found


def double_windows(runs: Iterable[WindowRun]) -> list[tuple[str, float, int]]:
    """(resource, window, runs) for every `once_per` window with more than one successful run."""
    counts = Counter((r.resource, r.window) for r in runs if r.ok)
    return sorted((res, window, n) for (res, window), n in counts.items() if n > 1)


def _slot(seconds: float) -> int:
    """A scheduled time as an integer key (milliseconds), immune to float noise."""
    return round(seconds * 1000)


def double_firings(firings: Iterable[Firing]) -> list[tuple[str, float, int]]:
    """(job, scheduled time, starts) for every cron scheduled time whose function began twice."""
    counts = Counter((f.job, _slot(f.scheduled)) for f in firings)
    return sorted((job, at / 1000, n) for (job, at), n in counts.items() if n > 1)


def missing_firings(
    firings: Iterable[Firing],
    every: float,
    until: float,
    faults: Sequence[Fault],
    after: float,
    per_fault: int = 2,
    jobs: Iterable[str] = (),
    since: float = 0.0,
) -> tuple[list[tuple[str, float]], int]:
    """Cron scheduled times that never began and no fault excuses; and how many were excused.

    Each job's times run every `every` s from its first firing to `until`
    (the run's clock); each of them must have begun at least once.  A job
    of `jobs` that never fired misses every time from `since` to `until`.  A fault
    in `faults` (those on sessions that carry a cron worker) excuses at most
    `per_fault` missing times of each job scheduled from 1 s before its start
    to `after` s after its end: a firing claimed by its leader and cut off
    before its function began is recorded interrupted and not run again, and
    one fault can do that twice to a job (when its leader loses the job, and
    when the job moves back to the worker once it returns).  A job that stops
    firing for longer is not excused.
    """
    by_job: dict[str, set[int]] = defaultdict(set)
    first: dict[str, float] = {}
    firings = list(firings)
    for f in firings:
        first[f.job] = min(first.get(f.job, math.inf), f.scheduled)
    for f in firings:
        by_job[f.job].add(round((f.scheduled - first[f.job]) / every))
    for job in jobs:
        if job not in first:
            first[job] = since
            by_job[job] = set()
    missing: list[tuple[str, float]] = []
    excused = 0
    for job in sorted(by_job):
        used: Counter[int] = Counter()
        k = 0
        while (at := first[job] + k * every) <= until:
            if k not in by_job[job]:
                for i, fault in enumerate(faults):
                    if fault.start - 1.0 <= at <= fault.end + after and used[i] < per_fault:
                        used[i] += 1
                        excused += 1
                        break
                else:
                    missing.append((job, at))
            k += 1
    return missing, excused


def recipe_targets(
    runs: Sequence[WindowRun],
    firings: Sequence[Firing],
    *,
    every: float,
    until: float,
    cron_faults: Sequence[Fault],
    after: float,
    jobs: Iterable[str] = (),
    since: float = 0.0,
) -> list[Target]:
    """No `once_per` window run twice, no cron time begun twice, every cron time begun once."""
    doubled = double_windows(runs)
    windows = len({(r.resource, r.window) for r in runs if r.ok})
    out = [
        Target("once_per windows run twice", f"{len(doubled)} of {windows}", "0", not doubled),
    ]
    twice = double_firings(firings)
    out.append(Target("cron times begun twice", f"{len(twice)} of {len(firings)}", "0", not twice))
    missing, excused = missing_firings(
        firings, every, until, cron_faults, after, jobs=jobs, since=since
    )
    note = f" ({excused} excused)" if excused else ""
    out.append(Target("cron times never begun", f"{len(missing)}{note}", "0", not missing))
    return out


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:+.1f} %"


def verdict(
    samples: Sequence[Sample],
    warmup: float,
    terms: Sequence[Term],
    suspended: Mapping[int, Sequence[float]],
    jobs: Jobs,
    errors: int,
    *,
    grace: float = 1.0,
    limit: float = GROWTH_LIMIT,
) -> list[Target]:
    """One `Target` per goal: growth after `warmup`, lost jobs, overlapping terms, errors."""
    after = [s for s in samples if s.t >= warmup]
    series: list[tuple[str, Callable[[Sample], float | None]]] = [
        ("RSS growth", lambda s: s.rss_kib),
        ("client watches growth", lambda s: s.client_watches),
        ("server watches growth (wchs)", lambda s: s.server_watches),
        ("tasks growth", lambda s: s.tasks),
        ("fds growth", lambda s: s.fds),
    ]
    out: list[Target] = []
    for name, get in series:
        points = [(s.t, float(v)) for s in after if (v := get(s)) is not None]
        g = growth(points)
        ok = g is not None and g < limit
        out.append(Target(name, _pct(g), f"< {limit * 100:.0f} %", ok))
    found = overlaps(terms, suspended, grace)
    bad = [o for o in found if o.excused_by is None]
    excused = len(found) - len(bad)
    note = f" ({excused} excused)" if excused else ""
    out.append(Target("overlapping terms", f"{len(bad)}{note}", "0", not bad))
    disorder = token_disorder(terms)
    out.append(Target("fencing tokens out of order", str(len(disorder)), "0", not disorder))
    out.append(Target("jobs lost", f"{len(jobs.lost)} of {jobs.submitted}", "0", not jobs.lost))
    out.append(
        Target(
            "jobs failed or wrong", str(jobs.failed + jobs.wrong), "0", not jobs.failed + jobs.wrong
        )
    )
    out.append(Target("unexpected errors", str(errors), "0", errors == 0))
    return out


def _ms(pair: tuple[float, float] | None) -> str:
    return "-" if pair is None else f"{pair[0]:.1f}/{pair[1]:.0f}"


def format_samples(samples: Sequence[Sample], header: bool = True) -> str:
    """The samples as a fixed-width table (one line each), with or without its header."""
    lines = []
    if header:
        lines.append(
            f"{'t s':>5} {'RSS MiB':>8} {'blocks k':>8} {'fds':>5} {'tasks':>6} {'watch c/s':>11} "
            f"{'znodes':>7} {'terms':>7} {'jobs':>7} {'open':>5} {'faults':>6} "
            f"{'job ms':>10} {'lock ms':>10} {'rtt ms':>9} {'lag ms':>7} {'load':>5}"
        )
    for s in samples:
        server = "-" if s.server_watches is None else str(s.server_watches)
        znodes = "-" if s.znodes is None else str(s.znodes)
        lines.append(
            f"{s.t:5.0f} {s.rss_kib / 1024:8.1f} {s.blocks / 1000:8.0f} {s.fds:5d} {s.tasks:6d} "
            f"{f'{s.client_watches}/{server}':>11} {znodes:>7} {s.terms:7d} {s.jobs_done:7d} "
            f"{s.jobs_open:5d} {s.faults:6d} {_ms(s.job_ms):>10} {_ms(s.lock_ms):>10} "
            f"{_ms(s.rtt_ms):>9} {s.lag_ms:7.0f} {s.load:5.2f}"
        )
    return "\n".join(lines)


def format_verdict(targets: Sequence[Target]) -> str:
    lines = [f"{'target':<30} {'value':>30} {'limit':>8}  result"]
    for t in targets:
        lines.append(f"{t.name:<30} {t.value:>30} {t.limit:>8}  {'pass' if t.ok else 'FAIL'}")
    passed = all(t.ok for t in targets)
    lines.append(f"verdict: {'PASS' if passed else 'FAIL'}")
    return "\n".join(lines)
