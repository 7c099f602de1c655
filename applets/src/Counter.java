// An applet with instance state, a constructor, instance methods, natives,
// persistent and per-invocation arrays.
public class Counter {
    private int count;
    private byte[] buf;
    static int[] hist;
    static int made;
    static byte[] RxBuf;

    Counter() {
        buf = new byte[16];
        hist = new int[4];
        made = made + 1;
        count = 5;
    }

    int bump(int by) { count += by; return count; }
    private int priv(int x) { return x + count; }
    int viaPriv(int x) { return priv(x) + this.bump(0); }
    int bufLen() { return buf.length; }
    static int scratch(int n) { int[] a = new int[n]; a[n - 1] = 5; return a.length + a[n - 1]; }
    static int keep(int n) { hist = new int[n]; return hist.length; }
    static int histLen() { return hist.length; }
    static native int hostAdd(int a, int b);
    static native void fill(byte[] b, int v);
    static native int[] makeInts(int n);
    static int callNative(int a) { return hostAdd(a, 1); }
    int fillBuf(int v) { fill(buf, v); return buf[3]; }
    static int fromHost(int n) { int[] a = makeInts(n); return a.length; }
    static int rxSum(int n) {
        int s = 0;
        for (int i = 0; i < n; i++) s += RxBuf[i];
        return s;
    }
    static void rxInc() { RxBuf[0]++; }
}
