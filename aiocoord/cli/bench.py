"""``aiocoord bench``: a few figures of aiocoord's recipes on your own ZooKeeper.

Measures, against the servers named by ``--hosts`` (else ``AIOCOORD_HOSTS``,
else the embedded development server, started for the run if it is not
running), under a fresh node below ``--root`` that is deleted afterwards:

- getData round trips, one at a time (median and p99 latency);
- getData pipelined, 32 requests in flight on one session (throughput);
- `cas_lock` acquire+release with K contenders, each its own session;
- `leader_latch` hand-off: the leader leaves, the next in line leads (latency).

Only aiocoord's own recipes are measured.  The comparisons with other
clients (kazoo, aiozk's recipes, Curator) are in ``benchmarks/`` in the
repository, run from a checkout.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

import anyio

from ..errors import ConnectionLostError
from ..settings import Settings
from ._connect import checked_path, embedded_dir
from ._run import run_async
from .zk import UserError, local_zookeeper

if TYPE_CHECKING:
    from ..session import Coordinator

__all__ = ("run_bench",)

Row = tuple[str, str, float]  # name, unit, value


def run_bench(args: argparse.Namespace) -> int:
    """The ``bench`` command: measure, print one table; 0 once done, else a `UserError`.

    Blocks for the whole run (a few times ``--seconds``).  Interrupted (Ctrl-C),
    the measurement is cancelled and the run's node is still deleted (within
    10 s, shielded), as it is when the run ends.
    """

    seconds = args.seconds if args.seconds is not None else (1.0 if args.quick else 3.0)
    if not 0 < seconds <= 60:
        raise UserError("--seconds must be more than 0 and at most 60")
    if not 1 <= args.contenders <= 64:
        raise UserError("--contenders must be from 1 to 64")
    if not 2 <= args.participants <= 64:
        raise UserError("--participants must be from 2 to 64")
    if not args.timeout > 0:
        raise UserError("--timeout must be more than 0")
    checked_path(args.root, "--root")
    if args.hosts is not None:
        return _measure_and_print(Settings.build(args.hosts), seconds, args)
    with local_zookeeper(embedded_dir(args)) as settings:
        return _measure_and_print(settings, seconds, args)


def _measure_and_print(settings: Settings, seconds: float, args: argparse.Namespace) -> int:
    base = f"{args.root.rstrip('/')}/run-{uuid.uuid4().hex[:8]}"
    print(f"ZooKeeper at {settings.hosts}; under {base}; {seconds:g} s per measurement", flush=True)
    started = time.monotonic()

    async def run() -> list[Row]:
        try:
            return await _measure_all(settings, base, seconds, args)
        except ConnectionLostError:
            raise UserError(
                f"cannot reach ZooKeeper at {settings.hosts} within {args.timeout:g}s"
            ) from None

    rows = run_async(run, args.loop)
    print()
    head = f"{'benchmark':<40} {'unit':<6} {'aiocoord':>10}"
    print(head)
    print("-" * len(head))
    for name, unit, value in rows:
        shown = f"{value:,.0f}" if value >= 100 else f"{value:.2f}"
        print(f"{name:<40} {unit:<6} {shown:>10}")
    print(f"\n({time.monotonic() - started:.0f} s; comparisons with other clients: benchmarks/)")
    return 0


async def _measure_all(
    settings: Settings, base: str, seconds: float, args: argparse.Namespace
) -> list[Row]:
    from .. import connect

    def progress(what: str) -> None:
        print(f"  measuring {what} ...", flush=True)

    async with AsyncExitStack() as stack:
        coords = [
            await stack.enter_async_context(
                connect(settings, session_timeout=10.0, connect_timeout=args.timeout)
            )
            for _ in range(max(args.contenders, args.participants))
        ]
        try:
            progress("getData round trips")
            rows = await _session_rows(coords[0], f"{base}/data", seconds)
            progress(f"cas_lock with {args.contenders} contenders")
            rate = await _lock_rate(coords[: args.contenders], f"{base}/lock", seconds)
            rows.append((f"lock acquire+release, {args.contenders} contenders", "acq/s", rate))
            progress(f"leader hand-off with {args.participants} participants")
            hand = await _handoff_ms(coords[: args.participants], f"{base}/latch", seconds)
            rows.append((f"leader hand-off, {args.participants} participants", "ms", hand))
            return rows
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(10):
                await coords[0].client.delete_all(base)


async def _session_rows(coord: Coordinator, path: str, seconds: float) -> list[Row]:
    # Its ancestors are containers: the server removes --root once the run's node is gone.
    await coord.client.create(path, b"x" * 100, make_parents=True)

    async def get() -> None:
        await coord.client.get(path)

    latencies: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        await get()
        latencies.append(time.perf_counter() - t0)
    latencies.sort()
    done = await _count_until([get] * 32, seconds)
    return [
        ("getData round trip (median)", "us", statistics.median(latencies) * 1e6),
        ("getData round trip (p99)", "us", latencies[int(len(latencies) * 0.99) - 1] * 1e6),
        ("getData pipelined, 32 in flight", "ops/s", done / seconds),
    ]


async def _count_until(steps: list[Callable[[], Awaitable[None]]], seconds: float) -> int:
    """How many steps ran within `seconds`, each of `steps` in a loop of its own, concurrently."""
    count = 0
    stop = time.perf_counter() + seconds

    async def loop(step: Callable[[], Awaitable[None]]) -> None:
        nonlocal count
        while time.perf_counter() < stop:
            await step()
            count += 1

    async with anyio.create_task_group() as tg:
        for step in steps:
            tg.start_soon(loop, step)
    return count


async def _lock_rate(coords: list[Coordinator], path: str, seconds: float) -> float:
    from ..recipes.cas_lock import cas_lock

    def contender(i: int) -> Callable[[], Awaitable[None]]:
        async def acquire_release() -> None:
            async with cas_lock(coords[i], path, owner=f"c{i}", lease=10.0):
                pass

        return acquire_release

    return await _count_until([contender(i) for i in range(len(coords))], seconds) / seconds


async def _handoff_ms(coords: list[Coordinator], path: str, seconds: float) -> float:
    """Median ms from the leader leaving to the next one leading; it rejoins at the back."""
    from ..recipes.leader_latch import leader_latch

    latencies: list[float] = []
    # The controller swaps `elected` before each release; the next leader sets it.
    turn: dict[str, Any] = {"elected": anyio.Event(), "released": None, "leader": None}

    async def participant(i: int, joined: anyio.Event) -> None:
        while True:
            release, rejoin = anyio.Event(), anyio.Event()
            async with leader_latch(coords[i], path, participant_id=f"p{i}") as latch:
                joined.set()
                await latch.wait()
                if turn["released"] is not None:
                    latencies.append(time.perf_counter() - turn["released"])
                turn["leader"] = (release, rejoin)
                turn["elected"].set()
                await release.wait()
                turn["released"] = time.perf_counter()
            await rejoin.wait()

    end = time.perf_counter() + seconds
    with anyio.move_on_after(seconds + 60) as bound:
        async with anyio.create_task_group() as tg:
            for i in range(len(coords)):  # in order: each joins once the previous one has
                joined = anyio.Event()
                tg.start_soon(participant, i, joined)
                await joined.wait()
            await turn["elected"].wait()
            while len(latencies) < 3 or time.perf_counter() < end:
                turn["elected"] = anyio.Event()
                release, rejoin = turn["leader"]
                release.set()
                await turn["elected"].wait()
                rejoin.set()
                await anyio.sleep(0.01)  # the rejoin settles: a round times the hand-off alone
            tg.cancel_scope.cancel()
    if bound.cancelled_caught:
        raise UserError(f"no leader hand-off at {path} within {seconds + 60:g}s")
    return statistics.median(latencies) * 1000
