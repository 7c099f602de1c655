public class MultiDim { static int f() { int[][] a = new int[2][3]; return 0; } }
