public class Synchronized { static synchronized int f(int a) { return a; } }
