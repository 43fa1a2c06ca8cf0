"""The demo's cron jobs: their names and schedules, shared by the workers and the verdict.

A dozen jobs by default, in a repeating pattern of four schedules: every
second, ``*/2 * * * * *`` (a six-field cron expression: every even second),
every 3 seconds and ``*/3 * * * * *``; one in three runs an interrupted
firing again (``retry_interrupted=True``).  Each firing "works" for
`FIRE_WORK` seconds, so a hand-over or a crash can catch one mid-run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from cronsim import CronSim

__all__ = ("FIRE_WORK", "JobSpec", "job_specs", "scheduled_times")

FIRE_WORK = 0.3  # seconds a firing takes

_PATTERN: tuple[tuple[str | None, float | None], ...] = (
    (None, 1.0),
    ("*/2 * * * * *", None),
    (None, 3.0),
    ("*/3 * * * * *", None),
)


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One demo job: a cron `expression` (UTC) or an interval `every`, and its retry policy."""

    name: str
    expression: str | None
    every: float | None
    retry_interrupted: bool

    @property
    def schedule(self) -> str:
        return self.expression if self.expression is not None else f"every {self.every:g}s"

    @property
    def period(self) -> float:
        """The longest gap between two scheduled times."""
        if self.every is not None:
            return self.every
        return float(self.expression.split()[0].removeprefix("*/")) if self.expression else 1.0


def job_specs(count: int) -> list[JobSpec]:
    """The demo's `count` jobs, named ``cron-00``, ``cron-01``, ..."""
    specs = []
    for i in range(count):
        expression, every = _PATTERN[i % len(_PATTERN)]
        specs.append(JobSpec(f"cron-{i:02d}", expression, every, retry_interrupted=i % 3 == 2))
    return specs


def scheduled_times(spec: JobSpec, first: float, last: float) -> list[float]:
    """The job's scheduled times from `first` to `last` (Unix times, both included)."""
    if spec.every is not None:
        step = round(spec.every * 1_000_000)  # as the recipe counts: whole microseconds
        lo = -(-round(first * 1_000_000) // step)
        hi = round(last * 1_000_000) // step
        return [k * step / 1_000_000 for k in range(lo, hi + 1)]
    assert spec.expression is not None
    out = [first] if _fires_at(spec.expression, first) else []
    for when in CronSim(spec.expression, datetime.fromtimestamp(first, UTC)):
        t = when.timestamp()
        if t > last:
            break
        out.append(t)
    return out


def _fires_at(expression: str, t: float) -> bool:
    after = next(CronSim(expression, datetime.fromtimestamp(t - 1.0, UTC)), None)
    return after is not None and after.timestamp() == t
