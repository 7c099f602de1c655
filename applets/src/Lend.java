// Methods for the lent-array analysis (crates/jive/tests/lend.rs): each
// takes a byte[] msg first, which a test declares lent (jive::LentParam) for
// one method at a time. The first group only reads msg and must be
// accepted; every other method smuggles msg out one way and must be
// refused, naming the method, the bytecode index and what it did. Undeclared,
// every method is an ordinary one and the class loads.
public class Lend {
    static byte[] Kept;
    static byte[] Other = new byte[4];
    byte[] kept;

    // rd reads its array; wr writes it; rdwr reads src and writes dst;
    // same returns its array (the tests' table marks rd, rdwr's src and
    // same as read-only).
    static native int rd(byte[] a, int n);
    static native void wr(byte[] a, int n);
    static native void rdwr(byte[] src, byte[] dst, int n);
    static native byte[] same(byte[] a);

    // ---- Allowed: reads, compares, read-only natives, moves between locals.

    // The shape of a lending doRx: reads, a loop, a read-only native.
    static int doRx(byte[] msg, int length, int channel) {
        if (msg == null || msg.length < 4) {
            return -1;
        }
        int sum = 0;
        for (int i = 0; i < msg.length; i++) {
            sum += msg[i];
        }
        return sum + rd(msg, length) + channel;
    }

    // msg through locals and a loop that joins them; only reads.
    static int readJoined(byte[] msg, int c) {
        byte[] a = Other;
        byte[] b = msg;
        int s = 0;
        for (int i = 0; i < c; i++) {
            byte[] t = a;
            a = b;
            b = t;
            s += a[0] + b.length;
        }
        return s;
    }

    // A ternary and a switch that join msg with another array; the join
    // is only read.
    static int readTernary(byte[] msg, int c) {
        byte[] x = c > 0 ? msg : Other;
        return x[0];
    }

    static int readSwitch(byte[] msg, int c) {
        byte[] x;
        switch (c) {
            case 0: x = msg; break;
            case 1: x = Other; break;
            case 2: x = new byte[2]; break;
            default: x = msg;
        }
        return x.length;
    }

    // Reference comparisons.
    static int compares(byte[] msg, int c) {
        if (msg == Other) {
            return 1;
        }
        if (msg != null) {
            return 2;
        }
        return 3;
    }

    // Read-only parameters of natives: rd, rdwr's src.
    static int passReadOnly(byte[] msg, int n) {
        rdwr(msg, Other, n);
        return rd(msg, n);
    }

    // The arrays the method makes itself are its own.
    static void ownArrays(byte[] msg, int n) {
        byte[] mine = new byte[n];
        mine[0] = msg[0];
        Kept = mine;
        wr(mine, 0);
    }

    // Tail sites (jive::TAIL_SUFFIX) with the lent array as the argument:
    // pushed from its parameter, whose local no instruction writes, the
    // site binds the native's tail form (the host holds the lent bytes,
    // not the heap); from a local written anywhere in the method, or from
    // a copy in another local, it does not. Each only reads msg.
    static int tailLent(byte[] msg, int n) {
        rd(msg, n);
        return 0;
    }

    static int tailLentWritten(byte[] msg, int n) {
        if (n < 0) {
            msg = Other;
        }
        rd(msg, n);
        return 0;
    }

    static int tailLentCopied(byte[] msg, int n) {
        byte[] b = msg;
        rd(b, n);
        return 0;
    }

    // ---- Refused: each smuggles msg out.

    static void storeStatic(byte[] msg) {
        Kept = msg;
    }

    void storeField(byte[] msg) {
        kept = msg;
    }

    static void write(byte[] msg) {
        msg[0] = 1;
    }

    static byte[] returnIt(byte[] msg) {
        return msg;
    }

    static int helper(byte[] a, int n) {
        return a[n];
    }

    static int passToMethod(byte[] msg, int n) {
        return helper(msg, n);
    }

    // A local that holds msg on one path and Other on the other, stored.
    static void mergeLocal(byte[] msg, int c) {
        byte[] x = Other;
        if (c > 0) {
            x = msg;
        }
        Kept = x;
    }

    // aload msg; dup; astore t; putstatic.
    static int dupStore(byte[] msg) {
        byte[] t;
        Kept = t = msg;
        return t[0];
    }

    // The join on the operand stack: aload msg / getstatic Other; putstatic.
    static void ternaryStore(byte[] msg, int c) {
        Kept = c > 0 ? msg : Other;
    }

    // A tableswitch whose arms join in a local, stored.
    static void switchStore(byte[] msg, int c) {
        byte[] x;
        switch (c) {
            case 0: x = Other; break;
            case 1: x = new byte[1]; break;
            case 2: x = msg; break;
            default: x = Other;
        }
        Kept = x;
    }

    // A loop that moves msg one local further per trip: b holds it only
    // from the third trip on, so only a fixed point finds the store.
    static void loopStore(byte[] msg, int c) {
        byte[] a = Other;
        byte[] b = Other;
        for (int i = 0; i < c; i++) {
            Kept = b;
            b = a;
            a = msg;
        }
    }

    // A lent array as the second argument of a native whose first is
    // read-only, and a native that writes its only array.
    static void passSecond(byte[] msg, int n) {
        rdwr(Other, msg, n);
    }

    static void passWriting(byte[] msg, int n) {
        wr(msg, n);
    }

    // What a native given msg returns may be msg.
    static void launder(byte[] msg) {
        Kept = same(msg);
    }
}
