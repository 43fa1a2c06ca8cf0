// Apache Curator's PersistentTtlNode, driven by tests/zk/test_interop_ttl_node.py.
// Argument: connect string (chroot included).  Prints "READY <default data>" once
// connected (the client's default data: CuratorFrameworkFactory.getLocalAddress()),
// then answers one line per command read from stdin:
//   start <path> <ttl ms> <data>  -> STARTED <path> <true|false: created within 10 s>
//   inspect <path>                -> INSPECT <path> <data>|<children, comma-separated>|<touch data>
//                                    ("-" for a missing node)
//   close <path>                  -> CLOSED <path>
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.nodes.PersistentTtlNode;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.KeeperException;

public final class CuratorTtlNode {
    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(args[0])
                .sessionTimeoutMs(10000)
                .connectionTimeoutMs(5000)
                .retryPolicy(new ExponentialBackoffRetry(100, 5))
                .build();
        client.start();
        client.blockUntilConnected();
        String local = new String(CuratorFrameworkFactory.getLocalAddress(), StandardCharsets.UTF_8);
        System.out.println("READY " + local);
        System.out.flush();
        Map<String, PersistentTtlNode> nodes = new HashMap<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split(" ");
            String path = words.length > 1 ? words[1] : "";
            switch (words[0]) {
                case "start": {
                    byte[] data = words[3].getBytes(StandardCharsets.UTF_8);
                    PersistentTtlNode node = new PersistentTtlNode(client, path, Long.parseLong(words[2]), data);
                    node.start();
                    nodes.put(path, node);
                    boolean created = node.waitForInitialCreate(10, TimeUnit.SECONDS);
                    System.out.println("STARTED " + path + " " + created);
                    break;
                }
                case "inspect": {
                    String data = read(client, path);
                    String children = "-";
                    try {
                        List<String> names = client.getChildren().forPath(path);
                        children = String.join(",", names);
                    } catch (KeeperException.NoNodeException e) {
                        // stays "-"
                    }
                    String touch = read(client, path + "/" + PersistentTtlNode.DEFAULT_CHILD_NODE_NAME);
                    System.out.println("INSPECT " + path + " " + data + "|" + children + "|" + touch);
                    break;
                }
                case "close": {
                    nodes.remove(path).close();
                    System.out.println("CLOSED " + path);
                    break;
                }
                default:
                    System.out.println("UNKNOWN " + line);
            }
            System.out.flush();
        }
        for (PersistentTtlNode node : nodes.values()) {
            node.close();
        }
        client.close();
    }

    private static String read(CuratorFramework client, String path) throws Exception {
        try {
            return new String(client.getData().forPath(path), StandardCharsets.UTF_8);
        } catch (KeeperException.NoNodeException e) {
            return "-";
        }
    }
}
