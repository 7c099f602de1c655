import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.lang.reflect.Method;

/**
 * Times the methods of Bench inside the JVM (startup excluded). For each
 * benchmark named on the command line as "name:n:reps", warms up, then runs
 * Bench.name(n) reps times and prints "name ns_per_call" (the best of 7
 * rounds), measuring the CPU time of this thread (the machine may be shared;
 * jive's side measures the same).
 */
public class BenchHarness {
    public static void main(String[] args) throws Exception {
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        for (String spec : args) {
            String[] p = spec.split(":");
            Method m = Bench.class.getDeclaredMethod(p[0], int.class);
            m.setAccessible(true);
            int n = Integer.parseInt(p[1]);
            int reps = Integer.parseInt(p[2]);
            int sink = 0;
            for (int w = 0; w < 3; w++) sink += (Integer) m.invoke(null, n);
            long best = Long.MAX_VALUE;
            for (int round = 0; round < 7; round++) {
                long t0 = mx.getCurrentThreadCpuTime();
                for (int r = 0; r < reps; r++) sink += (Integer) m.invoke(null, n);
                long t = mx.getCurrentThreadCpuTime() - t0;
                if (t < best) best = t;
            }
            System.out.println(p[0] + " " + ((double) best / reps) + " " + sink);
        }
    }
}
