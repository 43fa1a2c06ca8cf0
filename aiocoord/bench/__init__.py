"""The benchmarks: aiocoord against kazoo and aiozk's recipes, measured in the same run.

Each module is one benchmark with a ``main()``, run as
``python -m aiocoord.bench.<name>`` (the scripts in ``benchmarks/`` call the
same functions), against an embedded ZooKeeper server it starts itself:

- `session`: getData round trips, one at a time and pipelined;
- `lock`: the CAS lock's acquire+release throughput, fairness, requests and
  lost CAS writes per acquisition, for K = 4 and 16;
- `mutex`: the queued mutex's throughput and fairness against Curator's
  ``InterProcessMutex`` (in a JVM, `mutex_peers`), and its costs for K = 4 … 64;
- `contenders`: what those two share (the race, aiozk's and kazoo's locks,
  Jain's index, counting the costs in aiocoord's clients);
- `latch`: leader hand-off latency and joining at scale (runs in `latch_aiocoord`
  and `latch_peers`);
- `scheduler`: job throughput, latency and requests per job;
- `tasks`: a task leadership hand-over of many tasks (runs in `tasks_processes`
  and `tasks_peers`);
- `summary`: the one table of ``aiocoord bench``;
- `curves`: how each cost grows with its size, as a table and PNG plots
  (`curves_report`) for ``docs/performance.md``.

Every ratio compares figures taken in the same run: machines are noisy, and
figures from different runs do not compare.  Optional peers that are not
installed are skipped with a note (`peers`).
"""

from __future__ import annotations

__all__ = ()
