// NullRxLent: NullRx (the probe of issue 28's "doRx returning at once")
// written against the lent receive interface: doRx(msg, length, channel)
// gets the message itself, msg[0..length), lent for the call
// (docs/unet.md, "The lent doRx"), and returns 0 without reading it.
// crates/bench/src/bin/unet-count.rs counts it (`dorx-lent-null` -
// `deliver`) beside BreakdownLent's mode 0 (`dorx-lent`).
//
// doTx does nothing and returns -1.
public class NullRxLent {
    private static int doTx(int length, int channel, int off) {
        return -1;
    }

    private static int doRx(byte[] msg, int length, int channel) {
        return 0;
    }
}
