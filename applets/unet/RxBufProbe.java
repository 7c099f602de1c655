// RxBufProbe: not an experiment of the paper but the probe of what doRx can
// see of RxBuf, the array the engine fills with each arriving message
// (crates/unet/tests/rxbuf.rs). The engine's contract with doRx: RxBuf is
// one array, of the endpoint's largest message, made when the applet is
// installed (or again, of the message's length, where the applet stored
// null or an array shorter than the message); each message is copied to its start, RxBuf[0..length); the bytes
// past the message keep what earlier messages and the applet left there;
// and the array keeps the message after doRx returns, for the applet's
// later invocations. A receive that lent doRx the message's bytes in place
// (its frame, or the sender's buffer area) instead of copying them would
// change each of these, and this applet would see it:
//
// doRx(length, channel): records RxBuf.length (`seen`), the byte just past
// the message (`past`, -1 if the message fills the array), whether RxBuf is
// the array the last doRx kept (`same`), and the byte its last doRx wrote at
// the array's end (`own`); then keeps the array (`Kept`) and writes
// `length` at its end.
// doTx(length, channel, off): sends the first `length` bytes of the array
// the last doRx kept (the last message received, after its doRx returned).
public class RxBufProbe {
    public static byte[] RxBuf;
    public static byte[] Kept;
    public static int seen;
    public static int past;
    public static int same;
    public static int own;

    private static int doTx(int length, int channel, int off) {
        txPush(Kept, 0, channel, length);
        return 0;
    }

    private static int doRx(int length, int channel) {
        byte[] b = RxBuf;
        int n = b.length;
        seen = n;
        past = length < n ? b[length] : -1;
        same = b == Kept ? 1 : 0;
        own = b[n - 1];
        Kept = b;
        b[n - 1] = (byte) length;
        return 0;
    }

    static native void txPush(byte[] txarray, int txoff, int chan, int len);
}
