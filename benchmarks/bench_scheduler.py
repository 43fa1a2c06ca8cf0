"""Job scheduler throughput, latency and ZooKeeper requests per job.

A thin entry point: the benchmark is `aiocoord.bench.scheduler`.

    python benchmarks/bench_scheduler.py [--jobs 2000] [--concurrency 200] [--workers 3]
"""

from __future__ import annotations

from aiocoord.bench.scheduler import main

__all__ = ("main",)

if __name__ == "__main__":
    main()
