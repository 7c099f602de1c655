// A lent byte[] (crates/jive/tests/lend_runtime.rs) passed to a native the
// JIT emits inline: copyIn, the inline form CopyIn (unet's doLtoHDMA), which
// copies the array's bytes [aoff, aoff + len) into the host's area at 8.
public class LendingInline {
    static native void copyIn(byte[] b, int aoff, int off, int len);

    static int viaInline(byte[] msg, int aoff, int len) {
        copyIn(msg, aoff, 8, len);
        return msg.length;
    }
}
