// StandardLent: the standard applet (StandardUnet.java, the U-Net/SLE
// paper's Figure 5) written against the lent interfaces: doRx(msg, length,
// channel) gets the message itself, msg[0..length), lent for the call
// (docs/unet.md, "The lent doRx"), where StandardUnet's doRx(length,
// channel) finds it copied into RxBuf first; doTx(msg, length, channel)
// gets the application's message where it lies in the buffer area (docs/
// unet.md, "The lent doTx"), where StandardUnet's doTx(length, channel, off)
// copies it into TxBuf first. The same deliveries, drops and buffers as
// StandardUnet, with two copies of each message fewer.
//
// doTx: transmit the message on `channel` (Figure 2's doTx). The push is at
// a tail site, so the engine sends the bytes from the area after doTx
// returns, one copy as without an applet.
//
// doRx: see StandardUnet.java; the buffers it holds between messages too.
public class StandardLent {
    public static int freebufferlen;
    // Free buffers taken from the free queue and not yet delivered, in
    // bufs[0..held): at most 14, since they are only taken up to the number
    // one message needs. bufs is also the receive descriptor's offsets list
    // (dmaRxd reads its first ceil(length / freebufferlen) words).
    public static int[] bufs;
    public static int held;

    StandardLent() {
        freebufferlen = getFreeBufferLength();
        bufs = new int[14];
    }

    private static int doTx(byte[] msg, int length, int channel) {
        txPush(msg, 0, channel, length);
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

    static native int getFreeBufferLength();
    static native int getFreeBuffer();
    static native void doLtoHDMA(byte[] rxarray, int rxoff, int useroff, int len);
    static native void txPush(byte[] txarray, int txoff, int chan, int len);
    static native void dmaRxd(int[] offsets, int chan, int len);
    static native void dmaRxdPayload(byte[] payload, int chan, int len);
}
