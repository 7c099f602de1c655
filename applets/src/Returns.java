// Returns to the host. The methods no method calls are compiled at their
// dispatch target and return straight to the host: constants (0 and
// others), arguments, a local kept in memory, a value chosen by a switch,
// and void. `callee` is called by `caller`, so it returns through its call
// stub when the host invokes it. Fuel: a switch or a call charges one unit,
// so `pick` costs 1 on every path, `pick2` 2 and `caller` 1; the rest 0.
public class Returns {
    static int seen;

    static int zero(int a) { return 0; }
    static int seven(int a) { return 7; }
    static int minusOne(int a) { return -1; }
    static int big(int a) { return 0x12345678; }
    static int min(int a) { return Integer.MIN_VALUE; }
    static int arg(int a) { return a; }
    static int second(int a, int b) { return b; }
    static int deep(int a, int b) {
        int c0 = a + 1, c1 = b + 2, c2 = a ^ b, c3 = a - b, c4 = c0 * 3, c5 = c1 * 5;
        int c6 = c2 + c3, c7 = c4 - c5, c8 = c6 ^ c7, c9 = c8 + a, c10 = c9 - b;
        int c11 = c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7 + c8 + c9 + c10;
        return c11;
    }
    static void touch(int a) { seen = a; }
    static int seenNow(int a) { return seen; }
    static int pick(int m) {
        switch (m) {
            case 0: return 0;
            case 1: return 11;
            case 2: return m;
            default: return -m;
        }
    }
    static int pick2(int m) {
        int r;
        switch (m) {
            case 0: r = 3; break;
            case 1: r = 4; break;
            default: r = 5; break;
        }
        switch (r) {
            case 3: return 0;
            case 4: return m;
            default: return 9;
        }
    }
    static int callee(int a) { return a + 1; }
    static int caller(int a) { return callee(a) - a - 1; }
}
