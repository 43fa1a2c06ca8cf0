"""`inspect_path`: walk a path, recognise each recipe by its layout, describe it.

Plain nodes are walked down to `depth` levels and at most `MAX_NODES` nodes;
a child this session may not read (created with other credentials) is shown
as "no access", a child that vanished while the walk looked is left out.
"""

from __future__ import annotations

from ..errors import NoAuthError, NoNodeError
from ..recipes.cas_lock import is_lock_record
from ..recipes.cron import describe_cron, is_cron
from ..recipes.leader_latch import latch_layout
from ..recipes.mutex import is_mutex
from ..recipes.task_leadership import is_task_leadership
from ..scheduler import is_scheduler
from ..session import Coordinator
from ..zk.paths import join
from ._cron import cron_info
from ._info import Info
from ._recipes import latch_info, lock_info, mutex_info, task_info
from ._scheduler import scheduler_info

__all__ = ("MAX_NODES", "inspect_path")

MAX_NODES = 500  # a plain tree stops being walked after this many nodes

NO_ACCESS = (
    "no access with these credentials "
    "(set AIOCOORD_AUTH or AIOCOORD_SASL_* to an identity its ACL allows)"
)


def _text(data: bytes, limit: int = 80) -> str:
    text = data.decode("utf-8", "replace")
    return text if len(text) <= limit else text[: limit - 3] + "..."


async def inspect_path(coord: Coordinator, path: str, *, depth: int = 4) -> Info:
    """Describe `path` and what is below it; raises `NoNodeError` if it does not exist."""
    budget = [MAX_NODES]
    return await _inspect(coord, path, depth, budget)


async def _inspect(coord: Coordinator, path: str, depth: int, budget: list[int]) -> Info:
    client = coord.client
    node = await client.get(path)
    try:
        children = sorted(await client.children(path))
    except NoNodeError:
        children = []
    budget[0] -= 1
    base: Info = {"path": path}
    if is_lock_record(node.data):
        return base | lock_info(path, node.data, node.stat.mzxid)
    if "jobs" in children and not is_scheduler(children):
        # Once its last worker has stopped, a cron keeps only ``jobs/`` (the empty
        # ``workers/`` and ``leaders/`` containers are reaped): its records say it is one.
        cron = await describe_cron(coord, path)
        readable = any(job.schedule is not None for job in cron.jobs.values())
        if readable or (is_cron(children) and cron.recognised):
            return base | cron_info(cron)
    if is_task_leadership(children):
        return base | await task_info(coord, path)
    if is_scheduler(children):
        return base | await scheduler_info(coord, path)
    if latch_layout(children) is not None:
        return base | await latch_info(coord, path)
    if is_mutex(children):
        return base | await mutex_info(coord, path)
    info: Info = base | {
        "kind": "node",
        "data": _text(node.data) if node.data else None,
        "ephemeral": bool(node.stat.ephemeral_owner),
        "children": [],
    }
    if depth <= 0 or budget[0] <= 0:
        info["more"] = len(children)
        return info
    for child in children:
        if budget[0] <= 0:
            info["more"] = len(children) - len(info["children"])
            break
        child_path = join(path, child)
        try:
            info["children"].append(await _inspect(coord, child_path, depth - 1, budget))
        except NoNodeError:
            continue  # gone while we looked
        except NoAuthError:
            # Created with other credentials (creator-only ACL): say so, show the rest.
            info["children"].append({"path": child_path, "kind": "node", "error": NO_ACCESS})
    return info
