"""The benchmarks: aiocoord against kazoo, aiozk's recipes and Curator, measured in the same run.

Not part of the aiocoord package (the wheel ships none of it): a package of its
own, run from a checkout of the repository, from its root, after
``pip install -e '.[dev]'`` (which brings the peers kazoo and matplotlib).
Each module with a ``main()`` is one benchmark, run as
``python -m benchmarks.<name>``, against an embedded ZooKeeper server it starts
itself:

- `summary`: a few figures of each benchmark against its peers, in one table;
- `session`: getData round trips, one at a time and pipelined;
- `lock`: the CAS lock's acquire+release throughput, fairness, requests and
  lost CAS writes per acquisition, for K = 4 and 16;
- `mutex`: the queued mutex's throughput and fairness against Curator's
  ``InterProcessMutex`` (in a JVM, `mutex_peers`), and its costs for K = 4 … 64;
- `contenders`: what those two share (the race, aiozk's and kazoo's locks,
  Jain's index, counting the costs in aiocoord's clients);
- `latch`: leader hand-off latency and joining at scale (runs in `latch_runs`
  and `latch_peers`);
- `scheduler`: job throughput, latency and requests per job;
- `arq_shape`: the scheduler against arq (on its own ``redis-server``) in arq
  users' shape: 3 worker processes, 1 client process, 200 submitters;
- `tasks`: a task leadership hand-over of many tasks (runs in `tasks_runs`
  and `tasks_peers`);
- `spread`: how evenly task leadership spreads tasks over workers;
- `curves`: how each cost grows with its size, as a table and PNG plots
  (`curves_report`) for ``docs/performance.md``;
- `soak`: every recipe and the scheduler under load and network faults;
- `weight`: the import time and memory of ``import aiocoord``.

Every ratio compares figures taken in the same run: machines are noisy, and
figures from different runs do not compare.  Optional peers that are not
installed are skipped with a note (`peers`).  ``aiocoord bench`` (in the
package) measures one's own ensemble with aiocoord's recipes only.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ("ROOT", "python_m")

ROOT = Path(__file__).resolve().parent.parent
"""The checkout's root: the folder that holds ``benchmarks/``."""


def python_m(module: str, *args: str) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run ``python -m <module> args`` in a child process.

    The child finds this package wherever it was started from: the checkout's
    root is put first on its ``PYTHONPATH``.
    """
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return [sys.executable, "-m", module, *args], {**os.environ, "PYTHONPATH": path}
