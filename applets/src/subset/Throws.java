public class Throws { static int f(int a) { if (a < 0) throw null; return a; } }
