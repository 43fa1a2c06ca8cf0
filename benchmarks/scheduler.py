"""Job scheduler throughput, latency and ZooKeeper requests per job.

Against one embedded standalone server, in one process: W workers, each with
its own coordinator (its own session), with a trivial handler, and a client
coordinator that submits.  Measured:

- throughput: J jobs submitted by C concurrent submitters, each awaiting its
  result (submit -> result end to end), in jobs per second;
- latency of one job at a time (submit -> result): p50 and p99; and at a
  steady rate (``--rate``, 100 jobs/s), each job submitted on time;
- the gap when the assigner dies without closing its session
  (`_scheduler_failover`): the longest wait of a job submitted after it froze;
- ZooKeeper requests per job, counted by wrapping every coordinator's
  ``client._sender``'s ``fetch``/``fetch_packet`` (the assigner's and the workers' included),
  with W workers and again with ``--more-workers`` (12), to show it does not
  grow with them.

The write floor is measured too: pipelined transactions shaped like an
assignment (check, create, delete), divided by the writes a job makes.

No peer library has a scheduler to compare with, so the references are raw
requests measured in the same run on the same server: pipelined getData
throughput for jobs/s (a job costs 8 requests, 4 of them writes), and the
sequential getData and setData round trips for latency: one job's critical
path is 3 writes and 3 reads in sequence (submit; the assigner's read and
transaction; the worker's read and result; the client's read), so "x1.0 its
request path" would mean no overhead beyond those round trips.

    python -m benchmarks.scheduler [--jobs 2000] [--concurrency 200] [--workers 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio

import aiocoord
from aiocoord.scheduler import Scheduler
from aiocoord.testing import ZooKeeperServer
from aiocoord.zk.types import CheckOp, CreateMode, CreateOp, DeleteOp

from ._scheduler_failover import failover_gap

__all__ = ("bench", "main", "raw_round_trips", "run_jobs")

ROOT = "/bench-scheduler"
WRITES_PER_JOB = 4  # submit, assignment, running mark, result with the assignment's delete


class Counter:
    """Counts requests sent through the wrapped clients."""

    def __init__(self) -> None:
        self.requests = 0

    def wrap(self, coord: aiocoord.Coordinator) -> None:
        sender: Any = coord.client._sender
        for name in ("fetch", "fetch_packet"):  # `call` sends through `fetch`
            original = getattr(sender, name)

            def counted(*args: Any, _original: Any = original, **kwargs: Any) -> Awaitable[Any]:
                self.requests += 1
                result: Awaitable[Any] = _original(*args, **kwargs)
                return result

            setattr(sender, name, counted)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


async def raw_round_trips(
    coord: aiocoord.Coordinator, seconds: float
) -> tuple[float, float, float]:
    """Median sequential getData and setData latency (s), pipelined getData throughput (req/s)."""
    await coord.client.ensure_path(ROOT)
    reads: list[float] = []
    writes: list[float] = []
    end = time.perf_counter() + seconds / 2
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        await coord.client.get(ROOT)
        t1 = time.perf_counter()
        await coord.client.set(ROOT, b"")
        reads.append(t1 - t0)
        writes.append(time.perf_counter() - t1)
    count = 0

    async def pipelined(stop: float) -> None:
        nonlocal count
        while time.perf_counter() < stop:
            await coord.client.get(ROOT)
            count += 1

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(32):
            tg.start_soon(pipelined, started + seconds / 2)
    rate = count / (time.perf_counter() - started)
    return statistics.median(reads), statistics.median(writes), rate


async def raw_multis(coord: aiocoord.Coordinator, seconds: float) -> float:
    """Pipelined transactions per second shaped like an assignment: check, create, delete."""
    base = f"{ROOT}-raw"  # persistent: a container emptied by the deletes would be removed
    await coord.client.ensure_path(base, mode=CreateMode.PERSISTENT)
    count = 0

    async def pipelined(task: int, stop: float) -> None:
        nonlocal count
        path = f"{base}/{task}"
        while time.perf_counter() < stop:
            await coord.client.multi([CheckOp(base, -1), CreateOp(path, b"x" * 64), DeleteOp(path)])
            count += 1

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for task in range(32):
            tg.start_soon(pipelined, task, started + seconds)
    return count / (time.perf_counter() - started)


async def steady_latencies(client: Scheduler, rate: float, jobs: int) -> list[float]:
    """Submit a job every 1/`rate` seconds; each one's submit -> result time."""
    latencies: list[float] = []

    async def one(n: int) -> None:
        t0 = time.perf_counter()
        assert await client.result(await client.submit("echo", {"n": n})) == n
        latencies.append(time.perf_counter() - t0)

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for n in range(jobs):
            await anyio.sleep(max(0.0, started + n / rate - time.perf_counter()))
            tg.start_soon(one, n)
    return latencies


def make_scheduler(coord: aiocoord.Coordinator, strategy: str) -> Scheduler:
    sched = Scheduler(coord, ROOT, strategy=strategy, result_ttl=60)

    @sched.job("echo")
    async def echo(n: int) -> int:
        return n

    return sched


async def run_jobs(client: Scheduler, jobs: int, concurrency: int) -> float:
    """Submit `jobs` jobs with `concurrency` submitters; returns the elapsed seconds."""
    limiter = anyio.CapacityLimiter(concurrency)

    async def one(n: int) -> None:
        async with limiter:
            job_id = await client.submit("echo", {"n": n})
            assert await client.result(job_id) == n

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for n in range(jobs):
            tg.start_soon(one, n)
    return time.perf_counter() - started


