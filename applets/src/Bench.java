// The benchmark suite of the U-Net/SLE paper (section 4), run by jive and
// by HotSpot on the same class file. Each method runs its operation n times;
// per-operation times subtract nullLoop, as the paper does.
public class Bench {
    static int sf;
    static int sx;
    static int sy;
    static int[] one = new int[1];
    static int[] ax = new int[1];
    static int[] ay = new int[1];

    static int nullLoop(int n) {
        for (int i = 0; i < n; i++) {
        }
        return 0;
    }

    static int nothing() { return 0; }

    static int nullCall(int n) {
        for (int i = 0; i < n; i++) {
            nothing();
        }
        return 0;
    }

    static int fieldRead(int n) {
        int x = 0;
        for (int i = 0; i < n; i++) {
            x = sf;
        }
        return x;
    }

    static int fieldWrite(int n) {
        for (int i = 0; i < n; i++) {
            sf = i;
        }
        return 0;
    }

    static int arrayRead(int n) {
        int[] a = one;
        int x = 0;
        for (int i = 0; i < n; i++) {
            x = a[0];
        }
        return x;
    }

    static int arrayWrite(int n) {
        int[] a = one;
        for (int i = 0; i < n; i++) {
            a[0] = i;
        }
        return 0;
    }

    static int math(int n) {
        int x = 3;
        int y = 0;
        for (int i = 0; i < n; i++) {
            y = x + x + x + x + x + x + x + x + x + x;
        }
        return y;
    }

    static int mathField(int n) {
        sx = 3;
        for (int i = 0; i < n; i++) {
            sy = sx + sx + sx + sx + sx + sx + sx + sx + sx + sx;
        }
        return sy;
    }

    static int mathArray(int n) {
        int[] x = ax;
        int[] y = ay;
        x[0] = 3;
        for (int i = 0; i < n; i++) {
            y[0] = x[0] + x[0] + x[0] + x[0] + x[0] + x[0] + x[0] + x[0] + x[0] + x[0];
        }
        return y[0];
    }

    static void qsort(int[] a, int lo, int hi) {
        int i = lo;
        int j = hi;
        int pivot = a[(lo + hi) >>> 1];
        while (i <= j) {
            while (a[i] < pivot) i++;
            while (a[j] > pivot) j--;
            if (i <= j) {
                int t = a[i];
                a[i] = a[j];
                a[j] = t;
                i++;
                j--;
            }
        }
        if (lo < j) qsort(a, lo, j);
        if (i < hi) qsort(a, i, hi);
    }

    /** Quicksort of n numbers initially in reverse order. */
    static int qsortReverse(int n) {
        int[] a = new int[n];
        for (int i = 0; i < n; i++) a[i] = n - i;
        qsort(a, 0, n - 1);
        return a[0] + a[n - 1];
    }

    /** n numbers from an additive congruential generator (Knuth's subtractive method), fixed seed. */
    static int rand(int n) {
        int[] ma = new int[56];
        int mj = 161803398 - 314159;
        mj %= 1000000000;
        ma[55] = mj;
        int mk = 1;
        for (int i = 1; i < 55; i++) {
            int ii = (21 * i) % 55;
            ma[ii] = mk;
            mk = mj - mk;
            if (mk < 0) mk += 1000000000;
            mj = ma[ii];
        }
        for (int k = 1; k <= 4; k++) {
            for (int i = 1; i < 56; i++) {
                ma[i] -= ma[1 + (i + 30) % 55];
                if (ma[i] < 0) ma[i] += 1000000000;
            }
        }
        int inext = 0;
        int inextp = 31;
        int sum = 0;
        for (int r = 0; r < n; r++) {
            if (++inext == 56) inext = 1;
            if (++inextp == 56) inextp = 1;
            int x = ma[inext] - ma[inextp];
            if (x < 0) x += 1000000000;
            ma[inext] = x;
            sum += x / 1000 * 7 % 1009;
        }
        return sum;
    }

    /** The first n fibonacci numbers. */
    static int fibonacci(int n) {
        int a = 0;
        int b = 1;
        for (int i = 0; i < n; i++) {
            int t = a + b;
            a = b;
            b = t;
        }
        return a;
    }
}
