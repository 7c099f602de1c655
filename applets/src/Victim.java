// Small, valid methods whose bytes the negative corpus mutates, one targeted
// change at a time (see crates/jive/tests/negative_corpus.rs).
public class Victim {
    static int count;
    static byte[] buf;
    int inst;

    Victim() {
        inst = 1;
    }

    static int add(int a, int b) { return a + b; }

    static int loop(int n) {
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += i;
        }
        return s;
    }

    static int first(byte[] b) { return b[0]; }

    static int get() { return count; }

    static void put(int v) { count = v; }

    static int call(int v) { return add(v, 1); }

    static int sw(int v) {
        switch (v) {
            case 1: return 10;
            case 2: return 20;
            default: return 0;
        }
    }

    static byte[] make(int n) { return new byte[n]; }

    int getInst() { return inst; }

    static native int host(int v);

    static int callHost(int v) { return host(v); }
}
