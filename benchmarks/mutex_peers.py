"""The mutex benchmark's JVM peer: Curator's ``InterProcessMutex``.

It runs K contenders, each with its own ZooKeeper session, looping
acquire -> release on one path for a fixed time, and returns each contender's
count.  Curator's runs in a JVM: a small Java program (below) is compiled with
``javac`` against the Debian jars in ``/usr/share/java`` (packages
``libcurator-recipes-java`` and ``zookeeper``) the first time it is needed; it
warms up for a second (the JIT) before it counts.  It is skipped, with a note,
when Java or the jars are missing.
"""

from __future__ import annotations

import subprocess
import uuid

from ._java import JARS, classpath, curator_missing
from .contenders import Counts

__all__ = ("JARS", "bench_curator", "curator_missing")

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


def bench_curator(hosts: str, k: int, seconds: float, warmup: float = 1.0) -> Counts:
    """Curator's ``InterProcessMutex`` in one JVM, one thread and client per contender."""
    path = f"/bench-mutex/curator-{uuid.uuid4().hex[:8]}"
    done = subprocess.run(
        [
            "java",
            "-Xmx256m",
            "-cp",
            classpath("CuratorMutexBench", CURATOR_BENCH),
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
