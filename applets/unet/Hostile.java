// Hostile: an applet that spends every budget the engine gives it, for the
// attack tests (crates/unet/tests/attack.rs). doTx and doRx both do what
// `mode` (a static the host sets) selects:
//
//   0  return 0 at once (a well-behaved applet)
//   1  push frames of `len` bytes of Buf on channel `chan`, forever (the
//      engine's heap grows with every frame an invocation makes)
//   2  loop forever with no native call (only fuel ends it)
//   3  loop forever calling getFreeBufferLength (only time ends it, if
//      fuel is plentiful)
//   4  push `count` frames of `len` bytes of Buf from `off` on channel
//      `chan`, then return 0: not an attack but the probe of txPush's
//      checks in the engine (crates/unet/tests/fast_natives.rs), with
//      arguments of every kind (a null array where `nul` is not 0)
//
// No mode returns except 0 and 4: an invocation ends when the engine ends it.
public class Hostile {
    public static byte[] RxBuf;
    public static byte[] Buf;
    public static int mode;
    public static int chan;
    public static int len;
    public static int off;
    public static int count;
    public static int nul;
    public static int sink;

    Hostile() {
        Buf = newAlignedArray(65536);
    }

    private static int doTx(int length, int channel, int off) {
        return attack();
    }

    private static int doRx(int length, int channel) {
        return attack();
    }

    private static int attack() {
        int n = 0;
        switch (mode) {
            case 1:
                while (true) {
                    txPush(Buf, 0, chan, len);
                }
            case 2:
                while (true) {
                    n++;
                    sink = n;
                }
            case 3:
                while (true) {
                    n += getFreeBufferLength();
                }
            case 4:
                for (int i = 0; i < count; i++) {
                    txPush(nul != 0 ? null : Buf, off, chan, len);
                }
                return 0;
            default:
                return 0;
        }
    }

    static native byte[] newAlignedArray(int nbytes);
    static native void txPush(byte[] txarray, int txoff, int chan, int len);
    static native int getFreeBufferLength();
}
