// TailPush: not an experiment of the paper but the probe of the tail-site
// tests (jive's tail sites, unet's deferred txPush). doTx copies the
// message into TxBuf and pushes it as `mode` (a static the host sets) says:
// - 0: txPush and return, a tail site: the engine defers the message and
//   sends it at doTx's end, straight into a receiver's RxBuf where it can;
// - 1: txPush, then TxBuf[0] inverted: not a tail site, and the message
//   that arrives is TxBuf as it was at the push;
// - 2: txPush, then a static written: not a tail site (the eager push of
//   mode 0's message, for the differential tests);
// - 3: two txPushes of the message: the first is not a tail site, the
//   second is;
// - 4: the message copied into a new array held only by a local, pushed
//   and returned: not a tail site (the array is no static's, so the
//   invocation's end collects it), and the message arrives.
// doRx delivers a message of at most 56 bytes inline and drops a longer one.
//
// The other static methods are the tail rule's cases, each invoked by the
// host on its own (none but `called` is named by a call site):
// tail, tailValue and the instance method field push at a tail site,
// storeAfter, pushAfter (its first push), branchAfter, callAfter and
// called do not, nor do the ones whose array argument is not a static's
// or the instance's pushed just before the call: local (a local's),
// computed (an addition after the static's push) and jumpInto (a jump
// target between the push and the call).
public class TailPush {
    public static byte[] TxBuf;
    public static byte[] RxBuf;
    public static int mode;
    public static int after;
    byte[] own;

    TailPush() {
        TxBuf = newAlignedArray(65536);
        own = TxBuf;
    }

    private static int doTx(int length, int channel, int off) {
        doHtoLDMA(TxBuf, 0, off, length);
        if (mode == 1) {
            txPush(TxBuf, 0, channel, length);
            TxBuf[0] = (byte) ~TxBuf[0];
            return 0;
        }
        if (mode == 2) {
            txPush(TxBuf, 0, channel, length);
            after = length;
            return 0;
        }
        if (mode == 3) {
            txPush(TxBuf, 0, channel, length);
            txPush(TxBuf, 0, channel, length);
            return 0;
        }
        if (mode == 4) {
            byte[] b = new byte[length];
            doHtoLDMA(b, 0, off, length);
            txPush(b, 0, channel, length);
            return 0;
        }
        txPush(TxBuf, 0, channel, length);
        return 0;
    }

    private static int doRx(int length, int channel) {
        if (length <= 56) {
            dmaRxdPayload(RxBuf, channel, length);
            return 0;
        }
        return -1;
    }

    static void tail(int chan, int len) {
        txPush(TxBuf, 0, chan, len);
    }

    static int tailValue(int chan, int len) {
        txPush(TxBuf, 0, chan, len);
        return len;
    }

    static void storeAfter(int chan, int len) {
        txPush(TxBuf, 0, chan, len);
        TxBuf[0] = 1;
    }

    static void pushAfter(int chan, int len) {
        txPush(TxBuf, 0, chan, len);
        txPush(TxBuf, 0, chan, len);
    }

    static int branchAfter(int chan, int len) {
        txPush(TxBuf, 0, chan, len);
        if (len > 0) return 1;
        return 0;
    }

    static void callAfter(int chan, int len) {
        txPush(TxBuf, 0, chan, len);
        helper();
    }

    void field(int chan, int len) {
        txPush(own, 0, chan, len);
    }

    static void local(int chan, int len) {
        byte[] b = TxBuf;
        txPush(b, 0, chan, len);
    }

    static void computed(int chan, int len) {
        txPush(TxBuf, 0, chan, len - 1);
    }

    static void jumpInto(int chan, int len) {
        txPush(len > 0 ? TxBuf : RxBuf, 0, chan, len);
    }

    static void helper() {
    }

    static void called(int chan, int len) {
        txPush(TxBuf, 0, chan, len);
    }

    static void callsCalled(int chan, int len) {
        called(chan, len);
    }

    static native byte[] newAlignedArray(int nbytes);
    static native void doHtoLDMA(byte[] txarray, int txoff, int useroff, int len);
    static native void txPush(byte[] txarray, int txoff, int chan, int len);
    static native void dmaRxdPayload(byte[] payload, int chan, int len);
}
