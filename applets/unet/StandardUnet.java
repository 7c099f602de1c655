// StandardUnet: the "standard applet" of the U-Net/SLE paper's Figure 5: the
// basic U-Net semantics carried out by an applet, with a message spanning as
// many receive buffers as it needs (U-Net's PDUs spanning receive buffers).
//
// doTx(length, channel, off): copy the application's buffer [off, off+length)
// into TxBuf and transmit it on `channel` (Figure 2's doTx).
//
// doRx(length, channel), with the message in RxBuf[0..length):
// - length <= 56: one receive descriptor with the payload inline;
// - otherwise n = ceil(length / freebufferlen) buffers (at most 14, the
//   receive descriptor's offset list; a longer message is dropped): for each
//   chunk of the message, take a free buffer and copy the chunk into it
//   (doLtoHDMA), then push one receive descriptor naming the n offsets.
// - If the free queue runs dry before n buffers are in hand, the message is
//   dropped (doRx returns -1). The buffers already taken are not lost to the
//   application: the applet holds them (bufs[0..held)) and uses them first for
//   the next message. The same holds if the push traps (receive queue full):
//   a buffer leaves the applet only in a descriptor that has been pushed.
//
// The host fills RxBuf before doRx; TxBuf holds messages of up to 65536 bytes.
public class StandardUnet {
    public static byte[] TxBuf;
    public static byte[] RxBuf;
    public static int freebufferlen;
    // Free buffers taken from the free queue and not yet delivered, in
    // bufs[0..held): at most 14, since they are only taken up to the number
    // one message needs. bufs is also the receive descriptor's offsets list
    // (dmaRxd reads its first ceil(length / freebufferlen) words).
    public static int[] bufs;
    public static int held;

    StandardUnet() {
        TxBuf = newAlignedArray(65536);
        freebufferlen = getFreeBufferLength();
        bufs = new int[14];
    }

    private static int doTx(int length, int channel, int off) {
        doHtoLDMA(TxBuf, 0, off, length);
        txPush(TxBuf, 0, channel, length);
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
