"""Scaling curves: how each recipe's cost grows with its size, as a table and PNG plots.

A thin entry point: the benchmark is `aiocoord.bench.curves`.

    python benchmarks/bench_curves.py [--out docs/assets/performance] [--quick] [--cap 120]
"""

from __future__ import annotations

from aiocoord.bench.curves import main

__all__ = ("main",)

if __name__ == "__main__":
    main()
