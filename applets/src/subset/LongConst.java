public class LongConst { static int f(int a) { return (int) (a * 1000000000000L); } }
