// One Apache Curator contender on a semaphore or a read/write lock, driven over stdin/stdout
// by tests/zk/test_interop_locks.py.  Arguments: connect string, kind ("semaphore" or
// "rwlock"), path, acquisitions, max leases (semaphore) or writes in every ten (rwlock),
// participant id (written as the nodes' data where Curator lets it).  Commands (one per
// line): go (start acquiring, in a thread of its own), quit.  While holding it sleeps
// (20 ms with a lease, 5 ms with a lock), then prints "HELD <kind> <t0> <t1>":
// System.nanoTime() (CLOCK_MONOTONIC on Linux, the clock of Python's time.monotonic())
// just after acquiring and just before releasing; kind is "lease", "read" or "write".  Kind "revocable": on go, hold an
// InterProcessMutex made revocable at path, print "HELD", and release it once revoked
// ("REVOKED"); kind "revoke": on go, Revoker.attemptRevoke(path) (path is a lock node).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import java.util.concurrent.CountDownLatch;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorLocks {
    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static void semaphore(InterProcessSemaphoreV2 sem, int n) throws Exception {
        for (int i = 0; i < n; i++) {
            Lease lease = sem.acquire();
            long t0 = System.nanoTime();
            Thread.sleep(20);  // long enough for the leases to overlap
            long t1 = System.nanoTime();
            sem.returnLease(lease);
            say("HELD lease " + t0 + " " + t1);
        }
    }

    private static void rwlock(InterProcessReadWriteLock rw, int n, int writes) throws Exception {
        for (int i = 0; i < n; i++) {
            boolean write = i % 10 < writes;
            InterProcessMutex lock = write ? rw.writeLock() : rw.readLock();
            lock.acquire();
            long t0 = System.nanoTime();
            Thread.sleep(5);
            long t1 = System.nanoTime();
            lock.release();
            say("HELD " + (write ? "write " : "read ") + t0 + " " + t1);
        }
    }

    private static void revocable(CuratorFramework client, String path) throws Exception {
        InterProcessMutex mutex = new InterProcessMutex(client, path);
        CountDownLatch revoked = new CountDownLatch(1);
        mutex.makeRevocable(forLock -> revoked.countDown());
        mutex.acquire();
        say("HELD");
        revoked.await();
        say("REVOKED");
        mutex.release();  // from the thread that holds it, as Curator requires
    }

    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String kind = args[1];
        String path = args[2];
        int n = Integer.parseInt(args[3]);
        int number = Integer.parseInt(args[4]);
        byte[] id = args[5].getBytes(StandardCharsets.UTF_8);
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(10000)
                .connectionTimeoutMs(5000)
                .retryPolicy(new ExponentialBackoffRetry(100, 5))
                .defaultData(id)
                .build();
        client.start();
        client.blockUntilConnected();
        InterProcessSemaphoreV2 sem = null;
        InterProcessReadWriteLock rw = null;
        if (kind.equals("semaphore")) {
            sem = new InterProcessSemaphoreV2(client, path, number);
            sem.setNodeData(id);
        } else if (kind.equals("rwlock")) {
            rw = new InterProcessReadWriteLock(client, path, id);
        }
        final InterProcessSemaphoreV2 theSem = sem;
        final InterProcessReadWriteLock theRw = rw;
        say("READY");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            switch (line.trim()) {
                case "go":
                    new Thread(() -> {
                        try {
                            if (kind.equals("revocable")) {
                                revocable(client, path);
                            } else if (kind.equals("revoke")) {
                                Revoker.attemptRevoke(client, path);
                            } else if (theSem != null) {
                                semaphore(theSem, n);
                            } else {
                                rwlock(theRw, n, number);
                            }
                            say("DONE");
                        } catch (Exception e) {
                            say("FAILED " + e);
                        }
                    }).start();
                    say("GOING");
                    break;
                case "quit":
                    client.close();
                    say("BYE");
                    return;
                default:
                    say("ERROR unknown command " + line);
            }
        }
    }
}
