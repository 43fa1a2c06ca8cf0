"""The demo's cron verdicts: pure checks over the workers' firing logs and the jobs' histories.

Each worker logs a ``fire`` line when a firing starts and a ``fired`` (it
returned) or ``fire-cancelled`` line when it ends; a SIGKILLed worker's open
firing ends when it was killed.  `check_no_two_runners` holds the runs of
each job against each other: on one machine, with one clock, a firing runs
inside its runner's term of leadership and terms never overlap (task
leadership drains a term's bodies before the next leader's node exists), so
two runs of one job never overlap in time and their fencing tokens never go
down.  `check_exactly_once` holds ZooKeeper's history of each job (its
`aiocoord.FiringOutcome` list) against the logs: every scheduled time from the
job's first recorded firing to its last has an outcome and ran once, and an
interrupted firing ran at most once more, and only with ``retry_interrupted``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from ...recipes.cron import FiringOutcome
from .crons import JobSpec, scheduled_times
from .verdict import Check, WorkerLog

__all__ = ("Run", "check_exactly_once", "check_no_two_runners", "runs_of")


@dataclass(frozen=True, slots=True)
class Run:
    """One firing as a worker's log shows it."""

    job: str
    at: float  # the scheduled time
    worker: str
    token: int
    attempt: int
    start: float
    end: float  # when it returned or was cancelled; its kill time; inf while running
    ended: str  # "ok", "cancelled", "killed" or "open"


def runs_of(log: WorkerLog) -> list[Run]:
    """The worker's firings, from its ``fire`` lines and what ended each."""
    open_: dict[tuple[str, float, int], dict[str, object]] = {}
    runs: list[Run] = []

    def run(start: Mapping[str, object], end: float, ended: str) -> Run:
        return Run(
            str(start["job"]),
            float(str(start["at"])),
            log.worker,
            int(str(start["token"])),
            int(str(start["attempt"])),
            float(str(start["t"])),
            end,
            ended,
        )

    for r in log.records:
        ev = r["ev"]
        if ev not in ("fire", "fired", "fire-cancelled"):
            continue
        key = (str(r.get("job")), float(r.get("at", 0.0)), int(r.get("attempt", 0)))
        if ev == "fire":
            open_[key] = r
        elif key in open_:
            runs.append(run(open_.pop(key), r["t"], "ok" if ev == "fired" else "cancelled"))
    for start in open_.values():
        if log.killed_at is not None:
            runs.append(run(start, log.killed_at, "killed"))
        else:
            runs.append(run(start, float("inf"), "open"))
    return runs


def check_no_two_runners(logs: Iterable[WorkerLog]) -> tuple[Check, list[Run]]:
    """No two firings of one job overlap in time, and their tokens never go down."""
    logs = list(logs)
    runs = [r for log in logs for r in runs_of(log)]
    by_job: dict[str, list[Run]] = {}
    for r in runs:
        by_job.setdefault(r.job, []).append(r)
    problems: list[str] = []
    for job, items in sorted(by_job.items()):
        items.sort(key=lambda r: r.start)
        for before, after in itertools.pairwise(items):
            if after.start < before.end:
                problems.append(
                    f"{job}: {after.worker} started a firing {before.end - after.start:.3f}s "
                    f"before {before.worker}'s ended"
                )
            if after.token < before.token:
                problems.append(f"{job}: token 0x{after.token:x} after 0x{before.token:x}")
    detail = (
        f"{len(runs)} firings of {len(by_job)} jobs in {len(logs)} workers' logs, "
        "none overlapping; tokens never go down"
    )
    cut = sum(log.bad_lines for log in logs)
    if cut:
        detail += f" ({cut} unreadable log lines skipped)"
    if problems:
        return Check(False, "one job ran on two workers at once", "; ".join(problems[:5])), runs
    return Check(True, "no job ever ran on two workers at once", detail), runs


