"""Counters and registration churn: aiocoord against Curator and kazoo, in the same run.

One standalone ZooKeeper (forceSync on unless ``--no-fsync``).  Measured:

- **Counter**: `contenders` (8) clients, each its own session, increment one
  counter for ``--seconds`` after a warm-up; increments per second in all,
  and the compare-and-set attempts lost per increment.  aiocoord's
  `atomic_long` and `shared_count`, Curator's ``DistributedAtomicLong`` and
  ``SharedCount`` (one JVM, a thread and client per contender), kazoo's
  ``Counter`` (a thread per contender).
- **Registration churn**: ``--instances`` (1,000) instances register from 10
  sessions while one watcher waits until its view lists them all; the time
  to converge, and server requests per registration (the server's
  ``zk_packets_received`` delta, all sessions, pings included).  aiocoord's
  `service_discovery` (watcher: another discovery's `instances()`) against
  kazoo's ``Party`` (watcher: a ``ChildrenWatch`` on the party).  The
  registering discoveries watch nothing (``watch=False``), as kazoo's parties.

A registration of aiocoord's is a persistent node: its create, its watch
and the watch's read, written together (one round trip), against the one
create of a ``Party.join()``, which is not kept after a lost session.
``--only churn`` (or ``counter``) runs one half; ``--rounds`` repeats the
churn (the machine's load moves the times a lot: compare the same round).

    python benchmarks/bench_values.py [--seconds 5] [--contenders 8] [--instances 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiocoord
from aiocoord.testing import ZooKeeperServer, four_letter_word
from benchmarks._java import classpath, curator_missing

CURATOR_COUNTER = """\
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLongArray;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.retry.RetryNTimes;

