"""The demo's verdict: pure checks over the workers' logs and what ZooKeeper says.

Nothing here does I/O.  `_demo` collects the inputs (each worker's JSON-lines
log, the time it was killed if it was, a final snapshot of the leader nodes,
the once-per result nodes, the jobs' results) and prints the `Check` results.

Why the interval check is sound: a ``lead()`` body's ``lead`` record is
written after the leader node was created and its ``end`` record before the
node is deleted (task leadership drains bodies before it hands a task over),
so on one machine, with one clock, two terms of one task may never overlap in
time.  A SIGKILLed worker's open terms end at the moment it was killed: a
dead process does nothing, even while its node waits for the session to expire.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = (
    "Check",
    "Term",
    "WorkerLog",
    "check_final_leaders",
    "check_jobs",
    "check_no_two_leaders",
    "check_once_windows",
    "parse_log",
    "terms_of",
)


@dataclass(frozen=True, slots=True)
class Check:
    ok: bool
    title: str
    detail: str = ""


@dataclass(slots=True)
class WorkerLog:
    """One worker's records and fate."""

    worker: str
    version: str
    records: list[dict[str, Any]] = field(default_factory=list)
    killed_at: float | None = None  # wall time it was known dead after SIGKILL
    bad_lines: int = 0

    def events(self, ev: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("ev") == ev]


def parse_log(worker: str, version: str, text: str, killed_at: float | None = None) -> WorkerLog:
    """Parse a worker's log; a line cut short (or otherwise unreadable) is counted, not fatal."""
    out = WorkerLog(worker, version, killed_at=killed_at)
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            out.bad_lines += 1
            continue
        if isinstance(record, dict) and isinstance(record.get("t"), int | float):
            out.records.append(record)
        else:
            out.bad_lines += 1
    return out


@dataclass(frozen=True, slots=True)
class Term:
    task: str
    worker: str
    token: int
    start: float
    end: float  # math.inf: still open when the log ends (worker alive)


def terms_of(log: WorkerLog) -> list[Term]:
    """The worker's terms, from its ``lead``/``end`` pairs; open terms end when it was killed."""
    open_: dict[str, dict[str, Any]] = {}
    terms: list[Term] = []
    for r in log.records:
        ev = r["ev"]
        if ev == "lead":
            open_[r["task"]] = r
        elif ev == "end" and r.get("task") in open_:
            start = open_.pop(r["task"])
            terms.append(Term(r["task"], log.worker, int(start["token"]), start["t"], r["t"]))
    last = log.records[-1]["t"] if log.records else 0.0
    for task, start in open_.items():
        exited = any(r["ev"] in ("exit", "crash") for r in log.records)
        end = log.killed_at if log.killed_at is not None else (last if exited else math.inf)
        terms.append(Term(task, log.worker, int(start["token"]), start["t"], end))
    return terms


def check_no_two_leaders(logs: Iterable[WorkerLog]) -> tuple[Check, list[Term]]:
    """No two terms of one task overlap in time, and each term's token is larger than the last."""
    logs = list(logs)
    terms = [t for log in logs for t in terms_of(log)]
    by_task: dict[str, list[Term]] = {}
    for term in terms:
        by_task.setdefault(term.task, []).append(term)
    problems: list[str] = []
    for task, items in sorted(by_task.items()):
        items.sort(key=lambda t: t.start)
        for before, after in itertools.pairwise(items):
            if after.start < before.end:
                problems.append(
                    f"{task}: {after.worker} started {before.end - after.start:.3f}s "
                    f"before {before.worker} stopped"
                )
            if after.token <= before.token:
                problems.append(f"{task}: token 0x{after.token:x} after 0x{before.token:x}")
    cut = sum(log.bad_lines for log in logs)
    detail = (
        f"{len(terms)} terms over {len(by_task)} tasks in {len(logs)} workers' logs; "
        "tokens strictly increasing"
    )
    if cut:
        detail += f" ({cut} unreadable log lines skipped)"
    if problems:
        return Check(False, "two leaders of one task at once", "; ".join(problems[:5])), terms
    return Check(True, "no task ever had two leaders", detail), terms


