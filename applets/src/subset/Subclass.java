public class Subclass extends Thread { }
