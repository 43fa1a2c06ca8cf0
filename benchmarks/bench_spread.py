"""Task leadership's spread: loads and moves of the choice, T = 12, 100, 1,000 × W = 2 … 10.

A thin entry point: the benchmark is `aiocoord.bench.spread` (no server).

    python benchmarks/bench_spread.py [--sets 200] [--joins 3] [--seed 1]
"""

from __future__ import annotations

from aiocoord.bench.spread import main

__all__ = ("main",)

if __name__ == "__main__":
    main()
