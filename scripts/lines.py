#!/usr/bin/env python3
"""lines.py TRACE BINARY N: the cache lines that cross between threads per
round trip in a valgrind trace of `examples/loop_lines` (lackey
--trace-mem=yes --trace-sched=yes --fair-sched=yes), which ran N counted
round trips between its stores to `MARK`.

Valgrind runs one thread at a time; the trace's "SCHED[t]: acquired lock"
lines say which. Each 64-byte line is followed through a simple coherence
model with unbounded caches: a thread holds a valid copy of a line from
its access until another thread writes the line. Counted, per line, with
the function of the instruction that did it:

- fetch: a thread reads or writes a line whose last writer is another
  thread and of which it holds no valid copy (the line's data crosses
  cores: a miss served by the other core's cache);
- invalidate: a thread writes a line of which another thread holds a
  valid copy (the write must take the line from the other core first).

A line's first touch ever, or one written by no thread but this one, is
not counted. Lines are followed from the start; only what happens
between the stores to `MARK` is counted, and divided by N.
"""
import bisect
import collections
import re
import subprocess
import sys

SCHED = re.compile(r"SCHED\[(\d+)\]:\s+acquired lock")


def mark_address(binary):
    out = subprocess.run(["nm", binary], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == "MARK":
            return int(parts[0], 16)
    raise SystemExit("no MARK in " + binary)


def symbols(binary):
    out = subprocess.run(["nm", "-C", "--defined-only", binary], capture_output=True,
                         text=True, check=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "tTwW":
            syms.append((int(parts[0], 16), parts[2]))
    syms.sort()
    return [a for a, _ in syms], [n for _, n in syms]


def short(name):
    # The function's own name with its type's, without generics or hashes.
    name = re.sub(r"::h[0-9a-f]{16}$", "", name)
    name = re.sub(r"<[^<>]*>", "", name)
    name = re.sub(r"<[^<>]*>", "", name)
    return "::".join(name.split("::")[-2:])


def count(path, addrs, names, bias, mark):
    cur = None
    on = False
    last_i = 0
    writer = {}          # line -> last writer thread
    valid = collections.defaultdict(set)  # line -> threads with a valid copy
    fetch = collections.Counter()
    inval = collections.Counter()
    sym_cache = {}

    def who(ip):
        f = sym_cache.get(ip)
        if f is None:
            k = bisect.bisect_right(addrs, ip - bias) - 1
            f = short(names[k]) if k >= 0 else hex(ip)
            sym_cache[ip] = f
        return f

    with open(path, errors="replace") as fh:
        for line in fh:
            c = line[0]
            if c == "I":
                last_i = int(line[3:line.index(",")], 16)
                continue
            if c == " ":
                if cur is None:
                    continue
                kind = line[1]
                a = int(line[3:line.index(",")], 16)
                size = int(line[line.index(",") + 1:])
                if a == mark and kind in "SM":
                    on = not on
                    continue
                first, last = a >> 6, (a + size - 1) >> 6
                for ln in range(first, last + 1):
                    w = writer.get(ln)
                    v = valid[ln]
                    if on and w is not None and w != cur and cur not in v:
                        fetch[(ln, who(last_i))] += 1
                    if kind in "SM":
                        if on and any(t != cur for t in v):
                            inval[(ln, who(last_i))] += 1
                        v.clear()
                        writer[ln] = cur
                    v.add(cur)
                continue
            m = SCHED.search(line)
            if m:
                cur = int(m.group(1))
    return fetch, inval


def main():
    path, binary, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    addrs, names = symbols(binary)
    bias = 0x108000  # valgrind's load address of a position-independent executable
    f, i = count(path, addrs, names, bias, mark_address(binary) + bias)
    lines = collections.defaultdict(lambda: [0, 0, set()])
    for (ln, fn), k in f.items():
        lines[ln][0] += k
        lines[ln][2].add(f"fetch {k / n:.3f} {fn}")
    for (ln, fn), k in i.items():
        lines[ln][1] += k
        lines[ln][2].add(f"inval {k / n:.3f} {fn}")
    tf = sum(v[0] for v in lines.values())
    ti = sum(v[1] for v in lines.values())
    print(f"per round trip: fetches {tf / n:.3f}, invalidations {ti / n:.3f}, "
          f"over {len(lines)} lines")
    for ln in sorted(lines, key=lambda k: -(lines[k][0] + lines[k][1])):
        fe, iv, who = lines[ln]
        print(f"{ln << 6:#014x} fetch {fe / n:6.3f} inval {iv / n:6.3f}  " + "; ".join(sorted(who)))


main()
