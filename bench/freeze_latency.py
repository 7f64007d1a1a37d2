#!/usr/bin/env python3
"""Freeze time of a busy cgroup tenant under CPU contention, two builds compared ABAB.

Runs the `freeze_latency` example (crates/platform/examples) of each build in alternating
blocks, so that the machine's drift falls on both alike, and pools the blocks: median, p99 and
max of the time `Tenant::set_frozen(true)` took (a failed freeze counts at the time it gave
up), failures out of N, and the slowest thaw. Run as root, holding the measurement lock:

    cargo build -p isobench-platform --example freeze_latency   # once per build; copy each
    flock -x /tmp/isobench-measure.lock bench/freeze_latency.py \\
        --build before=/tmp/freeze_latency.before --build after=/tmp/freeze_latency.after \\
        --blocks 4 --per-block 50 --out /tmp/fz-abab

`--summarize DIR` pools the raw files of an earlier run (NAME.BLOCK.txt) without running.
"""

import argparse
import os
import subprocess
import sys


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def parse(path):
    """Rows of a --raw file: (freeze ms, ok, thaw ms)."""
    rows = []
    with open(path) as f:
        for line in f:
            c = line.split("\t")
            if len(c) >= 4 and c[0].isdigit():
                thaw = next((x.split()[1] for x in c[3:] if x.startswith("thaw ")), "nan")
                rows.append((float(c[1]), c[2] == "ok", float(thaw)))
    return rows


def summarize(out, names):
    print(f"{'build':8} {'N':>4} {'median':>8} {'p99':>8} {'max':>8} {'failed':>7} {'max thaw':>9}  (ms)")
    for name in names:
        rows = []
        for f in sorted(os.listdir(out)):
            if f.startswith(name + ".") and f.endswith(".txt"):
                rows += parse(os.path.join(out, f))
        ms = [r[0] for r in rows]
        failed = sum(1 for r in rows if not r[1])
        thaw = max((r[2] for r in rows), default=float("nan"))
        print(f"{name:8} {len(rows):4} {pct(ms, 50):8.1f} {pct(ms, 99):8.1f} {max(ms, default=float('nan')):8.1f}"
              f" {failed:7} {thaw:9.1f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", action="append", default=[], help="NAME=PATH of a freeze_latency binary")
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--per-block", type=int, default=50)
    ap.add_argument("--out", default="/tmp/fz-abab")
    ap.add_argument("--summarize", metavar="DIR")
    a = ap.parse_args()
    if a.summarize:
        names = sorted({f.split(".")[0] for f in os.listdir(a.summarize) if f.endswith(".txt")})
        summarize(a.summarize, names)
        return 0
    builds = [b.split("=", 1) for b in a.build]
    if not builds:
        ap.error("give at least one --build NAME=PATH")
    os.makedirs(a.out, exist_ok=True)
    for i in range(1, a.blocks + 1):
        for name, path in builds:
            print(f"== {name} block {i}", file=sys.stderr, flush=True)
            with open(os.path.join(a.out, f"{name}.{i}.txt"), "w") as f:
                subprocess.run([path, "--freezes", str(a.per_block), "--raw"], stdout=f,
                               stderr=subprocess.STDOUT, check=False)
    summarize(a.out, [n for n, _ in builds])
    return 0


if __name__ == "__main__":
    sys.exit(main())
