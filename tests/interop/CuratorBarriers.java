// Apache Curator's DistributedBarrier and DistributedDoubleBarrier, driven over
// stdin/stdout by tests/zk/test_interop_barriers.py.  Arguments: connect string,
// barrier path, double-barrier path, members.  Commands (one per line): set,
// remove, wait (prints PASSED once the barrier is down), enter (prints ENTERED
// once the double barrier is full), leave (prints LEFT once all have left),
// quit.  Each command is acknowledged with OK <command> before it blocks.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.barriers.DistributedBarrier;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorBarriers {
    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(args[0])
                .sessionTimeoutMs(10000)
                .connectionTimeoutMs(5000)
                .retryPolicy(new ExponentialBackoffRetry(100, 5))
                .build();
        client.start();
        client.blockUntilConnected();
        DistributedBarrier barrier = new DistributedBarrier(client, args[1]);
        DistributedDoubleBarrier twice = new DistributedDoubleBarrier(client, args[2], Integer.parseInt(args[3]));
        say("READY");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        String line;
        while ((line = in.readLine()) != null) {
            String command = line.trim();
            say("OK " + command);
            switch (command) {
                case "set": barrier.setBarrier(); say("DONE set"); break;
                case "remove": barrier.removeBarrier(); say("DONE remove"); break;
                case "wait": new Thread(() -> {
                    try { barrier.waitOnBarrier(); say("PASSED"); } catch (Exception e) { say("FAILED " + e); }
                }).start(); break;
                case "enter": new Thread(() -> {
                    try { twice.enter(); say("ENTERED"); } catch (Exception e) { say("FAILED " + e); }
                }).start(); break;
                case "leave": new Thread(() -> {
                    try { twice.leave(); say("LEFT"); } catch (Exception e) { say("FAILED " + e); }
                }).start(); break;
                case "quit": client.close(); return;
                default: say("FAILED unknown command " + command);
            }
        }
    }
}
