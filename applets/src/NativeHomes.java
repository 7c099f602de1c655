// Locals that live across native calls and allocations. The JIT keeps a
// method's most used slots in registers; around a runtime call (a native,
// `newarray`) it saves only the registers the called function may change
// and leaves the callee-saved ones in place. Each method here keeps more
// live ints than there are registers of either kind, changes them between
// calls, and combines them all at the end, so that a register the runtime
// clobbered, or a slot saved and reloaded at the wrong place, changes the
// result. The JIT's differential test (tests/jit.rs) runs every method on
// both engines, with `step` bound to a function of its arguments.
public class NativeHomes {
    static native int step(int a, int b);

    static int keep(int a, int b) {
        int c = a + 1, d = b - 2, e = a ^ b, f = a * 3, g = b * 5, h = a - b, k = 7;
        for (int i = 0; i < 4; i++) {
            c = step(c, d) + e;
            d += step(f, g) ^ h;
            e = step(e, i) - k;
            f += g;
            g = step(h, c);
            h ^= step(k, f);
            k += c;
        }
        return c + 3 * d + 5 * e + 7 * f + 11 * g + 13 * h + 17 * k + a + b;
    }

    static int withArrays(int a, int b) {
        int c = a, d = b, e = a + b, f = a - b;
        int n = (a & 7) + 1;
        int[] v = new int[n];
        byte[] w = new byte[(b & 15) + 1];
        for (int i = 0; i < n; i++) {
            v[i] = step(c, i) + d;
            int[] t = new int[2];
            t[1] = e;
            c += t[1] ^ f;
            d = step(d, v[i]);
        }
        w[0] = (byte) step(e, f);
        return c + 3 * d + 5 * e + 7 * f + v[n - 1] + w[0] + w.length;
    }
}
