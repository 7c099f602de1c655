// TailChecks: not an experiment of the paper but the probe of the inline
// tail push's tests (unet's tests/tail_inline.rs: each check the JIT's
// inline `txPush` at a tail site makes, against the interpreter). doTx
// copies the message into TxBuf, makes `pushes` eager txPushes of it (not
// tail sites: a branch follows each) and `calls` calls of
// getFreeBufferLength (units of the work budget), then pushes at a tail
// site, with arguments the host sets in statics: the array `which` names
// (0: TxBuf; 1: Null, a static never set), at `off`, on the descriptor's
// channel plus `dchan`, `length` plus `dlen` bytes.
// doRx delivers a message of at most 56 bytes inline and drops a longer one.
public class TailChecks {
    public static byte[] TxBuf;
    public static byte[] RxBuf;
    public static byte[] Null;
    public static int which;
    public static int off;
    public static int dchan;
    public static int dlen;
    public static int pushes;
    public static int calls;

    TailChecks() {
        TxBuf = newAlignedArray(65536);
    }

    private static int doTx(int length, int channel, int useroff) {
        doHtoLDMA(TxBuf, 0, useroff, length);
        for (int i = 0; i < pushes; i++) {
            txPush(TxBuf, 0, channel, length);
        }
        for (int i = 0; i < calls; i++) {
            getFreeBufferLength();
        }
        // The arguments in locals: only single pushes may follow the
        // array's `getstatic` at a tail site.
        int o = off;
        int c = channel + dchan;
        int n = length + dlen;
        if (which == 1) {
            txPush(Null, o, c, n);
            return 0;
        }
        txPush(TxBuf, o, c, n);
        return 0;
    }

    private static int doRx(int length, int channel) {
        if (length <= 56) {
            dmaRxdPayload(RxBuf, channel, length);
            return 0;
        }
        return -1;
    }

    static native byte[] newAlignedArray(int nbytes);
    static native int getFreeBufferLength();
    static native void doHtoLDMA(byte[] txarray, int txoff, int useroff, int len);
    static native void txPush(byte[] txarray, int txoff, int chan, int len);
    static native void dmaRxdPayload(byte[] payload, int chan, int len);
}
