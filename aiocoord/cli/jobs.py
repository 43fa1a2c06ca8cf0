"""The scheduler's part of ``aiocoord inspect``: workers, pending, assigned, results, assigner.

Reads the layout of `aiocoord.scheduler` (``jobs/``, ``workers/``,
``assignments/<worker>/``, ``results/``, ``assigner/``) with its own decoders;
a record that does not decode is reported, never fatal.  Results are counted
by outcome; at most `MAX_READS` result nodes are read.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..errors import NodeDataError, NoNodeError
from ..recipes.leader_latch._election import CURATOR, sort_children
from ..scheduler._records import Layout, decode_job, decode_result, decode_worker
from ..session import Coordinator

__all__ = ("MAX_READS", "render_scheduler", "scheduler_info")

MAX_READS = 200


async def _names(coord: Coordinator, path: str) -> list[str]:
    try:
        return sorted(await coord.client.children(path))
    except NoNodeError:
        return []


async def _data(coord: Coordinator, path: str) -> bytes | None:
    try:
        return (await coord.client.get(path)).data
    except NoNodeError:
        return None


async def scheduler_info(coord: Coordinator, path: str, children: list[str]) -> dict[str, Any]:
    """A summary of the scheduler rooted at `path`."""
    layout = Layout(path)
    workers: list[dict[str, Any]] = []
    for name in await _names(coord, layout.workers):
        data = await _data(coord, layout.worker(name))
        if data is None:
            continue
        try:
            w = decode_worker(layout.worker(name), data)
        except NodeDataError as exc:
            workers.append({"node": name, "error": exc.reason})
            continue
        workers.append(
            {
                "node": name,
                "id": w.id,
                "capacity": w.capacity,
                "jobs": sorted(w.jobs),
                "draining": w.draining,
                "host": w.host,
                "pid": w.pid,
            }
        )
    pending: list[dict[str, Any]] = []
    for job_id in (await _names(coord, layout.jobs))[:MAX_READS]:
        data = await _data(coord, layout.job(job_id))
        if data is None:
            continue
        try:
            pending.append({"id": job_id, "name": decode_job(layout.job(job_id), data).name})
        except NodeDataError as exc:
            pending.append({"id": job_id, "error": exc.reason})
    assigned = {
        q: await _names(coord, layout.queue(q)) for q in await _names(coord, layout.assignments)
    }
    outcomes: Counter[str] = Counter()
    results = await _names(coord, layout.results)
    for job_id in results[:MAX_READS]:
        data = await _data(coord, layout.result(job_id))
        if data is None:
            continue
        try:
            outcomes["done" if decode_result(layout.result(job_id), data).ok else "failed"] += 1
        except NodeDataError:
            outcomes["unreadable"] += 1
    assigner = None
    for node in sort_children(await _names(coord, layout.assigner), CURATOR):
        data = await _data(coord, f"{layout.assigner}/{node}")
        if data is not None:
            assigner = data.decode("utf-8", "replace")
            break
    return {
        "kind": "scheduler",
        "assigner": assigner,
        "workers": workers,
        "pending": pending,
        "assigned": {q: jobs for q, jobs in assigned.items() if jobs},
        "results": {"count": len(results), "read": sum(outcomes.values()), **outcomes},
    }


def render_scheduler(info: dict[str, Any], pad: str, name: str) -> list[str]:
    """Text lines for `scheduler_info`'s result."""
    assigned = sum(len(jobs) for jobs in info["assigned"].values())
    results = info["results"]
    lines = [
        f"{pad}{name}  [scheduler] assigner: {info['assigner']}; {len(info['workers'])} workers, "
        f"{len(info['pending'])} pending, {assigned} assigned, {results['count']} results"
    ]
    for w in info["workers"]:
        if "error" in w:
            lines.append(f"{pad}  worker {w['node']}: invalid record: {w['error']}")
            continue
        queue = len(info["assigned"].get(w["node"], []))
        drain = ", draining" if w["draining"] else ""
        lines.append(
            f"{pad}  worker {w['id']:<28} capacity {w['capacity']}, {queue} assigned{drain}; "
            f"jobs: {', '.join(w['jobs'])}"
        )
    by_name = Counter(j.get("name", "?") for j in info["pending"])
    if by_name:
        lines.append(
            f"{pad}  pending: " + ", ".join(f"{n} x{c}" for n, c in sorted(by_name.items()))
        )
    if results["count"]:
        parts = [f"{k} {results[k]}" for k in ("done", "failed", "unreadable") if results.get(k)]
        lines.append(f"{pad}  results: {', '.join(parts)} (of {results['read']} read)")
    return lines
