#!/usr/bin/env python3
"""Module dependencies inside crates/vcode/src, and any import circle.

Every `crate::` path in code (doc comments, comments and `#[cfg(test)]`
modules left out) is an edge from the module it is written in to the
module it names. A name the crate root re-exports (`crate::Func`) counts
as its defining module (`func`). Inline modules (`pub mod regs { .. }` in
x86_64.rs) are modules of their own, as Rust has them: `x86_64::regs`.
Prints the edges and exits 1 if there is a circle.
"""
import os
import re
import sys

SRC = os.path.join(os.path.dirname(__file__), "..", "crates", "vcode", "src")


def code_lines(text):
    """The file's lines without comments and #[cfg(test)] modules."""
    out, skip, depth = [], False, 0
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() == "#[cfg(test)]":
            skip, depth = True, 0
            i += 1
            continue
        if skip:
            depth += line.count("{") - line.count("}")
            if depth <= 0 and "}" in line:
                skip = False
            i += 1
            continue
        out.append(re.sub(r"//.*", "", line))
        i += 1
    return out


def inline_modules(lines):
    """(name, first line, last line) of each top-level inline module."""
    mods, i = [], 0
    while i < len(lines):
        m = re.match(r"(pub(\(crate\))? )?mod (\w+) \{", lines[i])
        if m:
            depth, j = 0, i
            while True:
                depth += lines[j].count("{") - lines[j].count("}")
                if depth == 0:
                    break
                j += 1
            mods.append((m.group(3), i, j))
            i = j
        i += 1
    return mods


def main():
    lib = open(os.path.join(SRC, "lib.rs")).read()
    files = sorted(f[:-3] for f in os.listdir(SRC) if f.endswith(".rs") and f != "lib.rs")
    reexport = {}
    for m in re.finditer(r"pub use (\w+)::\{?([^;]*?)\}?;", lib, re.S):
        for name in re.findall(r"\w+", m.group(2)):
            reexport[name] = m.group(1)
    for m in re.finditer(r"pub type (\w+) = (\w+)::", lib):
        reexport[m.group(1)] = m.group(2)
    nodes = {}
    for f in files:
        lines = code_lines(open(os.path.join(SRC, f + ".rs")).read())
        inl = inline_modules(lines)
        body = [l for k, l in enumerate(lines) if not any(a <= k <= b for _, a, b in inl)]
        nodes[f] = body
        for name, a, b in inl:
            nodes[f + "::" + name] = lines[a : b + 1]
    edges = {n: set() for n in nodes}
    for n, lines in nodes.items():
        text = "\n".join(lines)
        # `use crate::a::{b, c::d}` and `crate::a::b` paths, and `super::`
        # in an inline module (its parent).
        for m in re.finditer(r"crate::(\w+)(?:::(\w+))?", text):
            a, b = m.group(1), m.group(2)
            target = a if a in files else reexport.get(a)
            if target is None:
                continue
            if b and (target + "::" + b) in nodes:
                target = target + "::" + b
            if target != n:
                edges[n].add(target)
        if "::" in n and re.search(r"\bsuper::", text):
            edges[n].add(n.split("::")[0])
    for n in sorted(edges):
        print(f"{n:16} -> {', '.join(sorted(edges[n])) or '-'}")
    # Circles: depth-first search for a back edge.
    state, stack, cycles = {}, [], []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(edges[n]):
            if state.get(m) == 1:
                cycles.append(stack[stack.index(m):] + [m])
            elif m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(edges):
        if n not in state:
            visit(n)
    for c in cycles:
        print("circle: " + " -> ".join(c))
    if cycles:
        sys.exit(1)
    print("no import circle")


main()
