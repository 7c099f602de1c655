public class ObjectArray { static int f() { int[][] a = new int[2][]; return a.length; } }
