public class InstanceNative { native int f(int a); }
