"""Mutex throughput: aiocoord's mutex against Curator's InterProcessMutex, aiozk's and kazoo's Lock.

A thin entry point: the benchmark is `aiocoord.bench.mutex`.

    python benchmarks/bench_mutex.py [--seconds 3] [--rounds 3] [--contenders 4] [--sweep 4,16,64]
"""

from __future__ import annotations

from aiocoord.bench.mutex import main, report, run

__all__ = ("main", "report", "run")

if __name__ == "__main__":
    main()
