"""Version-aware task leadership: each task led by one worker of the newest version, spread evenly.

Many cron-like tasks, many workers, several versions alive at once during a
rolling upgrade.  Each task is led by exactly one worker, always one of the
newest version present (``prefer="oldest"``: the oldest), and the tasks are
spread evenly over those workers by a balanced rendezvous, so a worker that
joins or leaves moves mostly its share of them.

Node layout, under `root`::

    <root>/workers/<worker id>   EPHEMERAL  {"id", "version", "host", "pid", "started"}
    <root>/leaders/<task>        EPHEMERAL  {"id", "version"} of the worker leading the task

Parents are container nodes (re-created on demand if the server reaps them).
Creating ``<root>/leaders/<task>`` is the only way to lead a task, so two
workers never lead it at once; its czxid is the term's fencing token.

How it works: every worker watches the worker list (a child watch) and the
leader nodes (one persistent recursive watch; a worker that leads nothing, is
chosen for nothing and has no `changes()` reader drops it until it is needed
again, so a hand-over's notifications reach only the workers involved) and
computes the same choice for every task (`_choice`).  The chosen worker
creates the leader node as soon as it is free; if another worker holds it,
it waits for its deletion.  A worker that leads a task it should no longer
lead waits `settle` seconds (a flapping worker does not bounce tasks),
cancels its ``lead()`` bodies, waits for them to finish (drain) and then
deletes the node; the chosen worker, woken by the deletion, creates it.  A
worker acquires only with a current worker list: the list's watch fires
before any later leader event arrives, so a lagging worker never grabs a
task a newer worker should take.  Leader node writes issued at the same
moment (a whole hand-over) share one ``multi`` (`_writes`), so hundreds of
tasks move in a few transactions, and the tasks whose settle delay ends
together hand over together.

The choice, exactly (so that other languages can implement it): the
candidates are the workers whose version no other present version beats
(a documented fallback decides the rare cycles of Maven's order); the
(task, candidate) pairs, ranked by ``blake2b(t + "\\0" + w, digest_size=8)``
as a big-endian integer, are walked from the highest down, each giving its
task to its candidate unless the task is given or the candidate is full (at
``ceil(T/W)`` tasks, or ``floor(T/W)`` once ``T mod W`` candidates are at
``ceil(T/W)``).  See `aiocoord.recipes.task_leadership._choice`.  The choice
depends on the set of tasks and does not know which tasks a worker has: all
workers of one version should have the same tasks, and a task that only
older workers have is not led while a newer one is present (the newest
version decides what runs).

Where things are: `_leadership` (`TaskLeadership`), `_engine` (registration,
the worker list, the choice, the set of tasks), `_leader_watch`, `_state` and
`_slot` (one task: what is known about it, the steps that act on it), `_lead`
(``lead()``), `_writes` (leader-node writes batched), `_leave`, `_changes`
(``changes()``), `_records`, `_choice` and `_versions` (the pure rules).

Failure handling:

- SUSPENDED (and READ_ONLY) kept past the session's provable life (the
  default, ``recipes/_loss``; at once with ``lose_on_suspend=True``) stops
  leading everything: ``lead()`` bodies are cancelled and raise
  ``LeadershipLost(reason="suspended")``; the nodes stay.  With
  ``lose_on_suspend=False`` leadership is kept until LOST.  On
  RECONNECTED to the same session the worker list is re-read, held nodes are
  checked (by czxid) and leadership is granted again with the same token.
- LOST stops leading everything (``"session lost"``).  On the new session the
  worker registers again (deleting its own record left by the old session)
  and deletes the leader nodes it held in the old session if the server has
  not yet, as Curator does for protected nodes (CURATOR-498).  The worker
  node is a `aiocoord.persistent_node`: made again after a lost session, and
  at once when someone deletes it.
- A worker node with invalid data is ignored, with a `NodeDataError` logged
  and kept in `TaskLeadership.invalid_workers`; the others carry on.  A leader
  node with invalid data blocks its task (logged) until someone removes it.
- A worker id already registered by another live process: registration waits
  (logged) until that node goes away.
- Leaving the block cancels every body (``"closed"``), waits for them
  (bounded), then deletes the leader nodes and the worker node in one
  transaction, so the others see the tasks free and the worker gone at once.
"""

from __future__ import annotations

from ._leadership import TaskChange as TaskChange
from ._leadership import TaskLeadership as TaskLeadership
from ._leadership import TaskTerm as TaskTerm
from ._leadership import Worker as Worker
from ._leadership import task_leadership as task_leadership
from ._versions import MavenVersion as MavenVersion
from ._versions import maven_version_key as maven_version_key
from .describe import TaskLeader as TaskLeader
from .describe import TaskLeadershipView as TaskLeadershipView
from .describe import choose_leaders as choose_leaders
from .describe import describe_task_leadership as describe_task_leadership
from .describe import is_task_leadership as is_task_leadership
from .describe import read_task_leader as read_task_leader
from .describe import read_task_worker as read_task_worker

__all__ = (
    "MavenVersion",
    "TaskChange",
    "TaskLeadership",
    "TaskTerm",
    "Worker",
    "maven_version_key",
    "task_leadership",
    "TaskLeader",
    "TaskLeadershipView",
    "choose_leaders",
    "describe_task_leadership",
    "is_task_leadership",
    "read_task_leader",
    "read_task_worker",
)
