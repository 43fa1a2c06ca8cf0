"""``aiocoord bench``: the benchmarks in ``benchmarks/``, summed up in one table.

Every measurement runs against one embedded ZooKeeper server started for this
run, and every ratio compares figures taken in this same run (machines are
noisy; figures from different runs do not compare).  The table's rows come
from the benchmark scripts' own functions:

- ``bench_session.py``: getData round trip (median latency) and pipelined getData
  throughput: aiocoord (uvloop) against kazoo and aiozk's client;
- ``bench_lock.py``: lock acquire+release throughput with 4 contenders:
  ``cas_lock`` against kazoo's ``Lock`` and aiozk's ``Lock`` recipe;
- ``bench_latch.py``: leader hand-off latency: ``leader_latch`` against kazoo's
  ``Election`` and aiozk's ``LeaderElection``.

The ratio columns read "how many times better aiocoord is": the peer's latency
over ours, or our throughput over the peer's.  ``--all`` then runs every script
in ``benchmarks/`` on its own, with its defaults, for the detailed tables.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from .zk import UserError

__all__ = ("Row", "find_benchmarks", "format_table", "run_bench")


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


def find_benchmarks() -> Path:
    """The ``benchmarks/`` folder of this checkout (or of the current directory)."""
    for candidate in (Path(__file__).resolve().parent.parent / "benchmarks", Path("benchmarks")):
        if (candidate / "bench_session.py").is_file():
            return candidate
    raise UserError(
        "no benchmarks/ folder here: 'aiocoord bench' runs from a checkout of aiocoord "
        "(the benchmarks are not part of the installed package)"
    )


def _load(folder: Path, name: str) -> ModuleType:
    path = folder / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"aiocoord_bench_{name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def _session_rows(mod: ModuleType, hosts: str, seconds: float) -> list[Row]:
    ours = mod.bench_aiocoord(hosts, seconds, 32, True)
    kazoo = mod.bench_kazoo(hosts, seconds, 32)
    aiozk = mod.bench_aiozk(hosts, seconds, 32)
    return [
        Row(
            "getData round trip (median)",
            "us",
            ours["median_us"],
            kazoo["median_us"],
            aiozk["median_us"],
            lower_is_better=True,
        ),
        Row(
            "getData pipelined, 32 in flight",
            "ops/s",
            ours["pipelined_ops"],
            kazoo["pipelined_ops"],
            aiozk["pipelined_ops"],
        ),
    ]


def _lock_rows(mod: ModuleType, hosts: str, seconds: float) -> list[Row]:
    results: dict[str, list[list[int]]] = mod.run(
        hosts, seconds=seconds, rounds=1, contenders=4, uvloop=True
    )

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


def _latch_rows(mod: ModuleType, hosts: str, seconds: float) -> list[Row]:
    rounds = max(5, int(seconds * 10))
    n = 5

    def median_ms(result: dict[str, Any]) -> float | None:
        lat = result.get("latencies") or []
        return statistics.median(lat) * 1000 if lat else None

    # Each implementation in a process of its own, as the script itself measures them.
    opts = argparse.Namespace(participants=n, rounds=rounds, scale=0, handoffs=0, limit=60.0)

    def measure(impl: str) -> float | None:
        result: dict[str, Any] = mod.measure("handoff", impl, hosts, opts, 0)
        if "error" in result:
            raise RuntimeError(f"{impl}: {result['error']}")
        return median_ms(result)

    ours, kazoo, aiozk = measure("aiocoord/uvloop"), measure("kazoo"), measure("aiozk")
    return [Row(f"leader hand-off, {n} participants", "ms", ours, kazoo, aiozk, True)]


_ADAPTERS: tuple[tuple[str, str, Callable[[ModuleType, str, float], list[Row]]], ...] = (
    ("bench_session", "getData round trips", _session_rows),
    ("bench_lock", "lock throughput", _lock_rows),
    ("bench_latch", "leader hand-off", _latch_rows),
)


def run_bench(args: argparse.Namespace) -> int:
    """The ``bench`` command."""
    from ..testing import ZooKeeperNotInstalledError, ZooKeeperServer

    folder = find_benchmarks()
    seconds = args.seconds if args.seconds is not None else (1.0 if args.quick else 3.0)
    if not 0 < seconds <= 60:
        raise UserError("--seconds must be more than 0 and at most 60")
    sys.path.insert(0, str(folder))
    rows: list[Row] = []
    started = time.monotonic()
    try:
        with ZooKeeperServer() as server:
            print(
                f"ZooKeeper at {server.connect_string}; {seconds:g} s per measurement", flush=True
            )
            for name, label, adapter in _ADAPTERS:
                if not (folder / f"{name}.py").is_file():
                    continue
                print(f"  measuring {label} ({name}.py) ...", flush=True)
                try:
                    rows += adapter(_load(folder, name), server.connect_string, seconds)
                except Exception as exc:  # one broken benchmark must not hide the others
                    rows.append(Row(f"{name}.py", "", None, None, None, error=repr(exc)[:120]))
    except ZooKeeperNotInstalledError as exc:
        raise UserError(str(exc)) from None
    finally:
        sys.path.remove(str(folder))
    print()
    print(format_table(rows))
    print(f"\n(ratios: how many times better aiocoord is; {time.monotonic() - started:.0f} s)")
    covered = {f"{name}.py" for name, _, _ in _ADAPTERS}
    others = sorted(p.name for p in folder.glob("bench_*.py") if p.name not in covered)
    if others and not args.all:
        print(f"not in the table (no kazoo/aiozk peer): {', '.join(others)}; --all runs them")
    if args.all:
        for script in sorted(folder.glob("bench_*.py")):
            print(f"\n=== python {script.relative_to(folder.parent)} ===", flush=True)
            subprocess.run([sys.executable, str(script)], check=False)
    return 1 if any(r.error for r in rows) else 0
