#!/usr/bin/env python3
"""Precision of a stored run, from its JSON export (`isobench export RUN --format json`).

Prints: victim cells with an estimate, how many are within +/-5 and +/-2 points, the median
half-width, and per probe and design the median ratio of the time-adjacent interval's
half-width to the independent two-sample interval's on the same values. For an A/A run
(`--preset null`) the share of cells significant after the correction and the share of
intervals containing 0 (their coverage) are the figures to read.

    isobench export RUN --db DB --format json > run.json && bench/designs.py run.json
"""
import collections
import json
import statistics as st
import sys


def half(d):
    try:
        return (float(d["upper"]) - float(d["lower"])) / 2
    except (TypeError, ValueError, KeyError):
        return float("inf")


def main(path):
    r = json.load(open(path))
    r = r.get("results", r)
    hw, ratio = [], collections.defaultdict(list)
    significant = covering = 0
    for c in r["cells"]:
        cmp = c.get("comparison")
        if not cmp:
            continue
        d = cmp["degradation"]
        h = half(d)
        hw.append(h)
        significant += bool(cmp["significant"])
        covering += float(d["lower"]) <= 0 <= float(d["upper"])
        ind = c.get("independent")
        if ind:
            ratio[(c["probe"], c.get("design"))].append(h / half(ind["degradation"]))
    n = len(hw)
    if n == 0:
        print("no victim cell has an estimate")
        return
    print(f"victim cells {n}: within +/-5 {sum(h <= 5 for h in hw)} "
          f"({100 * sum(h <= 5 for h in hw) / n:.0f}%), within +/-2 {sum(h <= 2 for h in hw)} "
          f"({100 * sum(h <= 2 for h in hw) / n:.0f}%), median half-width {st.median(hw):.1f}")
    print(f"significant after correction {significant} ({100 * significant / n:.0f}%), "
          f"intervals containing 0 {covering} ({100 * covering / n:.0f}%)")
    for (probe, design), v in sorted(ratio.items()):
        print(f"  {probe:14} {design or '-':7} half-width / independent: median "
              f"{st.median(v):.2f} over {len(v)} cells")


if __name__ == "__main__":
    main(sys.argv[1])
