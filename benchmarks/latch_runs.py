"""The leader latch benchmark's runs of aiocoord, and what every implementation's run shares.

Each function is one measurement in the child process `latch` starts for it
(see `latch` for what is measured and why): ``*_first`` times next-in-line
hand-offs, ``*_handoff`` rotations, ``*_join`` joining at scale.  The peers'
runs are in `latch_peers`.
"""

from __future__ import annotations

import os
import resource
import time
import uuid
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio

__all__ = (
    "SETTLE",
    "Result",
    "aiocoord_first",
    "aiocoord_handoff",
    "aiocoord_join",
    "join_result",
    "packets",
    "peak_rss_mb",
    "rss_mb",
    "run_async",
)

SETTLE = 0.05  # seconds between a rejoin and the next release: a round times the hand-off alone
Result = dict[str, Any]


def packets(hosts: str) -> int:
    """The server's count of packets received (every request, ping and handshake)."""
    from aiocoord.testing import four_letter_word

    host, port = hosts.split(",")[0].rsplit(":", 1)
    for line in four_letter_word(host, int(port), "mntr").splitlines():
        if line.startswith("zk_packets_received"):
            return int(line.split()[1])
    raise RuntimeError("mntr gave no zk_packets_received")


def rss_mb() -> float:
    """This process's resident set size now, in MiB."""
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def join_result(
    settle: float, m: int, handoffs: int, counts: tuple[int, int, int], base_rss: float
) -> Result:
    """A join-at-scale result from the server's packet counts before, after joining, at the end."""
    before, joined, after = counts
    return {
        "settle_s": settle,
        "requests_per_participant": (joined - before) / m,
        "requests_per_handoff": (after - joined) / handoffs,
        "rss_mb": peak_rss_mb() - base_rss,
        "peak_rss_mb": peak_rss_mb(),
    }


def run_async(main: Callable[[], Any], uvloop: bool) -> Any:
    return anyio.run(main, backend="asyncio", backend_options={"use_uvloop": uvloop})


# --- aiocoord --------------------------------------------------------------------------------


def aiocoord_handoff(hosts: str, n: int, rounds: int, uvloop: bool) -> Result:
    import aiocoord
    from aiocoord.recipes.leader_latch import leader_latch

    path = f"/bench-latch/aiocoord-{uuid.uuid4().hex[:8]}"

    async def main() -> Result:
        latencies: list[float] = []
        # The controller swaps `elected` before each release; the next leader sets it.
        turn: dict[str, Any] = {"elected": anyio.Event(), "released": None, "leader": None}

        async with AsyncExitStack() as stack:
            coords = [
                await stack.enter_async_context(aiocoord.connect(hosts, session_timeout=10))
                for _ in range(n)
            ]

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

            async with anyio.create_task_group() as tg:
                for i in range(n):  # in order: each joins once the previous node exists
                    joined = anyio.Event()
                    tg.start_soon(participant, i, joined)
                    await joined.wait()
                await turn["elected"].wait()
                while len(latencies) < rounds:
                    turn["elected"] = anyio.Event()
                    release, rejoin = turn["leader"]
                    release.set()
                    await turn["elected"].wait()
                    rejoin.set()
                    await anyio.sleep(SETTLE)
                tg.cancel_scope.cancel()
        return {"latencies": latencies}

    result: Result = run_async(main, uvloop)
    return result


def aiocoord_first(hosts: str, n: int, rounds: int, uvloop: bool) -> Result:
    import aiocoord
    from aiocoord.recipes.leader_latch import leader_latch

    path = f"/bench-latch/aiocoord-first-{uuid.uuid4().hex[:8]}"

    async def main() -> Result:
        latencies: list[float] = []
        async with AsyncExitStack() as stack:
            coords = [
                await stack.enter_async_context(aiocoord.connect(hosts, session_timeout=10))
                for _ in range(n)
            ]
            for _ in range(rounds):
                release = [anyio.Event() for _ in range(n)]
                second = anyio.Event()
                t: dict[str, float] = {}

                async def participant(
                    i: int,
                    joined: anyio.Event,
                    release: list[anyio.Event] = release,
                    t: dict[str, float] = t,
                    second: anyio.Event = second,
                ) -> None:
                    async with leader_latch(coords[i], path, participant_id=f"p{i}") as latch:
                        joined.set()
                        if i < 2:
                            await latch.wait()
                            t[f"elected{i}"] = time.perf_counter()
                        if i == 1:
                            second.set()
                        await release[i].wait()
                        t.setdefault("released", time.perf_counter())

                async with anyio.create_task_group() as tg:
                    for i in range(n):
                        joined = anyio.Event()
                        tg.start_soon(participant, i, joined)
                        await joined.wait()
                    await anyio.sleep(SETTLE)
                    release[0].set()
                    await second.wait()
                    for event in release:
                        event.set()
                latencies.append(t["elected1"] - t["released"])
        return {"latencies": latencies}

    result: Result = run_async(main, uvloop)
    return result


def aiocoord_join(hosts: str, m: int, handoffs: int, uvloop: bool) -> Result:
    import aiocoord
    from aiocoord.recipes.leader_latch import ElectionState, LeaderLatch

    path = f"/bench-latch/aiocoord-join-{uuid.uuid4().hex[:8]}"

    async def main() -> Result:
        async with aiocoord.connect(hosts, session_timeout=10) as coord:
            latches = [LeaderLatch(coord, path, participant_id=f"p{i:04}") for i in range(m)]
            settled = anyio.Event()
            counted = 0
            leaving: dict[int, anyio.Event] = {i: anyio.Event() for i in range(m)}
            leader_changed = anyio.Event()

            async def participant(i: int) -> None:
                nonlocal counted, leader_changed
                latch = latches[i]
                async with latch:
                    ready = False
                    async for event in latch.changes():
                        if not ready and event.state in (
                            ElectionState.FOLLOWING,
                            ElectionState.ELECTED,
                        ):
                            ready = True
                            counted += 1
                            if counted == m:
                                settled.set()
                        if event.state is ElectionState.ELECTED:
                            leader_changed.set()
                            leader_changed = anyio.Event()
                            await leaving[i].wait()
                            break

            base_rss = rss_mb()
            before = packets(hosts)
            start = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for i in range(m):
                    tg.start_soon(participant, i)
                await settled.wait()
                settle = time.perf_counter() - start
                joined = packets(hosts)
                handing = time.perf_counter()
                for _ in range(handoffs):
                    leader = next(i for i, latch in enumerate(latches) if latch.has_leadership)
                    changed = leader_changed
                    leaving[leader].set()
                    await changed.wait()
                handed = (time.perf_counter() - handing) / handoffs
                after = packets(hosts)
                tg.cancel_scope.cancel()
        return {
            **join_result(settle, m, handoffs, (before, joined, after), base_rss),
            "handoff_s": handed,
        }

    result: Result = run_async(main, uvloop)
    return result
