"""What a job's leader does next, from the record it read and the clock: pure, table-tested.

`plan` maps (record, schedule, now, options, who I am) to one step:

- `Fenced`: a leader with a larger fencing token wrote the record: this one
  is stale and writes nothing more.
- `Wait`: nothing is due before `until` (None: the schedule never fires again).
- `Write`: write `record` with a CAS on the version read; then, if `run` is
  set, run that firing (its claim is in the record).  `entries` are the
  history entries the write adds (interrupted or missed times), for those
  who count outcomes.

The rules, in order:

1. A claim in the record belongs to a firing whose runner is gone: the reader
   leads the job, so the claimant's term (another worker's, or an earlier
   term of its own whose bodies were cancelled) is over, and a firing never
   outlives its term's ``lead()`` block.  It is recorded ``"interrupted"``;
   with ``retry_interrupted`` it is claimed again (attempt + 1).
2. The first scheduled time after ``last``, if it is not yet due: wait.
3. If it is due and late by at most ``grace`` seconds (a hand-over, a
   restart, a slow previous firing), claim and run it.
4. Otherwise the times later than ``grace`` ago were missed: ``"skip"``
   records them as one ``"missed"`` entry; ``"run_once"`` runs the latest as
   a catch-up and records the others; ``"run_all"`` runs each, oldest first,
   but at most ``max_catch_up`` of them (the older ones are recorded missed).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from ._record import Claim, Entry, JobRecord
from ._schedule import Schedule

__all__ = ("COUNT_CAP", "Fenced", "Me", "Missed", "Options", "Step", "Wait", "Write", "plan")

Missed = Literal["skip", "run_once", "run_all"]
COUNT_CAP = 10_000
"""Missed times are counted up to this many (a cron expression is stepped one time at a time)."""


@dataclass(frozen=True, slots=True)
class Options:
    """A job's policy: missed firings, interrupted ones, lateness allowed, history kept."""

    missed: Missed = "skip"
    retry_interrupted: bool = False
    grace: float = 60.0
    max_catch_up: int = 100
    keep: int = 50


@dataclass(frozen=True, slots=True)
class Me:
    """The leader that plans: its worker id, version and the term's fencing token."""

    worker: str
    version: str
    token: int


@dataclass(frozen=True, slots=True)
class Fenced:
    """A newer leader (larger token) wrote the record."""

    token: int


@dataclass(frozen=True, slots=True)
class Wait:
    """Nothing due before `until` (a Unix time; None: never)."""

    until: float | None


@dataclass(frozen=True, slots=True)
class Write:
    """Write `record` (CAS); then run `run` if set.  `entries`: what it adds to the history."""

    record: JobRecord
    run: Claim | None = None
    entries: tuple[Entry, ...] = ()


Step = Fenced | Wait | Write


def plan(record: JobRecord, schedule: Schedule, now: float, options: Options, me: Me) -> Step:
    """The next step of the job's leader; see the module docstring."""
    if record.token > me.token:
        return Fenced(record.token)
    base = replace(record, schedule=schedule.text, token=me.token)
    if record.claim is not None:
        return _interrupted(base, record.claim, now, options, me)
    nxt = schedule.after(record.last)
    if nxt is None or nxt > now:
        return Wait(nxt)
    cutoff = now - options.grace
    if nxt >= cutoff:
        return _claim(base, nxt, now, me, catch_up=False)
    count = schedule.count(record.last, cutoff, max(COUNT_CAP, options.max_catch_up + 1))
    latest = schedule.back(cutoff, 1)
    if latest is None or count < 1:  # cannot happen for a schedule that fired at `nxt`
        latest, count = nxt, 1
    if options.missed == "skip":
        missed = Entry(at=latest, status="missed", count=count)
        return _written(base, missed, options, last=latest)
    if options.missed == "run_once":
        done: tuple[Entry, ...] = ()
        if count > 1:
            older = schedule.back(cutoff, 2)
            at = older if older is not None else latest
            done = (Entry(at=at, status="missed", count=count - 1),)
            base = base.with_entries(done, options.keep)
        return _claim(base, latest, now, me, catch_up=True, entries=done)
    if count > options.max_catch_up:
        dropped = schedule.back(cutoff, options.max_catch_up + 1)
        if dropped is not None and dropped > record.last:
            missed = Entry(at=dropped, status="missed", count=count - options.max_catch_up)
            return _written(base, missed, options, last=dropped)
    return _claim(base, nxt, now, me, catch_up=True)


def _claim(
    record: JobRecord,
    at: float,
    now: float,
    me: Me,
    *,
    catch_up: bool,
    entries: tuple[Entry, ...] = (),
) -> Write:
    claim = Claim(at, me.token, me.worker, me.version, now, 1, catch_up)
    return Write(replace(record, last=max(record.last, at), claim=claim), claim, entries)


def _written(record: JobRecord, entry: Entry, options: Options, *, last: float) -> Write:
    """Write `entry` into the history, with every time up to `last` handled."""
    return Write(record.with_entries((entry,), options.keep).with_last(last), None, (entry,))


def _interrupted(record: JobRecord, claim: Claim, now: float, options: Options, me: Me) -> Write:
    entry = Entry.of_claim(claim, "interrupted", ended=None)
    record = replace(record.with_entries((entry,), options.keep), claim=None)
    if not options.retry_interrupted:
        return Write(record, None, (entry,))
    again = Claim(
        claim.at,
        me.token,
        me.worker,
        me.version,
        now,
        claim.attempt + 1,
        catch_up=claim.catch_up or now - claim.at > options.grace,
    )
    return Write(replace(record, claim=again), again, (entry,))
