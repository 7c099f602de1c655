package adversarial;

// Adversarial applet for jive's engines (tests/adversarial.rs runs
// every method on the interpreter and the JIT and wants the same result,
// trap, fuel and state from both). Each method aims at a place where native
// code could read or write outside the applet's memory, or disagree with the
// interpreter: indices at the ends of the int range, index arithmetic that
// wraps, arrays from natives (and handles forged by them), recursion up to
// and past the call-depth and frame-stack limits, fuel running out inside
// loops, narrowing stores at every array boundary, allocation sizes at the
// ends of the range, MIN_VALUE / -1, and many fields. Stays in the JIVE
// subset (docs/jive.md).
public class Adversary {
    // Four elements each; <clinit> fills them. The host reads them after
    // every invocation, so a stray write shows.
    static int[] ints;
    static byte[] bytes;
    static short[] shorts;
    static boolean[] bools;
    // Two small arrays allocated one after the other: writing past the end
    // of `left` must trap, not reach `right`.
    static byte[] left;
    static byte[] right;
    // Always null.
    static int[] nothing;
    // An array a native gave, kept across invocations.
    static byte[] kept;
    // A handle remembered across invocations (of an array that was freed).
    static int staleHandle;

    static int counter;
    static byte sbyte;
    static short sshort;
    static boolean sbool;
    static int s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15;

    int f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19,
        f20, f21, f22, f23, f24, f25, f26, f27, f28, f29, f30, f31;
    byte fb;
    short fs;
    boolean fz;
    int[] farr;

    // Allocates an n-byte array (the test binds it to Context::new_array).
    static native byte[] give(int n);
    // An n-int array.
    static native int[] giveInts(int n);
    // Returns its argument as a byte[] handle: whatever int the host likes.
    static native byte[] forge(int handle);
    // The handle of an array, as the native sees it.
    static native int handleOf(byte[] a);
    static native int handleOfInts(int[] a);
    // Stores v at a[i] from the host side (bounds-checked by the host).
    static native void poke(byte[] a, int i, int v);

    static {
        ints = new int[4];
        bytes = new byte[4];
        shorts = new short[4];
        bools = new boolean[4];
        for (int i = 0; i < 4; i++) {
            ints[i] = 10 * (i + 1);
            bytes[i] = (byte) (i + 1);
            shorts[i] = (short) (100 * (i + 1));
            bools[i] = (i & 1) == 1;
        }
        left = new byte[4];
        right = new byte[4];
        for (int i = 0; i < 4; i++) {
            right[i] = 7;
        }
    }

    // ---- Reads at any index: the host passes MIN_VALUE, -1, 0, length - 1,
    // length and MAX_VALUE.

    static int readInt(int i) {
        return ints[i];
    }

    static int readByte(int i) {
        return bytes[i];
    }

    static int readShort(int i) {
        return shorts[i];
    }

    static int readBool(int i) {
        return bools[i] ? 1 : 0;
    }

    // The array in a local and the index in a local (iaload/baload on two
    // locals, a superinstruction of the decoder).
    static int readIntLocal(int n, int i) {
        int[] a = new int[n];
        return a[i];
    }

    static int readByteLocal(int n, int i) {
        byte[] a = new byte[n];
        return a[i];
    }

    // Constant indices, inside, at and beyond the bounds.
    static int constIndex(int k) {
        int[] a = ints;
        switch (k) {
            case 0: return a[0];
            case 1: return a[3];
            case 2: return a[4];
            case 3: return a[-1];
            case 4: return a[32767];
            case 5: return a[-32768];
            case 6: return a[Integer.MAX_VALUE];
            case 7: return a[Integer.MIN_VALUE];
            case 8: return k + a[3];
            default: return k + a[4];
        }
    }

    static int constStore(int k, int v) {
        int[] a = ints;
        switch (k) {
            case 0: a[0] = v; break;
            case 1: a[3] = v; break;
            case 2: a[4] = v; break;
            case 3: a[-1] = v; break;
            case 4: a[Integer.MAX_VALUE] = v; break;
            default: a[Integer.MIN_VALUE] = v; break;
        }
        return a[0] + a[3];
    }

    // ---- Writes at every boundary, with values that need narrowing.

