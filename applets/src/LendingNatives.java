// A lent byte[] (crates/jive/tests/lend_runtime.rs) passed to a native that only
// reads its array and to one that writes it (which the natives' mutable
// accessor refuses for the lent array).
public class LendingNatives {
    static native int checksum(byte[] b, int off, int len);

    static native void fill(byte[] b, int v);

    static int viaNative(byte[] msg, int n) {
        return checksum(msg, 0, n);
    }

    static int writes(byte[] msg, int v) {
        fill(msg, v);
        return 0;
    }
}
