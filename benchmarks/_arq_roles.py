"""The processes of `arq_shape`: a worker or a client, of arq or of aiocoord's scheduler.

Run by `arq_shape` as ``python -m benchmarks._arq_roles ROLE ...``; each prints
one JSON line per measurement on stdout, and ``ready`` once it is set up.
A worker runs until SIGTERM; a client reads its orders (``go``) from stdin.

- ``arq-worker``: an arq ``Worker`` with the trivial job ``echo``;
- ``zk-worker``: a `Scheduler` worker on its own session, with ``echo``;
- ``client``: one process, `--concurrency` submitters, for arq or aiocoord:
  ``burst`` (each submitter submits and awaits its result, `--jobs` in all),
  ``steady`` (one job every 1/`--rate` s, each awaited: submit -> result),
  ``backlog`` (submit `--jobs` without awaiting, print ``submitted``, wait
  for ``go`` on stdin, then await every result).

``--count-ops FILE`` (aiocoord roles) writes the ZooKeeper requests this
process sent, by type, to FILE at exit: where a job's requests come from.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

__all__ = ("main",)

ROOT = "/bench-arq-shape"


def emit(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


# --- arq ----------------------------------------------------------------------------------------


async def echo_arq(ctx: dict[str, Any], n: int) -> int:
    return n


def arq_worker(args: argparse.Namespace) -> None:
    from arq.connections import RedisSettings
    from arq.worker import Worker

    async def started(ctx: dict[str, Any]) -> None:
        emit(event="ready")

    worker = Worker(
        functions=[echo_arq],
        queue_name="arq:queue",
        redis_settings=RedisSettings(port=args.port, conn_timeout=30, conn_retries=10),
        max_jobs=args.capacity,
        poll_delay=args.poll,
        keep_result=600,
        log_results=False,
        on_startup=started,
    )
    worker.run()  # until SIGTERM (arq's own handler: it finishes its jobs and closes)


async def arq_client(args: argparse.Namespace) -> None:
    from arq import create_pool
    from arq.connections import RedisSettings

    pool = await create_pool(RedisSettings(port=args.port, conn_timeout=30, conn_retries=10))

    async def submit(n: int) -> Any:
        job = await pool.enqueue_job("echo_arq", n)
        assert job is not None
        return job

    async def result(job: Any, n: int) -> None:
        assert await job.result(poll_delay=args.poll) == n

    await run_client(args, submit, result)
    await pool.aclose()


# --- aiocoord ---------------------------------------------------------------------------------


def count_ops(coord: Any, path: str | None) -> Callable[[], None]:
    """Count the requests `coord` sends, by type; the returned function writes them to `path`."""
    counts: collections.Counter[str] = collections.Counter()
    if path is not None:
        sender = coord.client._sender
        fetch, fetch_packet = sender.fetch, sender.fetch_packet

        def counted_fetch(request: Any, *a: Any, **k: Any) -> Awaitable[Any]:
            counts[getattr(request.opcode, "name", type(request).__name__)] += 1
            result: Awaitable[Any] = fetch(request, *a, **k)
            return result

        def counted_packet(build: Any, opcode: Any, *a: Any, **k: Any) -> Awaitable[Any]:
            counts[getattr(opcode, "name", str(opcode))] += 1
            result: Awaitable[Any] = fetch_packet(build, opcode, *a, **k)
            return result

        sender.fetch, sender.fetch_packet = counted_fetch, counted_packet

    def write() -> None:
        if path is not None:
            with open(path, "w") as f:
                json.dump(dict(counts), f)

    return write


def zk_scheduler(coord: Any, root: str) -> Any:
    from aiocoord.scheduler import Scheduler

    sched = Scheduler(coord, root, result_ttl=600)

    @sched.job("echo")
    async def echo(n: int) -> int:
        return n

    return sched


async def zk_worker(args: argparse.Namespace) -> None:
    import aiocoord

    async with aiocoord.connect(args.hosts, session_timeout=10) as coord:
        write = count_ops(coord, args.count_ops)
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with zk_scheduler(coord, args.root).worker(capacity=args.capacity):
                emit(event="ready")
                async for _ in signals:
                    break
        write()


async def zk_client(args: argparse.Namespace) -> None:
    import aiocoord

    async with aiocoord.connect(args.hosts, session_timeout=10) as coord:
        write = count_ops(coord, args.count_ops)
        sched = zk_scheduler(coord, args.root)

        async def submit(n: int) -> str:
            job_id: str = await sched.submit("echo", {"n": n})
            return job_id

        async def result(job_id: str, n: int) -> None:
            assert await sched.result(job_id) == n

        await run_client(args, submit, result)
        write()


# --- the client's loads -----------------------------------------------------------------------


async def run_client(
    args: argparse.Namespace,
    submit: Callable[[int], Awaitable[Any]],
    result: Callable[[Any, int], Awaitable[None]],
) -> None:
    limiter = anyio.CapacityLimiter(args.concurrency)

    async def one(n: int) -> None:
        async with limiter:
            await result(await submit(n), n)

    if args.load != "backlog":  # connections made, workers elected, code paths warm
        async with anyio.create_task_group() as tg:
            for n in range(args.warmup):
                tg.start_soon(one, n)
    emit(event="ready")
    if args.load == "burst":
        await anyio.to_thread.run_sync(sys.stdin.readline)  # "go"
        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for n in range(args.jobs):
                tg.start_soon(one, n)
        emit(event="done", seconds=time.perf_counter() - started)
    elif args.load == "steady":
        await anyio.to_thread.run_sync(sys.stdin.readline)
        latencies: list[float] = []

        async def timed(n: int) -> None:
            t0 = time.perf_counter()
            await result(await submit(n), n)
            latencies.append(time.perf_counter() - t0)

        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for n in range(args.jobs):
                await anyio.sleep(max(0.0, started + n / args.rate - time.perf_counter()))
                tg.start_soon(timed, n)
        emit(
            event="done",
            seconds=time.perf_counter() - started,
            p50=percentile(latencies, 0.5),
            p99=percentile(latencies, 0.99),
        )
    else:  # backlog
        handles: list[Any] = [None] * args.jobs

        async def queue(n: int) -> None:
            async with limiter:
                handles[n] = await submit(n)

        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for n in range(args.jobs):
                tg.start_soon(queue, n)
        emit(event="submitted", seconds=time.perf_counter() - started)
        await anyio.to_thread.run_sync(sys.stdin.readline)
        started = time.perf_counter()

        async def wait(n: int) -> None:
            async with limiter:
                await result(handles[n], n)

        async with anyio.create_task_group() as tg:
            for n in range(args.jobs):
                tg.start_soon(wait, n)
        emit(event="done", seconds=time.perf_counter() - started)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="one process of benchmarks.arq_shape")
    parser.add_argument("role", choices=("arq-worker", "zk-worker", "arq-client", "zk-client"))
    parser.add_argument("--port", type=int, default=6379, help="redis")
    parser.add_argument("--hosts", default="127.0.0.1:2181", help="zookeeper")
    parser.add_argument("--capacity", type=int, default=64)
    parser.add_argument("--poll", type=float, default=0.01, help="arq's poll delays (s)")
    parser.add_argument("--load", choices=("burst", "steady", "backlog"), default="burst")
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--root", default=ROOT, help="the scheduler's root")
    parser.add_argument("--warmup", type=int, default=200, help="jobs before 'ready'")
    parser.add_argument("--count-ops", default=None)
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    args = parser.parse_args(argv)
    if args.role == "arq-worker":
        if args.loop == "uvloop":
            import uvloop

            asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        arq_worker(args)
        return
    run = {"zk-worker": zk_worker, "zk-client": zk_client, "arq-client": arq_client}[args.role]
    options = {"use_uvloop": args.loop == "uvloop"}
    anyio.run(run, args, backend="asyncio", backend_options=options)


if __name__ == "__main__":
    main()