def _hms(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S")


def check_exactly_once(
    specs: Sequence[JobSpec],
    histories: Mapping[str, Sequence[FiringOutcome]],
    runs: Iterable[Run],
    *,
    history_bound: int,
) -> Check:
    """Every scheduled time of every job, from its first recorded firing to its last, ran
    exactly once: one outcome in ZooKeeper's history, one run in the logs by the worker and
    token it names, none missed or failed.  An interrupted firing (its runner was cut off)
    ran at most once per attempt; it is recorded interrupted, or run again (attempt 2) when
    the job has ``retry_interrupted``, and it is listed in the check's detail.
    """
    by_time: dict[tuple[str, float], list[Run]] = {}
    for r in runs:
        by_time.setdefault((r.job, r.at), []).append(r)
    problems: list[str] = []
    notes: list[str] = []
    times = 0
    for spec in specs:
        history = list(histories.get(spec.name, ()))
        if not history:
            problems.append(f"{spec.name} has no history")
            continue
        if len(history) >= history_bound:
            problems.append(f"{spec.name}: history full ({history_bound}), raise the bound")
        at = [h.scheduled_at.timestamp() for h in history]
        first, last = min(at), max(at)
        expected = scheduled_times(spec, first, last)
        times += len(expected)
        stray = sorted(set(at) - set(expected))
        if stray:
            problems.append(f"{spec.name}: outcome for {_hms(stray[0])}, not a scheduled time")
        logged = [t for (job, t) in by_time if job == spec.name]
        if logged and min(logged) < first:
            problems.append(f"{spec.name}: ran at {_hms(min(logged))}, before its history")
        for t in expected:
            entries = [h for h in history if h.scheduled_at.timestamp() == t]
            problem, note = _one_time(spec, t, entries, by_time.get((spec.name, t), []))
            if problem:
                problems.append(problem)
            if note:
                notes.append(note)
        for t in sorted(set(logged) - set(expected)):
            if first <= t <= last:
                problems.append(f"{spec.name} ran at {_hms(t)}, not a scheduled time")
            elif t > last and any(r.ended == "ok" for r in by_time[(spec.name, t)]):
                # Later than the last outcome: cut by the final stop, never completed.
                problems.append(f"{spec.name} {_hms(t)} ran but has no outcome in ZooKeeper")
    title = "every scheduled firing ran exactly once"
    if problems:
        return Check(False, title, "; ".join(problems[:5]))
    detail = (
        f"{times} scheduled times of {len(specs)} jobs, each from its first firing to its "
        "last, in ZooKeeper's history and the workers' logs"
    )
    if notes:
        shown = ", ".join(notes[:4]) + (f" and {len(notes) - 4} more" if len(notes) > 4 else "")
        detail += f"; {len(notes)} interrupted: {shown}"
    else:
        detail += "; none interrupted"
    return Check(True, title, detail)


def _one_time(
    spec: JobSpec, t: float, entries: list[FiringOutcome], runs: list[Run]
) -> tuple[str | None, str | None]:
    """(a problem, a note on an interrupted firing) for the scheduled time `t` of a job."""
    where = f"{spec.name} {_hms(t)}"
    if not entries:
        return f"{where} never ran (no outcome)", None
    statuses = [(e.status, e.attempt) for e in entries]
    n = len(entries)
    good = [("interrupted", k) for k in range(1, n)] + [("ok", n)]
    if statuses == [("interrupted", 1)] and not spec.retry_interrupted:
        pass
    elif statuses != good or (n > 1 and not spec.retry_interrupted):
        return f"{where}: outcomes {statuses}", None
    attempts = {r.attempt for r in runs}
    if len(attempts) != len(runs) or not attempts <= {e.attempt for e in entries}:
        return f"{where} ran {len(runs)} times: attempts {sorted(r.attempt for r in runs)}", None
    lost = False
    for e in entries:
        run = next((r for r in runs if r.attempt == e.attempt), None)
        if run is not None and (run.worker, run.token) != (e.worker, e.token):
            return f"{where}: run by {run.worker}, recorded for {e.worker}", None
        if e.status == "ok" and (run is None or run.ended != "ok"):
            return f"{where}: recorded ok, but no completed run in the logs", None
        # It returned, but its runner died before recording it: it ran, and may run again.
        lost = lost or (e.status == "interrupted" and run is not None and run.ended == "ok")
    if statuses == [("ok", 1)]:
        return None, None
    cut = next((r for r in runs if r.attempt == 1), None)
    how = {"killed": "killed mid-firing", "cancelled": "cancelled as its term ended"}
    cause = how.get(cut.ended, "cut off") if cut else "cut off before it started"
    note = f"{where} ({entries[0].worker} {cause}; "
    note += f"run again by {entries[-1].worker}" if n > 1 else "recorded interrupted"
    return None, note + (", after it had returned: at least once)" if lost else ")")