    static void writeInt(int i, int v) {
        ints[i] = v;
    }

    static void writeByte(int i, int v) {
        bytes[i] = (byte) v;
    }

    static void writeShort(int i, int v) {
        shorts[i] = (short) v;
    }

    static void writeBool(int i, int v) {
        bools[i] = (v & 1) == 1;
    }

    static void writeIntLocal(int i, int v) {
        int[] a = ints;
        a[i] = v;
    }

    static void writeByteLocal(int i, int v) {
        byte[] a = bytes;
        a[i] = (byte) v;
    }

    // Fills left[0..=upto] with v: traps once the index reaches 4, and
    // `right`, allocated just after `left`, must keep its 7s.
    static void fillLeft(int upto, int v) {
        for (int i = 0; i <= upto; i++) {
            left[i] = (byte) v;
        }
    }

    // Writes `left` at one index (e.g. 4, 8, 16, 20, -1, -16).
    static void pokeLeft(int i) {
        left[i] = 1;
    }

    // ---- Index arithmetic that wraps.

    static int overflowAdd(int i) {
        return ints[i + Integer.MAX_VALUE];
    }

    static int overflowSub(int i) {
        return ints[i - Integer.MIN_VALUE];
    }

    static int overflowMul(int i) {
        return ints[i * 0x40000000];
    }

    static int overflowShl(int i) {
        return ints[1 << i];
    }

    static int overflowNeg(int i) {
        return ints[-i];
    }

    // Sums ints[i - x] for i from x while i < x + 4: when x + 4 wraps, the
    // loop runs zero times.
    static int rangeLoop(int x) {
        int s = 0;
        for (int i = x; i < x + 4; i++) {
            s += ints[i - x];
        }
        return s;
    }

    // Steps through ints by `step` while i < 4: a negative step reaches -1,
    // a step near MIN_VALUE jumps to a huge negative index.
    static int strideLoop(int step) {
        int s = 0;
        for (int i = 0; i < 4; i += step) {
            s += ints[i];
        }
        return s;
    }

    // Reads ints from `from` downwards until an index traps.
    static int downLoop(int from) {
        int s = 0;
        for (int i = from; ; i--) {
            s += ints[i];
        }
    }

    // ---- Arrays from natives.

    static int nativeArray(int n, int i) {
        byte[] b = give(n);
        b[n - 1] = 5;
        return b[i];
    }

    static int nativeInts(int n, int i) {
        int[] a = giveInts(n);
        a[i] = 9;
        return a.length + a[i];
    }

    static int forged(int h, int i) {
        byte[] b = forge(h);
        return b[i];
    }

    // A handle of `bytes` passed out and back in through natives.
    static int roundTrip(int i) {
        byte[] b = forge(handleOf(bytes));
        b[i] = 99;
        return bytes[i];
    }

    // A handle of an int[] handed back as a byte[].
    static int wrongType() {
        byte[] b = forge(handleOfInts(ints));
        return b.length;
    }

    // Remembers the handle of a scratch array, which the mark phase frees at
    // the end of the invocation.
    static int makeStale() {
        byte[] scratch = give(8);
        staleHandle = handleOf(scratch);
        return scratch.length;
    }

    // Uses the remembered handle in a later invocation.
    static int useStale(int i) {
        byte[] b = forge(staleHandle);
        return b[i];
    }

    static int keep(int n) {
        kept = give(n);
        kept[n - 1] = (byte) n;
        return kept.length;
    }

    static int useKept(int i) {
        return kept[i];
    }

    // The host writes bytes[i], then the applet reads it.
    static int pokeThenRead(int i, int v) {
        poke(bytes, i, v);
        return bytes[i];
    }

    static int nullRead(int i) {
        return nothing[i];
    }

    static void nullWrite(int i) {
        nothing[i] = 1;
    }

    static int nullLength() {
        return nothing.length;
    }

    // ---- Recursion.

    static int depth(int n) {
        if (n <= 1) {
            return 1;
        }
        return depth(n - 1) + 1;
    }

    int depthThis(int n) {
        if (n <= 1) {
            return 1;
        }
        return this.depthThis(n - 1) + 1;
    }

    static int ping(int n) {
        return n <= 0 ? 0 : pong(n - 1) + 1;
    }

