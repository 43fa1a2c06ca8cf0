"""Caches: initial load, write-to-event latency, server cost, resync and memory, against peers.

One standalone ZooKeeper (forceSync on unless ``--no-fsync``), trees of depth 3
with 100-byte data.  Measured, for aiocoord's `tree_cache` / `node_cache`,
kazoo's `TreeCache` / `DataWatch` and (initial load only) Curator 5.4's
``CuratorCache`` in the same run:

- initial load of the tree (entering the cache; kazoo and Curator: until
  INITIALIZED), the median of ``--passes`` loads; Curator's in one JVM
  (Debian's jars, compiled with ``javac`` at run time, see `_java`; skipped
  with a note if Java or a jar is missing) after one untimed load that lets
  the JIT compile its paths;
- write -> event latency at rest for one change (median and p99; each library's
  own writer session);
- server requests per change event, from the server's ``cons`` counters of
  the cache's connection, and the watches the cache holds (``wchc``);
- resync after a forced expiry of the largest cache: time from the expiry to
  FRESH, and requests the new session sent;
- memory per cached node: RSS growth of a child process / nodes.

    python -m benchmarks.bench_cache [--sizes 1000 10000] [--passes 3] [--changes 200]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import aiocoord
from aiocoord.testing import ZooKeeperServer, expire_session, four_letter_word

from ._java import classpath, curator_missing

DATA = b"x" * 100
REPO = Path(__file__).resolve().parents[1]
ROOT = "/bench-cache"


def shape(size: int) -> tuple[int, int, int]:
    """Fan-outs of the three levels: 10 x 10 x size/100 leaves."""
    return 10, 10, max(1, size // 100)


def paths(size: int) -> list[str]:
    a, b, c = shape(size)
    out = []
    for i in range(a):
        out.append(f"/a{i}")
        for j in range(b):
            out.append(f"/a{i}/b{j}")
            out.extend(f"/a{i}/b{j}/c{k}" for k in range(c))
    return out


async def populate(hosts: str, base: str, size: int) -> int:
    """Create the tree under `base` (multi batches); the number of nodes, the root included."""
    async with aiocoord.connect(hosts) as coord:
        client = coord.client
        await client.create(base, DATA, make_parents=True)
        todo = [base + p for p in paths(size)]
        for start in range(0, len(todo), 200):
            await client.multi([aiocoord.zk.CreateOp(p, DATA) for p in todo[start : start + 200]])
        return len(todo) + 1


async def create(hosts: str, path: str) -> None:
    async with aiocoord.connect(hosts) as coord:
        await coord.client.create(path, DATA, make_parents=True)


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def connection_counts(address: tuple[str, int], session_id: int) -> int | None:
    """Packets the server received on `session_id`'s connection (``cons``)."""
    answer = four_letter_word(*address, "cons")
    for line in answer.splitlines():
        if f"sid=0x{session_id:x}" in line:
            match = re.search(r"recved=(\d+)", line)
            return int(match.group(1)) if match else None
    return None


def session_watches(address: tuple[str, int], session_id: int) -> list[str]:
    answer = four_letter_word(*address, "wchc")
    out: list[str] = []
    mine = False
    for line in answer.splitlines():
        if line.startswith("0x"):
            mine = int(line, 16) == session_id
        elif mine and line.strip() and line.strip() != "/zookeeper/config":
            out.append(line.strip())  # the coordinator's ensemble tracker is not the cache's
    return out


# --- aiocoord ---------------------------------------------------------------------------------


async def aiocoord_load(hosts: str, base: str, passes: int) -> tuple[float, int]:
    times = []
    count = 0
    async with aiocoord.connect(hosts) as coord:
        for _ in range(passes):
            started = time.perf_counter()
            async with aiocoord.tree_cache(coord, base) as tree:
                times.append(time.perf_counter() - started)
                count = len(tree)
    return statistics.median(times), count


async def aiocoord_latency(hosts: str, path: str, changes: int) -> list[float]:
    out = []
    async with (
        aiocoord.connect(hosts) as coord,
        aiocoord.connect(hosts) as writer,
        aiocoord.node_cache(coord, path) as node,
    ):
        stream = node.changes()
        for i in range(changes):
            started = time.perf_counter()
            await writer.client.set(path, b"%d" % i)
            async for _ in stream:
                break
            out.append(time.perf_counter() - started)
    return out


async def aiocoord_cost(
    hosts: str, address: tuple[str, int], base: str, changes: int
) -> tuple[float, list[str]]:
    """Requests the cache's connection sent per change event; its watches on the server."""
    async with (
        aiocoord.connect(hosts) as coord,
        aiocoord.connect(hosts) as writer,
        aiocoord.tree_cache(coord, base) as tree,
    ):
        sid = coord.session_id
        assert sid is not None
        stream = tree.events()
        leaves = [p for p in tree.nodes() if p.count("/") == base.count("/") + 3][:changes]
        before = connection_counts(address, sid) or 0
        for i, path in enumerate(leaves):
            await writer.client.set(path, DATA[:-4] + b"%04d" % i)
            async for event in stream:
                if event.path == path:
                    break
        after = connection_counts(address, sid) or 0
        return (after - before) / max(1, len(leaves)), session_watches(address, sid)


