public class UsesDouble { static int half(int a) { double d = a; d = d / 2; return (int) d; } }
