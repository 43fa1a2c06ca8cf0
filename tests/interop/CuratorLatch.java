// One Apache Curator LeaderLatch participant, driven over stdin/stdout by
// tests/test_interop_latch.py.  Commands (one per line): participants, leader,
// release (close the latch), join (a new latch, same id), quit.  Events are
// printed as they happen, stamped with System.nanoTime() (CLOCK_MONOTONIC on
// Linux, the clock of Python's time.monotonic()).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.StringJoiner;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorLatch {
    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static LeaderLatch start(CuratorFramework client, String path, String id) throws Exception {
        LeaderLatch latch = new LeaderLatch(client, path, id);
        latch.addListener(new LeaderLatchListener() {
            @Override
            public void isLeader() {
                say("LEADER " + System.nanoTime());
            }

            @Override
            public void notLeader() {
                say("NOTLEADER " + System.nanoTime());
            }
        });
        latch.start();
        return latch;
    }

    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String path = args[1];
        String id = args[2];
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(10000)
                .connectionTimeoutMs(5000)
                .retryPolicy(new ExponentialBackoffRetry(100, 5))
                .build();
        client.start();
        client.blockUntilConnected();
        LeaderLatch latch = start(client, path, id);
        say("STARTED");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        String line;
        while ((line = in.readLine()) != null) {
            switch (line.trim()) {
                case "participants": {
                    StringJoiner out = new StringJoiner(",");
                    for (Participant p : latch.getParticipants()) {
                        out.add(p.getId() + "=" + p.isLeader());
                    }
                    say("PARTICIPANTS " + out);
                    break;
                }
                case "leader":
                    say("LEADER_IS " + latch.getLeader().getId());
                    break;
                case "release":
                    say("RELEASED " + System.nanoTime());
                    latch.close(LeaderLatch.CloseMode.SILENT);
                    say("CLOSED");
                    break;
                case "join":
                    latch = start(client, path, id);
                    say("STARTED");
                    break;
                case "quit":
                    if (latch.getState() == LeaderLatch.State.STARTED) {
                        latch.close();
                    }
                    client.close();
                    say("BYE");
                    return;
                default:
                    say("ERROR unknown command " + line);
            }
        }
    }
}
