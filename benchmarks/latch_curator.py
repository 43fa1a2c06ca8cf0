"""The leader latch benchmark's Java peer: Apache Curator's ``LeaderLatch``, next in line.

A small Java program (below), compiled with ``javac`` against the Debian jars
(see `mutex_peers`) the first time it is needed, runs the next-in-line
hand-off the way `latch_runs.aiocoord_first` does: N latches, each with its
own client (session), started in order on one path; once the first leads and
a settle time has passed, it is closed, and the time until the second one's
``isLeader`` listener runs is recorded.  Untimed rounds first let the JIT
compile the paths involved.  Skipped, with a note, when Java or the jars are
missing (`_java.curator_missing`).
"""

from __future__ import annotations

import subprocess
import uuid

from ._java import classpath, curator_missing
from .latch_runs import SETTLE, Result

__all__ = ("CURATOR_LATCH_BENCH", "curator_first", "curator_missing")

CURATOR_LATCH_BENCH = """\
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.retry.ExponentialBackoffRetry;

// Next-in-line hand-off: N latches (a client each) joined in order; the first is
// closed, the time until the second's isLeader() runs is one sample.
// `warmup` untimed rounds, then `rounds` timed.  Prints "LATENCIES ns1 ns2 ...".
public final class CuratorLatchBench {
    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String path = args[1];
        int n = Integer.parseInt(args[2]);
        int warmup = Integer.parseInt(args[3]);
        int rounds = Integer.parseInt(args[4]);
        long settleMs = Long.parseLong(args[5]);
        CuratorFramework[] clients = new CuratorFramework[n];
        for (int i = 0; i < n; i++) {
            clients[i] = CuratorFrameworkFactory.builder().connectString(connect)
                .sessionTimeoutMs(10000).connectionTimeoutMs(5000)
                .retryPolicy(new ExponentialBackoffRetry(100, 5)).build();
            clients[i].start();
            clients[i].blockUntilConnected();
        }
        StringBuilder out = new StringBuilder("LATENCIES");
        for (int r = 0; r < warmup + rounds; r++) {
            LeaderLatch[] latches = new LeaderLatch[n];
            final AtomicLong elected = new AtomicLong();
            final CountDownLatch second = new CountDownLatch(1);
            for (int i = 0; i < n; i++) {
                latches[i] = new LeaderLatch(clients[i], path, "p" + i);
                if (i == 1) {
                    latches[i].addListener(new LeaderLatchListener() {
                        @Override
                        public void isLeader() {
                            elected.set(System.nanoTime());
                            second.countDown();
                        }

                        @Override
                        public void notLeader() {}
                    });
                }
                latches[i].start();
                while (latches[i].getOurPath() == null) Thread.sleep(1);
            }
            if (!latches[0].await(30, TimeUnit.SECONDS)) throw new IllegalStateException("no leader");
            Thread.sleep(settleMs);
            long released = System.nanoTime();
            latches[0].close(LeaderLatch.CloseMode.SILENT);
            if (!second.await(30, TimeUnit.SECONDS)) throw new IllegalStateException("no hand-off");
            if (r >= warmup) out.append(' ').append(elected.get() - released);
            for (int i = 1; i < n; i++) latches[i].close(LeaderLatch.CloseMode.SILENT);
        }
        System.out.println(out);
        for (CuratorFramework c : clients) c.close();
    }
}
"""


def curator_first(hosts: str, n: int, rounds: int, warmup: int = 20) -> Result:
    """Curator's next-in-line hand-offs in one JVM: ``{"latencies": [seconds, ...]}``."""
    why = curator_missing()
    if why is not None:
        return {"error": f"not measured: {why}"}
    path = f"/bench-latch/curator-first-{uuid.uuid4().hex[:8]}"
    cmd = [
        "java",
        "-Xmx256m",
        "-cp",
        classpath("CuratorLatchBench", CURATOR_LATCH_BENCH),
        "CuratorLatchBench",
        hosts,
        path,
    ]
    cmd += [str(n), str(warmup), str(rounds), str(int(SETTLE * 1000))]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return {"error": "timed out"}
    for line in done.stdout.splitlines():
        if line.startswith("LATENCIES"):
            return {"latencies": [int(ns) / 1e9 for ns in line.split()[1:]]}
    lines = done.stderr.strip().splitlines()
    return {"error": lines[-1] if lines else "Curator's benchmark printed no latencies"}
