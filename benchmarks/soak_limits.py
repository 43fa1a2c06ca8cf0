"""The soak's absolute limits per fault: pure functions over what it recorded, no I/O.

Beside the relative growth of `soak_verdict`, every fault is held to bounds
derived from the session timeout (see `Limits`): its session is usable again
in time, every latch election has a leader again in time, the client watches
are back at their level within a few samples, and memory grows by less than
a fixed amount per fault.  `recoveries` measures each fault, `recovery_targets`
judges them (worst value and p99), `format_recoveries` prints them by kind.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .soak_verdict import Fault, Sample, Target, Term, percentiles, trend

__all__ = (
    "Limits",
    "Recovery",
    "format_recoveries",
    "per_fault",
    "recoveries",
    "recovery_targets",
)


@dataclass(frozen=True, slots=True)
class Limits:
    """The absolute limits per fault, derived from the session timeout `timeout` (T).

    - the faulted session is CONNECTED or RECONNECTED again, counted from the
      end of the fault (the network back), within T after a cut or a pause
      that lasted T or less, and (a new session) within 2 T after a pause
      that lasted longer (planned as an expiry, or a shorter pause that a
      starved process ended late: its length as measured decides);
    - every latch election has a leader again within 4 T: no latch path goes
      without a leader for longer than that, counted from the fault's start
      (or from the gap's start, if later) for every leaderless gap that begins
      before the fault's end plus 4 T;
    - the client watches are back within `watch_tolerance` of their level
      (the median after the warm-up) at a sample within `watch_intervals`
      sampling intervals after the fault's end;
    - RSS grows less than `rss_kib` KiB and the interpreter's allocated
      blocks less than `blocks` blocks per fault after the warm-up (the
      trend over the samples, divided by the faults in its span), once at
      least `min_faults` faults make the division meaningful.
    """

    timeout: float
    interval: float
    watch_intervals: int = 3
    watch_tolerance: float = 0.05
    rss_kib: float = 64.0
    blocks: float = 200.0
    min_faults: int = 20

    def category(self, fault: Fault) -> str:
        """cut, short (a pause of T or less) or long (a pause beyond T), by its measured length."""
        if fault.kind == "cut":
            return "cut"
        return "long" if fault.end - fault.start > self.timeout else "short"

    def reconnect(self, fault: Fault) -> float:
        """The bound on the time from `fault`'s end until its session is usable again."""
        return 2 * self.timeout if self.category(fault) == "long" else self.timeout

    @property
    def leaderless(self) -> float:
        return 4 * self.timeout

    @property
    def watches(self) -> float:
        return self.watch_intervals * self.interval


@dataclass(frozen=True, slots=True)
class Recovery:
    """How the run recovered from one fault; None: not measurable (the run ended first)."""

    fault: Fault
    reconnect: float | None  # s from the fault's end until usable (0: it never left); inf: never
    leaderless: float  # the longest leaderless gap of one latch path around the fault (s)
    leaderless_path: str | None
    watches_back: float | None  # s from the fault's end to a sample with the watches back; inf


def per_fault(points: Sequence[tuple[float, float]], faults: int) -> float | None:
    """How much the trend of `points` (as in `growth`) rises over their span, per fault.

    None with fewer than two points or no fault.
    """
    line = trend(points)
    if line is None or faults <= 0:
        return None
    return line[0] * (points[-1][0] - points[0][0]) / faults


READY = ("CONNECTED", "RECONNECTED")
DOWN = ("SUSPENDED", "LOST")


def _reconnect(
    fault: Fault, events: Sequence[tuple[float, str]], bound: float, stop: float
) -> float | None:
    """Seconds from `fault`'s end until its session was usable again (see `recoveries`)."""
    downs = [t for t, state in events if state in DOWN and fault.start <= t <= fault.end + 1.0]
    if not downs:
        return 0.0
    back = next((t for t, state in events if state in READY and t > downs[0]), None)
    if back is not None:
        return max(0.0, back - fault.end)
    return None if stop - fault.end < bound else math.inf


def _gaps(terms: Sequence[Term], stop: float) -> list[tuple[float, float]]:
    """When `terms` (of one resource) left it without a holder, from its first term to `stop`."""
    ordered = sorted(terms, key=lambda t: t.start)
    out: list[tuple[float, float]] = []
    covered = ordered[0].end
    for term in ordered[1:]:
        if term.start > covered:
            out.append((covered, term.start))
        covered = max(covered, term.end)
    if covered < stop:
        out.append((covered, stop))
    return out


def recoveries(
    faults: Sequence[Fault],
    states: Mapping[int, Sequence[tuple[float, str]]],
    leader_terms: Iterable[Term],
    samples: Sequence[Sample],
    warmup: float,
    stop: float,
    limits: Limits,
) -> list[Recovery]:
    """How the run recovered from each fault, measured against `limits`' definitions.

    `states` gives, per session, its connection states (CONNECTED, SUSPENDED,
    RECONNECTED, LOST) with the times they arrived; `leader_terms` are the
    latch terms (one resource per election); `stop` is when the load stopped.
    - reconnect: 0 if no SUSPENDED or LOST arrived from the fault's start to
      1 s after its end (the session never left); else the time from the
      fault's end to the first CONNECTED or RECONNECTED after that SUSPENDED;
    - leaderless: the longest time one election went without a leader, for
      every gap that overlaps the fault's start to its end plus 4 T, counted
      from the fault's start or the gap's start, whichever is later;
    - watches back: from the fault's end to the first sample whose client
      watches are within the tolerance of their level (the median of the
      samples after `warmup`); None for faults that end in the warm-up.
    """
    by_path: dict[str, list[Term]] = defaultdict(list)
    for term in leader_terms:
        by_path[term.resource].append(term)
    gaps = {path: _gaps(ts, stop) for path, ts in by_path.items()}
    ends = {path: [g[1] for g in gs] for path, gs in gaps.items()}
    after = [s for s in samples if s.t >= warmup]
    level = statistics.median(s.client_watches for s in after) if after else None
    out: list[Recovery] = []
    for fault in faults:
        reconnect = _reconnect(fault, states.get(fault.session, ()), limits.reconnect(fault), stop)
        worst, worst_path = 0.0, None
        horizon = fault.end + limits.leaderless
        for path in sorted(gaps):
            path_gaps = gaps[path]
            for g0, g1 in path_gaps[bisect.bisect_right(ends[path], fault.start) :]:
                if g0 >= horizon:
                    break
                length = g1 - max(g0, fault.start)
                if length > worst:
                    worst, worst_path = length, path
        back: float | None = None
        if level is not None and fault.end >= warmup:
            tolerance = limits.watch_tolerance * level
            later = [s for s in after if s.t >= fault.end]
            found = next((s for s in later if abs(s.client_watches - level) <= tolerance), None)
            if found is not None:
                back = found.t - fault.end
            elif later and later[-1].t >= fault.end + limits.watches:
                back = math.inf
        out.append(Recovery(fault, reconnect, worst, worst_path, back))
    return out


def _s(value: float) -> str:
    return "never" if math.isinf(value) else f"{value:.2f} s"


def _worst(values: Sequence[float]) -> str:
    """'worst (p99)' of `values`."""
    pair = percentiles(values)
    if pair is None:
        return "none"
    return f"{_s(max(values))} (p99 {_s(pair[1])})"


def recovery_targets(
    recs: Sequence[Recovery], samples: Sequence[Sample], warmup: float, limits: Limits
) -> list[Target]:
    """The absolute limits per fault (`Limits`), each with its worst value and p99."""
    out: list[Target] = []
    for kind, name, bound in (
        ("cut", "reconnect after a cut", limits.timeout),
        ("short", "reconnect after a pause <= T", limits.timeout),
        ("long", "reconnect after a pause > T", 2 * limits.timeout),
    ):
        values = [
            r.reconnect
            for r in recs
            if limits.category(r.fault) == kind and r.reconnect is not None
        ]
        out.append(Target(name, _worst(values), f"<= {bound:g} s", max(values, default=0) <= bound))
    lengths = [r.leaderless for r in recs]
    bound = limits.leaderless
    out.append(
        Target(
            "latch leaderless per fault",
            _worst(lengths),
            f"<= {bound:g} s",
            max(lengths, default=0) <= bound,
        )
    )
    backs = [r.watches_back for r in recs if r.watches_back is not None]
    bound = limits.watches
    out.append(
        Target(
            "watches back after a fault",
            _worst(backs),
            f"<= {bound:g} s",
            max(backs, default=0) <= bound,
        )
    )
    after = [s for s in samples if s.t >= warmup]
    counted = [r for r in recs if after and after[0].t <= r.fault.start < after[-1].t]
    memory: list[tuple[str, list[tuple[float, float]], float, str]] = [
        ("RSS per fault", [(s.t, float(s.rss_kib)) for s in after], limits.rss_kib, "KiB"),
        ("heap blocks per fault", [(s.t, float(s.blocks)) for s in after], limits.blocks, "blocks"),
    ]
    for name, points, bound, unit in memory:
        if len(counted) < limits.min_faults:
            value, ok = f"n/a ({len(counted)} faults)", True
        else:
            rise = per_fault(points, len(counted))
            ok = rise is not None and rise < bound
            value = "n/a" if rise is None else f"{rise:+.1f} {unit}"
        out.append(Target(name, value, f"< {bound:g}", ok))
    return out


def format_recoveries(recs: Sequence[Recovery], limits: Limits) -> str:
    """Per kind of fault: how many, and the worst and p99 of each recovery figure; then the
    faults that exceeded a limit."""

    def col(values: Sequence[float]) -> str:
        pair = percentiles(values)
        if pair is None:
            return "-"
        worst = max(values)
        return f"{'never' if math.isinf(worst) else f'{worst:.2f}'}/{pair[1]:.2f}"

    lines = [
        "recovery per fault, worst/p99 in s (reconnect: from the fault's end; leaderless: "
        "the longest latch gap; watches: until a sample at their level); short: a pause "
        "of T or less, long: a pause beyond T, as measured",
        f"{'fault':<8} {'count':>5} {'reconnect':>12} {'leaderless':>12} {'watches':>12}",
    ]
    for kind in ("cut", "short", "long", "all"):
        mine = [r for r in recs if kind in ("all", limits.category(r.fault))]
        if not mine:
            continue
        lines.append(
            f"{kind:<8} {len(mine):5d} "
            f"{col([r.reconnect for r in mine if r.reconnect is not None]):>12} "
            f"{col([r.leaderless for r in mine]):>12} "
            f"{col([r.watches_back for r in mine if r.watches_back is not None]):>12}"
        )
    for r in recs:
        f = r.fault
        over = []
        if r.reconnect is not None and r.reconnect > limits.reconnect(f):
            over.append(f"reconnect {_s(r.reconnect)}")
        if r.leaderless > limits.leaderless:
            over.append(f"{r.leaderless_path} leaderless {_s(r.leaderless)}")
        if r.watches_back is not None and r.watches_back > limits.watches:
            over.append(f"watches back after {_s(r.watches_back)}")
        if over:
            lines.append(
                f"OVER LIMIT: {f.kind} s{f.session} {f.start:.1f}-{f.end:.1f}: " + ", ".join(over)
            )
    return "\n".join(lines)
