public class Lambda { static int f() { Runnable r = () -> { }; return 0; } }
