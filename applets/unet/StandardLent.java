// StandardLent: the standard applet (StandardUnet.java, the U-Net/SLE
// paper's Figure 5) written against the lent receive interface:
// doRx(msg, length, channel) gets the message itself, msg[0..length), lent
// for the call (docs/unet.md, "The lent doRx"), where StandardUnet's
// doRx(length, channel) finds it copied into RxBuf first. The same
// deliveries, drops and buffers as StandardUnet, with one copy of each
// received message fewer: the payload goes from the message straight into
// the receive descriptor or the free buffers.
//
// doTx(length, channel, off): copy the application's buffer [off, off+length)
// into TxBuf and transmit it on `channel` (Figure 2's doTx).
//
// doRx: see StandardUnet.java; the buffers it holds between messages too.
public class StandardLent {
    public static byte[] TxBuf;
    public static int freebufferlen;
    // Free buffers taken from the free queue and not yet delivered, in
    // bufs[0..held): at most 14, since they are only taken up to the number
    // one message needs. bufs is also the receive descriptor's offsets list
    // (dmaRxd reads its first ceil(length / freebufferlen) words).
    public static int[] bufs;
    public static int held;

    StandardLent() {
        TxBuf = newAlignedArray(65536);
        freebufferlen = getFreeBufferLength();
        bufs = new int[14];
    }

    private static int doTx(int length, int channel, int off) {
        doHtoLDMA(TxBuf, 0, off, length);
        txPush(TxBuf, 0, channel, length);
        return 0;
    }

    private static int doRx(byte[] msg, int length, int channel) {
        if (length <= 56) {
            dmaRxdPayload(msg, channel, length);
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
            doLtoHDMA(msg, done, bufs[i], chunk);
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
