package adversarial;

// The second of three versions of one applet (ReplaceA, ReplaceB and
// ReplaceC: the same methods, other constants) that tests/jit_cache.rs
// swaps while four threads run it. Each thread checks that every result is
// the one of the version it runs, and that the static and instance counters
// are its own applet instance's even though the JIT shares the code of
// applets loaded from the same class.
public class ReplaceB {
    static int calls;
    int total;

    static int version() {
        return 2;
    }

    static int step(int x) {
        return x * 5 + version();
    }

    // s = s * 31 + step(i) for i < n, then s ^ version(): 2n + 1 calls
    // among this version's methods (step calls version).
    int work(int n) {
        calls++;
        int s = 0;
        for (int i = 0; i < n; i++) {
            s = s * 31 + step(i);
        }
        total += s;
        return s ^ version();
    }

    static int calls() {
        return calls;
    }

    int total() {
        return total;
    }
}
