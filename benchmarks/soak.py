"""Soak: every recipe and the scheduler under load and network faults; growth, overlaps, lost jobs.

A thin entry point: the soak is `aiocoord.bench.soak`.  Exits 1 if a target fails.

    python benchmarks/soak.py [--seconds 600] [--interval 10] [--sessions 10] [--latch-paths 50]
        [--locks 20] [--contenders 3] [--tasks 200] [--task-workers 4] [--job-rate 100]
        [--job-workers 3] [--seed 1] [--loop uvloop|asyncio]
"""

from __future__ import annotations

from aiocoord.bench.soak import main, report, run

__all__ = ("main", "report", "run")

if __name__ == "__main__":
    raise SystemExit(main())
