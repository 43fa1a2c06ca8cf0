"""A read-only look at task leadership: registered workers, who leads each task, who should.

For tools that watch a cluster rather than take part (``aiocoord inspect``, the
demo, dashboards): `describe_task_leadership` reads ``<root>/workers`` and
``<root>/leaders`` and returns a `TaskLeadershipView`; `read_task_leader` and
`read_task_worker` read one node; `choose_leaders` computes the recipe's own
choice (the balanced rendezvous among the newest version's workers) for a set
of workers, so a tool can tell whether the cluster has settled.  Nothing here
writes or watches.  A record that does not decode is reported next to the
others (`NodeDataError`), never raised.

    view = await describe_task_leadership(coord, "/app/tasks")
    {t: lead.worker for t, lead in view.leaders.items()}
    choose_leaders(view.leaders, {w.id: w.version for w in view.workers})
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ...errors import NodeDataError, NoNodeError
from ...session import Coordinator
from ...zk import ZkClient
from ...zk.paths import join
from .._describe import client_of, read_children
from ._choice import Prefer, VersionKey, assign
from ._records import Worker, decode_leader, decode_worker
from ._versions import maven_version_key

__all__ = (
    "TaskLeader",
    "TaskLeadershipView",
    "choose_leaders",
    "describe_task_leadership",
    "is_task_leadership",
    "read_task_leader",
    "read_task_worker",
)


@dataclass(frozen=True, slots=True)
class TaskLeader:
    """Who leads `task`: the `worker` id and its `version` as the leader node records them,
    and the term's fencing `token` (the leader node's czxid)."""

    task: str
    worker: str
    version: str
    token: int


@dataclass(frozen=True, slots=True)
class TaskLeadershipView:
    """Task leadership under `path`.

    `workers` are the valid worker records, by id; `leaders` maps each led task
    to its `TaskLeader`.  Nodes whose data does not decode are in
    `invalid_workers` (by node name) and `invalid_leaders` (by task).
    """

    path: str
    workers: tuple[Worker, ...]
    leaders: Mapping[str, TaskLeader]
    invalid_workers: Mapping[str, NodeDataError]
    invalid_leaders: Mapping[str, NodeDataError]


def is_task_leadership(children: Iterable[str]) -> bool:
    """Whether a node with these children is the root of task leadership."""
    return {"workers", "leaders"} <= set(children)


async def read_task_leader(
    target: Coordinator | ZkClient, root: str, task: str
) -> TaskLeader | None:
    """Who leads `task` under `root`; None if nobody does.

    Raises `NodeDataError` if the leader node holds something else.
    """
    path = join(root, "leaders", task)
    try:
        node = await client_of(target).get(path)
    except NoNodeError:
        return None
    worker, version = decode_leader(path, node.data)
    return TaskLeader(task, worker, version, node.stat.czxid)


async def read_task_worker(
    target: Coordinator | ZkClient, root: str, worker_id: str
) -> Worker | None:
    """The record of the worker `worker_id` under `root`; None if it is not registered.

    Raises `NodeDataError` if its node holds something else.
    """
    path = join(root, "workers", worker_id)
    try:
        node = await client_of(target).get(path)
    except NoNodeError:
        return None
    return decode_worker(path, worker_id, node.data, maven_version_key)


async def describe_task_leadership(target: Coordinator | ZkClient, root: str) -> TaskLeadershipView:
    """Every worker record and leader node under `root` (one read per node, in turn).

    A missing `root` has none; nodes that vanish while read are left out.
    """
    client = client_of(target)
    workers, invalid_workers = await read_children(
        client, join(root, "workers"), lambda name: read_task_worker(client, root, name)
    )
    leaders, invalid_leaders = await read_children(
        client, join(root, "leaders"), lambda task: read_task_leader(client, root, task)
    )
    return TaskLeadershipView(
        root, tuple(workers.values()), leaders, invalid_workers, invalid_leaders
    )


def choose_leaders(
    tasks: Iterable[str],
    workers: Mapping[str, str],
    *,
    prefer: Prefer = "newest",
    version_key: VersionKey = maven_version_key,
) -> dict[str, str]:
    """Who should lead each task, by the recipe's rule, given `workers` (id -> version).

    The same choice every worker computes (see the package docstring): the
    candidates are the workers of the newest version (``prefer="oldest"``: the
    oldest), and the tasks are spread over them by the balanced rendezvous
    (no candidate leads more than ``ceil(T/W)``).  The spread depends on the
    whole set of tasks: pass all of them, not only those led now.  With no
    workers the result is empty.
    """
    return assign(tasks, workers, prefer=prefer, version_key=version_key).leaders
