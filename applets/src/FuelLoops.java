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

    /** A call in the body: not a counted loop (the call charges). */
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
}
