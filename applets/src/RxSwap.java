// An applet that replaces its RxBuf between messages, for the host's view
// of the array (jive's StaticBytes): storing another array, null, or a new
// array that may take the old one's handle once a collection freed it.
public class RxSwap {
    static byte[] RxBuf;
    static byte[] Other;

    static int first() { return RxBuf[0]; }
    static void rxNew(int n, int v) { RxBuf = new byte[n]; RxBuf[0] = (byte) v; }
    // RxBuf cleared, the old array kept (nothing allocated or freed).
    static void rxNullKept() { Other = RxBuf; RxBuf = null; }
    // RxBuf cleared and a scratch array made, so that the collection at
    // the end of the invocation frees the old array.
    static void rxNullFreed() { RxBuf = null; Other = null; byte[] s = new byte[1]; s[0] = 1; }
    // The two fields swap arrays (nothing allocated or freed).
    static void swap() { byte[] t = RxBuf; RxBuf = Other; Other = t; }
}
