// One Java participant of a fault campaign (tests/chaos): Apache Curator 5.4 in its own JVM.
//
// Started by the orchestrator (tests/chaos/java.py builds the command line) with one role:
//   latch     a LeaderLatch on /latch, the path of the Python latch participants;
//   selector  a LeaderSelector (autoRequeue) on /selector, beside the Python selectors;
//   mutex     an InterProcessMutex on /mutex, beside the Python mutex participants.
// It connects through its own fault proxies, writes the Python participants' records
// (tests/chaos/records.py: start, conn, term, end, stall, coord_error, error, exit,
// stale_lead) as JSON lines to --log, stamped with System.nanoTime() (CLOCK_MONOTONIC on
// Linux, the clock of Python's time.monotonic()), and writes through the fenced store while
// it holds a term; a term's token is its node's czxid.  A latch begins no term on a node of
// an earlier session, which Curator 5.4 may lead on (CURATOR-696, fixed in 5.7.0): it logs
// stale_lead instead.  It reports every new session to the store (so the
// orchestrator can expire it).  As Curator's documentation asks of every lock user, a term
// ends at SUSPENDED or LOST.  SIGTERM: every term ends, the recipe is closed, the client
// closed, and the JVM exits 0.
import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;

public final class CuratorChaos {
    static final double STALL = 0.3; // as tests/chaos/roles.py STALL
    static final double LOCK_LEASE = 2.0; // as roles.LOCK_LEASE: one hold in three is longer

    static String name;
    static int inc;
    static String role;
    static Log log;
    static Store store;
    static CuratorFramework client;
    static Random rng;
    static volatile boolean leaving = false; // SIGTERM: what fails from now on is the leave

    // --- the log ---------------------------------------------------------------------------

    static double now() {
        return System.nanoTime() / 1e9;
    }

    static final class Log {
        private final OutputStream out;

        Log(String path) throws IOException {
            out = new FileOutputStream(path, true); // O_APPEND: one write per line
        }

        synchronized void emit(String kind, Object... kv) {
            StringBuilder b = new StringBuilder(160);
            b.append("{\"k\":");
            quote(b, kind);
            b.append(",\"t\":").append(now());
            b.append(",\"p\":");
            quote(b, name);
            b.append(",\"inc\":").append(inc);
            for (int i = 0; i + 1 < kv.length; i += 2) {
                b.append(',');
                quote(b, (String) kv[i]);
                b.append(':');
                value(b, kv[i + 1]);
            }
            b.append("}\n");
            try {
                out.write(b.toString().getBytes(StandardCharsets.UTF_8));
            } catch (IOException e) {
                // the campaign's directory is gone: nothing to tell
            }
        }
    }

    static void value(StringBuilder b, Object v) {
        if (v == null) {
            b.append("null");
        } else if (v instanceof Number || v instanceof Boolean) {
            b.append(v);
        } else {
            quote(b, v.toString());
        }
    }

    static void quote(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        b.append('"');
    }

    static void problem(String where, Throwable e) {
        String cls = e.getClass().getName();
        String msg = String.valueOf(e.getMessage());
        msg = msg.substring(0, Math.min(200, msg.length()));
        boolean ours = cls.startsWith("org.apache.zookeeper.") || cls.startsWith("org.apache.curator.");
        if (ours || leaving) { // a closed client, an interrupted call: the leave, not a bug
            log.emit("coord_error", "role", where, "exc", e.getClass().getSimpleName(), "msg", msg);
        } else {
            log.emit("error", "role", where, "exc", cls + ": " + msg, "tb", Arrays.toString(e.getStackTrace()));
        }
    }

    // --- the fenced store (tests/chaos/store.py, JSON lines on loopback) --------------------

    static final class Store {
        private final String host;
        private final int port;
        private Socket socket;
        private BufferedReader in;

        Store(String address) {
            int colon = address.lastIndexOf(':');
            host = address.substring(0, colon);
            port = Integer.parseInt(address.substring(colon + 1));
        }

        synchronized String request(String line) {
            for (int attempt = 0; attempt < 2; attempt++) {
                try {
                    if (socket == null) {
                        socket = new Socket();
                        socket.connect(new InetSocketAddress(host, port), 2000);
                        socket.setSoTimeout(2000);
                        in = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
                    }
                    socket.getOutputStream().write((line + "\n").getBytes(StandardCharsets.UTF_8));
                    String reply = in.readLine();
                    if (reply != null) {
                        return reply;
                    }
                } catch (IOException e) {
                    // reconnect once
                }
                drop();
            }
            return null;
        }

