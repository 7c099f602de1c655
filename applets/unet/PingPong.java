// PingPong: the U-Net/SLE paper's Figure 5 "applet which performs pingpong
// operations between user extension applets only, without propagating
// messages to user level". Both endpoints run it; the applications see only
// the end of the exchange.
//
// doTx(length, channel, off): start an exchange: reset `rounds`, copy the
// application's buffer into TxBuf and transmit it (the first ping).
// doRx(length, channel): count the message in `rounds`, and echo it back at
// once on the channel it came from (txPush(RxBuf, 0, channel, length)), with
// no descriptor for the application. When `limit` > 0 and `rounds` reaches
// it, the applet delivers instead one inline receive descriptor of 4 bytes,
// `rounds` big-endian, and stops echoing: the exchange is over.
//
// The host sets `limit` (jive's set_static_int) on the endpoint that starts
// the exchange, to the number of round trips to run; on the echoing endpoint
// it stays 0 (echo forever; its `rounds` counts the echoes). A run of N round
// trips is thus: one doTx on the initiator, then N receptions on each side.
//
// The host fills RxBuf before doRx; TxBuf holds messages of up to 65536 bytes.
public class PingPong {
    public static byte[] TxBuf;
    public static byte[] RxBuf;
    public static byte[] Done;
    public static int rounds;
    public static int limit;

    PingPong() {
        TxBuf = newAlignedArray(65536);
        Done = new byte[4];
    }

    private static int doTx(int length, int channel, int off) {
        rounds = 0;
        doHtoLDMA(TxBuf, 0, off, length);
        txPush(TxBuf, 0, channel, length);
        return 0;
    }

    private static int doRx(int length, int channel) {
        rounds++;
        if (limit > 0 && rounds >= limit) {
            Done[0] = (byte) (rounds >> 24);
            Done[1] = (byte) (rounds >> 16);
            Done[2] = (byte) (rounds >> 8);
            Done[3] = (byte) rounds;
            dmaRxdPayload(Done, channel, 4);
            return 0;
        }
        txPush(RxBuf, 0, channel, length);
        return 0;
    }

    static native byte[] newAlignedArray(int nbytes);
    static native void doHtoLDMA(byte[] txarray, int txoff, int useroff, int len);
    static native void txPush(byte[] txarray, int txoff, int chan, int len);
    static native void dmaRxdPayload(byte[] payload, int chan, int len);
}
