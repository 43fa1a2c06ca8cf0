"""When a cron job fires: a cron expression in a time zone, or an interval aligned to the epoch.

Pure: times in and out are Unix times (float seconds), so that records,
plans and tests never handle a naive datetime.

Cron expressions are parsed and stepped by `cronsim` (Debian cron's
semantics, five fields, or six with seconds first).  Local times come from
`zoneinfo`.  Across a daylight-saving change, a five-field expression with
a fixed minute and hour (``30 2 * * *``) fires once a day as Debian cron
does: at the first valid minute after a skipped time (02:30 becomes 03:00 on
the spring-forward night), and once, at the first occurrence, for a repeated
one.  An expression whose minute or hour field starts with ``*`` (``*/15 *
* * *``, ``0 * * * *``), and every six-field one, follows real time: a
skipped local time does not fire, a repeated one fires twice.

An interval (``every=``) fires at the Unix times that are whole multiples of
it (``every=timedelta(hours=6)``: 00:00, 06:00, ... UTC), whatever the time
zone, counted in whole microseconds.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from ...errors import ConfigError

__all__ = ("CronExpr", "Every", "Schedule", "resolve_timezone", "schedule_of", "schedule_from_text")

_US = 1_000_000
MAX_EVERY = 10 * 365 * 86400.0  # ten years: a longer interval would fire past what a datetime holds
# `Every.text`: "every " and the interval as `str(timedelta)` writes it ("1 day, 0:00:30.5").
_EVERY_TEXT = re.compile(r"every (?:(\d+) days?, )?(\d+):(\d\d):(\d\d)(?:\.(\d{6}))?")


def resolve_timezone(value: str | tzinfo | None) -> tzinfo:
    """A `tzinfo` for `value` (an IANA name such as ``"Europe/Berlin"``); UTC for None."""
    if value is None:
        return UTC
    if isinstance(value, tzinfo):
        return value
    if not isinstance(value, str):
        raise TypeError(f"timezone must be a str or a tzinfo, not {type(value).__name__}")
    try:
        return ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ConfigError("timezone", f"unknown time zone {value!r}") from None


class Schedule:
    """The scheduled times of one job (see the module docs); `text` describes it."""

    text: str

    def after(self, t: float) -> float | None:
        """The first scheduled time strictly after `t`; None if there is none."""
        raise NotImplementedError

    def back(self, t: float, n: int) -> float | None:
        """The `n`-th latest scheduled time at or before `t` (``n=1``: the latest); or None."""
        raise NotImplementedError

    def count(self, after: float, until: float, cap: int) -> int:
        """How many scheduled times lie in ``(after, until]``, counting no further than `cap`."""
        raise NotImplementedError


class Every(Schedule):
    """Every `seconds`, at the whole multiples of it since the epoch."""

    def __init__(self, seconds: float) -> None:
        self.step = round(seconds * _US)
        if self.step < 1:
            raise ConfigError("every", f"must be at least one microsecond, not {seconds!r}")
        self.text = f"every {timedelta(microseconds=self.step)}"

    def _index(self, t: float) -> int:
        """The index of the last multiple at or before `t`."""
        return round(t * _US) // self.step

    def after(self, t: float) -> float | None:
        return (self._index(t) + 1) * self.step / _US

    def back(self, t: float, n: int) -> float | None:
        return (self._index(t) - n + 1) * self.step / _US

    def count(self, after: float, until: float, cap: int) -> int:
        return max(0, min(cap, self._index(until) - self._index(after)))


class CronExpr(Schedule):
    """A cron expression read by `cronsim`, in the time zone `tz`."""

    def __init__(self, expr: str, tz: tzinfo) -> None:
        if not isinstance(expr, str):
            raise TypeError(f"the cron expression must be a str, not {type(expr).__name__}")
        self.expr = " ".join(expr.split())
        self.tz = tz
        self.text = self.expr
        try:
            probe = CronSim(self.expr, datetime.now(tz))
            next(probe)
        except CronSimError as exc:
            raise ConfigError("expression", f"{expr!r} is not a cron expression: {exc}") from None
        except StopIteration:
            raise ConfigError("expression", f"{expr!r} never fires") from None

    def _local(self, t: float) -> datetime:
        return datetime.fromtimestamp(t, self.tz)

    def after(self, t: float) -> float | None:
        try:
            return next(CronSim(self.expr, self._local(t))).timestamp()
        except StopIteration:
            return None

    def back(self, t: float, n: int) -> float | None:
        # Reverse iteration starts one second before its start: start a second after `t`.
        start = self._local(math.floor(t) + 1.0)
        it = CronSim(self.expr, start, reverse=True)
        found: float | None = None
        try:
            for _ in range(n):
                found = next(it).timestamp()
        except StopIteration:
            return None
        return found

    def count(self, after: float, until: float, cap: int) -> int:
        n = 0
        it = CronSim(self.expr, self._local(after))
        for when in it:
            if n >= cap or when.timestamp() > until:
                break
            n += 1
        return n


def schedule_of(expr: str | None, every: timedelta | float | None, tz: tzinfo) -> Schedule:
    """The schedule of a job given as a cron expression or as an interval (exactly one)."""
    if (expr is None) == (every is None):
        raise TypeError("a cron job needs either a cron expression or every=, not both or neither")
    if expr is not None:
        return CronExpr(expr, tz)
    if isinstance(every, timedelta):
        seconds = every.total_seconds()
    elif isinstance(every, int | float) and not isinstance(every, bool):
        seconds = float(every)
    else:
        raise TypeError(
            f"every must be a timedelta or a number of seconds, not {type(every).__name__}"
        )
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError("every", f"must be a positive, finite interval, not {every!r}")
    if seconds > MAX_EVERY:
        raise ConfigError("every", f"must be at most ten years ({MAX_EVERY:.0f} s), not {every!r}")
    return Every(seconds)


def schedule_from_text(text: str, tz: tzinfo) -> Schedule:
    """The schedule whose `Schedule.text` is `text` (as a job's record keeps it).

    For tools that read a record without the job's code; `ConfigError` if
    `text` is neither an interval's text nor a cron expression.
    """
    found = _EVERY_TEXT.fullmatch(text)
    if found is None:
        return CronExpr(text, tz)
    days, hours, minutes, seconds, micros = (int(g or 0) for g in found.groups())
    step = timedelta(days, seconds, micros, minutes=minutes, hours=hours)
    return Every(step / timedelta(microseconds=1) / _US)
