"""Leader latch: hand-off latency and join at scale, against aiozk's and kazoo's elections.

Every figure comes from one embedded ZooKeeper server in this same run, and each
implementation is measured in a process of its own (so peak RSS is its own):

- Hand-off: N participants, each with its own session, on one path.  The leader
  leaves; the time until the next participant observes its leadership is
  recorded over R rounds (median, p95), in two ways:
  - next in line: a fresh election each round, joined in order, so the next
    participant's last listing had only the leader ahead of it (aiocoord then
    leads on the notification alone; the peers list the children first);
  - rotation: the one that left joins again at the tail once the next leader
    is in, and the next round starts 50 ms later, so every recipe lists the
    children once per hand-off.
- Join at scale: M participants on one session join at once.  Time until settled
  (one leader, every other one watching its predecessor), requests per
  participant, then H hand-offs and the requests each cost, and peak RSS.
  Requests are the server's ``zk_packets_received`` (pings and the handshake
  included), the same yardstick for every implementation.

Before anything is timed, every implementation runs a few untimed rotation
rounds: a fresh server is slower until its JIT has compiled the paths involved,
and whichever implementation was measured first paid for that alone (its
rotation median was about a quarter higher than when measured again in the same
run).  ``--warm-up 0`` skips it.  The R rounds of each hand-off measurement
are split into interleaved passes (``--passes``, 3): every pass runs every
implementation once, so a slow spell of the shared machine weighs on all of
them alike (measured one after the other, the same code's median moved by a
fifth from one run to the next, and the ratios with it).

Peers: ``aiozk.recipes.LeaderElection`` (the installed aiozk package, on the
asyncio loop) and ``kazoo.recipe.election.Election`` (one thread per
participant).  aiocoord runs on asyncio and on uvloop.  The server runs with
``forceSync=no`` unless ``--fsync`` is given: with it, every hand-off is
dominated by the same disk flush for everyone and the clients' own cost hides.

    python benchmarks/bench_latch.py [--participants 10] [--rounds 30] [--scale 1000] [--fsync]
        [--warm-up 10] [--passes 3] [--small-scale 100] [--impl NAME ...]
        (--scale 0 --small-scale 0: no join)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio

IMPLS = ("aiocoord/asyncio", "aiocoord/uvloop", "aiozk", "kazoo")
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
                for _ in range(handoffs):
                    leader = next(i for i, latch in enumerate(latches) if latch.has_leadership)
                    changed = leader_changed
                    leaving[leader].set()
                    await changed.wait()
                after = packets(hosts)
                tg.cancel_scope.cancel()
        return join_result(settle, m, handoffs, (before, joined, after), base_rss)

    result: Result = run_async(main, uvloop)
    return result


# --- aiozk -----------------------------------------------------------------------------------


def aiozk_handoff(hosts: str, n: int, rounds: int) -> Result:
    import aiozk

    path = f"/bench-latch/aiozk-{uuid.uuid4().hex[:8]}"

    async def main() -> Result:
        clients = [aiozk.ZKClient(hosts, session_timeout=10) for _ in range(n)]
        for zk in clients:
            await zk.start()
        latencies: list[float] = []
        elected: asyncio.Queue[int] = asyncio.Queue()
        released: dict[str, float] = {}
        release = [asyncio.Event() for _ in range(n)]
        rejoin = [asyncio.Event() for _ in range(n)]

        async def participant(i: int) -> None:
            while True:
                election = clients[i].recipes.LeaderElection(path)
                await election.volunteer()
                await election.wait_for_leadership()
                now = time.perf_counter()
                if "t" in released:
                    latencies.append(now - released.pop("t"))
                elected.put_nowait(i)
                await release[i].wait()
                release[i].clear()
                released["t"] = time.perf_counter()
                await election.resign()
                await rejoin[i].wait()
                rejoin[i].clear()

        tasks = []
        try:
            for i in range(n):
                tasks.append(asyncio.ensure_future(participant(i)))
                await asyncio.sleep(0.01)  # join in order
            leader = await elected.get()
            while len(latencies) < rounds:
                release[leader].set()
                following = await elected.get()
                rejoin[leader].set()
                await asyncio.sleep(SETTLE)
                leader = following
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for zk in clients:
                await zk.close()
        return {"latencies": latencies}

    result: Result = run_async(main, False)
    return result


def aiozk_first(hosts: str, n: int, rounds: int) -> Result:
    import aiozk

    path = f"/bench-latch/aiozk-first-{uuid.uuid4().hex[:8]}"

    async def main() -> Result:
        clients = [aiozk.ZKClient(hosts, session_timeout=10) for _ in range(n)]
        for zk in clients:
            await zk.start()
        latencies: list[float] = []
        try:
            for _ in range(rounds):
                elections = [zk.recipes.LeaderElection(path) for zk in clients]
                for election in elections:  # in order
                    await election.volunteer()
                await asyncio.sleep(SETTLE)
                await elections[0].wait_for_leadership()
                second = asyncio.ensure_future(elections[1].wait_for_leadership())
                await asyncio.sleep(0)
                released = time.perf_counter()
                await elections[0].resign()
                await second
                latencies.append(time.perf_counter() - released)
                for election in elections[1:]:
                    await election.resign()
        finally:
            for zk in clients:
                await zk.close()
        return {"latencies": latencies}

    result: Result = run_async(main, False)
    return result


def aiozk_join(hosts: str, m: int, handoffs: int) -> Result:
    import aiozk
    from aiozk.recipes.election import LeaderElection

    path = f"/bench-latch/aiozk-join-{uuid.uuid4().hex[:8]}"
    waiting: set[int] = set()
    all_waiting = asyncio.Event()
    elected: asyncio.Queue[int] = asyncio.Queue()

    class Counted(LeaderElection):  # type: ignore[misc]
        """Tells when it starts to wait on its predecessor, and when it leads."""

        def __init__(self, base_path: str, index: int) -> None:
            super().__init__(base_path)
            self.index = index

        async def wait_on_sibling(self, sibling: str, timeout: float | None = None) -> None:
            waiting.add(self.index)
            if len(waiting) >= m - 1:
                all_waiting.set()
            await super().wait_on_sibling(sibling, timeout)

        async def watch_loop(self) -> None:
            await super().watch_loop()
            elected.put_nowait(self.index)

    async def main() -> Result:
        zk = aiozk.ZKClient(hosts, session_timeout=10)
        await zk.start()
        try:
            elections = [Counted(path, i) for i in range(m)]
            for election in elections:
                election.set_client(zk)
            base_rss = rss_mb()
            before = packets(hosts)
            start = time.perf_counter()
            await asyncio.gather(*(e.volunteer() for e in elections))
            leader = await elected.get()
            await all_waiting.wait()
            settle = time.perf_counter() - start
            joined = packets(hosts)
            for _ in range(handoffs):
                await elections[leader].resign()
                leader = await elected.get()
            after = packets(hosts)
            for election in elections:
                if election.watch_loop_task is not None:
                    election.watch_loop_task.cancel()
        finally:
            await zk.close()
        return join_result(settle, m, handoffs, (before, joined, after), base_rss)

    result: Result = run_async(main, False)
    return result


# --- kazoo -----------------------------------------------------------------------------------


def kazoo_handoff(hosts: str, n: int, rounds: int) -> Result:
    from kazoo.client import KazooClient

    path = f"/bench-latch/kazoo-{uuid.uuid4().hex[:8]}"
    clients = [KazooClient(hosts=hosts, timeout=10) for _ in range(n)]
    for zk in clients:
        zk.start(timeout=10)
    latencies: list[float] = []
    released: dict[str, float] = {}
    elected: list[int] = []
    changed = threading.Condition()
    release = [threading.Event() for _ in range(n)]
    rejoin = [threading.Event() for _ in range(n)]
    stop = threading.Event()

    def participant(i: int) -> None:
        while not stop.is_set():
            election = clients[i].Election(path, f"p{i}")

            def lead() -> None:
                now = time.perf_counter()
                with changed:
                    if "t" in released:
                        latencies.append(now - released.pop("t"))
                    elected.append(i)
                    changed.notify_all()
                release[i].wait()
                release[i].clear()
                released["t"] = time.perf_counter()

            election.run(lead)
            rejoin[i].wait()
            rejoin[i].clear()

    threads = [threading.Thread(target=participant, args=(i,), daemon=True) for i in range(n)]
    try:
        for t in threads:
            t.start()
            time.sleep(0.01)  # join in order
        with changed:
            changed.wait_for(lambda: elected, timeout=30)
        while len(latencies) < rounds:
            with changed:
                leader, count = elected[-1], len(elected)
            release[leader].set()
            with changed:
                if not changed.wait_for(lambda: len(elected) > count, timeout=30):  # noqa: B023
                    raise TimeoutError("kazoo hand-off did not happen")
            rejoin[leader].set()
            time.sleep(SETTLE)
    finally:
        stop.set()
        for zk in clients:
            zk.stop()
            zk.close()
    return {"latencies": latencies}


def kazoo_first(hosts: str, n: int, rounds: int) -> Result:
    from kazoo.client import KazooClient

    path = f"/bench-latch/kazoo-first-{uuid.uuid4().hex[:8]}"
    clients = [KazooClient(hosts=hosts, timeout=10) for _ in range(n)]
    for zk in clients:
        zk.start(timeout=10)
    latencies: list[float] = []
    try:
        for _ in range(rounds):
            elections = [zk.Election(path, f"p{i}") for i, zk in enumerate(clients)]
            release = [threading.Event() for _ in range(n)]
            times: dict[str, float] = {}
            second = threading.Event()

            def run(
                i: int,
                elections: Any = elections,
                release: list[threading.Event] = release,
                times: dict[str, float] = times,
                second: threading.Event = second,
            ) -> None:
                def lead() -> None:
                    if i == 1:
                        times["elected1"] = time.perf_counter()
                        second.set()
                    release[i].wait()
                    if i == 0:
                        times["released"] = time.perf_counter()

                elections[i].run(lead)

            threads = []
            for i in range(n):  # in order: each once its node exists
                threads.append(threading.Thread(target=run, args=(i,), daemon=True))
                threads[-1].start()
                while len(elections[i].contenders()) < i + 1:
                    time.sleep(0.001)
            time.sleep(SETTLE)
            release[0].set()
            if not second.wait(30):
                raise TimeoutError("kazoo hand-off did not happen")
            latencies.append(times["elected1"] - times["released"])
            for election in elections:
                election.cancel()
            for event in release:
                event.set()
            for thread in threads:
                thread.join(10)
    finally:
        for zk in clients:
            zk.stop()
            zk.close()
    return {"latencies": latencies}


def kazoo_join(hosts: str, m: int, handoffs: int, limit: float) -> Result:
    from kazoo.client import KazooClient
    from kazoo.recipe.lock import Lock

    path = f"/bench-latch/kazoo-join-{uuid.uuid4().hex[:8]}"
    zk = KazooClient(hosts=hosts, timeout=10)
    zk.start(timeout=10)
    waiting: set[int] = set()
    elected: list[int] = []
    changed = threading.Condition()
    release = [threading.Event() for _ in range(m)]

    class Counted(Lock):  # type: ignore[misc]
        """Tells when it has found its predecessor (it watches it next)."""

        index = -1

        def _get_predecessor(self, node: str) -> str | None:
            found: str | None = super()._get_predecessor(node)
            if found is not None:
                with changed:
                    waiting.add(self.index)
                    changed.notify_all()
            return found

    def participant(i: int) -> None:
        election = zk.Election(path, f"p{i:04}")
        lock = Counted(zk, path, f"p{i:04}")
        lock.index = i
        election.lock = lock

        def lead() -> None:
            with changed:
                elected.append(i)
                changed.notify_all()
            release[i].wait()

        election.run(lead)

    base_rss = rss_mb()
    before = packets(hosts)
    start = time.perf_counter()
    threads = [threading.Thread(target=participant, args=(i,), daemon=True) for i in range(m)]
    result: Result = {}
    try:
        for t in threads:
            t.start()
        with changed:
            ok = changed.wait_for(
                lambda: elected and len(waiting - {elected[-1]}) >= m - 1, timeout=limit
            )
        if not ok:
            return {"settle_s": None, "note": f"not settled within {limit:.0f} s"}
        settle = time.perf_counter() - start
        joined = packets(hosts)
        for _ in range(handoffs):
            with changed:
                leader, count = elected[-1], len(elected)
            release[leader].set()
            with changed:
                changed.wait_for(lambda: len(elected) > count, timeout=limit)  # noqa: B023
        after = packets(hosts)
        result = join_result(settle, m, handoffs, (before, joined, after), base_rss)
    finally:
        for event in release:
            event.set()
        zk.stop()
        zk.close()
    return result


# --- the parent: runs each measurement in a child process, prints the table -------------------


def child(args: argparse.Namespace) -> Result:
    impl, hosts = args.child_impl, args.hosts
    if args.child == "first":
        if impl.startswith("aiocoord"):
            return aiocoord_first(hosts, args.participants, args.rounds, impl.endswith("uvloop"))
        if impl == "aiozk":
            return aiozk_first(hosts, args.participants, args.rounds)
        return kazoo_first(hosts, args.participants, args.rounds)
    if args.child == "handoff":
        if impl.startswith("aiocoord"):
            return aiocoord_handoff(hosts, args.participants, args.rounds, impl.endswith("uvloop"))
        if impl == "aiozk":
            return aiozk_handoff(hosts, args.participants, args.rounds)
        return kazoo_handoff(hosts, args.participants, args.rounds)
    if impl.startswith("aiocoord"):
        return aiocoord_join(hosts, args.scale, args.handoffs, impl.endswith("uvloop"))
    if impl == "aiozk":
        return aiozk_join(hosts, args.scale, args.handoffs)
    return kazoo_join(hosts, args.scale, args.handoffs, args.limit)


def measure(kind: str, impl: str, hosts: str, args: argparse.Namespace, scale: int) -> Result:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        kind,
        "--child-impl",
        impl,
        "--hosts",
        hosts,
        "--participants",
        str(args.participants),
        "--rounds",
        str(args.rounds),
        "--scale",
        str(scale),
        "--handoffs",
        str(args.handoffs),
        "--limit",
        str(args.limit),
    ]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.limit + 60)
    except subprocess.TimeoutExpired:
        return {"error": "timed out"}
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
    result: Result = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure_in_passes(kind: str, impls: list[str], args: argparse.Namespace) -> dict[str, Result]:
    """Each implementation's R rounds, taken in `args.passes` interleaved passes.

    Every pass runs every implementation once (a process each), starting one
    further along the list each time, so that a slow spell of the shared
    machine (other work on its two cores) weighs on all of them alike rather
    than on whichever ran during it.
    """
    passes = max(1, min(args.passes, args.rounds))
    results: dict[str, Result] = {impl: {"latencies": []} for impl in impls}
    for p in range(passes):
        share = args.rounds // passes + (1 if p < args.rounds % passes else 0)
        part = argparse.Namespace(**{**vars(args), "rounds": share})
        for impl in impls[p % len(impls) :] + impls[: p % len(impls)]:
            res = measure(kind, impl, args.hosts, part, args.scale)
            if "error" in res:
                results[impl] = res
            elif "error" not in results[impl]:
                results[impl]["latencies"].extend(res.get("latencies", []))
    return {impl: results[impl] for impl in impls}


def _ratio(mine: float | None, theirs: float | None) -> str:
    if not mine or not theirs:
        return "    -"
    return f"{mine / theirs:5.2f}x"


def report_handoff(title: str, results: dict[str, Result]) -> list[str]:
    lines = [
        f"{title:<17} {'median ms':>9} {'p95 ms':>8} {'vs aiozk':>9} {'vs kazoo':>9}",
    ]
    medians: dict[str, float | None] = {}
    for impl, res in results.items():
        lat = sorted(res.get("latencies", []))
        medians[impl] = statistics.median(lat) * 1000 if lat else None
    for impl, res in results.items():
        lat = sorted(res.get("latencies", []))
        if not lat:
            lines.append(f"{impl:<17} {res.get('error', 'no data')}")
            continue
        p95 = lat[max(0, int(len(lat) * 0.95) - 1)] * 1000
        med = medians[impl]
        lines.append(
            f"{impl:<17} {med:9.2f} {p95:8.2f} {_ratio(med, medians.get('aiozk')):>9} "
            f"{_ratio(med, medians.get('kazoo')):>9}"
        )
    return lines


def report_join(scale: int, results: dict[str, Result]) -> list[str]:
    lines = [
        f"{f'join M={scale}':<17} {'settle s':>9} {'req/part':>8} {'req/hand-off':>12} "
        f"{'RSS MiB':>8} {'settle vs aiozk':>15} {'vs kazoo':>9}",
    ]
    settle = {impl: res.get("settle_s") for impl, res in results.items()}
    for impl, res in results.items():
        if res.get("settle_s") is None:
            lines.append(f"{impl:<17} {res.get('error') or res.get('note') or 'no data'}")
            continue
        lines.append(
            f"{impl:<17} {res['settle_s']:9.3f} {res['requests_per_participant']:8.2f} "
            f"{res['requests_per_handoff']:12.2f} {res['rss_mb']:8.1f} "
            f"{_ratio(settle[impl], settle.get('aiozk')):>15} "
            f"{_ratio(settle[impl], settle.get('kazoo')):>9}"
        )
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--participants", type=int, default=10, help="N, hand-off")
    parser.add_argument("--rounds", type=int, default=30, help="R hand-offs timed")
    parser.add_argument("--scale", type=int, default=1000, help="M, join at scale")
    parser.add_argument("--small-scale", type=int, default=100, help="a second M (0: none)")
    parser.add_argument("--handoffs", type=int, default=10, help="H hand-offs after the join")
    parser.add_argument("--limit", type=float, default=60.0, help="seconds allowed per join")
    parser.add_argument("--impl", choices=IMPLS, action="append", help="only these")
    parser.add_argument("--fsync", action="store_true", help="keep the server's forceSync")
    parser.add_argument(
        "--warm-up", type=int, default=10, help="untimed rotation rounds per implementation first"
    )
    parser.add_argument(
        "--passes", type=int, default=3, help="interleaved passes the R rounds are split into"
    )
    parser.add_argument("--hosts", default=None, help="use this server instead of starting one")
    parser.add_argument("--child", choices=("first", "handoff", "join"), help=argparse.SUPPRESS)
    parser.add_argument("--child-impl", choices=IMPLS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return
    if args.hosts is None:
        from aiocoord.testing import ZooKeeperServer

        config = {} if args.fsync else {"forceSync": "no"}
        with ZooKeeperServer(extra_config=config) as server:
            args.hosts = server.connect_string
            return main_with(args)
    main_with(args)


def main_with(args: argparse.Namespace) -> None:
    impls = args.impl or list(IMPLS)
    began = time.perf_counter()
    sync = "forceSync=yes" if args.fsync else "forceSync=no"
    print(f"one standalone ZooKeeper ({sync}); each implementation in its own process")
    print(
        f"hand-off: N={args.participants} participants, one session each, {args.rounds} rounds;"
        " median and p95 of release -> next observes leadership"
    )
    print("- next in line: a fresh election each round (joined in order), the leader leaves")
    print("- rotation: the leader leaves and joins again at the tail, round after round")
    if args.warm_up > 0:
        warm = argparse.Namespace(**{**vars(args), "rounds": args.warm_up})
        for impl in impls:
            measure("handoff", impl, args.hosts, warm, args.scale)
    first = measure_in_passes("first", impls, args)
    print("\n".join(report_handoff("next in line", first)))
    handoff = measure_in_passes("handoff", impls, args)
    print("\n".join(report_handoff("rotation", handoff)))
    scales = [s for s in (args.small_scale, args.scale) if s]
    for scale in scales:
        print()
        print(
            f"join at scale: M={scale} participants on one session, then {args.handoffs} hand-offs"
        )
        joins = {impl: measure("join", impl, args.hosts, args, scale) for impl in impls}
        print("\n".join(report_join(scale, joins)))
    print(f"\n({time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
