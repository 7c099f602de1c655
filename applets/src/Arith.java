// Static int methods run both by jive and by HotSpot (differential test):
// overflow, shifts, division edge cases, narrowing, switches, recursion,
// loops, arrays and the dup family.
public class Arith {
    static int sf;
    static byte sb;
    static short ss;
    static boolean sz;

    static int add(int a, int b) { return a + b; }
    static int sub(int a, int b) { return a - b; }
    static int mul(int a, int b) { return a * b; }
    static int div(int a, int b) { return a / b; }
    static int rem(int a, int b) { return a % b; }
    static int neg(int a) { return -a; }
    static int shl(int a, int b) { return a << b; }
    static int shr(int a, int b) { return a >> b; }
    static int ushr(int a, int b) { return a >>> b; }
    static int bits(int a, int b) { return (a & b) ^ (a | ~b); }
    static int toByte(int a) { return (byte) a; }
    static int toShort(int a) { return (short) a; }
    static byte retByte(int a) { return (byte) (a * 3); }
    static short retShort(int a) { return (short) (a * 5); }
    static boolean isNeg(int a) { return a < 0; }
    static boolean isSmall(byte b) { return b < 10; }

    static int byteArith(int a, int b) {
        byte x = (byte) a;
        byte y = (byte) b;
        x += y;
        x *= 3;
        return x;
    }

    static int shortArith(int a, int b) {
        short x = (short) a;
        x -= (short) b;
        x <<= 3;
        return x;
    }

    static int incs(int a) {
        int x = a;
        x += 100;
        x += 1000;
        x -= 30000;
        x += 70000;
        x++;
        return x;
    }

    static int tswitch(int a) {
        switch (a) {
            case 0: return 10;
            case 1: return 11;
            case 2: return 12;
            case 4: return 14;
            case 5: return 15;
            default: return -1;
        }
    }

    static int lswitch(int a) {
        switch (a) {
            case -1000000: return 1;
            case 7: return 2;
            case 1000: return 3;
            case Integer.MAX_VALUE: return 4;
            case Integer.MIN_VALUE: return 5;
            default: return 0;
        }
    }

    static int fallSwitch(int a) {
        int r = 0;
        switch (a & 7) {
            case 0: r += 1;
            case 1: r += 2; break;
            case 2: r += 4;
            case 3: r += 8; break;
            default: r = -a;
        }
        return r;
    }

    static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

    static int fibOf(int n) { return fib(n & 15); }

    static int ack(int m, int n) {
        if (m == 0) return n + 1;
        if (n == 0) return ack(m - 1, 1);
        return ack(m - 1, ack(m, n - 1));
    }

    static int ackSmall(int m, int n) { return ack(m & 1, n & 7); }

    static int gcd(int a, int b) {
        while (b != 0) {
            int t = a % b;
            a = b;
            b = t;
        }
        return a;
    }

    static int cmp(int a, int b) {
        int r = 0;
        if (a < b) r |= 1;
        if (a <= b) r |= 2;
        if (a > b) r |= 4;
        if (a >= b) r |= 8;
        if (a == b) r |= 16;
        if (a != b) r |= 32;
        if (a < 0) r |= 64;
        if (a <= 0) r |= 128;
        if (a > 0) r |= 256;
        if (a >= 0) r |= 512;
        if (a == 0) r |= 1024;
        if (a != 0) r |= 2048;
        return r;
    }

    static int loop(int n) {
        int s = 0;
        for (int i = 0; i < (n & 1023); i++) s = s * 31 + i;
        return s;
    }

    static int intArray(int n, int k) {
        int[] a = new int[n];
        for (int i = 0; i < a.length; i++) a[i] = i * k;
        int s = 0;
        for (int i = 0; i < a.length; i++) s += a[i];
        return s;
    }

    static int byteArray(int v, int i) {
        byte[] b = new byte[4];
        b[i] = (byte) v;
        b[(i + 1) & 3] = (byte) (v >> 8);
        return b[i] * 1000 + b[(i + 1) & 3];
    }

    static int shortArray(int v, int i) {
        short[] s = new short[3];
        s[i] = (short) v;
        s[i] += 7;
        return s[i] + s.length;
    }

    static int boolArray(int v) {
        boolean[] z = new boolean[2];
        z[0] = v > 0;
        z[1] = !z[0];
        return (z[0] ? 1 : 0) + (z[1] ? 10 : 0);
    }

    static int dups(int i, int v) {
        int[] a = new int[4];
        a[i & 3] += v;
        a[i & 3]++;
        int x;
        int y = x = a[i & 3] * 2;
        return x + y + a[i & 3];
    }

    static int fields(int a) {
        sf = a;
        sb = (byte) a;
        ss = (short) a;
        sz = a > 0;
        sf += 3;
        int old = sf++;
        return sf + sb + ss + (sz ? 1 : 0) + old;
    }

    static int nullArray(int i) {
        int[] a = null;
        if (i > 100) a = new int[1];
        return a[0];
    }

    // Division and remainder of the same operands one after the other
    // (the JIT computes the remainder from the quotient), by a local and by
    // a static; and the patterns it must not take for that: the quotient
    // stored into the divisor, a static written between the two.
    static int divRem(int a, int b) {
        int q = a / b;
        int r = a % b;
        return q * 65599 + r;
    }

    static int divRemStatic(int a, int b) {
        sf = b;
        int q = a / sf;
        int r = a % sf;
        return q * 65599 + r;
    }

    static int divRemIntoDivisor(int a, int b) {
        b = a / b;
        return a % b;
    }

    static int divRemStaticWritten(int a, int b) {
        sf = b;
        int q = a / sf;
        sf = q;
        int r = a % sf;
        return q * 65599 + r;
    }

    // Statics read again after a branch, written on one of its ways.
    static int staticAfterBranch(int a, int b) {
        sf = a;
        int x = sf;
        if (b > 0) sf = b;
        if (a < b) x += sf;
        return x * 31 + sf;
    }

    static int arrayLen(int n) {
        byte[] b = new byte[n];
        return b.length;
    }
}
