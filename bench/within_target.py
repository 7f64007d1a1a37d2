#!/usr/bin/env python3
"""Share of victim results whose 95% interval is within +/-5 points, per exported run."""
import json, sys
for f in sys.argv[1:]:
    d = json.load(open(f))
    r = d["results"]
    cells = [c for c in r["cells"]]
    ok = wide = none = 0
    worst = []
    for c in cells:
        cmp = c.get("comparison")
        if not cmp:
            none += 1; continue
        g = cmp["degradation"]; hw = (g["upper"] - g["lower"]) / 2
        if hw <= 5: ok += 1
        else: wide += 1; worst.append((round(hw, 1), c["probe"], c["metric"], c["condition"]))
    n = ok + wide + none
    print(f"{f}: {r['run']['id']} status {r['run']['status']}: {ok} of {n} victim results within +/-5 ({100*ok/n:.1f}%), {wide} wider, {none} without estimate")
    for w in sorted(worst, reverse=True): print("   wide:", w)
