public class OtherClass { static int f(int a) { return Math.abs(a); } }
