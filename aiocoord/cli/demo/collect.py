"""What the demo reads for its verdict: the workers' logs and what ZooKeeper holds.

`Proc` is one worker process as the demo started it; the rest read: each
worker's JSON-lines log (`read_logs`, `open_firing`), the cron jobs'
histories (`read_histories`, through a `Cron` that is never started, so
it writes nothing) and the once-per job's result nodes (`once_runs`).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import NoNodeError
from ...recipes.cron import Cron, FiringOutcome
from ...recipes.task_leadership import Worker
from ...session import Coordinator
from ...zk.paths import join
from .crons import JobSpec
from .firings import Run, runs_of
from .verdict import WorkerLog, parse_log

__all__ = ("Proc", "once_runs", "open_firing", "read_histories", "read_logs")


@dataclass(slots=True)
class Proc:
    """A worker process: its id, version, log (JSON lines) and output, and its fate."""

    id: str
    version: str
    popen: subprocess.Popen[bytes]
    log: Path
    out: Path
    killed_at: float | None = None
    stopped: bool = False

    def read_log(self) -> WorkerLog:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            text = ""
        return parse_log(self.id, self.version, text, self.killed_at)


def read_logs(procs: Iterable[Proc]) -> list[WorkerLog]:
    return [proc.read_log() for proc in procs]


def open_firing(proc: Proc) -> Run | None:
    """A firing the worker's log shows started and not ended (or cut by its kill)."""
    return next((r for r in runs_of(proc.read_log()) if r.ended in ("open", "killed")), None)


async def read_histories(
    coord: Coordinator, root: str, specs: Sequence[JobSpec]
) -> dict[str, list[FiringOutcome]]:
    """Each cron job's history, read from ZooKeeper."""
    reader = Cron(coord, join(root, "tasks"), worker=Worker("0", id="demo-verdict"))
    return {spec.name: await reader.history(spec.name) for spec in specs}


async def once_runs(coord: Coordinator, root: str) -> dict[str, dict[str, Any]]:
    """The once-per job's result nodes: window start (ms) -> the run's JSON data."""
    base = join(root, "once", "runs")
    out: dict[str, dict[str, Any]] = {}
    try:
        names = await coord.client.children(base)
    except NoNodeError:
        return out
    for name in names:
        try:
            data = json.loads((await coord.client.get(join(base, name))).data)
        except (NoNodeError, ValueError):
            continue
        out[name] = data if isinstance(data, dict) else {}
    return out
