#!/usr/bin/env python3
"""How hard the disk and fork-bomb stressors are on a victim's tail, against stress-ng.

Run by hand, as root, on a cgroup v1 machine, after `cargo build --release -p isobench`:

    python3 bench/tail.py                          # disk and forkbomb, the default arms
    python3 bench/tail.py --only disk --reps 6
    python3 bench/tail.py --arm 'iso-direct=disk:--set threads=2 --set direct=true' \\
                          --arm 'sng-hdd=sng:--hdd 2' --only custom

The victim is fio's own figure, as a service's SLO would be: 8 KiB O_DIRECT random reads at
queue depth 1 (`fio --rw=randread --bs=8k --direct=1 --ioengine=psync`), for `--seconds` per
measurement, its read IOPS and its completion-latency p99 (`clat_ns.percentile["99.000000"]`,
fio's JSON). It runs in a cgroup of its own on CPUs 0-1 (cpu, cpuset, memory, pids, blkio),
the aggressors in another, as `isobench run` places tenants with `placement = "shared"`:
isobench's stressor through `isobench stress NAME --platform cgroup`, stress-ng in a cgroup
this script makes (bench/stressors.py's `SngAggressor`).

Each repetition measures the victim alone and beside every arm, in a seeded shuffled order,
within a minute of each other, and each arm's effect is taken against the baseline of its own
repetition: IOPS lost (%), and p99 raised (%). The ratio of an isobench arm to the stress-ng
arm of the same resource (`--ref`) is median over median, with a 90% paired percentile
bootstrap over repetitions (bench/stressors.py's `paired_bootstrap`): `>=1` when its lower
bound is at least 1, `<1` when its upper bound is under 1, `tie` otherwise.

Equal workers: `disk threads=W` against `stress-ng --hdd W`; `forkbomb max_procs=2W` against
`stress-ng --fork W` (a stress-ng fork worker and the child it waits for are two processes).

Writes bench/out/tail.json and bench/out/tail.md, and the default arms' ratios to their
records in bench/figures/05-tail.json (and bench/RESULTS.md).
"""
import argparse
import json
import os
import random
import shlex
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stressors as sb  # noqa: E402  (the cgroup and bootstrap helpers)
import results as records  # noqa: E402  (bench/figures/ and bench/RESULTS.md)

OUT = "bench/out"
FIO_FILE_MB = 1024


class VictimCgroup:
    """A cgroup of its own for the victim (not named `isobench-...`: cleanup would kill it)."""

    CONTROLLERS = sb.SngAggressor.CONTROLLERS

    def __init__(self):
        self.name = f"tailbench-victim-{os.getpid()}"
        self.dirs = sb.make_cgroups(self.name, self.CONTROLLERS)

    def run(self, argv, timeout):
        join = " ".join(f"echo $$ > {d}/cgroup.procs;" for d in self.dirs)
        return sb.sh(["sh", "-c", f"{join} exec {shlex.join(argv)}"], timeout=timeout)

    def remove(self):
        sb.remove_cgroups(self.dirs)


def fio(cg, workdir, seconds):
    """The victim once: {"iops": .., "p99_us": ..} from fio's JSON."""
    argv = ["fio", "--name=victim", f"--filename={workdir}/tail-victim.dat",
            f"--size={FIO_FILE_MB}M", "--rw=randread", "--bs=8k", "--direct=1",
            "--ioengine=psync", "--iodepth=1", f"--runtime={seconds}", "--time_based",
            "--output-format=json"]
    doc = json.loads(cg.run(argv, timeout=seconds + 120))
    read = doc["jobs"][0]["read"]
    return {"iops": read["iops"],
            "p99_us": read["clat_ns"]["percentile"]["99.000000"] / 1000.0,
            "p50_us": read["clat_ns"]["percentile"]["50.000000"] / 1000.0}


def arm_of(spec):
    """`label=iso:NAME ARGS...` / `label=sng:ARGS...` -> (label, kind, name, args)."""
    label, rest = spec.split("=", 1)
    kind, args = rest.split(":", 1)
    args = shlex.split(args)
    if kind in ("sng", "cmd"):
        return (label, kind, None, args)
    return (label, "iso", kind, args)


def default_arms(workers):
    w = str(workers)
    return {
        "disk": [("isobench disk", "iso", "disk", ["--set", f"threads={w}"]),
                 ("stress-ng --hdd", "sng", None, ["--hdd", w])],
        "forkbomb": [("isobench forkbomb", "iso", "forkbomb",
                      ["--set", f"max_procs={2 * workers}"]),
                     ("stress-ng --fork", "sng", None, ["--fork", w])],
    }


def aggressor(kind, name, args, workdir):
    if kind == "sng":
        return sb.SngAggressor(args, workdir)
    if kind == "cmd":
        return sb.SngAggressor([], workdir, program=args)
    return sb.iso_aggressor(name, ["--intensity", "100"] + args, workdir)


