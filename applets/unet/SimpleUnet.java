// SimpleUnet: the simplified applet of the U-Net/SLE paper's Figure 2 (class
// RawUnet there, and in applets/src/RawUnet.java), renamed so that every unet
// applet is compiled from applets/unet. Figure 5 measures it as the
// "simplified applet".
//
// Protocol: doTx copies the application's buffer into TxBuf and transmits
// it; doRx delivers messages of at most 56 bytes inline and longer ones in
// ONE free buffer. It assumes a message fits one receive buffer: a longer one
// is copied past its buffer into the buffers that follow (the natives still
// confine it to the endpoint's buffer area, and trap at the area's end), and
// its descriptor names offsets[1..] left as they were. Use StandardUnet for
// messages that span buffers.
//
// The text below is Figure 2's with one change: the paper's line 24 reads
// `return;` in an int method, which javac rejects; it returns -1 here.
public class SimpleUnet {
    public static byte[] TxBuf;
    public static byte[] RxBuf;
    public static int freebufferlen;
    public static int[] offsets;

    SimpleUnet() {
        TxBuf = newAlignedArray(4096);
        freebufferlen = getFreeBufferLength();
        offsets = new int[14];
    }

    private static int doTx(int length, int channel, int off) {
        doHtoLDMA(TxBuf, 0, off, length);
        txPush(TxBuf, 0, channel, length);
        return 0;
    }

    private static int doRx(int length, int channel) {
        if (length <= 56) {
            dmaRxdPayload(RxBuf, channel, length);
        } else {
            int dma_offset = getFreeBuffer();
            if (dma_offset == -1) return -1; /* No buffer available; drop */
            doLtoHDMA(RxBuf, 0, dma_offset, length);
            offsets[0] = dma_offset;
            dmaRxd(offsets, channel, length);
        }
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
