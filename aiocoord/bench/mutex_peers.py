"""The mutex benchmark's peers: aiozk's and kazoo's ``Lock``, and Curator's ``InterProcessMutex``.

Each runs K contenders, each with its own ZooKeeper session, looping
acquire -> release on one path for a fixed time, and returns each contender's
count.  Curator's runs in a JVM: a small Java program (below) is compiled with
``javac`` against the Debian jars in ``/usr/share/java`` (packages
``libcurator-recipes-java`` and ``zookeeper``) the first time it is needed; it
warms up for a second (the JIT) before it counts.  It is skipped, with a note,
when Java or the jars are missing.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from functools import cache
from pathlib import Path
from typing import Any

import anyio

__all__ = ("Counts", "bench_aiozk", "bench_curator", "bench_kazoo", "curator_missing", "race")

Counts = list[int]

JAVA_DIR = Path("/usr/share/java")
JARS = (
    "curator-framework.jar",
    "curator-client.jar",
    "curator-recipes.jar",
    "guava.jar",
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-nop.jar",
)

CURATOR_BENCH = """\
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLongArray;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;

// K contenders, each its own Curator client (session), acquire -> release on one path:
// `warmup` seconds uncounted, then `seconds` counted.  Prints "COUNTS c1 c2 ...".
public final class CuratorMutexBench {
    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String path = args[1];
        int k = Integer.parseInt(args[2]);
        double warmup = Double.parseDouble(args[3]);
        double seconds = Double.parseDouble(args[4]);
        CuratorFramework[] clients = new CuratorFramework[k];
        for (int i = 0; i < k; i++) {
            clients[i] = CuratorFrameworkFactory.builder().connectString(connect)
                .sessionTimeoutMs(10000).connectionTimeoutMs(5000)
                .retryPolicy(new ExponentialBackoffRetry(100, 5)).build();
            clients[i].start();
            clients[i].blockUntilConnected();
        }
        AtomicLongArray counts = new AtomicLongArray(k);
        long start = System.nanoTime() + (long) (warmup * 1e9);
        long stop = start + (long) (seconds * 1e9);
        CountDownLatch done = new CountDownLatch(k);
        for (int i = 0; i < k; i++) {
            final int me = i;
            final InterProcessMutex mutex = new InterProcessMutex(clients[i], path);
            new Thread(() -> {
                try {
                    while (true) {
                        mutex.acquire();
                        mutex.release();
                        long now = System.nanoTime();
                        if (now >= stop) break;
                        if (now >= start) counts.incrementAndGet(me);
                    }
                } catch (Exception e) {
                    e.printStackTrace();
                } finally {
                    done.countDown();
                }
            }).start();
        }
        done.await();
        StringBuilder out = new StringBuilder("COUNTS");
        for (int i = 0; i < k; i++) out.append(' ').append(counts.get(i));
        System.out.println(out);
        for (CuratorFramework c : clients) c.close();
    }
}
"""


async def race(loops: list[Callable[[], Awaitable[None]]], seconds: float) -> Counts:
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


def bench_aiozk(hosts: str, k: int, seconds: float, uvloop: bool) -> Counts:
    """aiozk's ``Lock`` recipe (the installed aiozk)."""
    import aiozk

    path = f"/bench-mutex/aiozk-{uuid.uuid4().hex[:8]}"

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


def bench_kazoo(hosts: str, k: int, seconds: float) -> Counts:
    """kazoo's ``Lock``, one thread per contender."""
    from kazoo.client import KazooClient

    path = f"/bench-mutex/kazoo-{uuid.uuid4().hex[:8]}"
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


def curator_missing() -> str | None:
    """Why Curator's mutex cannot be measured here, or None if it can."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH"
    missing = [jar for jar in JARS if not (JAVA_DIR / jar).exists()]
    if missing:
        return f"{', '.join(missing)} not in {JAVA_DIR} (libcurator-recipes-java, zookeeper)"
    return None


@cache
def _classpath() -> str:
    """Compile the Java program once per process; its class path."""
    out = Path(tempfile.mkdtemp(prefix="aiocoord-curator-bench-"))
    source = out / "CuratorMutexBench.java"
    source.write_text(CURATOR_BENCH)
    jars = ":".join(str(JAVA_DIR / jar) for jar in JARS)
    subprocess.run(
        ["javac", "-d", str(out), "-cp", jars, str(source)],
        check=True,
        capture_output=True,
        timeout=180,
    )
    return f"{jars}:{out}"


def bench_curator(hosts: str, k: int, seconds: float, warmup: float = 1.0) -> Counts:
    """Curator's ``InterProcessMutex`` in one JVM, one thread and client per contender."""
    path = f"/bench-mutex/curator-{uuid.uuid4().hex[:8]}"
    done = subprocess.run(
        [
            "java",
            "-Xmx256m",
            "-cp",
            _classpath(),
            "CuratorMutexBench",
            hosts,
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
    for line in done.stdout.splitlines():
        if line.startswith("COUNTS "):
            return [int(c) for c in line.split()[1:]]
    raise RuntimeError(f"Curator's benchmark printed no counts: {done.stderr[-2000:]}")
