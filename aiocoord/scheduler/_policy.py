"""A job's run policy: timeout, retries with backoff, deliveries; and the checks of its numbers.

Pure: no I/O.  `RetryBackoff.delay` is the wait before retry number `n`
(exponential, capped, with jitter); `JobOptions` is what ``@sched.job(...)``
was given, checked once at registration; `check_delay` and `check_run_at`
turn a submit's ``delay=``/``run_at=`` into one wall-clock time.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .._backoff import grown
from .._checks import check_int, check_seconds

__all__ = (
    "DEFAULT_BACKOFF",
    "DEFAULT_OPTIONS",
    "Backoff",
    "RetryBackoff",
    "JobOptions",
    "check_delay",
    "check_run_at",
)

MAX_SECONDS = 10 * 365 * 86400.0  # ten years: past any sensible delay or timeout
MAX_DELIVERIES = 1000
MAX_CONCURRENCY = 10_000
_EPOCH = 0.0
_LAST = 253370764800.0  # 9998-12-31: inside what a record's timestamp may hold


@dataclass(frozen=True, slots=True)
class RetryBackoff:
    """How long to wait before retrying a failed job: exponential, capped, with jitter.

    Retry ``n`` (1 for the first) waits ``min(maximum, initial * factor**(n-1))``
    seconds, less a random share of up to `jitter` of it (0: exact, 1: anywhere
    from zero), so jobs that failed together do not all come back together.
    """

    initial: float = 1.0
    maximum: float = 60.0
    factor: float = 2.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        check_seconds("initial", self.initial, most=MAX_SECONDS)
        check_seconds("maximum", self.maximum, most=MAX_SECONDS)
        if self.maximum < self.initial:
            raise ValueError(f"maximum ({self.maximum}) must be >= initial ({self.initial})")
        if isinstance(self.factor, bool) or not isinstance(self.factor, int | float):
            raise TypeError(f"factor must be a number, not {type(self.factor).__name__}")
        if not (math.isfinite(self.factor) and 1.0 <= self.factor <= 100.0):
            raise ValueError(f"factor must be from 1 to 100, not {self.factor!r}")
        if isinstance(self.jitter, bool) or not isinstance(self.jitter, int | float):
            raise TypeError(f"jitter must be a number, not {type(self.jitter).__name__}")
        if not (math.isfinite(self.jitter) and 0.0 <= self.jitter <= 1.0):
            raise ValueError(f"jitter must be from 0 to 1, not {self.jitter!r}")

    def ceiling(self, retry: int) -> float:
        """The wait before retry number `retry` (from 1) without jitter."""
        return grown(self.initial, retry - 1, self.maximum, factor=self.factor)

    def delay(self, retry: int, rand: Callable[[], float] = random.random) -> float:
        """The wait before retry number `retry` (from 1), jitter included."""
        ceiling = self.ceiling(retry)
        return ceiling * (1.0 - self.jitter * rand())


Backoff = RetryBackoff
"""The name design.md shows (``aiocoord.Backoff(initial=1.0, maximum=60.0)``): the same class."""


@dataclass(frozen=True, slots=True)
class JobOptions:
    """What ``@scheduler.job(name, ...)`` was given, checked (see `Scheduler.job`)."""

    timeout: float | None = None
    retries: int = 0
    backoff: RetryBackoff = RetryBackoff()
    retry_on: tuple[type[BaseException], ...] = (Exception,)
    max_deliveries: int = 5
    concurrency: int | None = None  # runs of the name at once across the fleet (None: no cap)

    @classmethod
    def build(
        cls,
        *,
        timeout: object,
        retries: object,
        backoff: object,
        retry_on: object,
        max_deliveries: object,
        concurrency: object = None,
    ) -> JobOptions:
        """Check each argument; `TypeError`/`ValueError` naming the one that is wrong."""
        seconds = (
            None
            if timeout is None
            else check_seconds("timeout", timeout, positive=True, most=MAX_SECONDS)
        )
        count = check_int("retries", retries, least=0, most=1000)
        if not isinstance(backoff, RetryBackoff):
            raise TypeError(
                f"backoff must be an aiocoord.RetryBackoff, not {type(backoff).__name__}"
            )
        kinds: Any = (retry_on,) if isinstance(retry_on, type) else retry_on
        if not isinstance(kinds, tuple) or not all(
            isinstance(k, type) and issubclass(k, Exception) for k in kinds
        ):
            raise TypeError(
                f"retry_on must be an exception class or a tuple of them, not {retry_on!r}"
            )
        deliveries = check_int("max_deliveries", max_deliveries, least=1, most=MAX_DELIVERIES)
        cap = (
            None
            if concurrency is None
            else check_int("concurrency", concurrency, least=1, most=MAX_CONCURRENCY)
        )
        return cls(seconds, count, backoff, kinds, deliveries, cap)

    def retries_after(self, error: BaseException, failures: int) -> bool:
        """Whether a job that failed `failures` times (this `error` included) runs again."""
        return failures <= self.retries and isinstance(error, self.retry_on)


def check_delay(delay: object, now: float) -> float:
    """The wall-clock time a job submitted with ``delay=`` seconds is due."""
    return now + check_seconds("delay", delay, most=MAX_SECONDS)


def check_run_at(run_at: object) -> float:
    """The wall-clock time of an aware `datetime`; a naive one is refused (its zone is unknown)."""
    if not isinstance(run_at, datetime):
        raise TypeError(f"run_at must be a datetime, not {type(run_at).__name__}")
    if run_at.tzinfo is None or run_at.utcoffset() is None:
        raise ValueError(
            f"run_at must be a timezone-aware datetime, not the naive {run_at.isoformat()} "
            "(use datetime.now(timezone.utc) + timedelta(...))"
        )
    when = run_at.timestamp()
    if not _EPOCH <= when <= _LAST:
        raise ValueError(f"run_at must be between 1970 and 9998, not {run_at.isoformat()}")
    return when


DEFAULT_BACKOFF = RetryBackoff()
DEFAULT_OPTIONS = JobOptions()
