public class UsesLong { static long twice(long a) { return a * 2; } }
