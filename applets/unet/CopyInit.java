// CopyInit: an applet whose constructor spends its fuel on native work, for
// the attack tests (crates/unet/tests/attack.rs, attack 7m). Each unit of
// fuel pays for one call of doHtoLDMA, which copies 512 KiB of the buffer
// area: its 100,000 units, about 50 GB of copying, ran 1.2 s under its
// endpoint's locks while the natives never read the clock in a constructor.
// The constructor never returns; the load fails when a budget ends it.
public class CopyInit {
    public static byte[] RxBuf;
    public static byte[] Buf;

    CopyInit() {
        Buf = new byte[524288];
        while (true) {
            doHtoLDMA(Buf, 0, 0, 524288);
        }
    }

    private static int doTx(int length, int channel, int off) {
        return 0;
    }

    private static int doRx(int length, int channel) {
        return 0;
    }

    static native void doHtoLDMA(byte[] txarray, int txoff, int useroff, int len);
}
