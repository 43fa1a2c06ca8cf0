"""Lock throughput: aiocoord's CasLock against kazoo's Lock and aiozk's Lock recipe.

K contenders, each with its own ZooKeeper session, loop acquire -> release as
fast as they can on one lock path for a fixed time.  Reported per
implementation: acquisitions per second (all contenders together), each
contender's share, and Jain's fairness index (1.0: perfectly even; 1/K: one
contender took everything).  Ratios are against the peers measured in this
same run, against one embedded server, since machines are noisy.

- ``cas_lock``: ``async with cas_lock(coord, path)`` (renewal tasks and loss
  watching included: what applications use).
- ``CasLock``: ``await lock.acquire(); await lock.release()`` (the bare CAS).
- ``kazoo``: ``kazoo.recipe.lock.Lock`` (one thread per contender; skipped, with a
  note, when kazoo is not installed).
- ``aiozk``: ``aiozk.recipes.Lock`` from the installed aiozk package.

CasLock has no queue: who wins after a release is whoever's CAS lands first,
so its fairness is measured rather than promised (kazoo's and aiozk's locks
are FIFO queues of sequential nodes).

The implementations take turns for `--rounds` rounds (each `--seconds` long)
so that a slow patch of a shared machine hits all of them alike; acq/s is the
median over rounds, each ratio the median of the per-round ratios, and the
shares and fairness count every round.

    python -m aiocoord.bench.lock [--seconds 3] [--rounds 3] [--contenders 4] [--loop uvloop|asyncio]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio

import aiocoord
from aiocoord.recipes.cas_lock import CasLock, cas_lock
from aiocoord.testing import ZooKeeperServer

from .peers import kazoo_installed, skipped_note

__all__ = ("bench_aiocoord", "bench_aiozk", "bench_kazoo", "jain", "main", "report", "run")

Counts = list[int]


def jain(counts: Counts) -> float:
    total = sum(counts)
    squares = sum(c * c for c in counts)
    return total * total / (len(counts) * squares) if squares else 0.0


async def _race(loops: list[Callable[[], Awaitable[None]]], seconds: float) -> Counts:
    counts = [0] * len(loops)
    stop = time.perf_counter() + seconds

    async def run(i: int) -> None:
        step = loops[i]
        while time.perf_counter() < stop:
            await step()
            counts[i] += 1

    async with anyio.create_task_group() as tg:
        for i in range(len(loops)):
            tg.start_soon(run, i)
    return counts


def bench_aiocoord(hosts: str, k: int, seconds: float, uvloop: bool, managed: bool) -> Counts:
    path = f"/bench-lock/cas-{uuid.uuid4().hex[:8]}"

    async def main() -> Counts:
        async with AsyncExitStack() as stack:
            coords = [
                await stack.enter_async_context(aiocoord.connect(hosts, session_timeout=10))
                for _ in range(k)
            ]
            locks = [CasLock(c, path, owner=f"c{i}", lease=10) for i, c in enumerate(coords)]

            def step_for(i: int) -> Callable[[], Awaitable[None]]:
                async def held_block() -> None:
                    async with cas_lock(coords[i], path, owner=f"c{i}", lease=10):
                        pass

                async def bare() -> None:
                    await locks[i].acquire()
                    await locks[i].release()

                return held_block if managed else bare

            return await _race([step_for(i) for i in range(k)], seconds)

    counts: Counts = anyio.run(main, backend="asyncio", backend_options={"use_uvloop": uvloop})
    return counts


def bench_aiozk(hosts: str, k: int, seconds: float, uvloop: bool) -> Counts:
    import aiozk

    path = f"/bench-lock/aiozk-{uuid.uuid4().hex[:8]}"

    async def main() -> Counts:
        clients = [aiozk.ZKClient(hosts, session_timeout=10) for _ in range(k)]
        for zk in clients:
            await zk.start()
        try:
            locks = [zk.recipes.Lock(path) for zk in clients]

            def step_for(lock: Any) -> Callable[[], Awaitable[None]]:
                async def step() -> None:
                    await lock.acquire()
                    await lock.release()

                return step

            return await _race([step_for(lock) for lock in locks], seconds)
        finally:
            for zk in clients:
                await zk.close()

    counts: Counts = anyio.run(main, backend="asyncio", backend_options={"use_uvloop": uvloop})
    return counts


def bench_kazoo(hosts: str, k: int, seconds: float) -> Counts:
    from kazoo.client import KazooClient

    path = f"/bench-lock/kazoo-{uuid.uuid4().hex[:8]}"
    clients = [KazooClient(hosts=hosts, timeout=10) for _ in range(k)]
    for zk in clients:
        zk.start(timeout=10)
    counts = [0] * k
    start = threading.Barrier(k)

    def run(i: int) -> None:
        lock = clients[i].Lock(path, f"c{i}")
        start.wait()
        stop = time.perf_counter() + seconds
        while time.perf_counter() < stop:
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
    hosts: str | None = None,
    *,
    seconds: float = 3.0,
    rounds: int = 3,
    contenders: int = 4,
    uvloop: bool = True,
) -> Rounds:
    """Measure every implementation, in turns; starts its own server unless `hosts` is given.

    kazoo's lock is left out when kazoo is not installed.
    """
    if hosts is None:
        with ZooKeeperServer() as server:
            return run(
                server.connect_string,
                seconds=seconds,
                rounds=rounds,
                contenders=contenders,
                uvloop=uvloop,
            )
    kazoo = kazoo_installed()
    results: Rounds = {"cas_lock": [], "CasLock": [], "kazoo Lock": [], "aiozk Lock": []}
    if not kazoo:
        del results["kazoo Lock"]
    for _ in range(rounds):
        results["cas_lock"].append(bench_aiocoord(hosts, contenders, seconds, uvloop, True))
        results["CasLock"].append(bench_aiocoord(hosts, contenders, seconds, uvloop, False))
        if kazoo:
            results["kazoo Lock"].append(bench_kazoo(hosts, contenders, seconds))
        results["aiozk Lock"].append(bench_aiozk(hosts, contenders, seconds, uvloop))
    return results


def report(results: Rounds, seconds: float) -> str:
    rates = {name: [sum(c) / seconds for c in runs] for name, runs in results.items()}

    def ratio(name: str, peer: str) -> str:
        if not rates.get(peer):
            return f"{'-':>9}"
        value = statistics.median(a / b for a, b in zip(rates[name], rates[peer], strict=True))
        return f"{value:8.2f}x"

    lines = [
        f"{'implementation':<12} {'acq/s':>8} {'vs kazoo':>9} {'vs aiozk':>9} "
        f"{'jain':>5}  per-contender shares   (acq/s of each round)",
    ]
    for name, runs in results.items():
        counts = [sum(column) for column in zip(*runs, strict=True)]
        total = sum(counts) or 1
        shares = " ".join(f"{c / total:4.0%}" for c in counts)
        each = " ".join(f"{r:.0f}" for r in rates[name])
        lines.append(
            f"{name:<12} {statistics.median(rates[name]):8.0f} {ratio(name, 'kazoo Lock')} "
            f"{ratio(name, 'aiozk Lock')} {jain(counts):5.2f}  {shares}   ({each})"
        )
    if "kazoo Lock" not in results:
        lines.append(skipped_note("kazoo"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per implementation and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--contenders", type=int, default=4)
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    parser.add_argument("--hosts", default=None, help="use this server instead of starting one")
    args = parser.parse_args(argv)
    results = run(
        args.hosts,
        seconds=args.seconds,
        rounds=args.rounds,
        contenders=args.contenders,
        uvloop=args.loop == "uvloop",
    )
    print(
        f"{args.contenders} contenders, {args.rounds} rounds of {args.seconds:g} s each, "
        f"async on {args.loop}, acquire -> release in a loop"
    )
    print(report(results, args.seconds))


if __name__ == "__main__":
    main()
