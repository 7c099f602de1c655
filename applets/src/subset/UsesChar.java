public class UsesChar { static int low(int a) { char c = (char) a; return c; } }
