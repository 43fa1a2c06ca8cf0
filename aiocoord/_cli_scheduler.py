"""The scheduler's part of ``aiocoord inspect``: jobs pending, assigned and done under a path.

Counts children of the ``pending``, ``assigned`` and ``results`` nodes; the
scheduler's own record formats are not interpreted here.
"""

from __future__ import annotations

from typing import Any

from .errors import NoNodeError
from .session import Coordinator
from .zk.paths import join

__all__ = ("render_scheduler", "scheduler_info")


async def _names(coord: Coordinator, path: str) -> list[str]:
    try:
        return sorted(await coord.client.children(path))
    except NoNodeError:
        return []


async def scheduler_info(coord: Coordinator, path: str, children: list[str]) -> dict[str, Any]:
    """A summary of the scheduler rooted at `path`."""
    out: dict[str, Any] = {"kind": "scheduler"}
    for part in ("pending", "assigned", "results"):
        out[part] = await _names(coord, join(path, part)) if part in children else []
    return out


def render_scheduler(info: dict[str, Any], pad: str, name: str) -> list[str]:
    return [
        f"{pad}{name}  [scheduler] {len(info['pending'])} pending, "
        f"{len(info['assigned'])} assigned, {len(info['results'])} results"
    ]