        private void drop() {
            try {
                if (socket != null) {
                    socket.close();
                }
            } catch (IOException e) {
                // gone already
            }
            socket = null;
            in = null;
        }

        void write(String res, long token, String termId) {
            StringBuilder b = new StringBuilder("{\"op\":\"write\",\"p\":");
            quote(b, name);
            b.append(",\"res\":");
            quote(b, res);
            b.append(",\"tok\":").append(token).append(",\"id\":");
            quote(b, termId);
            request(b.append('}').toString());
        }

        void reportSession(long sid, byte[] password, Integer serverPort) {
            StringBuilder hex = new StringBuilder();
            for (byte x : password) {
                hex.append(String.format("%02x", x & 0xff));
            }
            StringBuilder b = new StringBuilder("{\"op\":\"session\",\"p\":");
            quote(b, name);
            b.append(",\"inc\":").append(inc).append(",\"sid\":").append(sid);
            b.append(",\"pw\":\"").append(hex).append("\",\"port\":").append(serverPort).append('}');
            request(b.toString());
        }
    }

    // --- terms -----------------------------------------------------------------------------

    // Every term begins and ends under this lock; so do the connection's state changes and the
    // fenced writes, so that no write of a term lands after its end was logged.
    static final Object LOCK = new Object();
    static boolean connected = false; // CONNECTED or RECONNECTED, and not SUSPENDED since
    static long generation = 0; // bumped by every loss of the connection
    static int terms = 0;
    static final Map<String, long[]> OPEN = new HashMap<>(); // term id -> {token}

    /** A term with `token`, if nothing was lost since `gen`: its id, else null. */
    static String begin(long token, long gen) {
        synchronized (LOCK) {
            if (!connected || gen != generation || Thread.currentThread().isInterrupted()) {
                return null;
            }
            terms++;
            String id = name + "." + inc + "." + terms;
            OPEN.put(id, new long[] {token});
            log.emit("term", "id", id, "role", role, "res", role, "tok", token);
            return id;
        }
    }

    static boolean end(String id, String why) {
        synchronized (LOCK) {
            if (id == null || OPEN.remove(id) == null) {
                return false;
            }
            log.emit("end", "id", id, "why", why);
            return true;
        }
    }

    static void endAll(String why) {
        synchronized (LOCK) {
            for (String id : OPEN.keySet().toArray(new String[0])) {
                end(id, why);
            }
        }
    }

    /** One fenced write of term `id`; false once the term is over. */
    static boolean write(String id) {
        synchronized (LOCK) {
            long[] term = OPEN.get(id);
            if (term == null) {
                return false;
            }
            store.write(role, term[0], id);
            return true;
        }
    }

    static long gen() {
        synchronized (LOCK) {
            return generation;
        }
    }

    /** Hold term `id` for `seconds` (forever if negative), writing every 30-120 ms. */
    static String hold(String id, double seconds) {
        double until = seconds < 0 ? Double.POSITIVE_INFINITY : now() + seconds;
        try {
            while (now() < until && write(id)) {
                Thread.sleep(30 + rng.nextInt(90));
            }
            return "exit";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "cancelled";
        }
    }

    static double holdTime() {
        return rng.nextDouble() < 2.0 / 3.0 ? 0.2 + rng.nextDouble() : LOCK_LEASE + rng.nextDouble() * 4.0;
    }

    static Long czxid(String path) throws Exception {
        Stat stat = path == null ? null : client.checkExists().forPath(path);
        return stat == null ? null : stat.getCzxid();
    }

    // --- the connection --------------------------------------------------------------------

    static long lastSession = 0;

