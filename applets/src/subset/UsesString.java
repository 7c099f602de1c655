public class UsesString { static int len() { return "abc".length(); } }
