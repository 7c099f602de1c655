import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;

/**
 * Differential-test harness: reads lines "Class method arg...", calls the
 * static method with int arguments and prints one line per call: the result
 * as an int (booleans as 0/1), or "!" and the simple name of the exception.
 */
public class Harness {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) continue;
            String[] p = line.split(" ");
            Class<?> c = Class.forName(p[0]);
            Method m = null;
            for (Method x : c.getDeclaredMethods()) if (x.getName().equals(p[1])) m = x;
            m.setAccessible(true);
            Class<?>[] types = m.getParameterTypes();
            Object[] a = new Object[types.length];
            for (int i = 0; i < types.length; i++) {
                int v = Integer.parseInt(p[2 + i]);
                if (types[i] == byte.class) a[i] = (byte) v;
                else if (types[i] == short.class) a[i] = (short) v;
                else if (types[i] == boolean.class) a[i] = (v & 1) != 0;
                else a[i] = v;
            }
            try {
                Object r = m.invoke(null, a);
                if (r instanceof Boolean) out.append(((Boolean) r) ? 1 : 0);
                else if (r == null) out.append("void");
                else out.append(((Number) r).intValue());
            } catch (InvocationTargetException e) {
                out.append('!').append(e.getCause().getClass().getSimpleName());
            }
            out.append('\n');
        }
        System.out.print(out);
    }
}
