// InitFuel: initializers that each fit in an invocation's fuel but not
// together (crates/jive/tests/applets.rs). `<clinit>` and the constructor
// each run the loop `again` runs (600 taken back edges), written out in
// each so that a trap names the initializer it ran in; 700 units pay for
// either alone, and the two share one invocation's fuel.
public class InitFuel {
    static int total;
    int mine;

    static {
        for (int i = 0; i < 600; i++) {
            total += i;
        }
    }

    InitFuel() {
        for (int i = 0; i < 600; i++) {
            mine += i;
        }
    }

    static int again() {
        int sum = 0;
        for (int i = 0; i < 600; i++) {
            sum += i;
        }
        return sum;
    }

    static int total() {
        return total;
    }

    int mine() {
        return mine;
    }
}