async def bench(hosts: str, args: argparse.Namespace) -> dict[str, float]:
    out: dict[str, float] = {}
    counter = Counter()
    async with AsyncExitStack() as stack:

        async def connect() -> aiocoord.Coordinator:
            coord = await stack.enter_async_context(aiocoord.connect(hosts, session_timeout=10))
            counter.wrap(coord)
            return coord

        client_coord = await connect()
        client = make_scheduler(client_coord, args.strategy)
        raw = await raw_round_trips(client_coord, args.raw_seconds)
        out["rtt_s"], out["write_rtt_s"], out["raw_rps"] = raw
        out["raw_multis"] = await raw_multis(client_coord, args.raw_seconds / 2)

        async def add_workers(count: int) -> None:
            for _ in range(count):
                sched = make_scheduler(await connect(), args.strategy)
                await stack.enter_async_context(sched.worker(capacity=args.capacity))

        await add_workers(args.workers)
        with anyio.fail_after(args.timeout):
            await run_jobs(client, min(200, args.jobs), args.concurrency)  # warm up, elect
            before = counter.requests
            elapsed = await run_jobs(client, args.jobs, args.concurrency)
            out["jobs_per_s"] = args.jobs / elapsed
            out["requests_per_job"] = (counter.requests - before) / args.jobs

            latencies: list[float] = []
            for n in range(args.latency_jobs):
                t0 = time.perf_counter()
                job_id = await client.submit("echo", {"n": n})
                await client.result(job_id)
                latencies.append(time.perf_counter() - t0)
            out["p50_s"] = percentile(latencies, 0.50)
            out["p99_s"] = percentile(latencies, 0.99)
            steady = await steady_latencies(client, args.rate, round(args.rate * 3))
            out["steady_p50_s"] = percentile(steady, 0.50)
            out["steady_p99_s"] = percentile(steady, 0.99)

        await add_workers(args.more_workers - args.workers)  # outside fail_after: the stack exits
        with anyio.fail_after(args.timeout):
            more = max(50, args.jobs // 4)
            before = counter.requests
            await run_jobs(client, more, args.concurrency)
            out["requests_per_job_more"] = (counter.requests - before) / more
    return out


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--latency-jobs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--more-workers", type=int, default=12, help="requests/job again with")
    parser.add_argument("--rate", type=float, default=100.0, help="jobs/s of the steady latency")
    parser.add_argument("--capacity", type=int, default=64)
    parser.add_argument("--strategy", default="least-loaded")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    parser.add_argument("--raw-seconds", type=float, default=2.0)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--no-failover", action="store_true", help="skip the assigner-death gap")
    args = parser.parse_args(argv)
    options = {"use_uvloop": args.loop == "uvloop"}

    with ZooKeeperServer() as server:
        run: Callable[[], Awaitable[dict[str, float]]] = lambda: bench(  # noqa: E731
            server.connect_string, args
        )
        r = anyio.run(run, backend="asyncio", backend_options=options)
        if not args.no_failover:
            gap = lambda: failover_gap(server)  # noqa: E731
            r.update(anyio.run(gap, backend="asyncio", backend_options=options))

    w = args.workers
    # One job's critical path: submit (write), assigner read + multi (write), worker read +
    # result (write), client read; the watch notifications ride on those replies.
    path = 3 * r["write_rtt_s"] + 3 * r["rtt_s"]
    print(
        f"scheduler: {args.jobs} jobs, {w} workers (capacity {args.capacity}), "
        f"{args.concurrency} concurrent submitters, {args.strategy}, {args.loop}"
    )
    floor = r["raw_multis"] / WRITES_PER_JOB  # jobs/s if the writes alone were the limit
    rows = [
        (
            "end to end",
            f"{r['jobs_per_s']:.0f} jobs/s",
            f"raw getData pipelined {r['raw_rps']:.0f}/s",
        ),
        ("", "", f"-> 1 job per {r['raw_rps'] / r['jobs_per_s']:.1f} raw requests' time"),
        ("raw multi", f"{r['raw_multis']:.0f} txn/s", "pipelined check+create+delete, same server"),
        (
            "",
            f"{floor:.0f} jobs/s",
            f"its floor at {WRITES_PER_JOB} writes/job: x{r['jobs_per_s'] / floor:.2f}",
        ),
        ("latency p50", f"{r['p50_s'] * 1e3:.2f} ms", f"x{r['p50_s'] / path:.2f} its request path"),
        ("latency p99", f"{r['p99_s'] * 1e3:.2f} ms", f"x{r['p99_s'] / path:.2f} its request path"),
        ("steady p50", f"{r['steady_p50_s'] * 1e3:.2f} ms", f"at {args.rate:.0f} jobs/s"),
        ("steady p99", f"{r['steady_p99_s'] * 1e3:.2f} ms", f"at {args.rate:.0f} jobs/s"),
        ("raw getData", f"{r['rtt_s'] * 1e3:.3f} ms", "median round trip, same server"),
        ("raw setData", f"{r['write_rtt_s'] * 1e3:.3f} ms", "median round trip, same server"),
        ("request path", f"{path * 1e3:.2f} ms", "3 writes + 3 reads in sequence (raw)"),
        ("requests/job", f"{r['requests_per_job']:.2f}", f"{w} workers"),
        (
            "requests/job",
            f"{r['requests_per_job_more']:.2f}",
            f"{args.more_workers} workers: x{r['requests_per_job_more'] / r['requests_per_job']:.2f}",
        ),
    ]
    if "gap_wait_s" in r:
        rows += [
            ("assigner death", f"{r['gap_wait_s']:.2f} s", "longest wait of a job submitted after"),
            ("", f"{r['gap_silence_s']:.2f} s", "longest time without a result (session 10 s)"),
        ]
    print(f"{'metric':<16}{'value':>14}  ratio / reference")
    for name, value, note in rows:
        print(f"{name:<16}{value:>14}  {note}")
    return r


if __name__ == "__main__":
    main()
