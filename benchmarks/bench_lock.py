"""Lock throughput: aiocoord's CasLock against kazoo's Lock and aiozk's Lock recipe.

A thin entry point: the benchmark is `aiocoord.bench.lock`.

    python benchmarks/bench_lock.py [--seconds 3] [--rounds 3] [--contenders 4,16] [--loop uvloop|asyncio]
"""

from __future__ import annotations

from aiocoord.bench.lock import main, report, run

__all__ = ("main", "report", "run")

if __name__ == "__main__":
    main()
