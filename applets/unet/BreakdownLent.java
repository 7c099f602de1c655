// BreakdownLent: Breakdown (Figure 7's probe) written against the lent
// receive interface: doRx(msg, length, channel) gets the message itself,
// msg[0..length), lent for the call (docs/unet.md, "The lent doRx"), where
// Breakdown's doRx(length, channel) finds it copied into RxBuf. The
// bytecode of each mode is Breakdown's with `msg` (a local) in place of the
// static RxBuf, so that unet-count's `dorx-lent` - `deliver` is the cost of
// invoking a lent doRx, to set beside `dorx` - `deliver` (Breakdown's).
//
// doRx does what the static `mode` selects (see Breakdown.java) and returns
// 0; doTx returns -1.
public class BreakdownLent {
    public static int mode;

    BreakdownLent() {
        mode = 0;
    }

    private static int doTx(int length, int channel, int off) {
        return -1;
    }

    private static int doRx(byte[] msg, int length, int channel) {
        switch (mode) {
            case 0:
                return 0;
            case 1:
                getFreeBufferLength();
                getFreeBufferLength();
                getFreeBufferLength();
                getFreeBufferLength();
                getFreeBufferLength();
                getFreeBufferLength();
                getFreeBufferLength();
                getFreeBufferLength();
                return 0;
            case 2:
                getFreeBuffer();
                getFreeBuffer();
                getFreeBuffer();
                getFreeBuffer();
                getFreeBuffer();
                getFreeBuffer();
                getFreeBuffer();
                getFreeBuffer();
                return 0;
            case 3:
                dmaRxdPayload(msg, channel, 0);
                dmaRxdPayload(msg, channel, 0);
                dmaRxdPayload(msg, channel, 0);
                dmaRxdPayload(msg, channel, 0);
                dmaRxdPayload(msg, channel, 0);
                dmaRxdPayload(msg, channel, 0);
                dmaRxdPayload(msg, channel, 0);
                dmaRxdPayload(msg, channel, 0);
                return 0;
            default:
                return -1;
        }
    }

    static native int getFreeBufferLength();
    static native int getFreeBuffer();
    static native void dmaRxdPayload(byte[] payload, int chan, int len);
}