    static int pong(int n) {
        return n <= 0 ? 0 : ping(n - 1) + 2;
    }

    // Recurses n deep, then reads ints[i] at the bottom.
    static int trapDeep(int n, int i) {
        if (n == 0) {
            return ints[i];
        }
        return trapDeep(n - 1, i) + 1;
    }

    // 200 int locals, all live across the call, so each frame takes more
    // than 200 of the frame stack's 16,384 slots: the recursion runs out of
    // frame stack (CallDepthExceeded) long before the default call depth of
    // 256. a<k> = n + k(k+1)/2.
    static int bigFrame(int n) {
        int a0 = n, a1 = a0 + 1, a2 = a1 + 2, a3 = a2 + 3, a4 = a3 + 4, a5 = a4 + 5, a6 = a5 + 6, a7 = a6 + 7,
            a8 = a7 + 8, a9 = a8 + 9, a10 = a9 + 10, a11 = a10 + 11, a12 = a11 + 12, a13 = a12 + 13, a14 = a13 + 14, a15 = a14 + 15,
            a16 = a15 + 16, a17 = a16 + 17, a18 = a17 + 18, a19 = a18 + 19, a20 = a19 + 20, a21 = a20 + 21, a22 = a21 + 22, a23 = a22 + 23,
            a24 = a23 + 24, a25 = a24 + 25, a26 = a25 + 26, a27 = a26 + 27, a28 = a27 + 28, a29 = a28 + 29, a30 = a29 + 30, a31 = a30 + 31,
            a32 = a31 + 32, a33 = a32 + 33, a34 = a33 + 34, a35 = a34 + 35, a36 = a35 + 36, a37 = a36 + 37, a38 = a37 + 38, a39 = a38 + 39,
            a40 = a39 + 40, a41 = a40 + 41, a42 = a41 + 42, a43 = a42 + 43, a44 = a43 + 44, a45 = a44 + 45, a46 = a45 + 46, a47 = a46 + 47,
            a48 = a47 + 48, a49 = a48 + 49, a50 = a49 + 50, a51 = a50 + 51, a52 = a51 + 52, a53 = a52 + 53, a54 = a53 + 54, a55 = a54 + 55,
            a56 = a55 + 56, a57 = a56 + 57, a58 = a57 + 58, a59 = a58 + 59, a60 = a59 + 60, a61 = a60 + 61, a62 = a61 + 62, a63 = a62 + 63,
            a64 = a63 + 64, a65 = a64 + 65, a66 = a65 + 66, a67 = a66 + 67, a68 = a67 + 68, a69 = a68 + 69, a70 = a69 + 70, a71 = a70 + 71,
            a72 = a71 + 72, a73 = a72 + 73, a74 = a73 + 74, a75 = a74 + 75, a76 = a75 + 76, a77 = a76 + 77, a78 = a77 + 78, a79 = a78 + 79,
            a80 = a79 + 80, a81 = a80 + 81, a82 = a81 + 82, a83 = a82 + 83, a84 = a83 + 84, a85 = a84 + 85, a86 = a85 + 86, a87 = a86 + 87,
            a88 = a87 + 88, a89 = a88 + 89, a90 = a89 + 90, a91 = a90 + 91, a92 = a91 + 92, a93 = a92 + 93, a94 = a93 + 94, a95 = a94 + 95,
            a96 = a95 + 96, a97 = a96 + 97, a98 = a97 + 98, a99 = a98 + 99, a100 = a99 + 100, a101 = a100 + 101, a102 = a101 + 102, a103 = a102 + 103,
            a104 = a103 + 104, a105 = a104 + 105, a106 = a105 + 106, a107 = a106 + 107, a108 = a107 + 108, a109 = a108 + 109, a110 = a109 + 110, a111 = a110 + 111,
            a112 = a111 + 112, a113 = a112 + 113, a114 = a113 + 114, a115 = a114 + 115, a116 = a115 + 116, a117 = a116 + 117, a118 = a117 + 118, a119 = a118 + 119,
            a120 = a119 + 120, a121 = a120 + 121, a122 = a121 + 122, a123 = a122 + 123, a124 = a123 + 124, a125 = a124 + 125, a126 = a125 + 126, a127 = a126 + 127,
            a128 = a127 + 128, a129 = a128 + 129, a130 = a129 + 130, a131 = a130 + 131, a132 = a131 + 132, a133 = a132 + 133, a134 = a133 + 134, a135 = a134 + 135,
            a136 = a135 + 136, a137 = a136 + 137, a138 = a137 + 138, a139 = a138 + 139, a140 = a139 + 140, a141 = a140 + 141, a142 = a141 + 142, a143 = a142 + 143,
            a144 = a143 + 144, a145 = a144 + 145, a146 = a145 + 146, a147 = a146 + 147, a148 = a147 + 148, a149 = a148 + 149, a150 = a149 + 150, a151 = a150 + 151,
            a152 = a151 + 152, a153 = a152 + 153, a154 = a153 + 154, a155 = a154 + 155, a156 = a155 + 156, a157 = a156 + 157, a158 = a157 + 158, a159 = a158 + 159,
            a160 = a159 + 160, a161 = a160 + 161, a162 = a161 + 162, a163 = a162 + 163, a164 = a163 + 164, a165 = a164 + 165, a166 = a165 + 166, a167 = a166 + 167,
            a168 = a167 + 168, a169 = a168 + 169, a170 = a169 + 170, a171 = a170 + 171, a172 = a171 + 172, a173 = a172 + 173, a174 = a173 + 174, a175 = a174 + 175,
            a176 = a175 + 176, a177 = a176 + 177, a178 = a177 + 178, a179 = a178 + 179, a180 = a179 + 180, a181 = a180 + 181, a182 = a181 + 182, a183 = a182 + 183,
            a184 = a183 + 184, a185 = a184 + 185, a186 = a185 + 186, a187 = a186 + 187, a188 = a187 + 188, a189 = a188 + 189, a190 = a189 + 190, a191 = a190 + 191,
            a192 = a191 + 192, a193 = a192 + 193, a194 = a193 + 194, a195 = a194 + 195, a196 = a195 + 196, a197 = a196 + 197, a198 = a197 + 198, a199 = a198 + 199;
        if (n <= 1) {
            return a0 + a199;
        }
        return bigFrame(n - 1) + a0 + a100 + a199;
    }

