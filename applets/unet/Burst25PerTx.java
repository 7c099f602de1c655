// Burst25PerTx: the U-Net/SLE paper's Figure 6 applet "which transmits a
// burst of 25 messages for each transmit request posted by the user".
//
// doTx(length, channel, off): copy the application's buffer [off, off+length)
// into TxBuf once, then transmit it 25 times (25 txPush calls), so one
// transmit descriptor yields a whole burst and the per-request costs (the
// applet invocation, the host-to-interface copy) are paid once per 25
// messages. The receiver acknowledges each burst at user level, as with
// StandardUnet; this applet carries no acknowledgments of its own.
// doRx(length, channel): StandardUnet's receive path (inline up to 56 bytes,
// else as many free buffers as the message needs, keeping the buffers taken for a dropped message).
//
// The host fills RxBuf before doRx; TxBuf holds messages of up to 65536 bytes.
public class Burst25PerTx {
    public static byte[] TxBuf;
    public static byte[] RxBuf;
    public static int freebufferlen;
    public static int[] bufs; /* StandardUnet's held buffers and offsets list */
    public static int held;

    Burst25PerTx() {
        TxBuf = newAlignedArray(65536);
        freebufferlen = getFreeBufferLength();
        bufs = new int[14];
    }

    private static int doTx(int length, int channel, int off) {
        doHtoLDMA(TxBuf, 0, off, length);
        for (int i = 0; i < 25; i++) txPush(TxBuf, 0, channel, length);
        return 0;
    }

    private static int doRx(int length, int channel) {
        if (length <= 56) {
            dmaRxdPayload(RxBuf, channel, length);
            return 0;
        }
        int n = length / freebufferlen;
        if (length % freebufferlen != 0) n++;
        if (n > 14) return -1; /* Longer than one descriptor can hold; drop */
        int done = 0;
        for (int i = 0; i < n; i++) {
            if (i == held) {
                int off = getFreeBuffer();
                if (off == -1) return -1; /* No buffer available; drop, keep those held */
                bufs[i] = off;
                held++;
            }
            int chunk = length - done;
            if (chunk > freebufferlen) chunk = freebufferlen;
            doLtoHDMA(RxBuf, done, bufs[i], chunk);
            done += chunk;
        }
        dmaRxd(bufs, channel, length);
        /* The first n buffers are the application's now; keep the others. */
        for (int i = n; i < held; i++) bufs[i - n] = bufs[i];
        held -= n;
        return 0;
    }

    static native byte[] newAlignedArray(int nbytes);
    static native int getFreeBufferLength();
    static native int getFreeBuffer();
    static native void doHtoLDMA(byte[] txarray, int txoff, int useroff, int len);
    static native void doLtoHDMA(byte[] rxarray, int rxoff, int useroff, int len);
    static native void txPush(byte[] txarray, int txoff, int chan, int len);
    static native void dmaRxd(int[] offsets, int chan, int len);
    static native void dmaRxdPayload(byte[] payload, int chan, int len);
}
