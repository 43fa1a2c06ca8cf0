"""Scaling curves: how each recipe's cost grows with its size, on one standalone server.

The other benchmarks measure one size well; this one sweeps the size, reusing
their measurements, and writes a markdown table, the raw figures
(``curves.json``) and one PNG plot per curve into a directory:

- leader latch (`latch`'s join at scale, each implementation in a process of
  its own): join-settle time and hand-off latency for M participants on one
  session, aiocoord against aiozk's and kazoo's elections;
- locks (`mutex`, `lock`): acquire+release throughput of ``mutex`` and
  ``cas_lock`` for K contenders, each with its own session, against aiozk's
  and kazoo's ``Lock`` (best of ``--runs``);
- task leadership (`tasks`): hand-over time of T tasks to a newer worker (join
  -> all led, the settle delay taken out; median and slowest of ``--runs``),
  and the longest gap of a task;
- scheduler (`scheduler`): end-to-end jobs/s for W workers (best of ``--runs``).

Next to each figure, the server requests per operation: the server's
``zk_packets_received`` over the measurement (pings and handshakes included),
except the scheduler's, counted in its clients.  Each series' growth is the
slope of its log-log fit, in words.

Every point is bounded: a join gets ``--cap`` seconds, and an implementation
is not run at a size its previous point extrapolates (linearly) past the cap,
nor after it failed; the table says so.  Each sweep has a fresh server of
its own, with ``forceSync=no`` (``--fsync`` keeps it) and no limit on
connections per address.

    python -m benchmarks.curves [--out DIR] [--quick] [--cap 120] [--only latch,locks,...]
        [--sizes tasks=10,100,1000 ...] [--replot]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio

from . import contenders, latch, lock, mutex, scheduler, tasks_runs
from .curves_report import Curve, Point, load_json, plot, to_markdown, write_json
from .latch_runs import packets
from .peers import kazoo_installed

__all__ = ("SWEEPS", "main", "sweep_latch", "sweep_locks", "sweep_scheduler", "sweep_tasks")

# Sizes of each sweep: full, and --quick (a smoke test in seconds).
SIZES = {
    "latch": ([100, 1000, 10000], [5, 20]),
    "locks": ([1, 4, 16, 64], [1, 4]),
    "tasks": ([10, 100, 500, 1000, 2000], [3, 10]),
    "scheduler": ([1, 2, 4, 8, 12], [1, 2]),
}


def _latch_impls() -> dict[str, str]:
    """Label -> `latch` implementation; aiozk on asyncio, as aiocoord here."""
    aiozk = next(i for i in latch.IMPLS if i in ("aiozk/asyncio", "aiozk"))
    impls = {"aiocoord": "aiocoord/asyncio", "aiozk": aiozk}
    if kazoo_installed():
        impls["kazoo"] = "kazoo"
    return impls


def _skip(previous: tuple[int, float | None] | None, size: int, cap: float) -> str | None:
    """Why not to run at `size` after the `previous` point (its size, seconds taken or None)."""
    if previous is None:
        return None
    at, took = previous
    if took is None:
        return f"not run: failed or not run at {at:,}"
    # A point well inside the cap is mostly fixed costs (processes, sessions): no extrapolation.
    if took > cap / 10 and took * size / at > cap:
        return f"not run: {took:.0f} s at {at:,} extrapolates past the {cap:.0f} s cap"
    return None


def sweep_latch(hosts: str, sizes: list[int], cap: float, handoffs: int) -> list[Curve]:
    """Join-settle time and hand-off latency for M participants on one session."""
    settle = Curve(
        "latch_settle", "Leader latch: join-settle time", "participants (M)", "s", "participant"
    )
    handoff = Curve(
        "latch_handoff", "Leader latch: hand-off latency", "participants (M)", "ms", "hand-off"
    )
    # The join's own limit is kazoo's; the others are bounded by the child's timeout (limit + 60).
    opts = argparse.Namespace(participants=2, rounds=1, handoffs=handoffs, limit=max(1.0, cap - 60))
    for impl in _latch_impls().values():  # untimed: a fresh server is slow until its JIT warms up
        latch.measure("join", impl, hosts, opts, sizes[0])
    for label, impl in _latch_impls().items():
        settle.series[label], handoff.series[label] = [], []
        previous: tuple[int, float | None] | None = None
        for m in sizes:
            why = _skip(previous, m, cap)
            if why is None:
                began = time.perf_counter()
                res = latch.measure("join", impl, hosts, opts, m)
                if res.get("settle_s") is not None:
                    previous = (m, time.perf_counter() - began)
                    per = res["requests_per_participant"]
                    settle.series[label].append(Point(m, res["settle_s"], per))
                    ms = res["handoff_s"] * 1000 if "handoff_s" in res else None
                    handoff.series[label].append(Point(m, ms, res["requests_per_handoff"]))
                    continue
                why = str(res.get("error") or res.get("note") or "no result")[:80]
            previous = (m, None)
            settle.series[label].append(Point(m, None, note=why))
            handoff.series[label].append(Point(m, None, note=why))
    return [settle, handoff]


def _counted(hosts: str, k: int, measure: Callable[[int], list[int]], seconds: float) -> Point:
    """Acquisitions per second of `measure` with `k` contenders, and server requests per one."""
    before = packets(hosts)
    try:
        done = sum(measure(k))
    except Exception as exc:  # one failing peer must not hide the others
        return Point(k, None, note=repr(exc)[:80])
    return Point(k, done / seconds, (packets(hosts) - before) / done if done else None)


def sweep_locks(hosts: str, sizes: list[int], seconds: float, runs: int) -> list[Curve]:
    """Acquire+release throughput for K contenders, each with its own session (uvloop).

    The best of `runs` rounds per K, the implementations taking turns in each
    round: other work on a shared machine only ever slows one down.
    """
    curve = Curve(
        "locks",
        f"Locks: acquire+release throughput (best of {runs})",
        "contenders (K)",
        "acq/s",
        "acquisition",
        False,
    )
    impls: dict[str, Callable[[int], list[int]]] = {
        "mutex": lambda k: mutex.bench_aiocoord(hosts, k, seconds, True, True),
        "cas_lock": lambda k: lock.bench_aiocoord(hosts, k, seconds, True, True),
        "aiozk Lock": lambda k: contenders.bench_aiozk(hosts, k, seconds, True),
    }
    if kazoo_installed():
        impls["kazoo Lock"] = lambda k: contenders.bench_kazoo(hosts, k, seconds)
    curve.series = {name: [] for name in impls}
    for run in impls.values():  # untimed: a fresh server is slow until its JIT has warmed up
        _counted(hosts, sizes[0], run, seconds)
    for k in sizes:
        rounds: dict[str, list[Point]] = {name: [] for name in impls}
        for _ in range(runs):
            for name, run in impls.items():  # in turns, so a slow patch hits all alike
                rounds[name].append(_counted(hosts, k, run, seconds))
        for name, points in rounds.items():
            best = max(points, key=lambda p: p.value or 0.0)
            curve.series[name].append(best)
    return [curve]


def sweep_tasks(hosts: str, sizes: list[int], cap: float, settle: float, runs: int) -> list[Curve]:
    """Hand-over of T tasks from three workers to a newer one, each worker a process.

    `runs` hand-overs per size: the median and the slowest are shown, since one
    stalled process on a loaded machine can make any single run its slowest.
    """
    curve = Curve(
        "tasks_handover", "Task leadership: hand-over of T tasks", "tasks (T)", "ms", "task"
    )
    os.environ[tasks_runs.GC_FREEZE] = "1"
    tasks_runs.hand_over(hosts, sizes[0], settle)  # untimed: the server's JIT warms up
    median: list[Point] = []
    slowest: list[Point] = []
    longest: list[Point] = []
    previous: tuple[int, float | None] | None = None
    for t in sizes:
        why = _skip(previous, t, cap)
        if why is None:
            began = time.perf_counter()
            try:
                done = [tasks_runs.hand_over(hosts, t, settle) for _ in range(runs)]
            except Exception as exc:  # a failed point says why; the smaller ones stand
                why = repr(exc)[:80]
            else:
                previous = (t, (time.perf_counter() - began) / runs)
                led = sorted(((r.join_to_all_led - r.settle) * 1000, r.requests / t) for r in done)
                median.append(Point(t, *led[len(led) // 2]))
                slowest.append(Point(t, *led[-1]))
                longest.append(Point(t, max(max(r.gaps) for r in done) * 1000))
                continue
        previous = (t, None)
        median.append(Point(t, None, note=why))
    curve.series = {
        f"all led, median of {runs}": median,
        f"all led, slowest of {runs}": slowest,
        "longest gap of a task": longest,
    }
    return [curve]


def sweep_scheduler(
    hosts: str, sizes: list[int], jobs: int, timeout: float, runs: int
) -> list[Curve]:
    """End-to-end jobs/s (submit -> result) for W workers, 200 concurrent submitters.

    The best of `runs` runs per W: other work on a shared machine only ever slows one down.
    """
    curve = Curve(
        "scheduler", "Scheduler: end-to-end throughput", "workers (W)", "jobs/s", "job", False
    )
    points: list[Point] = []
    for w in sizes:
        args = argparse.Namespace(
            jobs=jobs,
            concurrency=200,
            latency_jobs=20,
            workers=w,
            capacity=64,
            strategy="least-loaded",
            raw_seconds=0.2,
            timeout=timeout,
            rate=100.0,  # the steady phase, which the curve does not plot
            more_workers=w,
        )
        try:
            done = [
                anyio.run(scheduler.bench, hosts, args, backend_options={"use_uvloop": True})
                for _ in range(runs)
            ]
        except Exception as exc:  # a failed point says why; the others stand
            points.append(Point(w, None, note=repr(exc)[:80]))
            continue
        best = max(done, key=lambda r: r["jobs_per_s"])
        points.append(Point(w, best["jobs_per_s"], best["requests_per_job"]))
    curve.series = {f"aiocoord, best of {runs}": points}
    return [curve]


SWEEPS = ("latch", "locks", "tasks", "scheduler")


def _header(args: argparse.Namespace, load: tuple[float, float], minutes: float) -> list[str]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown CPU",
    )
    return [
        f"Measured on {os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, "
        f"one standalone ZooKeeper ({'forceSync=yes' if args.fsync else 'forceSync=no'}); "
        f"load average {load[0]:.1f} at the start, {load[1]:.1f} at the end; {minutes:.0f} min.",
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("curves"), help="directory to write")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    parser.add_argument("--cap", type=float, default=120.0, help="seconds allowed per point")
    parser.add_argument("--seconds", type=float, default=3.0, help="per lock measurement")
    parser.add_argument("--jobs", type=int, default=1000, help="scheduler jobs per point")
    parser.add_argument(
        "--runs", type=int, default=3, help="lock, task and scheduler runs per point"
    )
    parser.add_argument("--only", default=",".join(SWEEPS), help="comma-separated sweeps")
    parser.add_argument(
        "--sizes", action="append", default=[], help="NAME=a,b,c: other sizes for one sweep"
    )
    parser.add_argument("--fsync", action="store_true", help="keep the server's forceSync")
    parser.add_argument("--replot", action="store_true", help="redraw from DIR/curves.json")
    parser.add_argument("--hosts", default=None, help="use this server instead of starting one")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    curves, header = load_json(args.out / "curves.json") if args.replot else _measure(args)
    write_json(curves, header, args.out / "curves.json")
    (args.out / "curves.md").write_text(to_markdown(curves, header))
    for curve in curves:
        plot(curve, args.out)
    print(to_markdown(curves, header))


@contextlib.contextmanager
def _server(args: argparse.Namespace) -> Iterator[str]:
    """The server of one sweep: a fresh one each (unless --hosts), so none inherits a crash."""
    if args.hosts is not None:
        yield args.hosts
        return
    from aiocoord.testing import ZooKeeperServer

    config = {"maxClientCnxns": "0", **({} if args.fsync else {"forceSync": "no"})}
    with ZooKeeperServer(extra_config=config) as server:
        yield server.connect_string


def _measure(args: argparse.Namespace) -> tuple[list[Curve], list[str]]:
    only = [name.strip() for name in args.only.split(",") if name.strip()]
    size = {name: SIZES[name][1 if args.quick else 0] for name in SWEEPS}
    for given in args.sizes:
        name, _, values = given.partition("=")
        size[name] = [int(v) for v in values.split(",")]
    seconds = 0.2 if args.quick else args.seconds
    runs = 1 if args.quick else args.runs
    sweeps: dict[str, Callable[[str], list[Curve]]] = {
        "latch": lambda hosts: sweep_latch(hosts, size["latch"], args.cap, 3 if args.quick else 10),
        "locks": lambda hosts: sweep_locks(hosts, size["locks"], seconds, runs),
        "tasks": lambda hosts: sweep_tasks(
            hosts, size["tasks"], args.cap, 0.05 if args.quick else 0.2, runs
        ),
        "scheduler": lambda hosts: sweep_scheduler(
            hosts, size["scheduler"], 50 if args.quick else args.jobs, args.cap, runs
        ),
    }
    load = os.getloadavg()[0]
    began = time.perf_counter()
    curves: list[Curve] = []
    for name in only:
        print(f"measuring {name} ...", flush=True)
        try:
            with _server(args) as hosts:
                curves += sweeps[name](hosts)
        except Exception:  # a sweep that breaks (say, its server died) leaves the others
            traceback.print_exc()
    minutes = (time.perf_counter() - began) / 60
    return curves, _header(args, (load, os.getloadavg()[0]), minutes)


if __name__ == "__main__":
    main()
