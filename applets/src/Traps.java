// One method per trap kind, plus a counter showing the applet survives traps.
public class Traps {
    static int[] arr;
    static int counter;
    static int[] kept;

    static int aioobe(int i) { int[] a = new int[3]; return a[i]; }
    static int npe(int i) { return arr[i]; }
    static int div(int a, int b) { return a / b; }
    static int negSize(int n) { return new int[n].length; }
    static int spin(int n) { while (true) { n++; } }
    static int spinCalling(int n) { while (true) { n += bump(); } }
    static int recurse(int n) { return recurse(n + 1) + 1; }
    static int hog(int n) {
        int s = 0;
        for (int i = 0; i < n; i++) {
            int[] a = new int[1000];
            s += a.length;
        }
        return s;
    }
    static int bump() { counter++; return counter; }
    static int bumpThenTrap(int i) {
        counter += 100;
        kept = new int[8];
        int[] scratch = new int[8];
        return scratch[i];
    }
    static int keptLen() { return kept == null ? -1 : kept.length; }
}
