"""`Firing` (what a job's function is called with) and `FiringOutcome` (a line of its history)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, tzinfo

from ._record import Entry, Status

__all__ = ("Firing", "FiringOutcome", "outcome_of")


@dataclass(frozen=True, slots=True)
class Firing:
    """One scheduled time of a cron job, as its function runs it.

    `scheduled_at` is the scheduled time (aware, in the cron's time zone), not
    the moment the function started; `token` is the fencing token of this
    worker's term of leadership of the job (larger for every later leader);
    `attempt` is 1, or more when an interrupted firing runs again
    (``retry_interrupted=True``); `catch_up` is True when the firing runs
    later than the job's grace allows, as a missed firing under
    ``missed="run_once"`` or ``"run_all"``.
    """

    job: str
    scheduled_at: datetime
    token: int
    attempt: int = 1
    catch_up: bool = False


@dataclass(frozen=True, slots=True)
class FiringOutcome:
    """How one scheduled time of a job ended, as `Cron.history` reads it.

    `status` is ``"ok"`` (the function returned), ``"failed"`` (it raised:
    `error` says what), ``"interrupted"`` (its runner lost leadership or died
    before it ended; recorded by the next leader) or ``"missed"`` (no worker
    ran it in time and the job's ``missed`` policy gave it up; `count` such
    times, the latest at `scheduled_at`).  Times are aware datetimes in the
    cron's time zone; `worker`, `version` and `token` say who ran it.
    """

    job: str
    scheduled_at: datetime
    status: Status
    attempt: int = 1
    token: int | None = None
    worker: str | None = None
    version: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    error: str | None = None
    count: int = 1
    catch_up: bool = False

    @property
    def duration(self) -> float | None:
        """Seconds from start to end, for a firing that ended (ok or failed)."""
        if self.started_at is None or self.ended_at is None:
            return None
        return (self.ended_at - self.started_at).total_seconds()


def _time(t: float | None, tz: tzinfo) -> datetime | None:
    return None if t is None else datetime.fromtimestamp(t, tz)


def outcome_of(job: str, entry: Entry, tz: tzinfo) -> FiringOutcome:
    """The public form of a history entry."""
    return FiringOutcome(
        job=job,
        scheduled_at=datetime.fromtimestamp(entry.at, tz),
        status=entry.status,
        attempt=entry.attempt,
        token=entry.token,
        worker=entry.worker,
        version=entry.version,
        started_at=_time(entry.started, tz),
        ended_at=_time(entry.ended, tz),
        error=entry.error,
        count=entry.count,
        catch_up=entry.catch_up,
    )
