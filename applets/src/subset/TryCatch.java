public class TryCatch { static int f(int a) { try { return 10 / a; } catch (ArithmeticException e) { return -1; } } }
