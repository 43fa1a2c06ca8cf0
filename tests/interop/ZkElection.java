// One ZooKeeper LeaderElectionSupport participant (zookeeper-recipes-election),
// driven over stdin/stdout by tests/test_interop_latch.py, like CuratorLatch.
// The recipe has no participant list of its own: `participants` reads the
// offers (n_<seq>, data = host name) in the recipe's own order.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.StringJoiner;
import java.util.concurrent.CountDownLatch;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.recipes.leader.LeaderElectionSupport;

public final class ZkElection {
    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static LeaderElectionSupport start(ZooKeeper zk, String path, String id) {
        LeaderElectionSupport election = new LeaderElectionSupport();
        election.setZooKeeper(zk);
        election.setRootNodeName(path);
        election.setHostName(id);
        election.addListener(event -> {
            if (event == LeaderElectionSupport.EventType.ELECTED_COMPLETE) {
                say("LEADER " + System.nanoTime());
            } else if (event == LeaderElectionSupport.EventType.FAILED) {
                say("FAILED " + System.nanoTime());
            }
        });
        election.start();
        return election;
    }

    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String path = args[1];
        String id = args[2];
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(connect, 10000, event -> {
            if (event.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        });
        connected.await();
        LeaderElectionSupport election = start(zk, path, id);
        say("STARTED");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        String line;
        while ((line = in.readLine()) != null) {
            switch (line.trim()) {
                case "participants": {
                    List<String> names = new ArrayList<>(zk.getChildren(path, false));
                    names.sort((a, b) -> Integer.compare(
                            Integer.parseInt(a.substring(2)), Integer.parseInt(b.substring(2))));
                    StringJoiner out = new StringJoiner(",");
                    boolean first = true;
                    for (String name : names) {
                        byte[] data = zk.getData(path + "/" + name, false, null);
                        out.add(new String(data, StandardCharsets.UTF_8) + "=" + first);
                        first = false;
                    }
                    say("PARTICIPANTS " + out);
                    break;
                }
                case "leader":
                    say("LEADER_IS " + election.getLeaderHostName());
                    break;
                case "release":
                    say("RELEASED " + System.nanoTime());
                    election.stop();
                    say("CLOSED");
                    break;
                case "join":
                    election = start(zk, path, id);
                    say("STARTED");
                    break;
                case "quit":
                    election.stop();
                    zk.close();
                    say("BYE");
                    return;
                default:
                    say("ERROR unknown command " + line);
            }
        }
    }
}
