"""Raw request round trips: aiocoord (asyncio and uvloop) against aiozk and kazoo.

A thin entry point: the benchmark is `aiocoord.bench.session`.

    python benchmarks/bench_session.py [--seconds 3] [--concurrency 32]
"""

from __future__ import annotations

from aiocoord.bench.session import bench_aiocoord, bench_aiozk, bench_kazoo, main

__all__ = ("bench_aiocoord", "bench_aiozk", "bench_kazoo", "main")

if __name__ == "__main__":
    main()
