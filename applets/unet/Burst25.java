// Burst25: the U-Net/SLE paper's Figure 6 benchmark applet, "bursts of up to
// 25 messages ... before receiving an acknowledgment from the receiver", a
// token-based flow control carried out between the applets: the application
// posts transmit requests as it likes and the applets keep at most 25
// unacknowledged messages per channel in flight. Acknowledgments are never
// delivered to the applications. Both endpoints run it.
//
// Wire protocol: every message ends with a one-byte type trailer.
// - Data: the application's message followed by the byte 0 (length + 1 bytes
//   on the wire). The receiver delivers the message without the trailer.
// - Ack: 5 bytes: a count (big-endian int, > 0) followed by the byte 1. It
//   returns `count` tokens to the sender on that channel.
// A trailer rather than a header keeps the message at offset 0 of RxBuf, so
// the receiver delivers it with the same natives and copies as StandardUnet.
//
// Sender (doTx(length, channel, off)): each channel starts with 25 tokens. With
// a token and nothing queued, the message is sent at once (copy into TxBuf,
// append the trailer, txPush) and costs a token. Otherwise the request (its
// offset and length) joins the channel's queue, 32 entries per channel, and
// is sent when an ack returns tokens; a request finding the queue full is
// dropped (doTx returns -1). A queued request's buffer is read when it is
// sent, not when it is queued: the application must leave it untouched until
// then.
//
// Receiver (doRx(length, channel)): a data message is counted first, and when
// 25 have arrived on the channel since the last ack, an ack carrying the count
// goes back on the channel; then the message is delivered as StandardUnet
// delivers it (inline up to 56 bytes, else in as many free buffers as it
// needs, keeping the buffers of a dropped message; no free buffer: dropped, but still counted, so
// that the sender's tokens come back). An ack adds its count to the channel's
// tokens and sends queued requests while tokens last.
//
// Channel tags 0..7 are supported (the flow-control state is per channel);
// messages and requests on other channels are dropped. The channel must not
// lose messages (the loop transport, or Myrinet in the paper): a lost message
// is a lost token.
public class Burst25 {
    static final int BURST = 25;
    static final int CHANNELS = 8;
    static final int QCAP = 32; /* per channel; a power of two */
    static final int DATA = 0;
    static final int ACK = 1;

    public static byte[] TxBuf;
    public static byte[] RxBuf;
    public static byte[] AckBuf;
    public static int freebufferlen;
    public static int[] bufs; /* StandardUnet's held buffers and offsets list */
    public static int held;

    // Per channel: tokens left, data messages received since the last ack,
    // and the queue of waiting requests (qoff/qlen[ch * QCAP + i]).
    public static int[] tokens;
    public static int[] received;
    public static int[] qhead;
    public static int[] qcount;
    public static int[] qoff;
    public static int[] qlen;

    Burst25() {
        TxBuf = newAlignedArray(65537);
        AckBuf = new byte[5];
        freebufferlen = getFreeBufferLength();
        bufs = new int[14];
        tokens = new int[CHANNELS];
        received = new int[CHANNELS];
        qhead = new int[CHANNELS];
        qcount = new int[CHANNELS];
        qoff = new int[CHANNELS * QCAP];
        qlen = new int[CHANNELS * QCAP];
        for (int c = 0; c < CHANNELS; c++) tokens[c] = BURST;
    }

    private static int doTx(int length, int channel, int off) {
        if (channel < 0 || channel >= CHANNELS) return -1;
        if (tokens[channel] > 0 && qcount[channel] == 0) {
            send(length, channel, off);
            tokens[channel]--;
            return 0;
        }
        if (qcount[channel] == QCAP) return -1; /* Queue full; drop */
        int slot = channel * QCAP + ((qhead[channel] + qcount[channel]) & (QCAP - 1));
        qoff[slot] = off;
        qlen[slot] = length;
        qcount[channel]++;
        drain(channel);
        return 0;
    }

    private static int doRx(int length, int channel) {
        if (channel < 0 || channel >= CHANNELS || length < 1) return -1;
        int type = RxBuf[length - 1];
        if (type == ACK) return ack(length, channel);
        if (type != DATA) return -1;
        received[channel]++;
        if (received[channel] >= BURST) {
            int count = received[channel];
            AckBuf[0] = (byte) (count >> 24);
            AckBuf[1] = (byte) (count >> 16);
            AckBuf[2] = (byte) (count >> 8);
            AckBuf[3] = (byte) count;
            AckBuf[4] = (byte) ACK;
            txPush(AckBuf, 0, channel, 5);
            received[channel] = 0;
        }
        return deliver(length - 1, channel);
    }

    // Transmits the application's buffer [off, off+length) with the data trailer.
    private static void send(int length, int channel, int off) {
        doHtoLDMA(TxBuf, 0, off, length);
        TxBuf[length] = (byte) DATA;
        txPush(TxBuf, 0, channel, length + 1);
    }

    // Sends queued requests of `channel` while it has tokens. A request leaves
    // the queue before it is sent, and takes its token once sent: a request
    // whose send traps is dropped without costing a token.
    private static void drain(int channel) {
        while (tokens[channel] > 0 && qcount[channel] > 0) {
            int slot = channel * QCAP + qhead[channel];
            qhead[channel] = (qhead[channel] + 1) & (QCAP - 1);
            qcount[channel]--;
            send(qlen[slot], channel, qoff[slot]);
            tokens[channel]--;
        }
    }

    private static int ack(int length, int channel) {
        if (length != 5) return -1;
        int count = ((RxBuf[0] & 0xff) << 24) | ((RxBuf[1] & 0xff) << 16)
                | ((RxBuf[2] & 0xff) << 8) | (RxBuf[3] & 0xff);
        if (count <= 0) return -1;
        tokens[channel] += count;
        drain(channel);
        return 0;
    }

    // StandardUnet's receive path, for the first `length` bytes of RxBuf.
    private static int deliver(int length, int channel) {
        if (length <= 56) {
            dmaRxdPayload(RxBuf, channel, length);
            return 0;
        }
        int n = length / freebufferlen;
        if (length % freebufferlen != 0) n++;
        if (n > 14) return -1;
        int done = 0;
        for (int i = 0; i < n; i++) {
            if (i == held) {
                int off = getFreeBuffer();
                if (off == -1) return -1;
                bufs[i] = off;
                held++;
            }
            int chunk = length - done;
            if (chunk > freebufferlen) chunk = freebufferlen;
            doLtoHDMA(RxBuf, done, bufs[i], chunk);
            done += chunk;
        }
        dmaRxd(bufs, channel, length);
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
