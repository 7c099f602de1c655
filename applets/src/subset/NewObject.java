public class NewObject { static int f() { Object o = new Object(); return 0; } }
