// LentProbe: not an experiment of the paper but the probe of the lent
// doRx (crates/unet/tests/rx_lent.rs): doRx(msg, length, channel) gets
// the message itself, msg[0..length), lent for the invocation, which the
// engine copies into no array of the applet's heap (docs/unet.md, "Applets
// and natives"). What it does is the static `mode`'s (set by the host):
//
//   0  records msg.length (`seen`) and a hash of msg[0..length) (`hash`)
//   1  reads msg[length], one past the message: traps (index out of bounds)
//   2  echoes the message on `channel` (txPush(msg, 0, channel, length))
//   3  delivers it as the standard applet does: inline up to 56 bytes,
//      else in one free buffer (doLtoHDMA(msg, ...), dmaRxd)
//
// doTx sends nothing and returns -1.
public class LentProbe {
    public static int mode;
    public static int seen;
    public static int hash;
    public static int[] offsets;

    LentProbe() {
        offsets = new int[14];
    }

    private static int doTx(int length, int channel, int off) {
        return -1;
    }

    private static int doRx(byte[] msg, int length, int channel) {
        switch (mode) {
            case 0: {
                seen = msg.length;
                int h = 0;
                for (int i = 0; i < length; i++) {
                    h = h * 31 + msg[i];
                }
                hash = h;
                return 0;
            }
            case 1:
                return msg[length];
            case 2:
                txPush(msg, 0, channel, length);
                return 0;
            case 3: {
                if (length <= 56) {
                    dmaRxdPayload(msg, channel, length);
                    return 0;
                }
                int off = getFreeBuffer();
                if (off < 0) {
                    return -1;
                }
                doLtoHDMA(msg, 0, off, length);
                offsets[0] = off;
                dmaRxd(offsets, channel, length);
                return 0;
            }
            default:
                return -1;
        }
    }

    static native int getFreeBuffer();
    static native void doLtoHDMA(byte[] rxarray, int rxoff, int useroff, int len);
    static native void txPush(byte[] txarray, int txoff, int chan, int len);
    static native void dmaRxd(int[] offsets, int chan, int len);
    static native void dmaRxdPayload(byte[] payload, int chan, int len);
}
