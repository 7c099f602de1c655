#!/usr/bin/env python3
"""Runs `loop_rtt` (crates/unet/examples/loop_rtt.rs) of several builds
alternately and prints, per message size, each build's median over its
runs of the standard applet's round trip over U-Net's (the example's own
ratio, within one run), of U-Net's round trip and of the applet's, and for
every build after the first in how many rounds its ratio was below the
first build's: the way docs/benchmarks.md compares builds of the inbox on
this shared 2-core machine, where absolute times drift between runs.

    LENT=1 scripts/rtt-compare.py NAME=LOOP_RTT NAME=LOOP_RTT ... [--runs N]
        [--batches B] [--sizes 0,40,56,57,1024]

Each round runs every build once, in a rotating order (the first of a
round ran faster or slower in some sets). The environment is
passed on (`LENT=1` for the lent applet); `STD=1` is set, since the ratio
compared is the applet's.
"""
import argparse, collections, os, re, statistics, subprocess, sys

LINE = re.compile(r'\s*(\d+) B\s+unet ([\d.]+) us .*?standard ([\d.]+) us \(([\d.]+)x unet\)')


def run(binary, batches, sizes):
    env = dict(os.environ, STD='1')
    out = subprocess.run([binary, str(batches), sizes], env=env, capture_output=True,
                         text=True, check=True).stdout
    rows = {}
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            rows[int(m.group(1))] = tuple(float(m.group(i)) for i in (4, 2, 3))
    if not rows:
        sys.exit(f'{binary}: no round trip with the standard applet in its output')
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('builds', nargs='+', help='NAME=path to a loop_rtt binary')
    ap.add_argument('--runs', type=int, default=10)
    ap.add_argument('--batches', type=int, default=200)
    ap.add_argument('--sizes', default='0,40,56,57,1024')
    a = ap.parse_args()
    builds = [b.split('=', 1) for b in a.builds]
    if any(len(b) != 2 for b in builds):
        sys.exit('each build is NAME=BINARY')
    got = collections.defaultdict(list)  # (name, size) -> [(ratio, unet, applet)] by round
    for r in range(a.runs):
        for name, binary in builds[r % len(builds):] + builds[:r % len(builds)]:
            for size, row in run(binary, a.batches, a.sizes).items():
                got[(name, size)].append(row)
    first = builds[0][0]
    print(f'{a.runs} rounds; median of the applet over U-Net (U-Net, applet in us)')
    for size in sorted({s for _, s in got}):
        cells = []
        for name, _ in builds:
            rows = got[(name, size)]
            med = [statistics.median(r[i] for r in rows) for i in range(3)]
            cell = f'{name} {med[0]:.2f}x ({med[1]:.3f}, {med[2]:.3f})'
            if name != first:
                lower = sum(r[0] < f[0] for r, f in zip(rows, got[(first, size)]))
                cell += f' lower in {lower} of {len(rows)}'
            cells.append(cell)
        print(f'{size:6d} B  ' + '  |  '.join(cells))


if __name__ == '__main__':
    main()
