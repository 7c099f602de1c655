#!/usr/bin/env python3
"""steps.py FUNCTION SKIP MARK BINARY [ARGS...]: the instructions one call
of FUNCTION runs, in the order it runs them, and how many of them come
before MARK (a source line, `file.rs:LINE`, e.g. the store that publishes
a message to the other thread).

It runs BINARY under gdb, stops at the (SKIP + 1)-th call of FUNCTION (a
symbol, mangled or not: the first one `nm` lists that contains it), steps
one instruction at a time until the call returns, and maps each
instruction to the source lines it was inlined from (`addr2line -i`).
Instructions outside the binary (generated code, libc) are counted as
such. The environment passes through (`LENT=1` and the like).

Printed: the instructions of the call, the index of the first one whose
inlining chain holds MARK, and the run of the call as consecutive pieces,
each named by the innermost function of the crate's own code (not the
standard library's) that it was inlined from. With `STEPS_LIST=A-B`, the
instructions A to B one a line, disassembled (`objdump`), for a store whose
line the debug information lost (`addr2line` gives `file.rs:?`, as for
the seal of plain U-Net's receive descriptor; MARK `-` marks nothing):

    steps.py xthr_count_send 3000 inbox.rs:841 \\
        target/release/examples/xthr_count 40 16400 1

Work before the mark delays the other thread by its time; work after it
overlaps with the line's crossing and the other thread's work (docs/
benchmarks.md, "What a message's time is made of"). Callgrind counts the
same instructions but not their order. Needs gdb (`apt-get install gdb`).
"""
import os
import shutil
import subprocess
import sys
import tempfile

# The standard library's files: a piece is named by the first function of
# the chain whose file is not one of these.
STD = ("/rustc/", "/library/core/", "/library/std/", "/library/alloc/")

GDB = r"""
import gdb
gdb.execute("set pagination off")
gdb.execute("set confirm off")
# The breakpoint's address in the file ("Breakpoint 1 at 0x...: ..."),
# before the run relocates it: with the pc where it stops, where the
# binary is loaded.
said = gdb.execute("break {symbol}", to_string=True)
at = int(said.split(" at ", 1)[1].split(":", 1)[0], 16)
gdb.execute("ignore 1 {skip}", to_string=True)
gdb.execute("run")
gdb.execute("disable 1")
base = int(gdb.parse_and_eval("$pc")) - at
f = gdb.selected_frame()
while f.type() == gdb.INLINE_FRAME:
    f = f.older()
back = f.older().pc()
pcs = []
while len(pcs) < {limit}:
    pc = int(gdb.parse_and_eval("$pc"))
    if pc == back:
        break
    pcs.append(pc)
    gdb.execute("stepi", to_string=True)
with open("{out}", "w") as o:
    o.write("\n".join(hex(p) for p in pcs))
    o.write("\nbase " + hex(base) + "\n")
gdb.execute("kill")
gdb.execute("quit")
"""


def symbol_of(binary, name):
    """The first function symbol `nm` lists that contains `name`."""
    out = subprocess.run(["nm", binary], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "Tt" and name in parts[2]:
            return parts[2]
    sys.exit(f"steps.py: no function symbol containing {name!r} in {binary}")


def at_line(loc, mark):
    """Whether `loc` (`/path/file.rs:LINE`, perhaps with a discriminator
    after it) is the line `mark` (`file.rs:LINE`): `inbox.rs:84` is not
    `inbox.rs:841`."""
    path = loc.split(" ", 1)[0]
    return path == mark or path.endswith("/" + mark)


def chains(binary, addrs):
    """Each address's inlining chain, innermost first: (function, file:line)."""
    out = subprocess.run(
        ["addr2line", "-a", "-i", "-f", "-C", "-e", binary] + [hex(a) for a in addrs],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    got, cur, i = {}, None, 0
    while i < len(out):
        line = out[i]
        if line.startswith("0x") and int(line, 16) in addrs:
            cur = int(line, 16)
            got[cur] = []
            i += 1
            continue
        got[cur].append((line, out[i + 1] if i + 1 < len(out) else "?"))
        i += 2
    return got


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    if shutil.which("gdb") is None:
        sys.exit("steps.py: needs gdb (apt-get install gdb)")
    name, skip, mark, binary = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    symbol = symbol_of(binary, name)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "pcs")
        script = os.path.join(d, "steps.gdb.py")
        with open(script, "w") as s:
            s.write(GDB.format(symbol=symbol, skip=skip, limit=200000, out=out))
        subprocess.run(
            ["gdb", "-q", "-batch", "-x", script, "--args", binary] + sys.argv[5:],
            capture_output=True, text=True,
        )
        if not os.path.exists(out):
            sys.exit(f"steps.py: gdb stopped nowhere: is {name} called {skip + 1} times?")
        lines = open(out).read().split()
    pcs = [int(p, 16) for p in lines[:-2]]
    if not pcs:
        sys.exit("steps.py: no instruction stepped")
    base = int(lines[-1], 16)
    inside = sorted({p - base for p in pcs if 0 <= p - base < (1 << 32)})
    info = chains(binary, set(inside))
    first_mark, pieces = None, []
    for k, pc in enumerate(pcs):
        chain = info.get(pc - base)
        if chain is None:
            key = "(outside the binary: generated code, libc)"
        else:
            if first_mark is None and any(at_line(loc, mark) for _, loc in chain):
                first_mark = k
            own = [(f, loc) for f, loc in chain if not loc.startswith(STD)]
            f, loc = (own or chain)[0]
            key = f"{f.split('::')[-1][:48]}  {loc.split('/')[-1]}"
        if pieces and pieces[-1][2] == key:
            pieces[-1][1] += 1
        else:
            pieces.append([k, 1, key])
    print(f"{symbol}: {len(pcs)} instructions")
    if mark == "-":
        pass
    elif first_mark is None:
        print(f"{mark}: not reached")
    else:
        print(f"{mark}: first at instruction {first_mark}, "
              f"{first_mark} before it and {len(pcs) - first_mark} from it on")
    for k, n, key in pieces:
        print(f"{k:6d} {n:5d}  {key}")
    if os.environ.get("STEPS_LIST"):
        a, b = (int(x) for x in os.environ["STEPS_LIST"].split("-"))
        listed = disassembly(binary, [p - base for p in pcs[a:b + 1]])
        for k in range(a, min(b + 1, len(pcs))):
            print(f"{k:6d}  {pcs[k] - base:#x}  {listed.get(pcs[k] - base, '(outside the binary)')}")


def disassembly(binary, addrs):
    """Each address in `addrs` (in the binary) with its instruction's text."""
    inside = [a for a in addrs if 0 <= a < (1 << 32)]
    if not inside:
        return {}
    out = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", binary,
         f"--start-address={min(inside):#x}", f"--stop-address={max(inside) + 16:#x}"],
        capture_output=True, text=True,
    ).stdout
    got = {}
    for line in out.splitlines():
        at, _, text = line.strip().partition(":")
        try:
            got[int(at, 16)] = text.strip()
        except ValueError:
            pass
    return got


if __name__ == "__main__":
    main()
