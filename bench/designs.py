#!/usr/bin/env python3
"""Precision of a stored run, from its JSON export (`isobench export RUN --format json`).

Prints: victim cells with an estimate, how many are within +/-5 and +/-2 points, the median
half-width, and per probe and design the median ratio of the time-adjacent interval's
half-width to two independent two-sample intervals on the same values: `welch`, the same
statistic (ratio of geometric means, Welch t on the logarithms), so the ratio is what pairing
gained; and `median`, the default independent comparison (ratio of medians, percentile
bootstrap), a different statistic whose interval can be narrow where drift splits the values
into clusters. For an A/A run
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
    hw = []
    ratio = {"welch": collections.defaultdict(list), "median": collections.defaultdict(list)}
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
        key = (c["probe"], c.get("design"))
        ind = c.get("independent")
        if ind:
            ratio["median"][key].append(h / half(ind["degradation"]))
        if c.get("independent_welch"):
            ratio["welch"][key].append(h / half(c["independent_welch"]))
    n = len(hw)
    if n == 0:
        print("no victim cell has an estimate")
        return
    print(f"victim cells {n}: within +/-5 {sum(h <= 5 for h in hw)} "
          f"({100 * sum(h <= 5 for h in hw) / n:.0f}%), within +/-2 {sum(h <= 2 for h in hw)} "
          f"({100 * sum(h <= 2 for h in hw) / n:.0f}%), median half-width {st.median(hw):.1f}")
    print(f"significant after correction {significant} ({100 * significant / n:.0f}%), "
          f"intervals containing 0 {covering} ({100 * covering / n:.0f}%)")
    for kind, by in ratio.items():
        if not by:
            continue
        every = [x for v in by.values() for x in v]
        print(f"half-width / independent ({kind}): median {st.median(every):.2f} "
              f"over {len(every)} cells")
        for (probe, design), v in sorted(by.items()):
            print(f"  {probe:14} {design or '-':7} median {st.median(v):.2f} over {len(v)} cells")


if __name__ == "__main__":
    main(sys.argv[1])
