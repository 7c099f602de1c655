// LentTxKeeper: the attacker of the lent doTx (tests/tx_lent.rs), whose
// doTx keeps the lent message, the application's bytes in its buffer area,
// in a static for a later invocation to read; refused at install.
public class LentTxKeeper {
    public static byte[] RxBuf;
    public static byte[] kept;

    private static int doTx(byte[] msg, int length, int channel) {
        kept = msg;
        return 0;
    }

    private static int doRx(int length, int channel) {
        return 0;
    }
}