    static void onState(ConnectionState state) {
        long sid = 0;
        byte[] password = null;
        Integer serverPort = null;
        try {
            ZooKeeper zk = client.getZookeeperClient().getZooKeeper();
            sid = zk.getSessionId();
            password = zk.getSessionPasswd();
            String desc = zk.toString(); // "... remoteserver:host/127.0.0.1:port lastZxid:..."
            int at = desc.indexOf("remoteserver:");
            if (at >= 0) {
                String rest = desc.substring(at).split(" ")[0];
                serverPort = Integer.valueOf(rest.substring(rest.lastIndexOf(':') + 1));
            }
        } catch (Exception e) {
            // no session yet, or no port in the description
        }
        boolean usable = state == ConnectionState.CONNECTED || state == ConnectionState.RECONNECTED;
        synchronized (LOCK) {
            if (usable) {
                connected = true;
                LOCK.notifyAll();
            } else if (state != ConnectionState.READ_ONLY) {
                connected = false;
                generation++;
                endAll("cancelled"); // SUSPENDED or LOST: no term goes on (Curator's advice)
            }
            boolean fresh = usable && sid != 0 && sid != lastSession;
            log.emit("conn", "state", state.name(), "sid", sid == 0 ? null : sid, "new", fresh);
            if (usable && sid != 0) {
                lastSession = sid;
            }
        }
        if (usable && sid != 0 && password != null) {
            store.reportSession(sid, password, serverPort);
        }
    }