// K contenders, each its own client: increments for `seconds` after `warmup`.
// Prints "COUNTS c1 c2 ..." and "LOST l1 l2 ..." (compare-and-sets lost).
public final class CuratorCounterBench {
    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String kind = args[1];
        String path = args[2];
        int k = Integer.parseInt(args[3]);
        double warmup = Double.parseDouble(args[4]);
        double seconds = Double.parseDouble(args[5]);
        CuratorFramework[] clients = new CuratorFramework[k];
        for (int i = 0; i < k; i++) {
            clients[i] = CuratorFrameworkFactory.builder().connectString(connect)
                .sessionTimeoutMs(10000).connectionTimeoutMs(5000)
                .retryPolicy(new ExponentialBackoffRetry(100, 5)).build();
            clients[i].start();
            clients[i].blockUntilConnected();
        }
        AtomicLongArray counts = new AtomicLongArray(k);
        AtomicLongArray lost = new AtomicLongArray(k);
        long start = System.nanoTime() + (long) (warmup * 1e9);
        long stop = start + (long) (seconds * 1e9);
        CountDownLatch done = new CountDownLatch(k);
        for (int i = 0; i < k; i++) {
            final int me = i;
            new Thread(() -> {
                try {
                    if (kind.equals("shared")) {
                        SharedCount count = new SharedCount(clients[me], path, 0);
                        count.start();
                        while (System.nanoTime() < stop) {
                            VersionedValue<Integer> seen = count.getVersionedValue();
                            if (count.trySetCount(seen, seen.getValue() + 1)) {
                                if (System.nanoTime() >= start) counts.incrementAndGet(me);
                            } else if (System.nanoTime() >= start) {
                                lost.incrementAndGet(me);
                            }
                        }
                        count.close();
                    } else {
                        DistributedAtomicLong counter =
                            new DistributedAtomicLong(clients[me], path, new RetryNTimes(1000, 0));
                        while (System.nanoTime() < stop) {
                            AtomicValue<Long> result = counter.increment();
                            if (System.nanoTime() >= start) {
                                lost.addAndGet(me, result.getStats().getOptimisticTries() - 1);
                                if (result.succeeded()) counts.incrementAndGet(me);
                            }
                        }
                    }
                } catch (Exception e) {
                    e.printStackTrace();
                } finally {
                    done.countDown();
                }
            }).start();
        }
        done.await();
        StringBuilder c = new StringBuilder("COUNTS");
        StringBuilder l = new StringBuilder("LOST");
        for (int i = 0; i < k; i++) {
            c.append(' ').append(counts.get(i));
            l.append(' ').append(lost.get(i));
        }
        System.out.println(c);
        System.out.println(l);
        for (CuratorFramework client : clients) client.close();
    }
}
"""

Result = tuple[float, float]  # increments per second, lost compare-and-sets per increment


async def bench_aiocoord(hosts: str, kind: str, k: int, seconds: float, warmup: float) -> Result:
    path = f"/bench-values/aiocoord-{kind}-{uuid.uuid4().hex[:8]}"
    coords = [aiocoord.connect(hosts) for _ in range(k)]
    for coord in coords:
        await coord.start()
    counts = [0] * k
    lost = [0] * k
    try:
        loop = asyncio.get_running_loop()
        start = loop.time() + warmup
        stop = start + seconds

        async def contender(i: int) -> None:
            if kind == "shared":
                async with aiocoord.shared_count(coords[i], path) as count:
                    while loop.time() < stop:
                        before = count.retries
                        await count.add(1)
                        if loop.time() >= start:
                            counts[i] += 1
                            lost[i] += count.retries - before
            else:
                counter = aiocoord.atomic_long(coords[i], path)
                while loop.time() < stop:
                    before = counter.retries
                    await counter.increment()
                    if loop.time() >= start:
                        counts[i] += 1
                        lost[i] += counter.retries - before

        await asyncio.gather(*(contender(i) for i in range(k)))
    finally:
        for coord in coords:
            await coord.aclose()
    total = sum(counts)
    return total / seconds, sum(lost) / max(total, 1)


def bench_curator(hosts: str, kind: str, k: int, seconds: float, warmup: float) -> Result:
    path = f"/bench-values/curator-{kind}-{uuid.uuid4().hex[:8]}"
    done = subprocess.run(
        [
            "java",
            "-Xmx256m",
            "-cp",
            classpath("CuratorCounterBench", CURATOR_COUNTER),
            "CuratorCounterBench",
            hosts,
            kind,
            path,
            str(k),
            str(warmup),
            str(seconds),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=warmup + seconds + 120,
    )
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    counts = [int(c) for c in lines["COUNTS"].split()]
    lost = [int(c) for c in lines["LOST"].split()]
    return sum(counts) / seconds, sum(lost) / max(sum(counts), 1)


def bench_kazoo(hosts: str, k: int, seconds: float, warmup: float) -> Result:
    from kazoo.client import KazooClient
    from kazoo.recipe.counter import Counter
    from kazoo.retry import ForceRetryError

    path = f"/bench-values/kazoo-{uuid.uuid4().hex[:8]}"
    clients = [KazooClient(hosts=hosts) for _ in range(k)]
    for client in clients:
        client.start()
    counts = [0] * k
    start = time.monotonic() + warmup
    stop = start + seconds

    lost = [0] * k

    class CountedCounter(Counter):  # type: ignore[misc]
        """kazoo's `Counter`, counting its compare-and-sets lost (its retry loop does not)."""

        def _inner_change(self, value: int) -> None:
            try:
                super()._inner_change(value)
            except ForceRetryError:
                lost[self.me] += time.monotonic() >= start
                raise

    def contender(i: int) -> None:
        counter: Any = CountedCounter(clients[i], path)
        counter.me = i
        while time.monotonic() < stop:
            counter += 1
            counts[i] += time.monotonic() >= start

    threads = [threading.Thread(target=contender, args=(i,)) for i in range(k)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for client in clients:
        client.stop()
        client.close()
    return sum(counts) / seconds, sum(lost) / max(sum(counts), 1)


def packets(server: ZooKeeperServer) -> int:
    found = re.search(r"zk_packets_received\s+(\d+)", four_letter_word(*server.address, "mntr"))
    return int(found.group(1)) if found else 0


async def churn_aiocoord(server: ZooKeeperServer, n: int) -> Result:
    hosts = server.connect_string
    base = f"/bench-churn/aiocoord-{uuid.uuid4().hex[:8]}"
    coords = [aiocoord.connect(hosts) for _ in range(11)]
    for coord in coords:
        await coord.start()
    try:
        async with aiocoord.service_discovery(coords[0], base) as watcher:
            changes = watcher.changes()
            sds = [aiocoord.service_discovery(c, base, watch=False) for c in coords[1:]]
            for sd in sds:
                await sd.start()
            before = packets(server)
            began = time.monotonic()

            async def register(sd: aiocoord.ServiceDiscovery, first: int, count: int) -> None:
                for i in range(first, first + count):
                    await sd.register(aiocoord.ServiceInstance(name="api", id=f"i-{i}", port=i))

            per = n // len(sds)
            await asyncio.gather(*(register(sd, j * per, per) for j, sd in enumerate(sds)))
            while len(await watcher.instances("api")) < per * len(sds):
                await anext(changes)
            took = time.monotonic() - began
            requests = (packets(server) - before) / (per * len(sds))
            for sd in sds:
                await sd.aclose()
    finally:
        for coord in coords:
            await coord.aclose()
    return took, requests


def churn_kazoo(server: ZooKeeperServer, n: int) -> Result:
    from kazoo.client import KazooClient

    hosts = server.connect_string
    path = f"/bench-churn/kazoo-{uuid.uuid4().hex[:8]}"
    clients = [KazooClient(hosts=hosts) for _ in range(11)]
    for client in clients:
        client.start()
    clients[0].ensure_path(path)
    seen = threading.Event()
    per = n // 10

    def children(names: list[str]) -> None:
        if len(names) >= per * 10:
            seen.set()

    clients[0].ChildrenWatch(path, children)
    before = packets(server)
    began = time.monotonic()

    def join(client: KazooClient, first: int) -> None:
        for i in range(first, first + per):
            client.Party(path, identifier=f"i-{i}").join()

    threads = [threading.Thread(target=join, args=(c, j * per)) for j, c in enumerate(clients[1:])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seen.wait(120)
    took = time.monotonic() - began
    requests = (packets(server) - before) / (per * 10)
    for client in clients:
        client.stop()
        client.close()
    return took, requests


def counter(hosts: str, k: int, secs: float, warm: float) -> None:
    print(f"\ncounter: {k} contenders, {secs:g} s each")
    rows: dict[str, Result] = {}
    rows["aiocoord atomic_long"] = asyncio.run(bench_aiocoord(hosts, "long", k, secs, warm))
    rows["aiocoord shared_count"] = asyncio.run(bench_aiocoord(hosts, "shared", k, secs, warm))
    why = curator_missing()
    if why is None:
        rows["Curator DistributedAtomicLong"] = bench_curator(hosts, "long", k, secs, warm)
        rows["Curator SharedCount"] = bench_curator(hosts, "shared", k, secs, warm)
    else:
        print(f"Curator skipped: {why}")
    rows["kazoo Counter"] = bench_kazoo(hosts, k, secs, warm)
    for name, (rate, lost) in rows.items():
        print(f"  {name:32} {rate:8.0f} increments/s   {lost:5.2f} lost CAS per increment")
    ours = rows["aiocoord atomic_long"][0]
    for peer in ("Curator DistributedAtomicLong", "Curator SharedCount", "kazoo Counter"):
        if peer in rows:
            print(f"  atomic_long / {peer}: {ours / rows[peer][0]:.2f}x")
    ours = rows["aiocoord shared_count"][0]
    for peer in ("Curator SharedCount", "kazoo Counter"):
        if peer in rows:
            print(f"  shared_count / {peer}: {ours / rows[peer][0]:.2f}x")


def churn(server: ZooKeeperServer, n: int) -> None:
    print(f"\nregistration churn: {n} instances from 10 sessions, one watcher converging")
    rows: dict[str, Result] = {}
    cpu: dict[str, float] = {}

    def ours() -> Result:
        return asyncio.run(churn_aiocoord(server, n))

    def theirs() -> Result:
        return churn_kazoo(server, n)

    runs: tuple[tuple[str, Callable[[], Result]], ...] = (
        ("aiocoord service_discovery", ours),
        ("kazoo Party + ChildrenWatch", theirs),
    )
    for name, run in runs:
        began = time.process_time()
        rows[name] = run()
        cpu[name] = time.process_time() - began  # this process's: the client's (set-up included)
    per = n // 10 * 10
    for name, (took, req) in rows.items():
        print(
            f"  {name:28} {took * 1000:8.0f} ms  {took / per * 1000:6.2f} ms/registration"
            f"  {req:5.2f} requests/registration  {cpu[name] / per * 1000:5.2f} ms CPU/registration"
        )
    mine, peer = rows["aiocoord service_discovery"][0], rows["kazoo Party + ChildrenWatch"][0]
    print(f"  time ratio aiocoord / kazoo: {mine / peer:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--contenders", type=int, default=8)
    parser.add_argument("--instances", type=int, default=1000)
    parser.add_argument("--no-fsync", action="store_true")
    parser.add_argument("--only", choices=("counter", "churn"))
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    config = {"forceSync": "no"} if args.no_fsync else {}
    with ZooKeeperServer(extra_config=config) as server:
        print(f"one standalone ZooKeeper, forceSync={'no' if args.no_fsync else 'yes'}")
        if args.only != "churn":
            counter(server.connect_string, args.contenders, args.seconds, args.warmup)
        if args.only != "counter":
            for _ in range(args.rounds):
                churn(server, args.instances)


if __name__ == "__main__":
    main()
