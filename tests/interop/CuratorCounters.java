// Apache Curator's SharedCount and DistributedAtomicLong, driven by
// tests/zk/test_interop_values.py.  Arguments: connect string, kind ("shared"
// or "long"), path, increments.  Prints READY once connected, waits for a line
// on stdin, increments `increments` times (each retried until it wins), then
// prints "DONE <lost compare-and-sets>".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.retry.RetryNTimes;

public final class CuratorCounters {
    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String kind = args[1];
        String path = args[2];
        int n = Integer.parseInt(args[3]);
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(10000)
                .connectionTimeoutMs(5000)
                .retryPolicy(new ExponentialBackoffRetry(100, 5))
                .build();
        client.start();
        client.blockUntilConnected();
        long lost = 0;
        if (kind.equals("shared")) {
            SharedCount count = new SharedCount(client, path, 0);
            count.start();
            System.out.println("READY");
            System.out.flush();
            new BufferedReader(new InputStreamReader(System.in, "UTF-8")).readLine();
            for (int i = 0; i < n; i++) {
                while (true) {
                    VersionedValue<Integer> seen = count.getVersionedValue();
                    if (count.trySetCount(seen, seen.getValue() + 1)) {
                        break;
                    }
                    lost++;
                }
            }
            System.out.println("VALUE " + count.getCount());
            count.close();
        } else {
            DistributedAtomicLong counter = new DistributedAtomicLong(client, path, new RetryNTimes(10000, 0));
            System.out.println("READY");
            System.out.flush();
            new BufferedReader(new InputStreamReader(System.in, "UTF-8")).readLine();
            for (int i = 0; i < n; i++) {
                while (true) {
                    AtomicValue<Long> result = counter.increment();
                    if (result.succeeded()) {
                        lost += result.getStats().getOptimisticTries() - 1;
                        break;
                    }
                }
            }
            System.out.println("VALUE " + counter.get().postValue());
        }
        System.out.println("DONE " + lost);
        System.out.flush();
        client.close();
    }
}