async def aiocoord_resync(
    hosts: str, address: tuple[str, int], base: str
) -> tuple[float, int, int]:
    """Time from a forced expiry to FRESH, requests the new session sent, events published."""
    async with aiocoord.connect(hosts) as coord, aiocoord.tree_cache(coord, base) as tree:
        stream = tree.events()
        started = time.perf_counter()
        await expire_session(coord, address)
        events = 0
        async for event in stream:
            if event.type is aiocoord.CacheEventType.FRESH:
                break
            if event.type is not aiocoord.CacheEventType.STALE:
                events += 1
        elapsed = time.perf_counter() - started
        sid = coord.session_id
        assert sid is not None
        return elapsed, connection_counts(address, sid) or 0, events


# --- kazoo ------------------------------------------------------------------------------------


def kazoo_load(hosts: str, base: str, passes: int) -> float:
    from kazoo.client import KazooClient
    from kazoo.recipe.cache import TreeCache, TreeEvent

    zk = KazooClient(hosts=hosts)
    zk.start()
    times = []
    try:
        for _ in range(passes):
            done = threading.Event()
            cache = TreeCache(zk, base)

            def listen(event: Any, done: threading.Event = done) -> None:
                if event.event_type == TreeEvent.INITIALIZED:
                    done.set()

            cache.listen(listen)
            started = time.perf_counter()
            cache.start()
            if not done.wait(300):
                raise TimeoutError("kazoo TreeCache did not initialize")
            times.append(time.perf_counter() - started)
            cache.close()
    finally:
        zk.stop()
        zk.close()
    return statistics.median(times)


def kazoo_latency(hosts: str, path: str, changes: int) -> list[float]:
    from kazoo.client import KazooClient

    zk, writer = KazooClient(hosts=hosts), KazooClient(hosts=hosts)
    zk.start()
    writer.start()
    seen = threading.Event()
    out = []
    try:

        @zk.DataWatch(path)  # type: ignore[untyped-decorator]
        def watch(data: bytes | None, stat: Any) -> None:
            seen.set()

        time.sleep(0.2)
        for i in range(changes):
            seen.clear()
            started = time.perf_counter()
            writer.set(path, b"%d" % i)
            if not seen.wait(10):
                raise TimeoutError("kazoo DataWatch saw no change")
            out.append(time.perf_counter() - started)
    finally:
        for client in (zk, writer):
            client.stop()
            client.close()
    return out


# --- Curator ----------------------------------------------------------------------------------

CURATOR_CACHE_BENCH = """\
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.retry.ExponentialBackoffRetry;

// Initial load of a CuratorCache: from start() until its INITIALIZED listener runs.
// `warmup` untimed loads, then `passes` timed.  Prints "LOADS ns1 ns2 ... NODES n".
public final class CuratorCacheBench {
    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String path = args[1];
        int warmup = Integer.parseInt(args[2]);
        int passes = Integer.parseInt(args[3]);
        CuratorFramework client = CuratorFrameworkFactory.builder().connectString(connect)
            .sessionTimeoutMs(30000).connectionTimeoutMs(10000)
            .retryPolicy(new ExponentialBackoffRetry(100, 5)).build();
        client.start();
        client.blockUntilConnected();
        StringBuilder out = new StringBuilder("LOADS");
        int nodes = 0;
        for (int r = 0; r < warmup + passes; r++) {
            final CountDownLatch initialized = new CountDownLatch(1);
            CuratorCache cache = CuratorCache.build(client, path);
            cache.listenable().addListener(
                CuratorCacheListener.builder().forInitialized(initialized::countDown).build());
            long started = System.nanoTime();
            cache.start();
            if (!initialized.await(300, TimeUnit.SECONDS)) throw new IllegalStateException("no load");
            long took = System.nanoTime() - started;
            nodes = cache.size();
            cache.close();
            if (r >= warmup) out.append(' ').append(took);
        }
        System.out.println(out.append(" NODES ").append(nodes));
        client.close();
    }
}
"""