    // ---- Fuel.

    static int spin() {
        int i = 0;
        while (true) {
            i++;
        }
    }

    static int sumTo(int n) {
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += i;
        }
        return s;
    }

    // A loop whose every iteration goes through a tableswitch.
    static int switchSpin() {
        int s = 0;
        while (true) {
            switch (s & 3) {
                case 0: s += 1; break;
                case 1: s += 2; break;
                case 2: s ^= 5; break;
                default: s -= 1; break;
            }
        }
    }

    // The same with a lookupswitch.
    static int lookupSpin() {
        int s = 0;
        while (true) {
            switch (s) {
                case -1000000: s = 7; break;
                case 7: s = 1 << 20; break;
                case 1 << 20: s = Integer.MIN_VALUE; break;
                case Integer.MIN_VALUE: s = -1000000; break;
                default: s = 0; break;
            }
        }
    }

    // n iterations through a switch, then return.
    static int switchCount(int n) {
        int s = 0;
        for (int i = 0; i < n; i++) {
            switch (i % 3) {
                case 0: s += i; break;
                case 1: s -= 1; break;
                default: s ^= i; break;
            }
        }
        return s;
    }

    static int callSpin() {
        int n = 0;
        while (true) {
            n += bump();
        }
    }

    static int bump() {
        counter++;
        return counter;
    }

    // ---- Switches at the ends of the int range.

    static int tableLow(int k) {
        switch (k) {
            case Integer.MIN_VALUE: return 1;
            case Integer.MIN_VALUE + 1: return 2;
            case Integer.MIN_VALUE + 2: return 3;
            default: return 0;
        }
    }

    static int tableHigh(int k) {
        switch (k) {
            case Integer.MAX_VALUE - 2: return 1;
            case Integer.MAX_VALUE - 1: return 2;
            case Integer.MAX_VALUE: return 3;
            default: return 0;
        }
    }

    // ---- Allocation sizes.

    static int alloc(int kind, int n) {
        switch (kind) {
            case 0: return new boolean[n].length;
            case 1: return new byte[n].length;
            case 2: return new short[n].length;
            default: return new int[n].length;
        }
    }

    // Allocates n-int arrays until the heap budget runs out.
    static int allocForever(int n) {
        int count = 0;
        while (true) {
            int[] a = new int[n];
            count += a.length;
        }
    }

    // ---- Arithmetic.

    static int div(int a, int b) {
        return a / b;
    }

    static int rem(int a, int b) {
        return a % b;
    }

    static int divMinusOne(int a) {
        return a / -1;
    }

    static int remMinusOne(int a) {
        return a % -1;
    }

    static int divZero(int a) {
        return a / 0;
    }

    static int shl(int a, int b) {
        return a << b;
    }

    static int shr(int a, int b) {
        return a >> b;
    }

    static int ushr(int a, int b) {
        return a >>> b;
    }

    static int wideInc(int i) {
        i += 1000;
        i -= 32768;
        i += 32767;
        return i;
    }

    // ---- Instance fields (getfield/putfield on `this`).

    int setFields(int v) {
        f0 = v + 0;
        f1 = v + 1;
        f2 = v + 2;
        f3 = v + 3;
        f4 = v + 4;
        f5 = v + 5;
        f6 = v + 6;
        f7 = v + 7;
        f8 = v + 8;
        f9 = v + 9;
        f10 = v + 10;
        f11 = v + 11;
        f12 = v + 12;
        f13 = v + 13;
        f14 = v + 14;
        f15 = v + 15;
        f16 = v + 16;
        f17 = v + 17;
        f18 = v + 18;
        f19 = v + 19;
        f20 = v + 20;
        f21 = v + 21;
        f22 = v + 22;
        f23 = v + 23;
        f24 = v + 24;
        f25 = v + 25;
        f26 = v + 26;
        f27 = v + 27;
        f28 = v + 28;
        f29 = v + 29;
        f30 = v + 30;
        f31 = v + 31;
        fb = (byte) v;
        fs = (short) v;
        fz = (v & 1) == 1;
        return fieldSum();
    }

    int fieldSum() {
        int s = f0 + f1 + f2 + f3 + f4 + f5 + f6 + f7 + f8 + f9 + f10 + f11 + f12 + f13 + f14 + f15
                + f16 + f17 + f18 + f19 + f20 + f21 + f22 + f23 + f24 + f25 + f26 + f27 + f28 + f29
                + f30 + f31;
        return s + fb + fs + (fz ? 1 : 0);
    }

    // Read-modify-write of fields: dup, dup_x1 on `this`.
    int bumpFields(int v) {
        f0 += v;
        f31 -= v;
        fb += v;
        fs += v;
        int x = f1 = f2 = v;
        return x + f0 + f31 + fb + fs;
    }

    int fieldArray(int i) {
        if (farr == null) {
            farr = new int[4];
        }
        farr[i] = i + 1;
        return farr.length;
    }

    int fieldArrayAt(int i) {
        return farr[i];
    }

    // ---- Static fields.

    static int setStatics(int v) {
        s0 = v * 1;
        s1 = v * 2;
        s2 = v * 3;
        s3 = v * 4;
        s4 = v * 5;
        s5 = v * 6;
        s6 = v * 7;
        s7 = v * 8;
        s8 = v * 9;
        s9 = v * 10;
        s10 = v * 11;
        s11 = v * 12;
        s12 = v * 13;
        s13 = v * 14;
        s14 = v * 15;
        s15 = v * 16;
        sbyte = (byte) v;
        sshort = (short) v;
        sbool = (v & 1) == 1;
        return staticMix();
    }

    static int staticMix() {
        return s0 ^ s1 ^ s2 ^ s3 ^ s4 ^ s5 ^ s6 ^ s7 ^ s8 ^ s9 ^ s10 ^ s11 ^ s12 ^ s13 ^ s14 ^ s15;
    }

    static int narrowStatics() {
        return sbyte + sshort + (sbool ? 1 : 0);
    }

    // Changes a static field and an array, then traps at ints[i]: both
    // changes stay, as in Java.
    static int bumpThenTrap(int i) {
        counter += 100;
        ints[0] = counter;
        return ints[i];
    }

    static int counter() {
        return counter;
    }
}