    static void watchStalls() {
        double tick = 0.05;
        while (true) {
            double before = now();
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                return;
            }
            double late = now() - before - tick;
            if (late > STALL) {
                log.emit("stall", "t0", before + tick, "t1", before + tick + late);
            }
        }
    }

    // --- the roles -------------------------------------------------------------------------

    static AutoCloseable latch(String path, String id) throws Exception {
        LeaderLatch latch = new LeaderLatch(client, path, id);
        String[] current = {null};
        String[] staleNode = {null}; // the last node of an earlier session it led on
        latch.addListener(new LeaderLatchListener() {
            @Override
            public void isLeader() {
                // the writer begins the term: reading the token takes a round trip
            }

            @Override
            public void notLeader() {
                synchronized (LOCK) {
                    end(current[0], "cancelled");
                    current[0] = null;
                }
            }
        });
        // Every 30-120 ms: a leader without a term reads its node's czxid and begins one (if it
        // still leads on that node, nothing lost since); a term goes on with a fenced write.
        Thread writer = new Thread(() -> {
            while (!Thread.currentThread().isInterrupted()) {
                try {
                    String id0;
                    synchronized (LOCK) {
                        id0 = current[0];
                        if (id0 != null && !OPEN.containsKey(id0)) {
                            current[0] = id0 = null; // ended by a loss of the connection
                        }
                    }
                    if (id0 != null) {
                        write(id0);
                    } else if (latch.hasLeadership()) {
                        long gen = gen();
                        String ours = latch.getOurPath();
                        Stat stat = ours == null ? null : client.checkExists().forPath(ours);
                        long session = client.getZookeeperClient().getZooKeeper().getSessionId();
                        if (stat != null && stat.getEphemeralOwner() != session) {
                            // Curator 5.4 leads on a node of an earlier session (CURATOR-696,
                            // fixed in 5.7.0): its RECONNECTED after a new session reads the
                            // children again instead of joining anew, and that node goes when
                            // the server expires the old session, under a leader that never
                            // hears of it.  Like the fix, no term on it.
                            if (!ours.equals(staleNode[0])) {
                                staleNode[0] = ours;
                                log.emit("stale_lead", "node", ours, "owner", stat.getEphemeralOwner(), "sid", session);
                            }
                            stat = null;
                        }
                        synchronized (LOCK) {
                            if (stat != null && latch.hasLeadership() && ours.equals(latch.getOurPath())) {
                                current[0] = begin(stat.getCzxid(), gen);
                            }
                        }
                    }
                    Thread.sleep(30 + rng.nextInt(90));
                } catch (InterruptedException e) {
                    return;
                } catch (Exception e) {
                    problem("latch", e);
                    try {
                        Thread.sleep(100);
                    } catch (InterruptedException e2) {
                        return;
                    }
                }
            }
        }, "latch-writer");
        writer.setDaemon(true);
        latch.start();
        writer.start();
        return () -> {
            writer.interrupt();
            writer.join(2000);
            endAll("cancelled");
            latch.close();
        };
    }

    static AutoCloseable selector(String path, String id) {
        byte[] ourData = id.getBytes(StandardCharsets.UTF_8);
        LeaderSelector selector = new LeaderSelector(client, path, new LeaderSelectorListenerAdapter() {
            @Override
            public void takeLeadership(CuratorFramework c) throws Exception {
                long gen = gen();
                String term = null;
                try {
                    Long token = null;
                    for (String child : c.getChildren().forPath(path)) {
                        Stat stat = new Stat();
                        byte[] data = c.getData().storingStatIn(stat).forPath(path + "/" + child);
                        if (Arrays.equals(data, ourData) && (token == null || stat.getCzxid() > token)) {
                            token = stat.getCzxid(); // the newest: an old one may await deletion
                        }
                    }
                    if (token == null) {
                        log.emit("coord_error", "role", "selector", "exc", "NoNode", "msg", "our node is gone");
                        return;
                    }
                    term = begin(token, gen);
                    if (term != null) {
                        end(term, hold(term, holdTime()));
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw e;
                } catch (Exception e) {
                    problem("selector", e);
                } finally {
                    end(term, "cancelled");
                }
            }
        });
        selector.setId(id);
        selector.autoRequeue();
        selector.start();
        return () -> {
            endAll("cancelled");
            selector.close();
        };
    }

    static final class Mutex extends InterProcessMutex {
        Mutex(CuratorFramework client, String path) {
            super(client, path);
        }

        String ourPath() {
            return getLockPath();
        }
    }

    static AutoCloseable mutex(String path) {
        Mutex mutex = new Mutex(client, path);
        Thread holder = new Thread(() -> {
            while (!Thread.currentThread().isInterrupted()) {
                try {
                    Thread.sleep(50 + rng.nextInt(350));
                    long gen = gen();
                    mutex.acquire();
                    String term = null;
                    try {
                        Long token = czxid(mutex.ourPath());
                        term = token == null ? null : begin(token, gen);
                        if (term != null) {
                            end(term, hold(term, holdTime()));
                        }
                    } finally {
                        end(term, "cancelled");
                        mutex.release();
                    }
                } catch (InterruptedException e) {
                    return;
                } catch (Exception e) {
                    problem("mutex", e);
                    if (Thread.currentThread().isInterrupted()) {
                        return;
                    }
                }
            }
        }, "mutex-holder");
        holder.start();
        return () -> {
            endAll("cancelled");
            holder.interrupt();
            holder.join(5000);
        };
    }

    // --- main ------------------------------------------------------------------------------

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        name = args.get("name");
        inc = Integer.parseInt(args.getOrDefault("inc", "0"));
        role = args.get("role");
        if (!List.of("latch", "selector", "mutex").contains(role)) {
            throw new IllegalArgumentException("--role must be latch, selector or mutex, not " + role);
        }
        rng = new Random((args.getOrDefault("seed", "0") + "/" + name + "/" + inc + "/" + role).hashCode());
        log = new Log(args.get("log"));
        store = new Store(args.get("store"));
        log.emit("start", "os_pid", ProcessHandle.current().pid(), "wall", System.currentTimeMillis() / 1000.0,
                "loop", "java", "lang", "java", "mutant", null, "role", role);
        Thread stalls = new Thread(CuratorChaos::watchStalls, "stalls");
        stalls.setDaemon(true);
        stalls.start();
        int timeoutMs = (int) Math.round(Double.parseDouble(args.getOrDefault("session-timeout", "3.0")) * 1000);
        String namespace = args.getOrDefault("namespace", "/chaos").replaceFirst("^/", "");
        client = CuratorFrameworkFactory.builder()
                .connectString(args.get("hosts"))
                .namespace(namespace.isEmpty() ? null : namespace)
                .sessionTimeoutMs(timeoutMs)
                .connectionTimeoutMs(timeoutMs)
                .retryPolicy(new ExponentialBackoffRetry(100, 6, 1000))
                .build();
        client.getConnectionStateListenable().addListener((c, state) -> onState(state));
        client.start();
        synchronized (LOCK) {
            while (!connected) {
                LOCK.wait(); // the first CONNECTED, seen by onState
            }
        }
        String id = name + "." + inc;
        AutoCloseable recipe;
        switch (role) {
            case "latch":
                recipe = latch("/latch", id);
                break;
            case "selector":
                recipe = selector("/selector", id);
                break;
            default:
                recipe = mutex("/mutex");
        }
        Object done = new Object();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            leaving = true;
            try {
                recipe.close();
                client.close();
            } catch (Exception e) {
                problem(role, e);
            }
            log.emit("exit");
            Runtime.getRuntime().halt(0); // SIGTERM is a clean exit here, not 143
        }, "leave"));
        synchronized (done) {
            done.wait(); // until SIGTERM runs the hook (or SIGKILL)
        }
    }
}
