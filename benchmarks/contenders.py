"""What the lock and mutex benchmarks share: the race, aiozk's and kazoo's locks, fairness and costs.

K contenders, each with its own ZooKeeper session, loop acquire -> release on
one path for a fixed time; each run returns each contender's count.  `Costs`
counts, in aiocoord's own clients, what the acquisitions cost the server:
requests, watch notifications (and how many reached a live watch), and
conditional writes that lost (a ``setData`` answered with a bad version).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import anyio

import aiocoord
from aiocoord.zk._wire import OpCode

__all__ = (
    "Costs",
    "Counts",
    "Step",
    "bench_aiozk",
    "bench_kazoo",
    "instrument",
    "jain",
    "race",
    "race_sessions",
)

Counts = list[int]
Step = Callable[[], Awaitable[None]]  # one acquire -> release


def jain(counts: Counts) -> float:
    """Jain's fairness index of `counts`: 1.0 perfectly even, 1/K one contender took all."""
    total = sum(counts)
    squares = sum(c * c for c in counts)
    return total * total / (len(counts) * squares) if squares else 0.0


async def race(loops: list[Step], seconds: float) -> Counts:
    """Run each loop body as fast as it goes for `seconds`; how many times each ran."""
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


@dataclass(slots=True)
class Costs:
    """What K contenders cost the server, counted in their clients."""

    contenders: int
    acquisitions: int = 0
    requests: int = 0
    notifications: int = 0  # watch notifications received
    woken: int = 0  # of them, those that reached a live watch
    failed_cas: int = 0  # conditional setData answered with a bad version (or no node)

    def per(self, value: int) -> float:
        return value / self.acquisitions if self.acquisitions else 0.0


def instrument(coord: aiocoord.Coordinator, costs: Costs) -> None:
    """Count the requests `coord` sends, the notifications it receives and its lost CAS writes.

    Requests are counted where every one is queued on the connection (pings
    left out), so those sent without awaiting (a removeWatches, a cache's
    re-read) count too; a connection made after this call is not counted.
    """
    session: Any = coord.client._session
    conn: Any = session.connection
    if conn is not None:
        queue = conn.queue

        def counted_queue(
            packet: bytes, xid: int, opcode: OpCode, *args: Any, **kwargs: Any
        ) -> Any:
            costs.requests += opcode is not OpCode.PING
            return queue(packet, xid, opcode, *args, **kwargs)

        conn.queue = counted_queue
    client: Any = coord.client
    set_and_get = client.set_and_get

    async def counted_set_and_get(*args: Any, **kwargs: Any) -> Any:
        result = await set_and_get(*args, **kwargs)
        costs.failed_cas += result[0] is None
        return result

    client.set_and_get = counted_set_and_get
    set_data = client.set

    async def counted_set(*args: Any, **kwargs: Any) -> Any:
        try:
            return await set_data(*args, **kwargs)
        except (aiocoord.BadVersionError, aiocoord.NoNodeError):
            costs.failed_cas += 1
            raise

    client.set = counted_set
    watches = session.watches
    dispatch = watches.dispatch

    def counted_dispatch(type_: int, server_path: str, client_path: str) -> None:
        costs.notifications += 1
        if watches.watched(server_path):
            costs.woken += 1
        dispatch(type_, server_path, client_path)

    watches.dispatch = counted_dispatch


def race_sessions(
    hosts: str,
    k: int,
    seconds: float,
    uvloop: bool,
    steps: Callable[[list[aiocoord.Coordinator]], Awaitable[list[Step]]],
    costs: Costs | None = None,
) -> Counts:
    """aiocoord's side: K coordinators, each looping its step from `steps`, counted into `costs`."""

    async def main() -> Counts:
        async with AsyncExitStack() as stack:
            coords = [
                await stack.enter_async_context(aiocoord.connect(hosts, session_timeout=10))
                for _ in range(k)
            ]
            loops = await steps(coords)
            if costs is not None:
                for coord in coords:
                    instrument(coord, costs)
            counts = await race(loops, seconds)
            if costs is not None:
                costs.acquisitions += sum(counts)
            return counts

    counts: Counts = anyio.run(main, backend="asyncio", backend_options={"use_uvloop": uvloop})
    return counts


def bench_aiozk(hosts: str, k: int, seconds: float, uvloop: bool, root: str = "/bench") -> Counts:
    """aiozk's ``Lock`` recipe (the installed aiozk), on a fresh path under `root`."""
    import aiozk

    path = f"{root}/aiozk-{uuid.uuid4().hex[:8]}"

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

            return await race([step_for(lock) for lock in locks], seconds)
        finally:
            for zk in clients:
                await zk.close()

    counts: Counts = anyio.run(main, backend="asyncio", backend_options={"use_uvloop": uvloop})
    return counts


def bench_kazoo(hosts: str, k: int, seconds: float, root: str = "/bench") -> Counts:
    """kazoo's ``Lock``, one thread per contender, on a fresh path under `root`."""
    from kazoo.client import KazooClient

    path = f"{root}/kazoo-{uuid.uuid4().hex[:8]}"
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
