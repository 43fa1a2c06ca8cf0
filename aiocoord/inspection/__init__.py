"""What is under a ZooKeeper path, recognised by the layout of each recipe, as plain dicts.

The data side of ``aiocoord inspect`` and of the dashboard: `inspect_path`
walks a path and describes each node it recognises through the recipe's
public describe API; the result is JSON-ready (the ``--json`` output).
Rendering it as text is the command's business (``aiocoord.cli``).

Recognised, in this order, at a node:

- a CAS lock (also once_per): the node's data is an ``aiocoord.cas-lock/N`` record;
- a cron: children named ``workers``, ``leaders`` and ``jobs``, whose ``jobs`` holds
  cron job records; or a ``jobs`` child alone (the cron's workers have all stopped)
  holding at least one readable cron job record;
- task leadership: children named ``workers`` and ``leaders``;
- a job scheduler: children named ``jobs`` and ``assignments``;
- a leader latch: every child is an election node (Curator ``_c_<uuid>-latch-<seq>``,
  or ZooKeeper's ``n_<seq>``);
- a mutex: every child is a lock node (Curator ``_c_<uuid>-lock-<seq>``); a leader
  selector's election looks the same (Curator's ``LeaderSelector`` is a mutex at its
  path, and so is ours): its holder is the leader;
- a read/write lock: every child is a ``__READ__`` or ``__WRIT__`` node;
- a semaphore: children named ``leases`` (and ``locks``), Curator's V2 layout;
- otherwise a plain node, whose children are inspected the same way, down to
  `depth` levels.

Foreign or corrupt data never raises: it is reported as an error next to the node.
This package is never loaded by ``import aiocoord``.
"""

from __future__ import annotations

from ._cron import cron_info, workers_info
from ._info import Info
from ._scheduler import scheduler_info
from ._walk import MAX_NODES, inspect_path

__all__ = ("MAX_NODES", "Info", "cron_info", "inspect_path", "scheduler_info", "workers_info")
