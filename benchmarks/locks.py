"""Semaphore and read/write lock throughput, fairness and costs: aiocoord against Curator and kazoo.

K contenders, each with its own ZooKeeper session, loop acquire -> release as
fast as they can on one path for a fixed time:

- semaphore, ``max_leases`` N (default 2): ``async with aiocoord.semaphore(...)``
  against Curator's ``InterProcessSemaphoreV2`` and ``kazoo.recipe.lock.Semaphore``;
- read/write lock, 80 % reads: ``async with rw.read()`` / ``rw.write()`` against
  Curator's ``InterProcessReadWriteLock`` and kazoo's ``ReadLock`` / ``WriteLock``
  (every contender writes on every fifth turn).

Reported per implementation: acquisitions per second (all contenders
together, median over `--rounds`, the implementations taking turns), the
ratio aiocoord / each peer (the median of the per-round ratios) and Jain's
fairness index over the contenders' counts.  Then aiocoord's costs for K = 4,
16 and 64 (`--sweep`), counted in its own clients: server requests per
acquisition and watch notifications per acquisition.

    python -m benchmarks.locks [--seconds 3] [--rounds 3] [--contenders 8] [--leases 2]

Curator runs in a JVM (`locks_curator`), skipped with a note without Java and
Debian's jars; kazoo is skipped, with a note, when it is not installed.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid
from collections.abc import Callable

import aiocoord
from aiocoord.testing import ZooKeeperServer

from .contenders import Costs, Counts, Step, jain, race_sessions
from .locks_curator import bench_curator, curator_missing
from .peers import kazoo_installed, skipped_note

__all__ = ("bench_aiocoord", "bench_kazoo", "main", "measure_costs", "report", "run")

ROOT = "/bench-locks"
KINDS = ("semaphore", "rwlock")


def _writes(turn: int) -> bool:
    return turn % 5 == 0  # 20 % writes, 80 % reads


def bench_aiocoord(
    hosts: str,
    kind: str,
    k: int,
    seconds: float,
    leases: int,
    uvloop: bool,
    costs: Costs | None = None,
) -> Counts:
    """aiocoord's semaphore or read/write lock, in ``async with`` blocks."""
    path = f"{ROOT}/aiocoord-{kind}-{uuid.uuid4().hex[:8]}"

    async def steps(coords: list[aiocoord.Coordinator]) -> list[Step]:
        await coords[0].client.ensure_path(path)

        def step_for(i: int) -> Step:
            sem = aiocoord.Semaphore(coords[i], path, max_leases=leases, participant_id=f"c{i}")
            rw = aiocoord.ReadWriteLock(coords[i], path, participant_id=f"c{i}")
            turns = [i]

            async def lease() -> None:
                async with sem:
                    pass

            async def read_or_write() -> None:
                turns[0] += 1
                async with rw.write() if _writes(turns[0]) else rw.read():
                    pass

            return lease if kind == "semaphore" else read_or_write

        return [step_for(i) for i in range(k)]

    return race_sessions(hosts, k, seconds, uvloop, steps, costs)


