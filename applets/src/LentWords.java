// A native of no arguments returning int, called outside constructors,
// for the words a host lends an invocation's inline natives
// (jive's Natives::set_words and Applet::run_prepared_lent).
public class LentWords {
    static native int size();

    static int ask() { return size(); }
}
