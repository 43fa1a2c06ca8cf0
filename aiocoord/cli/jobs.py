"""The scheduler's part of ``aiocoord inspect`` as text: `aiocoord.inspection.scheduler_info`.

Workers, pending, assigned, results (counted by outcome) and the assigner; a
record that did not decode is shown next to the others.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

__all__ = ("render_scheduler",)


def render_scheduler(info: dict[str, Any], pad: str, name: str) -> list[str]:
    """Text lines for `scheduler_info`'s result."""
    assigned = sum(len(jobs) for jobs in info["assigned"].values())
    results = info["results"]
    scheduled = sum(1 for j in info["pending"] if j.get("status") == "scheduled")
    waiting = f"{len(info['pending']) - scheduled} pending, {scheduled} scheduled"
    lines = [
        f"{pad}{name}  [scheduler] assigner: {info['assigner']}; {len(info['workers'])} workers, "
        f"{waiting}, {assigned} assigned ({len(info['running'])} running), "
        f"{results['count']} results"
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
        kinds = ("done", "failed", "cancelled", "unreadable")
        parts = [f"{k} {results[k]}" for k in kinds if results.get(k)]
        lines.append(f"{pad}  results: {', '.join(parts)} (of {results['read']} read)")
    return lines
