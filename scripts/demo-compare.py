#!/usr/bin/env python3
"""Runs `fastpath demo` of several builds alternately and prints, per cell,
each build's median over its runs with the range, its ratio to the first
build, and the median of that ratio taken round by round (each round runs
every build once, so a round's builds share the machine's state): the way
docs/benchmarks.md compares builds on this shared 2-core machine, where
absolute times drift between runs. The demo's own ratios (U-Net over the
ring, each standard applet over U-Net, within one run) are cells too, and
the steadiest to compare.

    scripts/demo-compare.py NAME=BINARY NAME=BINARY ... [--runs N] [--save F]

Each round runs every build once, in a rotating order. Builds whose demo
has no --json (before 2026-11-28) are read from the text tables, which
print two decimals.
"""
import argparse, itertools, json, re, statistics, subprocess, sys

LAT = ('ring', 'unet', 'simple_applet', 'standard_applet', 'standard_lent_applet',
       'applet_ping_pong', 'unet_per_ring', 'standard_per_unet', 'standard_lent_per_unet')
COST = ('simple_applet', 'standard_applet', 'standard_lent_applet')
BW = ('unet_app_ack', 'standard_app_ack', 'standard_lent_app_ack', 'applet_generated',
      'applet_tokens', 'per_tx_25', 'standard_per_unet', 'standard_lent_per_unet')


def parse_text(t):
    """The three tables of a text-only demo, in the JSON's shape."""
    d = {'latency': {'rows': []}, 'applet_cost': {'rows': []}, 'bandwidth': {'rows': []}}
    sec = None
    for line in t.splitlines():
        for prefix, name in (('Round-trip latency', 'lat'), ('Applet cost', 'cost'), ('Bandwidth', 'bw')):
            if line.startswith(prefix):
                sec = name
        row = re.match(r'\s*(\d+) \|(.*)', line)
        if sec == 'lat' and row:
            a, b = (p.split() for p in row.group(2).split('|')[:2])
            cols = dict(zip(('unet', 'standard_applet', 'simple_applet', 'applet_ping_pong'), a), ring=b[0])
            d['latency']['rows'].append({'bytes': int(row.group(1)), **{k: {'value': float(v)} for k, v in cols.items()}})
        cost = re.match(r'\s*(\d+) B: standard\s+([\d.]+), simple\s+([\d.]+)', line)
        if sec == 'cost' and cost:
            d['applet_cost']['rows'].append({'bytes': int(cost.group(1)),
                                             'standard_applet': {'value': float(cost.group(2))},
                                             'simple_applet': {'value': float(cost.group(3))}})
        if sec == 'bw' and row:
            a = row.group(2).split('|')[0].split()
            cols = ('unet_app_ack', 'standard_app_ack', 'applet_tokens', 'per_tx_25', 'applet_generated')
            d['bandwidth']['rows'].append({'bytes': int(row.group(1)), **{k: {'value': float(v)} for k, v in zip(cols, a)}})
    return d


def run(binary):
    r = subprocess.run([binary, 'demo', '--json'], capture_output=True, text=True)
    if r.returncode == 0:
        return json.loads(r.stdout)
    r = subprocess.run([binary, 'demo'], capture_output=True, text=True, check=True)
    return parse_text(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('builds', nargs='+', help='NAME=BINARY')
    ap.add_argument('--runs', type=int, default=12)
    ap.add_argument('--save', help='write every run as JSON to this file')
    args = ap.parse_args()
    builds = [b.split('=', 1) for b in args.builds]
    res = {name: [] for name, _ in builds}
    orders = list(itertools.permutations(range(len(builds))))
    for i in range(args.runs):
        for j in orders[i % len(orders)]:
            name, binary = builds[j]
            res[name].append(run(binary))
            print(f'round {i + 1}/{args.runs}: {name}', file=sys.stderr)
    if args.save:
        with open(args.save, 'w') as f:
            json.dump(res, f)
    names = [n for n, _ in builds]
    first = res[names[0]][0]
    print('| table | bytes | column | ' + ' | '.join(f'{n} median [min, max]' for n in names)
          + ' | ' + ' | '.join(f'{n} / {names[0]}' for n in names[1:])
          + ' | ' + ' | '.join(f'{n} / {names[0]} by round (lower in)' for n in names[1:]) + ' |')
    print('|---|---:|---|' + '---:|' * (3 * len(names) - 2))

    def cell(x, sec, r, c):
        # A run's figure, or None where it has none (a failed run, a
        # figure the demo printed as n/a, a row it lacks).
        rows = x[sec]['rows']
        return rows[r].get(c, {}).get('value') if r < len(rows) else None

    for sec, cols in (('latency', LAT), ('applet_cost', COST), ('bandwidth', BW)):
        for r, row in enumerate(first[sec]['rows']):
            for c in cols:
                by_round = [[cell(x, sec, r, c) for x in res[n]] for n in names]
                v = [[f for f in b if f is not None] for b in by_round]
                if not all(v):
                    continue
                m = [statistics.median(x) for x in v]
                paired = []
                for b in by_round[1:]:
                    q = [f / f0 for f, f0 in zip(b, by_round[0]) if f is not None and f0]
                    paired.append(f'{statistics.median(q):.3f} ({sum(x < 1 for x in q)}/{len(q)})'
                                  if q else 'n/a')
                print(f"| {sec} | {row['bytes']} | {c} | "
                      + ' | '.join(f'{mm:.3f} [{min(x):.2f}, {max(x):.2f}]' for mm, x in zip(m, v))
                      + ' | ' + ' | '.join(f'{mm / m[0]:.2f}' for mm in m[1:])
                      + ' | ' + ' | '.join(paired) + ' |')
    print(f"\nruns per build: {', '.join(f'{n} {len(res[n])}' for n in names)}")


if __name__ == '__main__':
    main()
