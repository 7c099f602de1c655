// Breakdown: not an experiment of its own but the probe of the U-Net/SLE
// paper's Figure 7 ("U-Net/SLE transmit/receive operation overhead"): the
// cost of invoking doRx, of a null native method call, of getFreeBuffer and of
// pushing a receive descriptor, counted in host instructions by
// crates/bench/src/bin/unet-count.rs under callgrind.
//
// doRx(length, channel) does what the static `mode` (set by the host with
// jive's set_static_int) selects, then returns 0:
//
//   0  nothing: the cost of the invocation itself (the engine fills RxBuf,
//      calls doRx, which dispatches on mode and returns)
//   1  getFreeBufferLength() 8 times: a null native (it returns the
//      endpoint's buffer size, a constant)
//   2  getFreeBuffer() 8 times: 8 buffers leave the free queue (the host's
//      application gives them back between messages)
//   3  dmaRxdPayload(RxBuf, channel, 0) 8 times: 8 empty inline receive
//      descriptors (the host's application drains them between messages)
//
// Each mode is one case of a tableswitch ending in its own `return 0`, and
// the 8 calls are written out rather than looped, so that the bytecode of
// mode k differs from mode 0's by the 8 calls alone: (count of mode k -
// count of mode 0) / 8 is the cost of one call, its argument pushes and the
// pop of an unused result included, and nothing else.
//
// doTx does nothing and returns -1 (the engine counts the request as
// dropped): the breakdown measures the receive side, and the endpoint that
// sends to this one runs without an applet. Any other mode returns -1 too.
public class Breakdown {
    public static byte[] RxBuf;
    public static int mode;

    Breakdown() {
        mode = 0;
    }

    private static int doTx(int length, int channel, int off) {
        return -1;
    }

    private static int doRx(int length, int channel) {
        switch (mode) {
            case 0:
                return 0;
            case 1:
                getFreeBufferLength();
                getFreeBufferLength();
                getFreeBufferLength();
                getFreeBufferLength();
                getFreeBufferLength();
                getFreeBufferLength();
                getFreeBufferLength();
                getFreeBufferLength();
                return 0;
            case 2:
                getFreeBuffer();
                getFreeBuffer();
                getFreeBuffer();
                getFreeBuffer();
                getFreeBuffer();
                getFreeBuffer();
                getFreeBuffer();
                getFreeBuffer();
                return 0;
            case 3:
                dmaRxdPayload(RxBuf, channel, 0);
                dmaRxdPayload(RxBuf, channel, 0);
                dmaRxdPayload(RxBuf, channel, 0);
                dmaRxdPayload(RxBuf, channel, 0);
                dmaRxdPayload(RxBuf, channel, 0);
                dmaRxdPayload(RxBuf, channel, 0);
                dmaRxdPayload(RxBuf, channel, 0);
                dmaRxdPayload(RxBuf, channel, 0);
                return 0;
            default:
                return -1;
        }
    }

    static native int getFreeBufferLength();
    static native int getFreeBuffer();
    static native void dmaRxdPayload(byte[] payload, int chan, int len);
}
