import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.lang.reflect.Method;

/**
 * Times the methods of Bench inside the JVM (startup excluded), measuring
 * the CPU time of this thread (the machine may be shared; jive's side
 * measures the same).
 *
 * Each benchmark is named on the command line as "name:n:reps" and warmed up
 * (three calls; with "--serve", three times reps calls, so that C2 has
 * compiled it before the first sample). Without "--serve", it then runs Bench.name(n) reps times in
 * each of 7 rounds and prints "name ns_per_call sink" (the best round).
 *
 * With "--serve" as the first argument, it prints "ready" once every
 * benchmark is warm, then reads one line at a time from standard input: an
 * index k runs benchmark k once (reps calls) and prints its ns per call;
 * "quit" or the end of input exits. So a caller can interleave HotSpot's
 * rounds with its own, sample by sample, in one run.
 */
public class BenchHarness {
    static int sink = 0;

    public static void main(String[] args) throws Exception {
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        boolean serve = args.length > 0 && args[0].equals("--serve");
        int first = serve ? 1 : 0;
        int count = args.length - first;
        Method[] methods = new Method[count];
        int[] ns = new int[count];
        int[] repss = new int[count];
        String[] names = new String[count];
        for (int k = 0; k < count; k++) {
            String[] p = args[first + k].split(":");
            names[k] = p[0];
            methods[k] = Bench.class.getDeclaredMethod(p[0], int.class);
            methods[k].setAccessible(true);
            ns[k] = Integer.parseInt(p[1]);
            repss[k] = Integer.parseInt(p[2]);
            int warm = serve ? 3 * repss[k] : 3;
            for (int w = 0; w < warm; w++) sink += (Integer) methods[k].invoke(null, ns[k]);
        }
        if (!serve) {
            for (int k = 0; k < count; k++) {
                long best = Long.MAX_VALUE;
                for (int round = 0; round < 7; round++) {
                    long t = time(mx, methods[k], ns[k], repss[k]);
                    if (t < best) best = t;
                }
                System.out.println(names[k] + " " + ((double) best / repss[k]) + " " + sink);
            }
            return;
        }
        System.out.println("ready");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.equals("quit")) break;
            int k = Integer.parseInt(line);
            long t = time(mx, methods[k], ns[k], repss[k]);
            System.out.println(((double) t / repss[k]) + " " + sink);
            System.out.flush();
        }
    }

    /** CPU time of this thread for reps calls of m(n), in ns. */
    static long time(ThreadMXBean mx, Method m, int n, int reps) throws Exception {
        long t0 = mx.getCurrentThreadCpuTime();
        for (int r = 0; r < reps; r++) sink += (Integer) m.invoke(null, n);
        return mx.getCurrentThreadCpuTime() - t0;
    }
}
