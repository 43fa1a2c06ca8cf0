"""A job scheduler as a plain dict: workers, pending, assigned, results, assigner.

Read through `aiocoord.scheduler.describe_scheduler`; a record that does not
decode is reported next to the others, never fatal.  Results are counted by
outcome; at most `MAX_READS` pending jobs and result nodes are read.
"""

from __future__ import annotations

from typing import Any

from ..scheduler import describe_scheduler
from ..scheduler.describe import MAX_READS
from ..session import Coordinator

__all__ = ("MAX_READS", "scheduler_info")


async def scheduler_info(coord: Coordinator, path: str) -> dict[str, Any]:
    """A summary of the scheduler rooted at `path` (the ``--json`` shape)."""
    view = await describe_scheduler(coord, path, max_reads=MAX_READS)
    workers: dict[str, dict[str, Any]] = {
        w.node: {
            "node": w.node,
            "id": w.id,
            "capacity": w.capacity,
            "jobs": list(w.jobs),
            "draining": w.draining,
            "host": w.host,
            "pid": w.pid,
        }
        for w in view.workers
    }
    workers |= {name: {"node": name, "error": e.reason} for name, e in view.invalid_workers.items()}
    pending: dict[str, dict[str, Any]] = {
        j.id: {"id": j.id, "name": j.name, "status": j.status.value} for j in view.pending
    }
    pending |= {job: {"id": job, "error": e.reason} for job, e in view.invalid_jobs.items()}
    results = view.results
    outcomes = {
        "done": results.done,
        "failed": results.failed,
        "cancelled": results.cancelled,
        "unreadable": results.unreadable,
    }
    return {
        "kind": "scheduler",
        "assigner": view.assigner,
        "workers": [workers[name] for name in sorted(workers)],
        "pending": [pending[job] for job in sorted(pending)],
        "assigned": {queue: list(jobs) for queue, jobs in view.assigned.items()},
        "running": sorted(view.running),
        "results": {
            "count": results.count,
            "read": results.read,
            **{k: v for k, v in outcomes.items() if v},
        },
    }
