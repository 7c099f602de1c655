// VoidMethods: not an experiment of the paper but the probe of the engine's
// outcome tests (crates/unet/tests/endpoint.rs): doTx and doRx are void.
// A void method returns no value, so the engine must neither count a drop
// nor refuse a message for it, whatever its code left in the register a
// value would come back in: here each computes a negative number last
// (the message's length, negated, less one), which the JIT leaves there.
//
// doRx delivers nothing (it makes no receive descriptor) and doTx sends
// nothing; the host reads `last` to see that each ran.
public class VoidMethods {
    public static byte[] RxBuf;
    public static int last;

    private static void doTx(int length, int channel, int off) {
        last = -length - 1;
    }

    private static void doRx(int length, int channel) {
        last = -length - 1;
    }
}
