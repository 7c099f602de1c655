// NullRx: not an experiment of the paper but the probe of issue 28's
// target "an applet invocation (doRx returning at once)": doRx(length,
// channel) returns 0 and does nothing else, with the message copied into
// RxBuf first as for every doRx(int, int) (docs/unet.md, "Applets and
// natives"). crates/bench/src/bin/unet-count.rs counts it (`dorx-null` -
// `deliver`) beside Breakdown's mode 0 (`dorx`), whose doRx reads its
// static `mode` and switches on it before it returns.
//
// doTx does nothing and returns -1 (the engine counts the request as
// dropped): the sender of the count runs without an applet.
public class NullRx {
    public static byte[] RxBuf;

    private static int doTx(int length, int channel, int off) {
        return -1;
    }

    private static int doRx(int length, int channel) {
        return 0;
    }
}
