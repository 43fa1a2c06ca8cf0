// One Apache Curator GroupMember, driven over stdin/stdout by
// tests/zk/test_interop_group.py.  Arguments: connect string, group path,
// member id, payload.  Commands (one per line): members (prints "MEMBERS
// id=payload,..." sorted by id), quit.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.StringJoiner;
import java.util.TreeMap;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.nodes.GroupMember;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorGroup {
    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(args[0])
                .sessionTimeoutMs(10000)
                .connectionTimeoutMs(5000)
                .retryPolicy(new ExponentialBackoffRetry(100, 5))
                .build();
        client.start();
        client.blockUntilConnected();
        GroupMember member = new GroupMember(client, args[1], args[2], args[3].getBytes(StandardCharsets.UTF_8));
        member.start();
        System.out.println("READY");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.trim().equals("members")) {
                StringJoiner out = new StringJoiner(",");
                for (Map.Entry<String, byte[]> e : new TreeMap<>(member.getCurrentMembers()).entrySet()) {
                    out.add(e.getKey() + "=" + new String(e.getValue(), StandardCharsets.UTF_8));
                }
                System.out.println("MEMBERS " + out);
                System.out.flush();
            } else if (line.trim().equals("quit")) {
                member.close();
                client.close();
                return;
            }
        }
    }
}
