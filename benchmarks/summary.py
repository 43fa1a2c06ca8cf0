"""One table: a few figures of each benchmark, against its peers.

    python -m benchmarks.summary [--quick] [--seconds S] [--all]

Rows come from the benchmarks' own functions, run with short settings against
one server:

- `session`: getData round trip (median latency) and pipelined getData
  throughput: aiocoord (uvloop) against kazoo and aiozk's client;
- `lock`: lock acquire+release throughput with 4 contenders: ``cas_lock``
  against kazoo's ``Lock`` and aiozk's ``Lock`` recipe;
- `latch`: leader hand-off latency: ``leader_latch`` against kazoo's
  ``Election`` and aiozk's ``LeaderElection``.

The ratio columns read "how many times better aiocoord is": the peer's latency
over ours, or our throughput over the peer's.  A peer that is not installed
(kazoo) shows ``-``.  Every measurement runs against one embedded ZooKeeper
server started for this run; ``--all`` then runs every benchmark in full, each
as ``python -m benchmarks.<name>`` with its defaults, for the detailed tables.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiocoord.testing import ZooKeeperServer

from . import latch, lock, python_m, session
from .peers import kazoo_installed, skipped_note

__all__ = ("BENCHMARKS", "IN_TABLE", "Row", "format_table", "main", "measure_all")

BENCHMARKS = ("session", "lock", "mutex", "latch", "scheduler", "tasks")
"""Every benchmark module, each run in full by ``python -m benchmarks.<name>``."""


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the table: a measure of aiocoord and of each peer (None: not measured)."""

    name: str
    unit: str
    ours: float | None
    kazoo: float | None
    aiozk: float | None
    lower_is_better: bool = False
    error: str | None = None

    def ratio(self, peer: float | None) -> str:
        if not self.ours or not peer:
            return "-"
        value = peer / self.ours if self.lower_is_better else self.ours / peer
        return f"{value:.2f}x"


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:.2f}"


def format_table(rows: list[Row]) -> str:
    head = (
        f"{'benchmark':<38} {'unit':<6} {'aiocoord':>10} {'kazoo':>10} {'aiozk':>10} "
        f"{'vs kazoo':>9} {'vs aiozk':>9}"
    )
    lines = [head, "-" * len(head)]
    for row in rows:
        if row.error is not None:
            lines.append(f"{row.name:<38} error: {row.error}")
            continue
        lines.append(
            f"{row.name:<38} {row.unit:<6} {_fmt(row.ours):>10} {_fmt(row.kazoo):>10} "
            f"{_fmt(row.aiozk):>10} {row.ratio(row.kazoo):>9} {row.ratio(row.aiozk):>9}"
        )
    return "\n".join(lines)


def _session_rows(hosts: str, seconds: float) -> list[Row]:
    ours = session.bench_aiocoord(hosts, seconds, 32, True)
    kazoo = session.bench_kazoo(hosts, seconds, 32) if kazoo_installed() else {}
    aiozk = session.bench_aiozk(hosts, seconds, 32)
    return [
        Row(
            "getData round trip (median)",
            "us",
            ours["median_us"],
            kazoo.get("median_us"),
            aiozk["median_us"],
            lower_is_better=True,
        ),
        Row(
            "getData pipelined, 32 in flight",
            "ops/s",
            ours["pipelined_ops"],
            kazoo.get("pipelined_ops"),
            aiozk["pipelined_ops"],
        ),
    ]


def _lock_rows(hosts: str, seconds: float) -> list[Row]:
    results = lock.run(hosts, seconds=seconds, rounds=1, contenders=4, uvloop=True)

    def rate(name: str) -> float | None:
        runs = results.get(name)
        return sum(runs[0]) / seconds if runs else None

    return [
        Row(
            "lock acquire+release, 4 contenders",
            "acq/s",
            rate("cas_lock"),
            rate("kazoo Lock"),
            rate("aiozk Lock"),
        )
    ]


def _latch_rows(hosts: str, seconds: float) -> list[Row]:
    rounds = max(5, int(seconds * 10))
    n = 5
    # Each implementation in a process of its own, as the benchmark itself measures them.
    opts = argparse.Namespace(participants=n, rounds=rounds, scale=0, handoffs=0, limit=60.0)

    def measure(impl: str) -> float | None:
        result: dict[str, Any] = latch.measure("handoff", impl, hosts, opts, 0)
        if "error" in result:
            raise RuntimeError(f"{impl}: {result['error']}")
        lat = result.get("latencies") or []
        return statistics.median(lat) * 1000 if lat else None

    ours = measure("aiocoord/uvloop")
    kazoo = measure("kazoo") if kazoo_installed() else None
    aiozk = measure("aiozk/uvloop")  # on the same loop as ours
    return [Row(f"leader hand-off, {n} participants", "ms", ours, kazoo, aiozk, True)]


_ROWS: tuple[tuple[str, str, Callable[[str, float], list[Row]]], ...] = (
    ("session", "getData round trips", _session_rows),
    ("lock", "lock throughput", _lock_rows),
    ("latch", "leader hand-off", _latch_rows),
)
IN_TABLE = tuple(name for name, _, _ in _ROWS)
"""The benchmarks with rows in the table; the others have no kazoo or aiozk peer."""


def measure_all(hosts: str, seconds: float, progress: Callable[[str], None]) -> list[Row]:
    """Every row, `seconds` per measurement, against the server at `hosts`.

    `progress` is told which benchmark starts.  A benchmark that fails gives
    one error row instead of its figures, so the others still show.
    """
    rows: list[Row] = []
    for name, label, measure in _ROWS:
        progress(f"measuring {label} (benchmarks.{name}) ...")
        try:
            rows += measure(hosts, seconds)
        except Exception as exc:  # one broken benchmark must not hide the others
            rows.append(Row(name, "", None, None, None, error=repr(exc)[:120]))
    return rows


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table (and with ``--all`` every benchmark in full); 1 if a row failed."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run (1 s per measurement)")
    parser.add_argument("--seconds", type=float, help="seconds per measurement (default 3)")
    parser.add_argument(
        "--all", action="store_true", help="then run every benchmark in full, one by one"
    )
    args = parser.parse_args(argv)
    seconds = args.seconds if args.seconds is not None else (1.0 if args.quick else 3.0)
    if not 0 < seconds <= 60:
        parser.error("--seconds must be more than 0 and at most 60")
    started = time.monotonic()
    with ZooKeeperServer() as server:
        print(f"ZooKeeper at {server.connect_string}; {seconds:g} s per measurement", flush=True)
        if not kazoo_installed():
            print(skipped_note("kazoo"), flush=True)
        rows = measure_all(
            server.connect_string, seconds, lambda line: print(f"  {line}", flush=True)
        )
    print()
    print(format_table(rows))
    print(f"\n(ratios: how many times better aiocoord is; {time.monotonic() - started:.0f} s)")
    others = [name for name in BENCHMARKS if name not in IN_TABLE]
    if not args.all:
        print(f"not in the table (no kazoo/aiozk peer): {', '.join(others)}; --all runs them")
    else:
        for name in BENCHMARKS:
            print(f"\n=== python -m benchmarks.{name} ===", flush=True)
            cmd, env = python_m(f"benchmarks.{name}")
            subprocess.run(cmd, check=False, env=env)
    return 1 if any(r.error for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
