// A receive applet written against the lent interface (jive::LentParam,
// docs/jive.md "Lent byte[] parameters"): the host lends doRx the message
// itself, msg, for the invocation, instead of copying it into a static
// RxBuf. doRx delivers it as the standard applet does (inline up to 56
// bytes, else in one free buffer); echo transmits it back. Both only read
// msg, through the natives unet marks read-only. overwrite passes msg to
// doHtoLDMA, which writes its array: refused where msg is lent
// (crates/unet/tests/lent_rx.rs). The engine does not invoke this applet yet.
public class LentRx {
    static native void doHtoLDMA(byte[] txarray, int txoff, int useroff, int len);
    static native void doLtoHDMA(byte[] rxarray, int rxoff, int useroff, int len);
    static native void txPush(byte[] txarray, int txoff, int chan, int len);
    static native void dmaRxd(int[] offsets, int chan, int len);
    static native void dmaRxdPayload(byte[] payload, int chan, int len);
    static native int getFreeBuffer();

    static int[] Offsets = new int[14];

    static int doRx(byte[] msg, int length, int channel) {
        if (length <= 56) {
            dmaRxdPayload(msg, channel, length);
            return 0;
        }
        int off = getFreeBuffer();
        if (off < 0) {
            return -1;
        }
        doLtoHDMA(msg, 0, off, length);
        Offsets[0] = off;
        dmaRxd(Offsets, channel, length);
        return 0;
    }

    static int echo(byte[] msg, int length, int channel) {
        txPush(msg, 0, channel, length);
        return 0;
    }

    static int overwrite(byte[] msg, int length, int channel) {
        doHtoLDMA(msg, 0, 0, length);
        return 0;
    }
}
