public class Overloads { static int f(int a) { return a; } static int f(int a, int b) { return a + b; } }
