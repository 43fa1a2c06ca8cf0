"""Task hand-over: a newer worker joins 3 workers leading 200 tasks.

A thin entry point: the benchmark is `aiocoord.bench.tasks` (its worker
processes run `aiocoord.bench.tasks_runs`).

    python benchmarks/bench_tasks.py [--tasks 200] [--runs 3] [--settle 0.2] [--fsync]
                                     [--no-gc-freeze]
"""

from __future__ import annotations

from aiocoord.bench.tasks import main, run

__all__ = ("main", "run")

if __name__ == "__main__":
    main()
