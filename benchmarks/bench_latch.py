"""Leader latch: hand-off latency and join at scale, against aiozk, kazoo and Curator.

A thin entry point: the benchmark is `aiocoord.bench.latch` (its measurements
run in child processes, ``python -m aiocoord.bench.latch --child ...``).

    python benchmarks/bench_latch.py [--participants 10] [--rounds 30] [--scale 1000] [--fsync]
        [--warm-up 10] [--passes 3] [--small-scale 200] [--impl NAME ...] [--measure KIND ...]
"""

from __future__ import annotations

from aiocoord.bench.latch import main, measure, report_handoff, report_join
from aiocoord.bench.latch_runs import aiocoord_first, aiocoord_handoff, aiocoord_join

__all__ = (
    "aiocoord_first",
    "aiocoord_handoff",
    "aiocoord_join",
    "main",
    "measure",
    "report_handoff",
    "report_join",
)

if __name__ == "__main__":
    main()
