// Counted loops for the JIT's fuel test (jive/tests/jit.rs,
// `counted_loops_run_out_of_fuel_where_the_interpreter_does`): the JIT
// charges such a loop's trip count once at its entry when the fuel left
// covers it, and runs it charge by charge otherwise, so every method here
// must trap (or return, with the same fuel used) at the same point as the
// interpreter for every fuel budget around the point where it runs out.
// Each body leaves effects (static fields, array elements) that show how
// far it got, and some trap in the middle of the loop.
public class FuelLoops {
    static int sum;
    static int count;
    static int limit = 5;
    static int[] arr = new int[8];
    /** 0, 2, 4, ..., 46: the scanning loops' array. */
    static int[] scan = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 38, 40, 42, 44, 46};

    /** Counting up; divides by zero when i reaches bad. */
    static int up(int from, int to, int bad) {
        int s = 0;
        for (int i = from; i < to; i++) {
            s += 100 / (i - bad);
            sum = s;
        }
        return s;
    }

    /** Counting down; an index out of bounds when i reaches bad. */
    static int down(int from, int to, int bad) {
        int[] a = arr;
        for (int i = from; i > to; i--) {
            if (i == bad) {
                a[9] = i;
            } else {
                a[i & 7] = i;
            }
            count++;
        }
        return count;
    }

    /** The bound on the left of the test: while (to > i). */
    static int upSwapped(int from, int to, int x) {
        int i = from;
        while (to > i) {
            sum += i ^ x;
            i++;
        }
        return sum;
    }

    /** An inner counted loop inside a loop that stays metered. */
    static int nested(int n, int m, int x) {
        int s = 0;
        for (int j = 0; j < n; j++) {
            for (int i = 0; i < m; i++) {
                s += i * j + x;
                arr[(i + j) & 7] = s;
            }
            sum = s;
        }
        return s;
    }

    /** A bound read from a static into a local. */
    static int staticBound(int from, int x, int y) {
        int lim = limit + x;
        int s = y;
        for (int i = from; i < lim; i++) {
            s = s * 3 + i;
            arr[i & 7] = s;
        }
        limit = (limit + 1) & 15;
        return s;
    }

    /** Leaves early (break): not a counted loop, charged per iteration. */
    static int breaks(int n, int stop, int x) {
        int s = 0;
        for (int i = 0; i < n; i++) {
            if (i == stop) {
                break;
            }
            s += x;
            count = s;
        }
        return s;
    }

    /** Writes its bound: not a counted loop. */
    static int movingBound(int n, int at, int x) {
        int s = 0;
        for (int i = 0; i < n; i++) {
            if (i == at) {
                n -= 2;
            }
            s += i + x;
            sum = s;
        }
        return s;
    }

    /** A call of a method that charges nothing, on every pass: counted, one unit a pass (the call's). */
    static int calls(int n, int x, int y) {
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += twice(i + x);
            sum = s;
        }
        return s + y;
    }

    static int twice(int v) {
        return v + v;
    }

    static int nothing() {
        return 0;
    }

    /** Divides by zero when i reaches bad: the callee traps. */
    static int divide(int i, int bad) {
        return 100 / (i - bad);
    }

    /** Reads a[i]: out of bounds past the array's end. */
    static int element(int[] a, int i) {
        return a[i];
    }

    /** Forward branches only: charges nothing. */
    static int clamp(int v) {
        if (v > 9) {
            return 9;
        }
        return v < -9 ? -9 : v;
    }

    /** A loop: charges at its back edge. */
    static int sumTo(int v) {
        int s = 0;
        for (int k = 0; k < (v & 3); k++) {
            s += k;
        }
        return s;
    }

    /** A call: charges. */
    static int callsTwice(int v) {
        return twice(v) + 1;
    }

    int field = 3;

    /** An instance method that charges nothing. */
    int plus(int v) {
        return v + field;
    }

    /** Two calls a pass (one of an empty method, run in place): two units a pass. */
    static int twoCalls(int from, int to, int x) {
        int s = 0;
        for (int i = from; i < to; i++) {
            nothing();
            s += clamp(i + x);
            sum = s;
        }
        return s;
    }

    /** A static call that traps (division by zero) when i reaches bad. */
    static int callTraps(int from, int to, int bad) {
        int s = 0;
        for (int i = from; i < to; i++) {
            s += divide(i, bad);
            sum = s;
        }
        return s;
    }

    /** Counting down, a call that reads past the array's end when i reaches bad. */
    static int callReadsPast(int from, int to, int bad) {
        int[] a = arr;
        int s = 0;
        for (int i = from; i > to; i--) {
            s += element(a, i == bad ? 8 : i & 7);
            count = s;
        }
        return s;
    }

    /** Instance calls, the receiver null from pass `at` on (a null receiver traps). */
    int instanceCalls(int n, int at, int x) {
        FuelLoops r = this;
        int s = 0;
        for (int i = 0; i < n; i++) {
            if (i == at) {
                r = null;
            }
            s += r.plus(i + x);
            sum = s;
        }
        return s;
    }

    /** A call on each branch: one unit a pass on every path, counted. */
    static int callEitherWay(int n, int x, int y) {
        int s = 0;
        for (int i = 0; i < n; i++) {
            if (((i ^ x) & 1) == 0) {
                s += twice(i);
            } else {
                s -= clamp(i + y);
            }
            count = s;
        }
        return s;
    }

    /** A call on one branch only: the passes charge 1 or 2 units, not a counted loop. */
    static int callOneWay(int n, int x, int y) {
        int s = 0;
        for (int i = 0; i < n; i++) {
            if (((i ^ x) & 3) == 0) {
                s += twice(i + y);
            }
            sum = s;
        }
        return s;
    }

    /** Callees that charge (a loop, a call): not counted loops. */
    static int chargingCallees(int n, int x, int y) {
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += sumTo(i + x);
            sum = s;
        }
        for (int i = 0; i < n; i++) {
            s += callsTwice(i + y);
            count = s;
        }
        return s;
    }

    /** Two loops in a row, then an empty one. */
    static int twoLoops(int n, int m, int x) {
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += i;
            arr[i & 7] = s;
        }
        for (int i = m; i > 0; i--) {
            s ^= i + x;
            count = s;
        }
        for (int i = x; i < m; i++) {
        }
        return s;
    }

    /** Constant bounds: <, <= and >= (one more or less than the constant). */
    static int constBounds(int from, int x, int bad) {
        int s = 0;
        for (int i = from; i < 37; i++) {
            s += x / (i - bad);
            arr[i & 7] = s;
        }
        for (int i = from; i <= 20; i++) {
            sum += i;
        }
        for (int i = from; i >= -20; i--) {
            count += i;
        }
        return s;
    }

    /** Never ends unmetered (i <= MAX_VALUE holds for every int): not a counted loop. */
    static int forever(int from, int x, int y) {
        for (int i = from; i <= 2147483647; i++) {
            sum += x;
        }
        return y;
    }

    // Scanning loops (quicksort's `while (a[i] < pivot) i++;`): one
    // straight-line block with its exit tests and no call, which the JIT's
    // metered code runs four passes per fuel test, charging the group at
    // its first back edge and giving back on an exit what the group's
    // untaken back edges were charged. The number of passes, so the pass of
    // the group that leaves, moves with the arguments; a scan that runs off
    // the array traps at its test, in any pass of a group.

    /** Scanning up to the first element at least 2 * key; past the end traps. */
    static int scanUp(int from, int key, int x) {
        int[] a = scan;
        int i = from & 15;
        int k = 2 * key;
        while (a[i] < k) i++;
        sum = i + x;
        return i;
    }

    /** Scanning down to the first element at most 2 * key; below 0 traps. */
    static int scanDown(int from, int key, int x) {
        int[] a = scan;
        int j = (from & 15) + 8;
        int k = 2 * key;
        while (a[j] > k) j--;
        sum = j + x;
        return j;
    }

    /** Two exits (the && of two tests), and a count kept on every pass. */
    static int scanTwoExits(int from, int key, int stop) {
        int[] a = scan;
        int i = from & 7;
        int k = 2 * key;
        while (a[i] < k && i != stop) {
            count++;
            i++;
        }
        return i;
    }

    /** Divides by zero in the pass where the element is 2 * bad. */
    static int scanDivides(int from, int key, int bad) {
        int[] a = scan;
        int i = from & 15;
        int s = 0;
        int k = 2 * key;
        int d = 2 * bad;
        while (a[i] < k) {
            s += 1000 / (a[i] - d);
            arr[i & 7] = s;
            i++;
        }
        return s;
    }

    /**
     * A back edge without an iinc (i = i + step): with step 0 it never
     * ends, and runs out of fuel in a group however far in.
     */
    static int scanStride(int from, int key, int x) {
        int[] a = scan;
        int i = from & 15;
        int step = x & 3;
        int k = 2 * key;
        while (a[i] < k) {
            count += step;
            i = i + step;
        }
        return i;
    }

    /**
     * Entered by a jump to its head from the if/else before it (which the
     * JIT compiles as a copy of the head's test, `i < n`, and a jump past
     * it) or by falling through: both must enter the group. Two exits; past
     * the array's end (n up to 31) the scan traps, in any pass.
     */
    static int scanAfterBranch(int from, int key, int x) {
        int[] a = scan;
        int n = from & 31;
        int k = 2 * key;
        int i;
        if (x > 0) {
            i = x & 7;
        } else {
            i = 1;
        }
        while (i < n && a[i] < k) i++;
        sum = i + x;
        return i;
    }

    /**
     * A counted loop entered by a jump to its head from the if/else before
     * it (which the JIT compiles as a copy of the head's test, `i < to`,
     * and a jump past it) or by falling through: both must reach the
     * loop's entry, which charges the trip count once. Divides by zero
     * when i reaches bad.
     */
    static int upAfterBranch(int from, int to, int bad) {
        int s = 0;
        int i;
        if (bad > 0) {
            i = from;
        } else {
            i = from + 1;
        }
        while (i < to) {
            s += 100 / (i - bad);
            i++;
        }
        sum = s;
        return s;
    }
}
