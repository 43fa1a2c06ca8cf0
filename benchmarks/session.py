"""Raw request round trips: aiocoord (asyncio and uvloop) against aiozk and kazoo.

Measures, against one embedded ZooKeeper server in the same run:
- sequential getData latency (one request at a time, median and p99),
- pipelined throughput (C concurrent getData callers on one session).
Prints ratios against the peers measured in this same run, since machines are noisy.
kazoo is skipped, with a note, when it is not installed.

    python -m benchmarks.session [--seconds 3] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

import aiocoord
from aiocoord.testing import ZooKeeperServer

from .peers import kazoo_installed, skipped_note

__all__ = ("bench_aiocoord", "bench_aiozk", "bench_kazoo", "main")

Result = dict[str, float]


def _summary(latencies: list[float], ops: int, seconds: float) -> Result:
    lat = sorted(latencies)
    return {
        "median_us": statistics.median(lat) * 1e6,
        "p99_us": lat[int(len(lat) * 0.99) - 1] * 1e6,
        "seq_ops": len(lat) / sum(lat),
        "pipelined_ops": ops / seconds,
    }


async def _measure(get: Callable[[], Awaitable[Any]], seconds: float, concurrency: int) -> Result:
    latencies: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        await get()
        latencies.append(time.perf_counter() - t0)
    count = 0

    async def worker(stop: float) -> None:
        nonlocal count
        while time.perf_counter() < stop:
            await get()
            count += 1

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(worker, started + seconds)
    return _summary(latencies, count, time.perf_counter() - started)


def bench_aiocoord(hosts: str, seconds: float, concurrency: int, uvloop: bool) -> Result:
    async def main() -> Result:
        async with aiocoord.connect(hosts, session_timeout=10) as coord:
            await coord.client.ensure_path("/bench", mode=aiocoord.zk.CreateMode.PERSISTENT)
            await coord.client.set("/bench", b"x" * 100)
            return await _measure(lambda: coord.client.get("/bench"), seconds, concurrency)

    result: Result = anyio.run(main, backend="asyncio", backend_options={"use_uvloop": uvloop})
    return result


def bench_aiozk(hosts: str, seconds: float, concurrency: int) -> Result:
    import aiozk

    async def main() -> Result:
        zk = aiozk.ZKClient(hosts, session_timeout=10)
        await zk.start()
        try:
            return await _measure(lambda: zk.get_data("/bench"), seconds, concurrency)
        finally:
            await zk.close()

    result: Result = anyio.run(main, backend="asyncio")
    return result


def bench_kazoo(hosts: str, seconds: float, concurrency: int) -> Result:
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=hosts, timeout=10)
    zk.start(timeout=10)
    try:
        latencies: list[float] = []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            zk.get("/bench")
            latencies.append(time.perf_counter() - t0)
        # Pipelined: kazoo's async API, `concurrency` requests kept in flight.
        count = 0
        lock = threading.Lock()
        stop = time.perf_counter() + seconds
        done = threading.Event()
        inflight = [0]

        def issue() -> None:
            with lock:
                if time.perf_counter() >= stop:
                    if inflight[0] == 0:
                        done.set()
                    return
                inflight[0] += 1
            zk.get_async("/bench").rawlink(finished)

        def finished(_: Any) -> None:
            nonlocal count
            with lock:
                count += 1
                inflight[0] -= 1
            issue()

        started = time.perf_counter()
        for _ in range(concurrency):
            issue()
        done.wait(seconds + 10)
        return _summary(latencies, count, time.perf_counter() - started)
    finally:
        zk.stop()
        zk.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args(argv)
    with ZooKeeperServer() as server:
        hosts = server.connect_string
        results = {
            "aiocoord/uvloop": bench_aiocoord(hosts, args.seconds, args.concurrency, True),
            "aiocoord/asyncio": bench_aiocoord(hosts, args.seconds, args.concurrency, False),
            "aiozk": bench_aiozk(hosts, args.seconds, args.concurrency),
        }
        if kazoo_installed():
            results["kazoo"] = bench_kazoo(hosts, args.seconds, args.concurrency)
    print(
        f"getData round trips, {args.seconds:.0f}s each, {args.concurrency} concurrent for the pipelined column"
    )
    print(f"{'client':<18}{'median us':>10}{'p99 us':>10}{'seq ops/s':>11}{'pipelined ops/s':>17}")
    for name, r in results.items():
        print(
            f"{name:<18}{r['median_us']:>10.0f}{r['p99_us']:>10.0f}{r['seq_ops']:>11.0f}{r['pipelined_ops']:>17.0f}"
        )
    ours = results["aiocoord/uvloop"]
    for peer in ("aiozk", "kazoo"):
        if peer not in results:
            print(skipped_note(peer))
            continue
        p = results[peer]
        print(
            f"aiocoord/uvloop vs {peer}: latency {ours['median_us'] / p['median_us']:.2f}x, "
            f"pipelined throughput {ours['pipelined_ops'] / p['pipelined_ops']:.2f}x"
        )


if __name__ == "__main__":
    main()