def curator_load(hosts: str, base: str, passes: int) -> tuple[float, int] | str:
    """Curator's median initial load and the nodes it held, or why it was not measured."""
    why = curator_missing()
    if why is not None:
        return f"not measured: {why}"
    cmd = ["java", "-Xmx1g", "-cp", classpath("CuratorCacheBench", CURATOR_CACHE_BENCH)]
    cmd += ["CuratorCacheBench", hosts, base, "1", str(passes)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        return "timed out"
    for line in done.stdout.splitlines():
        if line.startswith("LOADS"):
            words = line.split()
            loads = [int(ns) / 1e9 for ns in words[1 : words.index("NODES")]]
            return statistics.median(loads), int(words[-1])
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else "Curator's benchmark printed no loads"


# --- memory, in child processes ---------------------------------------------------------------


def child_memory(impl: str, hosts: str, base: str) -> None:
    gc.collect()
    if impl == "aiocoord":

        async def hold() -> tuple[int, int]:
            async with aiocoord.connect(hosts) as coord:
                gc.collect()
                before = rss()
                async with aiocoord.tree_cache(coord, base) as tree:
                    gc.collect()
                    return rss() - before, len(tree)

        grown, nodes = asyncio.run(hold())
    else:
        from kazoo.client import KazooClient
        from kazoo.recipe.cache import TreeCache, TreeEvent

        zk = KazooClient(hosts=hosts)
        zk.start()
        done = threading.Event()
        gc.collect()
        before = rss()
        cache = TreeCache(zk, base)
        cache.listen(lambda e: done.set() if e.event_type == TreeEvent.INITIALIZED else None)
        cache.start()
        done.wait(300)
        gc.collect()
        grown, nodes = rss() - before, len(paths(int(sys.argv[-1]))) + 1
        cache.close()
        zk.stop()
    print(json.dumps({"grown": grown, "nodes": nodes}))


def memory(impl: str, hosts: str, base: str, size: int) -> float:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_cache", "--child", impl, hosts, base, str(size)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return float(result["grown"]) / float(result["nodes"])


# --- the run ----------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_memory(sys.argv[2], sys.argv[3], sys.argv[4])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--no-fsync", action="store_true")
    args = parser.parse_args()
    config = {"forceSync": "no"} if args.no_fsync else {}
    with ZooKeeperServer(extra_config=config) as server:
        hosts, address = server.connect_string, server.address
        print(f"one standalone ZooKeeper, forceSync={'no' if args.no_fsync else 'yes'}")
        bases = {}
        for size in args.sizes:
            base = f"{ROOT}/n{size}"
            nodes = asyncio.run(populate(hosts, base, size))
            bases[size] = base
            ours, count = asyncio.run(aiocoord_load(hosts, base, args.passes))
            assert count == nodes, (count, nodes)
            theirs = kazoo_load(hosts, base, args.passes)
            curator = curator_load(hosts, base, args.passes)
            if isinstance(curator, str):
                java = f"Curator CuratorCache {curator}"
            else:
                assert curator[1] == nodes, (curator, nodes)
                java = (
                    f"Curator CuratorCache {curator[0] * 1000:.0f} ms, "
                    f"ratio {ours / curator[0]:.2f}"
                )
            print(
                f"initial load, {nodes} nodes: aiocoord {ours * 1000:.0f} ms, "
                f"kazoo TreeCache {theirs * 1000:.0f} ms, ratio {ours / theirs:.2f}; {java}"
            )
        flag = f"{ROOT}/flag"
        asyncio.run(create(hosts, flag))
        ours_l = asyncio.run(aiocoord_latency(hosts, flag, args.changes))
        theirs_l = kazoo_latency(hosts, flag, args.changes)
        print(
            f"write -> event, {args.changes} changes: aiocoord median "
            f"{statistics.median(ours_l) * 1000:.2f} ms p99 {pct(ours_l, 0.99) * 1000:.2f} ms; "
            f"kazoo DataWatch median {statistics.median(theirs_l) * 1000:.2f} ms "
            f"p99 {pct(theirs_l, 0.99) * 1000:.2f} ms; median ratio "
            f"{statistics.median(ours_l) / statistics.median(theirs_l):.2f}"
        )
        small = bases[min(bases)]
        per_change, watches = asyncio.run(aiocoord_cost(hosts, address, small, args.changes))
        print(
            f"server cost: {per_change:.2f} requests per change event (pings included); "
            f"watches held by the cache's session: {len(watches)} ({', '.join(watches)})"
        )
        large = max(bases)
        took, requests, events = asyncio.run(aiocoord_resync(hosts, address, bases[large]))
        print(
            f"resync after a forced expiry, {large}-node tree: {took * 1000:.0f} ms to FRESH, "
            f"{requests} requests on the new session, {events} events (nothing changed)"
        )
        ours_m = memory("aiocoord", hosts, bases[large], large)
        theirs_m = memory("kazoo", hosts, bases[large], large)
        print(
            f"memory per cached node ({large} nodes): aiocoord {ours_m:.0f} B, "
            f"kazoo {theirs_m:.0f} B, ratio {ours_m / theirs_m:.2f}"
        )


if __name__ == "__main__":
    main()
