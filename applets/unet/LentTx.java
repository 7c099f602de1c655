// LentTx: not an experiment of the paper but the probe of the lent doTx
// (tests/tx_lent.rs). doTx(msg, length, channel) gets the application's
// message itself, lent where it lies in the endpoint's buffer area, and
// does as `mode` (a static the host sets) says:
// - 0: pushes msg[skip..length) at a tail site, so that the engine sends
//   it from the area once doTx has returned;
// - 1: pushes it, then counts the push in `pushed`: not a tail site (the
//   message is copied into a frame at the call);
// - 2: copies msg[0..length) into the area at `target` with doLtoHDMA
//   (a range over the message itself traps: nothing may write the lent
//   bytes), then pushes it at a tail site;
// - 3: records the message's length and a hash of its bytes in `seen` and
//   `hash`, and pushes nothing.
// doRx drops every message.
public class LentTx {
    public static byte[] RxBuf;
    public static int mode;
    public static int skip;
    public static int target;
    public static int pushed;
    public static int seen;
    public static int hash;

    private static int doTx(byte[] msg, int length, int channel) {
        if (mode == 3) {
            int h = 0;
            for (int i = 0; i < msg.length; i++) {
                h = h * 31 + msg[i];
            }
            seen = length;
            hash = h;
            return 0;
        }
        if (mode == 1) {
            txPush(msg, 0, channel, length);
            pushed++;
            return 0;
        }
        if (mode == 2) {
            doLtoHDMA(msg, 0, target, length);
        }
        int from = skip;
        int n = length - from;
        txPush(msg, from, channel, n);
        return 0;
    }

    private static int doRx(int length, int channel) {
        return -1;
    }

    static native void doLtoHDMA(byte[] rxarray, int rxoff, int useroff, int len);
    static native void txPush(byte[] txarray, int txoff, int chan, int len);
}
