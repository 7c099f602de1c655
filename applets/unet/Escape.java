// Escape: an applet that tries to reach outside its endpoint through the
// natives, for the bounds-check tests (crates/unet/tests/natives.rs). Every
// attempt must trap in the native, before anything moves.
//
// doTx and doRx both make the attempt selected by `mode`, with the arguments
// the host put in the statics a, b, c and the arrays Buf and Offsets (the
// constructor makes a 256-byte Buf and a 14-word Offsets; the host may replace
// them with arrays of other lengths through jive's set_static_array and
// set_static_int_array):
//
//   1  doHtoLDMA(Buf, a, b, c)       area -> array: negative or overflowing
//                                    offsets and lengths, past either end
//   2  doLtoHDMA(Buf, a, b, c)       array -> area: the same
//   3  txPush(Buf, a, b, c)          past the array's end, a channel that is
//                                    not open, longer than a message may be
//   4  dmaRxd(Offsets, a, b)         wrong offsets-array length, unaligned or
//                                    out-of-area offsets, too long, bad channel
//   5  dmaRxdPayload(Buf, a, b)      inline payload over 56 bytes or past the
//                                    array, bad channel
//   6  Got = newAlignedArray(a)      negative size, beyond the heap budget
//   7..11                            natives 1..5 with a null array
//   12 c = getFreeBuffer()           the free queue's next buffer, or -1
//   13 c = getFreeBufferLength()     the buffer size
//   14 c = c * 31 + getFreeBuffer()  a times in one invocation (c starts at 0):
//                                    several pops of one invocation, so that
//                                    the inline ones cross the queue's end
//   15 doHtoLDMA(Buf, 0, b, c)       the array offset a constant, as javac
//   16 doLtoHDMA(Buf, 0, b, c)       passes it (the JIT folds a constant
//   17 doHtoLDMA(Buf, -1, b, c)      offset of 0 or more; a negative one
//   18 doLtoHDMA(Buf, 3, b, c)       must still trap in the native)
//   19 n = b; if (n <= 56) { n = n + c; dmaRxdPayload(Buf, a, n); }
//   20 n = b; if (n <= 56) { n += 8; dmaRxdPayload(Buf, a, n); }
//   21 n = b; if (c == 0) { if (n <= 56) Got = null; } dmaRxdPayload(Buf, a, n);
//   22 n = b; if (n <= 56) { } dmaRxdPayload(Buf, a, n);
//                                    a length bounded by a branch, then
//                                    changed (a store, an iinc), reached
//                                    from a path without the bound (a
//                                    merge), or reached both ways (22: the
//                                    branch's target is the next op): the
//                                    JIT's range fact, which lets the
//                                    inline push leave out its test of 56,
//                                    must hold in none of them
//   23 dmaRxdPayload(Buf, 7, b)      a constant channel, as a protocol
//   24 dmaRxdPayload(Buf, 65535, 8)  passes its own (the JIT builds the
//   25 dmaRxdPayload(Buf, 65536, b)  sealed header from an immediate; a
//                                    channel too large must still trap in
//                                    the native)
//
// A native that returns normally lets the attempt return 0, so a test can
// tell an escape that did not trap.
public class Escape {
    public static byte[] RxBuf;
    public static byte[] Buf;
    public static int[] Offsets;
    public static byte[] Got;
    public static int mode;
    public static int a;
    public static int b;
    public static int c;

    Escape() {
        Buf = newAlignedArray(256);
        Offsets = new int[14];
    }

    private static int doTx(int length, int channel, int off) {
        return attempt();
    }

    private static int doRx(int length, int channel) {
        return attempt();
    }

    private static int attempt() {
        switch (mode) {
            case 1: doHtoLDMA(Buf, a, b, c); break;
            case 2: doLtoHDMA(Buf, a, b, c); break;
            case 3: txPush(Buf, a, b, c); break;
            case 4: dmaRxd(Offsets, a, b); break;
            case 5: dmaRxdPayload(Buf, a, b); break;
            case 6: Got = newAlignedArray(a); break;
            case 7: doHtoLDMA(null, a, b, c); break;
            case 8: doLtoHDMA(null, a, b, c); break;
            case 9: txPush(null, a, b, c); break;
            case 10: dmaRxd(null, a, b); break;
            case 11: dmaRxdPayload(null, a, b); break;
            case 12: c = getFreeBuffer(); break;
            case 13: c = getFreeBufferLength(); break;
            case 14:
                c = 0;
                for (int i = 0; i < a; i++) {
                    c = c * 31 + getFreeBuffer();
                }
                break;
            case 15: doHtoLDMA(Buf, 0, b, c); break;
            case 16: doLtoHDMA(Buf, 0, b, c); break;
            case 17: doHtoLDMA(Buf, -1, b, c); break;
            case 18: doLtoHDMA(Buf, 3, b, c); break;
            case 19: {
                int n = b;
                if (n <= 56) {
                    n = n + c;
                    dmaRxdPayload(Buf, a, n);
                }
                break;
            }
            case 20: {
                int n = b;
                if (n <= 56) {
                    n += 8;
                    dmaRxdPayload(Buf, a, n);
                }
                break;
            }
            case 21: {
                int n = b;
                if (c == 0) {
                    if (n <= 56) Got = null;
                }
                dmaRxdPayload(Buf, a, n);
                break;
            }
            case 22: {
                int n = b;
                if (n <= 56) {
                }
                dmaRxdPayload(Buf, a, n);
                break;
            }
            case 23: dmaRxdPayload(Buf, 7, b); break;
            case 24: dmaRxdPayload(Buf, 65535, 8); break;
            case 25: dmaRxdPayload(Buf, 65536, b); break;
            default: return -1;
        }
        return 0;
    }

    static native byte[] newAlignedArray(int nbytes);
    static native void doHtoLDMA(byte[] txarray, int txoff, int useroff, int len);
    static native void doLtoHDMA(byte[] rxarray, int rxoff, int useroff, int len);
    static native void txPush(byte[] txarray, int txoff, int chan, int len);
    static native void dmaRxd(int[] offsets, int chan, int len);
    static native void dmaRxdPayload(byte[] payload, int chan, int len);
    static native int getFreeBuffer();
    static native int getFreeBufferLength();
}
