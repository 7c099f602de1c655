// LentKeeper: not an experiment of the paper but the attacker of the lent
// doRx (crates/unet/tests/rx_lent.rs): its doRx(msg, length, channel)
// keeps the lent message in a static, to read it after the lend ends.
// The verifier refuses the class at install: a lent byte[] may be read,
// never kept or written (jive::LentParam, docs/jive.md).
public class LentKeeper {
    public static byte[] kept;

    private static int doTx(int length, int channel, int off) {
        return -1;
    }

    private static int doRx(byte[] msg, int length, int channel) {
        kept = msg;
        return 0;
    }
}
