// Methods that take a byte[] the host lends for one invocation (jive's
// Applet::lend and prepare_lending, crates/jive/tests/lend_runtime.rs): reads of
// it, a trap past its end, and a method that keeps it in a static (which
// the verifier refuses where the host declares the parameter lent; the
// runtime stays safe without that: after the lend the kept handle reads
// as an empty array).
public class Lending {
    static byte[] kept;

    static int sum(byte[] msg, int n) {
        int s = 0;
        for (int i = 0; i < n; i++) {
            s = s * 31 + msg[i];
        }
        return s;
    }

    static int length(byte[] msg, int n) {
        return msg.length;
    }

    static int at(byte[] msg, int i) {
        return msg[i];
    }

    // The lent parameter after an int one, and an applet's doRx shape.
    static int doRx(int channel, byte[] msg, int length) {
        if (msg.length != length) {
            return -1;
        }
        return channel * 1000 + (msg[0] & 0xff);
    }

    static int keep(byte[] msg, int n) {
        kept = msg;
        return msg.length;
    }

    static int keptLength() {
        return kept.length;
    }

    static int keptAt(int i) {
        return kept[i];
    }

    static void keptStore(int i, int v) {
        kept[i] = (byte) v;
    }

    static int plain(int a, int b) {
        return a + b;
    }
}
