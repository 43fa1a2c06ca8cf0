"""Assignment strategies: which live worker gets a job.  Pure functions of the assigner's view.

The assigner calls ``strategy.choose(job, workers)`` with the workers that can
take the job now (alive, not draining, a handler for its name, below
capacity), sorted by id, and assigns the job to the id returned; None leaves
the job pending.  A strategy is called from the assigner's event loop and
must not block; it keeps whatever state it likes (a cursor, a random
generator).  A new assigner starts from a fresh strategy object only if the
process is new: the strategy lives as long as the `Scheduler`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = (
    "STRATEGIES",
    "JobRequest",
    "LeastLoaded",
    "RandomChoice",
    "RoundRobin",
    "Strategy",
    "WorkerLoad",
    "strategy_from",
)


@dataclass(frozen=True, slots=True)
class JobRequest:
    """The job a strategy places: its id, handler name and JSON payload.

    (A job's status, as `Scheduler.info` returns it, is a `JobInfo`.)
    """

    id: str
    name: str
    payload: Any


@dataclass(frozen=True, slots=True)
class WorkerLoad:
    """A worker that can take the job: `load` jobs assigned of `capacity`."""

    id: str
    capacity: int
    load: int

    @property
    def free(self) -> int:
        return self.capacity - self.load


@runtime_checkable
class Strategy(Protocol):
    """Anything with this method is a strategy (``Scheduler(..., strategy=obj)``)."""

    def choose(self, job: JobRequest, workers: Sequence[WorkerLoad]) -> str | None:
        """The id of the worker (one of `workers`, never empty) to run `job`, or None."""
        ...


class RoundRobin:
    """Each job to the next worker in id order after the one chosen last.

    Keyed by the last id rather than an index, so workers joining or leaving
    do not make it skip or repeat the others.
    """

    def __init__(self) -> None:
        self._last: str | None = None

    def choose(self, job: JobRequest, workers: Sequence[WorkerLoad]) -> str | None:
        last = self._last
        chosen = next((w.id for w in workers if last is None or w.id > last), workers[0].id)
        self._last = chosen
        return chosen

    def __repr__(self) -> str:
        return f"<RoundRobin last={self._last}>"


class RandomChoice:
    """A uniformly random worker among those with room (`seed` for repeatable tests)."""

    def __init__(self, seed: int | None = None) -> None:
        self._random = random.Random(seed)

    def choose(self, job: JobRequest, workers: Sequence[WorkerLoad]) -> str | None:
        return self._random.choice(workers).id

    def __repr__(self) -> str:
        return "<RandomChoice>"


class LeastLoaded:
    """The worker with the smallest share of its capacity in use; ties go round-robin.

    The load counts assignments the assigner knows of (including those still
    being written), so a burst of jobs spreads over the workers at once
    instead of piling onto the one that looked idle.
    """

    def __init__(self) -> None:
        self._ties = RoundRobin()

    def choose(self, job: JobRequest, workers: Sequence[WorkerLoad]) -> str | None:
        best = min(w.load / w.capacity for w in workers)
        return self._ties.choose(job, [w for w in workers if w.load / w.capacity == best])

    def __repr__(self) -> str:
        return "<LeastLoaded>"


STRATEGIES = {"round-robin": RoundRobin, "random": RandomChoice, "least-loaded": LeastLoaded}


def strategy_from(spec: object) -> Strategy:
    """A strategy from a name in `STRATEGIES` or an object with a ``choose`` method."""
    if isinstance(spec, str):
        factory = STRATEGIES.get(spec)
        if factory is None:
            names = ", ".join(repr(n) for n in STRATEGIES)
            raise ValueError(f"strategy must be one of {names} or a Strategy, not {spec!r}")
        strategy: Strategy = factory()
        return strategy
    if isinstance(spec, Strategy):
        return spec
    raise TypeError(
        f"strategy must be a name or an object with choose(job, workers), not {type(spec).__name__}"
    )
