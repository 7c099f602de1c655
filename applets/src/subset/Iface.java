public class Iface implements Runnable { public void run() { } }
