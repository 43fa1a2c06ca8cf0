// One Apache Curator LeaderSelector participant (autoRequeue), driven over
// stdin/stdout by tests/zk/test_interop_selector.py.  Arguments: connect
// string, election path, participant id, term in milliseconds.  Each
// takeLeadership prints "LEADER <t>" on entry and "NOTLEADER <t>" on its way
// out (returned after the term, or interrupted), stamped with
// System.nanoTime() (CLOCK_MONOTONIC on Linux, the clock of Python's
// time.monotonic()); the selector releases its node only after that, and
// queues again.  Commands (one per line): now (prints "NOW <t>"),
// participants (the election as Curator reads it), quit (close the selector,
// a running term's NOTLEADER first, then the client).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.StringJoiner;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorSelector {
    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String path = args[1];
        String id = args[2];
        long term = Long.parseLong(args[3]);
        Semaphore idle = new Semaphore(1); // taken while a term runs
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(10000)
                .connectionTimeoutMs(5000)
                .retryPolicy(new ExponentialBackoffRetry(100, 5))
                .build();
        client.start();
        client.blockUntilConnected();
        LeaderSelector selector = new LeaderSelector(client, path, new LeaderSelectorListenerAdapter() {
            @Override
            public void takeLeadership(CuratorFramework c) throws Exception {
                idle.acquireUninterruptibly();
                try {
                    say("LEADER " + System.nanoTime());
                    try {
                        Thread.sleep(term);
                    } finally {
                        say("NOTLEADER " + System.nanoTime());
                    }
                } finally {
                    idle.release();
                }
            }
        });
        selector.setId(id);
        selector.autoRequeue();
        selector.start();
        say("STARTED");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            switch (line.trim()) {
                case "now":
                    say("NOW " + System.nanoTime());
                    break;
                case "participants": {
                    StringJoiner out = new StringJoiner(",");
                    for (Participant p : selector.getParticipants()) {
                        out.add(p.getId() + "=" + p.isLeader());
                    }
                    say("PARTICIPANTS " + out);
                    break;
                }
                case "quit":
                    selector.close(); // interrupts a term that runs
                    idle.tryAcquire(5, TimeUnit.SECONDS); // its NOTLEADER comes before BYE
                    client.close();
                    say("BYE");
                    return;
                default:
                    say("ERROR unknown command " + line);
            }
        }
    }
}
