// One Apache Curator InterProcessMutex contender, driven over stdin/stdout by
// tests/test_interop_mutex.py.  Arguments: connect string, lock path, counter
// node, acquisitions.  Commands (one per line): go (start acquiring, in a
// thread of its own), nodes (the lock's participant nodes in Curator's order),
// quit.  While holding the lock it increments the counter with a versioned
// setData (a write that fails if anyone else wrote in between), then prints
// "HELD <t0> <t1>": System.nanoTime() (CLOCK_MONOTONIC on Linux, the clock of
// Python's time.monotonic()) just after acquiring and just before releasing.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.StringJoiner;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.data.Stat;

public final class CuratorMutex {
    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static void contend(CuratorFramework client, InterProcessMutex mutex, String counter, int n) {
        try {
            for (int i = 0; i < n; i++) {
                mutex.acquire();
                long t0 = System.nanoTime();
                Stat stat = new Stat();
                byte[] data = client.getData().storingStatIn(stat).forPath(counter);
                int value = Integer.parseInt(new String(data, StandardCharsets.UTF_8));
                byte[] next = String.valueOf(value + 1).getBytes(StandardCharsets.UTF_8);
                client.setData().withVersion(stat.getVersion()).forPath(counter, next);
                long t1 = System.nanoTime();
                mutex.release();
                say("HELD " + t0 + " " + t1);
            }
            say("DONE");
        } catch (Exception e) {
            say("FAILED " + e);
        }
    }

    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String path = args[1];
        String counter = args[2];
        int n = Integer.parseInt(args[3]);
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(10000)
                .connectionTimeoutMs(5000)
                .retryPolicy(new ExponentialBackoffRetry(100, 5))
                .build();
        client.start();
        client.blockUntilConnected();
        InterProcessMutex mutex = new InterProcessMutex(client, path);
        say("READY");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            switch (line.trim()) {
                case "go":
                    new Thread(() -> contend(client, mutex, counter, n)).start();
                    say("GOING");
                    break;
                case "nodes": {
                    StringJoiner out = new StringJoiner(",");
                    for (String node : mutex.getParticipantNodes()) {
                        out.add(node.substring(node.lastIndexOf('/') + 1));
                    }
                    say("NODES " + out);
                    break;
                }
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
