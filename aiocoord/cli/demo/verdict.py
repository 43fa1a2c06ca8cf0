"""The demo's verdict: pure checks over the workers' logs and what ZooKeeper says.

Nothing here does I/O.  `run` collects the inputs (each worker's JSON-lines
log, the time it was killed if it was, a final snapshot of the leader nodes,
the cron jobs' histories, the once-per result nodes, the jobs' results) and
prints the `Check` results.  The cron checks are in `firings`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = (
    "Check",
    "WorkerLog",
    "check_final_leaders",
    "check_jobs",
    "check_once_windows",
    "parse_log",
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


def check_final_leaders(
    leaders: Mapping[str, tuple[str, str, int] | None],
    tasks: Iterable[str],
    live: Mapping[str, str],
    newest: str,
    fired: Iterable[tuple[str, str, int]],
) -> Check:
    """Every task is led, in ZooKeeper, by a live worker of the newest version, whose log
    shows firings of the task under the token of the leader node.

    `leaders` maps a task to (worker id, version, czxid) as read from its leader
    node; `live` maps live worker ids to their versions; `fired` holds the
    (task, worker, token) of each firing in the logs.
    """
    fired = set(fired)
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
        elif (task, worker, token) not in fired:
            problems.append(f"{task}: token 0x{token:x} in ZooKeeper, not in {worker}'s log")
        else:
            count += 1
    if problems:
        return Check(False, "tasks not where they should be at the end", "; ".join(problems[:5]))
    return Check(
        True,
        f"every task led by a live {newest} worker at the end",
        f"{count} leader nodes read from ZooKeeper, their tokens match the workers' firings",
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
