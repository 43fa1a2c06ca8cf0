"""``aiocoord bench``: the benchmarks of `aiocoord.bench`, summed up in one table.

Every measurement runs against one embedded ZooKeeper server started for this
run, and every ratio compares figures taken in this same run (machines are
noisy; figures from different runs do not compare).  The table is
`aiocoord.bench.summary`'s; ``--all`` then runs every benchmark in full, each
as ``python -m aiocoord.bench.<name>`` with its defaults, for the detailed
tables.  kazoo, an optional peer, is skipped with a note when not installed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from ..bench.peers import kazoo_installed, skipped_note
from ..bench.summary import BENCHMARKS, IN_TABLE, format_table, measure_all
from .zk import UserError

__all__ = ("run_bench",)


def run_bench(args: argparse.Namespace) -> int:
    """The ``bench`` command."""
    from ..server import ZooKeeperNotInstalledError, ZooKeeperServer

    seconds = args.seconds if args.seconds is not None else (1.0 if args.quick else 3.0)
    if not 0 < seconds <= 60:
        raise UserError("--seconds must be more than 0 and at most 60")
    started = time.monotonic()
    try:
        with ZooKeeperServer() as server:
            print(
                f"ZooKeeper at {server.connect_string}; {seconds:g} s per measurement", flush=True
            )
            if not kazoo_installed():
                print(skipped_note("kazoo"), flush=True)
            rows = measure_all(
                server.connect_string, seconds, lambda line: print(f"  {line}", flush=True)
            )
    except ZooKeeperNotInstalledError as exc:
        raise UserError(str(exc)) from None
    print()
    print(format_table(rows))
    print(f"\n(ratios: how many times better aiocoord is; {time.monotonic() - started:.0f} s)")
    others = [name for name in BENCHMARKS if name not in IN_TABLE]
    if not args.all:
        print(f"not in the table (no kazoo/aiozk peer): {', '.join(others)}; --all runs them")
    else:
        for name in BENCHMARKS:
            print(f"\n=== python -m aiocoord.bench.{name} ===", flush=True)
            subprocess.run([sys.executable, "-m", f"aiocoord.bench.{name}"], check=False)
    return 1 if any(r.error for r in rows) else 0
