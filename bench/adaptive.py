#!/usr/bin/env python3
"""Trials needed by the adaptive stopping rule versus a fixed repetition count, on the same data.

Reads a run exported as JSON (`isobench export RUN_ID --format json > run.json`). For every
victim result (probe metric x stressor) it replays the stored trials in the order they were
measured and finds the first repetition count k at which the bootstrap 95% CI of the
degradation (of medians, percentile method, as isobench computes it) is within +/-T points.

- adaptive: each result stops at its own k (isobench only repeats the results that still need
  it), so the cost is the sum of the k's;
- fixed: a fixed design must choose one count for every result, the largest k, to reach the
  same CI everywhere.

Results that never reach +/-T within the stored trials are left out of both and counted.

    python3 bench/adaptive.py run.json [--targets 5,10,20]
"""
import argparse
import json
import random
import statistics


def degradation(b, c, direction):
    mb, mc = statistics.median(b), statistics.median(c)
    d = (mb - mc) / abs(mb) if direction == "higher" else (mc - mb) / abs(mb)
    return 100.0 * d


def half_width(b, c, direction, resamples=1000, seed=7):
    rng = random.Random(seed)
    ds = []
    for _ in range(resamples):
        rb = [b[rng.randrange(len(b))] for _ in b]
        rc = [c[rng.randrange(len(c))] for _ in c]
        ds.append(degradation(rb, rc, direction))
    ds.sort()
    lo, hi = ds[int(0.025 * resamples)], ds[int(0.975 * resamples) - 1]
    return (hi - lo) / 2.0


def first_k(cell, target, min_k):
    b, c, direction = cell["baseline"], cell["contended"], cell["comparison"]["direction"]
    for k in range(min_k, len(c) + 1):
        nb = max(k, round(k * len(b) / len(c)))
        if half_width(b[:nb], c[:k], direction) <= target:
            return k
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("export")
    ap.add_argument("--targets", default="5,10,20")
    ap.add_argument("--min", type=int, default=3)
    a = ap.parse_args()
    res = json.load(open(a.export))["results"]
    cells = [c for c in res["cells"] if c.get("baseline") and c.get("contended") and len(c["contended"]) >= a.min]
    print(f"run {res['run']['id'] if isinstance(res['run'], dict) and 'id' in res['run'] else ''}: "
          f"{len(cells)} victim results with >= {a.min} contended trials")
    print("| target CI half-width | results reaching it | adaptive trials | fixed-count trials | fixed count | adaptive / fixed |")
    print("|---|---|---|---|---|---|")
    for t in [float(x) for x in a.targets.split(",")]:
        ks = [first_k(c, t, a.min) for c in cells]
        reached = [k for k in ks if k is not None]
        if not reached:
            print(f"| +/-{t:g} | 0 of {len(cells)} | - | - | - | - |")
            continue
        adaptive, fixed_n = sum(reached), max(reached)
        fixed = fixed_n * len(reached)
        print(f"| +/-{t:g} | {len(reached)} of {len(cells)} | {adaptive} | {fixed} | {fixed_n} | {adaptive / fixed:.2f} |")


if __name__ == "__main__":
    main()
