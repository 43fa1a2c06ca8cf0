"""The leader latch benchmark's peers: aiozk's ``LeaderElection`` and kazoo's ``Election``.

The same three measurements as `latch_runs` (next in line, rotation, join at
scale), each in the child process `latch` starts for it.  aiozk runs on the
asyncio loop or on uvloop; kazoo with one thread per participant.  Curator's
run is in `latch_curator`.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

from .latch_runs import SETTLE, Result, join_result, packets, rss_mb, run_async

__all__ = (
    "aiozk_first",
    "aiozk_handoff",
    "aiozk_join",
    "kazoo_first",
    "kazoo_handoff",
    "kazoo_join",
)

# --- aiozk -----------------------------------------------------------------------------------


def aiozk_handoff(hosts: str, n: int, rounds: int, uvloop: bool = False) -> Result:
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

    result: Result = run_async(main, uvloop)
    return result


def aiozk_first(hosts: str, n: int, rounds: int, uvloop: bool = False) -> Result:
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

    result: Result = run_async(main, uvloop)
    return result


def aiozk_join(hosts: str, m: int, handoffs: int, uvloop: bool = False) -> Result:
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
            handing = time.perf_counter()
            for _ in range(handoffs):
                await elections[leader].resign()
                leader = await elected.get()
            handed = (time.perf_counter() - handing) / handoffs
            after = packets(hosts)
            for election in elections:
                if election.watch_loop_task is not None:
                    election.watch_loop_task.cancel()
        finally:
            await zk.close()
        return {
            **join_result(settle, m, handoffs, (before, joined, after), base_rss),
            "handoff_s": handed,
        }

    result: Result = run_async(main, uvloop)
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
        handing = time.perf_counter()
        for _ in range(handoffs):
            with changed:
                leader, count = elected[-1], len(elected)
            release[leader].set()
            with changed:
                changed.wait_for(lambda: len(elected) > count, timeout=limit)  # noqa: B023
        handed = (time.perf_counter() - handing) / handoffs
        after = packets(hosts)
        result = join_result(settle, m, handoffs, (before, joined, after), base_rss)
        result["handoff_s"] = handed
    finally:
        for event in release:
            event.set()
        zk.stop()
        zk.close()
    return result