def bench_kazoo(hosts: str, kind: str, k: int, seconds: float, leases: int) -> Counts:
    """kazoo's ``Semaphore`` or ``ReadLock`` / ``WriteLock``, one thread and client per contender."""
    from kazoo.client import KazooClient

    path = f"{ROOT}/kazoo-{kind}-{uuid.uuid4().hex[:8]}"
    clients = [KazooClient(hosts=hosts, timeout=10) for _ in range(k)]
    for zk in clients:
        zk.start(timeout=10)
    counts = [0] * k
    start = threading.Barrier(k)

    def run(i: int) -> None:
        zk = clients[i]
        sem = zk.Semaphore(path, f"c{i}", max_leases=leases)
        read, write = zk.ReadLock(path, f"c{i}"), zk.WriteLock(path, f"c{i}")
        start.wait()
        stop = time.perf_counter() + seconds
        turn = i
        while time.perf_counter() < stop:
            turn += 1
            lock = sem if kind == "semaphore" else write if _writes(turn) else read
            with lock:
                pass
            counts[i] += 1

    try:
        threads = [threading.Thread(target=run, args=(i,)) for i in range(k)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(seconds + 30)
    finally:
        for zk in clients:
            zk.stop()
            zk.close()
    return counts


Rounds = dict[str, list[Counts]]  # implementation -> one Counts per round


def run(
    hosts: str,
    kind: str,
    *,
    seconds: float,
    rounds: int,
    contenders: int,
    leases: int,
    uvloop: bool,
) -> Rounds:
    """Measure aiocoord and kazoo on `kind`, taking turns for `rounds` rounds."""
    measure: dict[str, Callable[[], Counts]] = {
        "aiocoord": lambda: bench_aiocoord(hosts, kind, contenders, seconds, leases, uvloop),
    }
    if curator_missing() is None:
        measure["Curator"] = lambda: bench_curator(hosts, kind, contenders, seconds, leases)
    if kazoo_installed():
        measure["kazoo"] = lambda: bench_kazoo(hosts, kind, contenders, seconds, leases)
    results: Rounds = {name: [] for name in measure}
    names = list(measure)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            results[name].append(measure[name]())
    return results


def report(results: Rounds, seconds: float) -> str:
    rates = {name: [sum(c) / seconds for c in runs] for name, runs in results.items()}
    peers = [p for p in ("Curator", "kazoo") if p in rates]

    def ratio(name: str, peer: str) -> str:
        if name == peer or name in peers:
            return f"{'-':>10}"
        value = statistics.median(a / b for a, b in zip(rates[name], rates[peer], strict=True))
        return f"{value:9.2f}x"

    head = f"{'implementation':<14} {'acq/s':>7}" + "".join(f" {'vs ' + p:>10}" for p in peers)
    lines = [head + f" {'jain':>6}   (acq/s of each round)"]
    for name, runs in results.items():
        counts = [sum(column) for column in zip(*runs, strict=True)]
        each = " ".join(f"{r:.0f}" for r in rates[name])
        lines.append(
            f"{name:<14} {statistics.median(rates[name]):7.0f}"
            + "".join(f" {ratio(name, p)}" for p in peers)
            + f" {jain(counts):6.3f}   ({each})"
        )
    why = curator_missing()
    if why is not None:
        lines.append(f"note: Curator's recipes are not measured: {why}")
    if "kazoo" not in results:
        lines.append(skipped_note("kazoo"))
    return "\n".join(lines)


def measure_costs(
    hosts: str, kind: str, sweep: list[int], seconds: float, leases: int, uvloop: bool = True
) -> list[tuple[Costs, Counts]]:
    out = []
    for k in sweep:
        costs = Costs(k)
        counts = bench_aiocoord(hosts, kind, k, seconds, leases, uvloop, costs)
        out.append((costs, counts))
    return out


def report_costs(measured: list[tuple[Costs, Counts]], seconds: float) -> str:
    lines = [
        f"{'K':>3} {'acq/s':>7} {'jain':>6} {'requests/acq':>13} {'notifications/acq':>18} "
        f"{'waking one':>11}"
    ]
    for costs, counts in measured:
        lines.append(
            f"{costs.contenders:>3} {sum(counts) / seconds:7.0f} {jain(counts):6.3f} "
            f"{costs.per(costs.requests):13.2f} {costs.per(costs.notifications):18.2f} "
            f"{costs.per(costs.woken):11.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per implementation and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--contenders", type=int, default=8)
    parser.add_argument("--leases", type=int, default=2, help="the semaphore's max_leases")
    parser.add_argument("--sweep", default="4,16,64", help="K values for the costs ('' skips)")
    parser.add_argument("--kind", choices=(*KINDS, "both"), default="both")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    parser.add_argument("--hosts", default=None, help="use this server instead of starting one")
    args = parser.parse_args(argv)
    sweep = [int(k) for k in args.sweep.split(",") if k.strip()]
    uvloop = args.loop == "uvloop"
    kinds = KINDS if args.kind == "both" else (args.kind,)
    server = ZooKeeperServer(extra_config={"maxClientCnxns": "0"}) if args.hosts is None else None
    with server if server is not None else _nothing():
        hosts = server.connect_string if server is not None else args.hosts
        for kind in kinds:
            what = (
                f"semaphore, max_leases={args.leases}"
                if kind == "semaphore"
                else "read/write lock, 80 % reads"
            )
            print(
                f"\n{what}: {args.contenders} contenders, each its own session, {args.rounds} "
                f"rounds of {args.seconds:g} s, async on {args.loop}"
            )
            results = run(
                hosts,
                kind,
                seconds=args.seconds,
                rounds=args.rounds,
                contenders=args.contenders,
                leases=args.leases,
                uvloop=uvloop,
            )
            print(report(results, args.seconds))
            if sweep:
                print(f"aiocoord's costs ({args.seconds:g} s each)")
                measured = measure_costs(hosts, kind, sweep, args.seconds, args.leases, uvloop)
                print(report_costs(measured, args.seconds))


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


if __name__ == "__main__":
    main()