def effect(base, cont):
    return {"iops_lost_pct": 100.0 * (base["iops"] - cont["iops"]) / base["iops"],
            "p99_raised_pct": 100.0 * (cont["p99_us"] - base["p99_us"]) / base["p99_us"]}


def summarize(group, label, ref, runs, seed):
    rows = []
    for metric in ("iops_lost_pct", "p99_raised_pct"):
        di = [effect(r["base"], r[label])[metric] for r in runs]
        row = {"group": group, "arm": label, "metric": metric, "reps": len(runs),
               "median": statistics.median(di), "runs": di}
        if ref and ref != label:
            ds = [effect(r["base"], r[ref])[metric] for r in runs]
            (rlo, rhi), (dlo, dhi), _ = sb.paired_bootstrap(di, ds, seed)
            ms = statistics.median(ds)
            row.update({"ref": ref, "ref_median": ms,
                        "ratio": row["median"] / ms if ms >= sb.MIN_EFFECT else None,
                        "ratio_ci90": [rlo, rhi], "verdict": sb.verdict(rlo, rhi),
                        "diff_ci90_pts": [dlo, dhi]})
        rows.append(row)
    return rows


def fmt(x, nd=0):
    if x is None:
        return "n/a"
    if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
        return str(x)
    return f"{x:,.{nd}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="disk,forkbomb",
                    help="groups: disk, forkbomb, custom (the --arm ones)")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seconds", type=int, default=6)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--arm", action="append", default=[],
                    help="extra arm for group `custom`: LABEL=iso:STRESSOR ARGS, LABEL=sng:ARGS "
                         "(stress-ng's) or LABEL=cmd:ARGV (any program, in the same kind of cgroup)")
    ap.add_argument("--ref", default=None, help="the custom group's reference arm (a label)")
    a = ap.parse_args()
    groups = default_arms(a.workers)
    if a.arm:
        groups["custom"] = [arm_of(s) for s in a.arm]
    only = [g for g in a.only.split(",") if g]
    workdir = os.path.abspath(os.path.join(OUT, "taildir"))
    os.makedirs(workdir, exist_ok=True)
    rng = random.Random(a.seed)
    cg = VictimCgroup()
    rows, raw = [], {}
    try:
        fio(cg, workdir, 1)  # lays the file out once
        for g in only:
            arms = groups[g]
            ref = a.ref if g == "custom" else next(l for l, k, _, _ in arms if k == "sng")
            runs = []
            for k in range(a.reps):
                order = ["base"] + [l for l, _, _, _ in arms]
                rng.shuffle(order)
                rep = {}
                for cond in order:
                    if cond == "base":
                        rep[cond] = fio(cg, workdir, a.seconds)
                        continue
                    _, kind, name, args = next(x for x in arms if x[0] == cond)
                    with aggressor(kind, name, args, workdir):
                        rep[cond] = fio(cg, workdir, a.seconds)
                runs.append(rep)
                print(f"  {g} rep {k + 1}/{a.reps}: {json.dumps(rep)}", file=sys.stderr)
            raw[g] = runs
            for j, (label, _, _, _) in enumerate(arms):
                rows += summarize(g, label, ref, runs, a.seed + j)
    finally:
        cg.remove()
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "tail.json"), "w") as f:
        json.dump({"args": vars(a), "rows": rows, "raw": raw}, f, indent=1)
    md = ["| group | arm | metric | reps | median % | vs | its median % | ratio | 90% CI | verdict |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ci = r.get("ratio_ci90")
        md.append(f"| {r['group']} | {r['arm']} | {r['metric']} | {r['reps']} | "
                  f"{fmt(r['median'])} | {r.get('ref', '')} | {fmt(r.get('ref_median'))} | "
                  f"{fmt(r.get('ratio'), 2)} | "
                  f"{'' if ci is None else fmt(ci[0], 2) + '..' + fmt(ci[1], 2)} | "
                  f"{r.get('verdict', '')} |")
    with open(os.path.join(OUT, "tail.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    record(rows, records.command_line("bench/tail.py"))


UNITS = {"iops_lost_pct": "% IOPS lost", "p99_raised_pct": "% p99 raised"}


def record(rows, command, **stamp):
    """The ratios of the default arms (groups disk and forkbomb) as their records; the custom
    group's arms are ad hoc and stay in bench/out/tail.json."""
    for r in rows:
        if r["group"] == "custom" or r.get("ref") is None:
            continue
        records.update("05-tail", f"{r['group']}: {r['arm']} vs {r['ref']}, {r['metric']}",
                       reference=r["ref"], figure=round(r["median"]), unit=UNITS[r["metric"]],
                       reference_figure=round(r["ref_median"]),
                       ratio=None if r["ratio"] is None else round(r["ratio"], 2),
                       interval=[round(x, 2) for x in r["ratio_ci90"]], goal=">= 1",
                       verdict=records.BOOTSTRAP_VERDICTS[r["verdict"]], command=command,
                       note=f"{r['reps']} repetitions.", **stamp)


if __name__ == "__main__":
    main()
