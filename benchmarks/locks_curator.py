"""Curator's ``InterProcessSemaphoreV2`` and ``InterProcessReadWriteLock`` as peers of `locks`.

One JVM, one thread and Curator client (session) per contender, compiled with
``javac`` against Debian's jars the first time it is needed (`_java`).
"""

from __future__ import annotations

import subprocess
import uuid

from ._java import classpath, curator_missing
from .contenders import Counts

__all__ = ("bench_curator", "curator_missing")

CURATOR_LOCKS_BENCH = """\
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLongArray;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.ExponentialBackoffRetry;

// K contenders on a semaphore (kind "semaphore", `leases` leases) or a read/write lock
// (kind "rwlock", a write on every fifth turn), `warmup` seconds uncounted, then `seconds`
// counted.  Prints "COUNTS c1 c2 ...".
public final class CuratorLocksBench {
    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String kind = args[1];
        String path = args[2];
        int k = Integer.parseInt(args[3]);
        int leases = Integer.parseInt(args[4]);
        double warmup = Double.parseDouble(args[5]);
        double seconds = Double.parseDouble(args[6]);
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
            final InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(clients[i], path, leases);
            final InterProcessReadWriteLock rw = new InterProcessReadWriteLock(clients[i], path);
            new Thread(() -> {
                try {
                    int turn = me;
                    while (true) {
                        turn++;
                        if (kind.equals("semaphore")) {
                            Lease lease = sem.acquire();
                            sem.returnLease(lease);
                        } else {
                            InterProcessMutex lock = turn % 5 == 0 ? rw.writeLock() : rw.readLock();
                            lock.acquire();
                            lock.release();
                        }
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


def bench_curator(
    hosts: str, kind: str, k: int, seconds: float, leases: int, warmup: float = 1.0
) -> Counts:
    """Curator's semaphore or read/write lock in one JVM, one thread and client per contender."""
    path = f"/bench-locks/curator-{kind}-{uuid.uuid4().hex[:8]}"
    done = subprocess.run(
        [
            "java",
            "-Xmx256m",
            "-cp",
            classpath("CuratorLocksBench", CURATOR_LOCKS_BENCH),
            "CuratorLocksBench",
            hosts,
            kind,
            path,
            str(k),
            str(leases),
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