def check_final_leaders(
    leaders: Mapping[str, tuple[str, str, int] | None],
    tasks: Iterable[str],
    live: Mapping[str, str],
    newest: str,
    terms: Iterable[Term],
) -> Check:
    """Every task is led, in ZooKeeper, by a live worker of the newest version, with the
    token that worker's log shows for its current term.

    `leaders` maps a task to (worker id, version, czxid) as read from its leader
    node; `live` maps live worker ids to their versions.
    """
    open_terms = {(t.task, t.worker): t.token for t in terms if t.end == math.inf}
    problems: list[str] = []
    count = 0
    for task in tasks:
        leader = leaders.get(task)
        if leader is None:
            problems.append(f"{task} has no leader")
            continue
        worker, version, token = leader
        if worker not in live:
            problems.append(f"{task} is led by {worker}, which is not running")
        elif version != newest:
            problems.append(f"{task} is led by {worker} of version {version}, not {newest}")
        elif open_terms.get((task, worker)) != token:
            problems.append(f"{task}: token 0x{token:x} in ZooKeeper, not in {worker}'s log")
        else:
            count += 1
    if problems:
        return Check(False, "tasks not where they should be at the end", "; ".join(problems[:5]))
    return Check(
        True,
        f"every task led by a live {newest} worker at the end",
        f"{count} leader nodes read from ZooKeeper, their tokens match the workers' logs",
    )


def check_once_windows(
    nodes: Mapping[str, Mapping[str, Any]],
    logs: Iterable[WorkerLog],
    *,
    interval: float,
    covered_from: float,
    covered_to: float,
) -> Check:
    """Every window run exactly once: one result node per window in ZooKeeper, one
    successful run per window in the logs (matching worker and token), no duplicates,
    and no window with workers alive all through it left without a run.

    `nodes` maps a result node's name (window start in ms) to its JSON data.
    """
    done: dict[str, list[tuple[str, Any]]] = {}
    duplicates = 0
    for log in logs:
        for r in log.records:
            if r["ev"] == "once":
                done.setdefault(str(round(float(r["window"]) * 1000)), []).append(
                    (log.worker, r.get("token"))
                )
            elif r["ev"] == "once-duplicate":
                duplicates += 1
    problems: list[str] = []
    if duplicates:
        problems.append(f"{duplicates} runs found their window already done")
    for name, runs in sorted(done.items()):
        if len(runs) > 1:
            problems.append(f"window {name} ran {len(runs)} times")
        data = nodes.get(name)
        if data is None:
            problems.append(f"window {name} ran but has no result node")
        elif (data.get("worker"), data.get("token")) != runs[0]:
            problems.append(f"window {name}: result node and log disagree")
    for name in nodes:
        if name not in done:
            problems.append(f"result node {name} has no run in the logs")
    first = math.ceil(covered_from / interval - 1e-9)
    last = math.floor(covered_to / interval + 1e-9) - 1  # the last window that ended in time
    missing = [k for k in range(first, last + 1) if str(round(k * interval * 1000)) not in nodes]
    if missing:
        problems.append(f"{len(missing)} windows never ran")
    full = max(0, last - first + 1)
    if problems:
        return Check(False, "once-per-interval windows", "; ".join(problems[:5]))
    failed = sum(len(log.events("once-failed")) for log in logs)
    retried = f", {failed} interrupted attempts retried" if failed else ""
    return Check(
        True,
        f"every once-per-{interval:g}s window ran exactly once",
        f"{len(nodes)} runs in ZooKeeper, {full} windows with workers all through{retried}",
    )


def check_jobs(submitted: int, results: Mapping[str, Any], expected: Mapping[str, Any]) -> Check:
    """Every submitted job completed with the expected result."""
    wrong = [job for job, want in expected.items() if results.get(job) != want]
    if len(results) != submitted or wrong:
        return Check(
            False,
            "scheduler jobs",
            f"{len(results)}/{submitted} completed, {len(wrong)} missing or wrong",
        )
    return Check(True, "every job completed", f"{submitted}/{submitted} with the right result")
