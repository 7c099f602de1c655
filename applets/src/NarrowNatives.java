// Natives whose declared result is narrower than int: whatever int the host
// returns, a byte native's value is sign-extended from its low 8 bits, a
// short's from its low 16, and a boolean's is its bit 0 (JVMS §2.11.1,
// §2.3.4), on the interpreter and on the JIT alike. The JIT's differential
// test (tests/jit.rs) binds these natives to functions of their arguments,
// so that random arguments reach every bit of the results.
public class NarrowNatives {
    static native byte toByte(int v);
    static native short toShort(int v);
    static native boolean toBool(int v);
    static native int toInt(int v);

    static int viaByte(int v) { return toByte(v); }
    static int viaShort(int v) { return toShort(v); }
    static int viaBool(int v) { return toBool(v) ? 1 : 0; }
    static boolean bool(int v) { return toBool(v); }
    static int viaInt(int v) { return toInt(v); }
    // Narrowed values in arithmetic, where a wrong upper half would show.
    static int mix(int a, int b) { return toByte(a) * 65536 + toShort(b) + (toBool(a ^ b) ? 7 : 0); }
}
