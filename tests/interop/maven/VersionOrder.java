import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.TreeSet;

import org.apache.maven.artifact.versioning.ComparableVersion;

/**
 * The Java side of aiocoord's Maven version interop test.
 *
 * <p>Reads one command per line on stdin (UTF-8, fields separated by tabs) and
 * answers one line per command on stdout:
 *
 * <ul>
 *   <li>{@code cmp <a> <b>}: the sign of {@code new ComparableVersion(a).compareTo(b)};
 *   <li>{@code newest <v>...} and {@code oldest <v>...}: the versions whose workers
 *       lead tasks under aiocoord's task-leadership rule, in {@code String} order,
 *       tab-separated.
 * </ul>
 *
 * <p>The rule, as documented in {@code aiocoord/recipes/_task_choice.py}: the
 * preferred versions are those no other present version beats; when a cycle in
 * Maven's order leaves none unbeaten, the sets of equal versions with the best
 * Copeland score (wins minus losses) are kept and the one whose least text is
 * greatest ({@code newest}) or least ({@code oldest}) in {@code String.compareTo}
 * order wins.
 */
public final class VersionOrder {
    private VersionOrder() {}

    private static boolean beats(ComparableVersion a, ComparableVersion b, boolean newest) {
        int c = a.compareTo(b);
        return newest ? c > 0 : c < 0;
    }

    static List<String> preferred(List<String> versions, boolean newest) {
        List<List<String>> classes = new ArrayList<>();
        List<ComparableVersion> heads = new ArrayList<>();
        for (String text : new TreeSet<>(versions)) {
            ComparableVersion key = new ComparableVersion(text);
            boolean placed = false;
            for (int i = 0; i < classes.size() && !placed; i++) {
                ComparableVersion head = heads.get(i);
                if (!beats(key, head, newest) && !beats(head, key, newest)) {
                    classes.get(i).add(text);
                    placed = true;
                }
            }
            if (!placed) {
                classes.add(new ArrayList<>(List.of(text)));
                heads.add(key);
            }
        }
        TreeSet<String> out = new TreeSet<>();
        for (int i = 0; i < classes.size(); i++) {
            boolean unbeaten = true;
            for (int j = 0; j < classes.size(); j++) {
                if (j != i && beats(heads.get(j), heads.get(i), newest)) {
                    unbeaten = false;
                }
            }
            if (unbeaten) {
                out.addAll(classes.get(i));
            }
        }
        if (!out.isEmpty() || classes.isEmpty()) {
            return new ArrayList<>(out);
        }
        int best = Integer.MIN_VALUE;
        int chosen = -1;
        for (int i = 0; i < classes.size(); i++) {
            int score = 0;
            for (int j = 0; j < classes.size(); j++) {
                if (j != i) {
                    score += beats(heads.get(i), heads.get(j), newest) ? 1 : 0;
                    score -= beats(heads.get(j), heads.get(i), newest) ? 1 : 0;
                }
            }
            String text = classes.get(i).get(0);
            boolean better = chosen < 0 || score > best;
            if (!better && score == best) {
                int c = text.compareTo(classes.get(chosen).get(0));
                better = newest ? c > 0 : c < 0;
            }
            if (better) {
                best = score;
                chosen = i;
            }
        }
        return new ArrayList<>(new TreeSet<>(classes.get(chosen)));
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out =
                new PrintStream(new FileOutputStream(FileDescriptor.out), false, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            String[] fields = line.split("\t", -1);
            List<String> rest = Arrays.asList(fields).subList(1, fields.length);
            switch (fields[0]) {
                case "cmp":
                    int c = new ComparableVersion(fields[1]).compareTo(new ComparableVersion(fields[2]));
                    out.println(Integer.signum(c));
                    break;
                case "newest":
                case "oldest":
                    out.println(String.join("\t", preferred(rest, fields[0].equals("newest"))));
                    break;
                default:
                    throw new IllegalArgumentException("unknown command " + fields[0]);
            }
        }
        out.flush();
    }
}
