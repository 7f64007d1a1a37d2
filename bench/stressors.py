#!/usr/bin/env python3
"""How strong isobench's stressors are: against stress-ng, and membw against the machine's peak.

Run by hand, as root, on a cgroup v1 machine, after `cargo build --release -p isobench`:

    python3 bench/stressors.py                 # both parts
    python3 bench/stressors.py membw           # membw bytes/s vs likwid-bench copy_mem_avx
    python3 bench/stressors.py effect --only disk,net-rx --reps 5
    python3 bench/stressors.py effect --only net-tx,forkbomb      # 9 reps each by default

`effect`: each stressor's effect on its matching victim probe divided by stress-ng's effect at
the same number of workers, on the victim's throughput and on its p99 latency where the probe
has one. Victim and aggressor run in separate cgroups placed as `isobench run` places them:
the victim in an isobench cgroup tenant, the aggressor in another (isobench: `stress
--platform cgroup`; stress-ng: a cgroup this script makes), both on CPUs 0-1 with equal CPU
shares. Each repetition measures baseline, isobench-contended and stress-ng-contended within
a few seconds of each other, in a seeded shuffled order, and the degradation of each
contended measurement is taken against the baseline of its own repetition (the machine's
speed drifts over seconds).

How sure the ratio is: per metric, the point ratio is median(isobench degradations) /
median(stress-ng degradations) over the repetitions; its uncertainty comes from a paired
percentile bootstrap over repetitions (whole repetitions resampled, so each rep's baseline
stays with both of its contended measurements; seeded, 10,000 resamples), reported as a 90%
interval, i.e. one-sided 95% bounds. A resample whose stress-ng median is under 1 point
counts as an infinite ratio when isobench's median is above it and as 0 otherwise. Verdict:
`>=1` when the lower bound is at least 1 (at least as strong, one-sided 95%), `<1` when the
upper bound is under 1, `tie` otherwise. Also reported: the per-repetition ratios, the paired
difference of degradations (isobench - stress-ng, points) with its own bootstrap interval,
and the number of repetitions in which isobench's degradation was at least stress-ng's.
The percentile bootstrap of a median from under ~10 repetitions undercovers a little; read
`tie` as "not settled", not as "equal". Where stress-ng's median degradation is under 1 point
there is no ratio (verdict `n/a`); the paired difference still says which is stronger. Noisy pairs get more repetitions by default
(`REPS` below); `--reps N` sets every pair.

Each isobench aggressor runs with `--json`, and the pressure it reports (datagrams/s,
forks/s, ...) is kept per repetition in the JSON.

`membw`: `isobench stress membw --intensity 100 --duration 5 --json` bytes copied/s (x2 for
DRAM traffic: one read and one write per byte copied) alternating with `likwid-bench -t
copy_mem_avx -w S0:1GB:T` (non-temporal AVX copy; its MByte/s counts reads plus writes) for
T = 1 and 2 threads; the peak is the best likwid figure of the session.

Writes bench/out/stressors.json and bench/out/stressors.md. The machine is shared and noisy:
read the per-repetition figures in the JSON before trusting a ratio.
"""
import argparse
import json
import math
import os
import random
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time

import results as records  # bench/figures/ and bench/RESULTS.md

ISO = "target/release/isobench"
OUT = "bench/out"
CPUS = "0-1"
CG_ROOT = "/sys/fs/cgroup"


def sh(cmd, timeout=600):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-400:]}")
    return p.stdout


# ---------------------------------------------------------------------------------------------
# tenants

def victim(probe, sets, workdir, budget):
    """One probe run in a fresh isobench cgroup tenant on CPUS: {metric: (value, direction)}."""
    cmd = [ISO, "probe", probe, "--json", "--budget", str(budget), "--platform", "cgroup",
           "--limits", f"cpuset={CPUS}", "--dir", workdir]
    for s in sets:
        cmd += ["--set", s]
    doc = json.loads(sh(cmd))
    return {m["name"]: (m["value"], m["direction"]) for m in doc["metrics"]}


class Background:
    """A process group in the background for the duration of a with-block."""

    settle = 1.5

    def __init__(self, cmd, capture=False):
        self.cmd = cmd
        self.capture = capture
        self.stdout = ""

    def __enter__(self):
        out = subprocess.PIPE if self.capture else subprocess.DEVNULL
        self.p = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.PIPE,
                                  start_new_session=True)
        time.sleep(self.settle)
        if self.p.poll() is not None:
            err = self.p.stderr.read().decode(errors="replace")[-400:]
            raise RuntimeError(f"{' '.join(self.cmd)} exited early ({self.p.returncode}): {err}")
        return self

    def __exit__(self, *a):
        try:
            os.killpg(self.p.pid, signal.SIGINT)
            if self.capture:
                self.stdout = self.p.communicate(timeout=15)[0].decode(errors="replace")
            else:
                self.p.wait(15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.p.wait()


def iso_aggressor(name, args, workdir):
    return Background([ISO, "stress", name, "--json", "--platform", "cgroup", "--limits",
                       f"cpuset={CPUS},memory=4G,pids=4096", "--dir", workdir] + args,
                      capture=True)


def pressure_of(stdout):
    """{name: value} of the pressure an isobench aggressor reported (empty if none)."""
    try:
        rep = json.loads(stdout)["report"]
        return {p["name"]: p["value"] for p in rep.get("pressure", [])}
    except (ValueError, KeyError, TypeError):
        return {}


def make_cgroups(name, controllers):
    """Cgroup `name` in each v1 controller, its cpuset on CPUS; returns the directories."""
    dirs = [os.path.join(CG_ROOT, c, name) for c in controllers]
    for d in dirs:
        os.makedirs(d, exist_ok=True)
    cs = os.path.join(CG_ROOT, "cpuset", name)
    with open(os.path.join(cs, "cpuset.cpus"), "w") as f:
        f.write(CPUS)
    with open(os.path.join(CG_ROOT, "cpuset", "cpuset.mems")) as f:
        mems = f.read().strip()
    with open(os.path.join(cs, "cpuset.mems"), "w") as f:
        f.write(mems)
    return dirs


def remove_cgroups(dirs):
    """Removes the directories of `make_cgroups` once their tasks are gone."""
    for d in dirs:
        for _ in range(100):
            try:
                os.rmdir(d)
                break
            except OSError:
                time.sleep(0.05)


class SngAggressor(Background):
    """stress-ng in a cgroup of its own (cpu, cpuset, memory, pids), like an isobench tenant.

    Not named `isobench-...`: `isobench cleanup` kills the tasks of every cgroup with that
    prefix."""

    CONTROLLERS = ("cpu", "cpuset", "memory", "pids", "blkio")

    def __init__(self, args, workdir, program=None):
        """`program`: run this argv instead of stress-ng (a reference program of the user's)."""
        self.name = f"sngbench-{os.getpid()}"
        self.dirs = make_cgroups(self.name, self.CONTROLLERS)
        with open(os.path.join(CG_ROOT, "memory", self.name, "memory.limit_in_bytes"), "w") as f:
            f.write(str(4 << 30))
        with open(os.path.join(CG_ROOT, "pids", self.name, "pids.max"), "w") as f:
            f.write("4096")
        join = " ".join(f"echo $$ > {d}/cgroup.procs;" for d in self.dirs)
        argv = program or ["stress-ng", "--temp-path", workdir] + args + ["--timeout", "600"]
        sng = " ".join(["exec"] + [shlex.quote(a) for a in argv])
        super().__init__(["sh", "-c", f"{join} {sng}"])

    def __exit__(self, *a):
        super().__exit__(*a)
        procs = os.path.join(self.dirs[0], "cgroup.procs")
        for _ in range(200):
            with open(procs) as f:
                left = [int(x) for x in f.read().split()]
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        remove_cgroups(self.dirs)


# ---------------------------------------------------------------------------------------------
# effect vs stress-ng

# The network victims measure for 3 s: the p99 of a 1-s UDP RTT trial swings from -60% to +90%
# between repetitions under the same aggressor, which no 9-repetition median settles.
NET_VICTIMS = [("net-throughput", ["proto=udp", "duration=3"], 3, ["udp_mbps"]),
               ("net-rtt", ["proto=udp", "duration=3"], 3, ["udp_rtt_p50_ns", "udp_rtt_p99_ns"])]

# Equal workers: stress-ng --udp 1 is two processes (client and server), so net-rx runs one
# receiver and one sender, net-tx two senders; the other pairs run the same thread count.
PAIRS = [
    # stressor, isobench args, stress-ng args, victim probes: [(probe, sets, budget, metrics)]
    ("cpu", ["--intensity", "100"], ["--cpu", "2"],
     [("cpu-int", ["kernel=primes", "threads=2"], 1, ["events_per_sec"])]),
    ("cache", ["--intensity", "100"], ["--cache", "2"],
     [("cache-latency", ["level=llc"], 1, ["llc_ns"])]),
    ("membw", ["--intensity", "100"], ["--stream", "2"],
     [("mem-bandwidth", ["op=copy"], 1, ["copy_gbps"])]),
    ("disk", ["--intensity", "100", "--set", "threads=1"], ["--hdd", "1"],
     [("disk-io", ["ops=dioread,randread", "blocks=5000"], 2,
       ["dioread_mbps", "dioread_lat_p99_us", "randread_mbps", "randread_lat_p99_us"])]),
    ("net-rx", ["--intensity", "100", "--set", "threads=1", "--set", "senders=1"], ["--udp", "1"],
     NET_VICTIMS),
    ("net-tx", ["--intensity", "100", "--set", "threads=2"], ["--udp", "1"], NET_VICTIMS),
    ("forkbomb", ["--intensity", "100", "--set", "max_procs=2"], ["--fork", "1"],
     [("fork-latency", ["mode=fork"], 1, ["fork_p50_ns", "fork_p99_ns"])]),
]


# Repetitions per pair unless --reps says otherwise: the pairs whose effects spread most from
# rep to rep (network, fork, disk tails) get more.
REPS = {"cpu": 3, "cache": 3, "membw": 3, "disk": 5, "net-rx": 9, "net-tx": 9, "forkbomb": 9}
BOOT = 10_000
# Below this stress-ng degradation (points) a ratio means nothing.
MIN_EFFECT = 1.0


def degradation(base, cont, direction):
    d = (base - cont) / base if direction == "higher" else (cont - base) / base
    return 100.0 * d


def measure_all(probes, workdir):
    out = {}
    for probe, sets, budget, metrics in probes:
        ms = victim(probe, sets, workdir, budget)
        for m in metrics:
            out[m] = ms[m]
    return out


def ratio_of(di, ds):
    """isobench / stress-ng for one set of degradations; inf or 0 when stress-ng's is nil."""
    if ds >= MIN_EFFECT:
        return di / ds
    return math.inf if di > ds else 0.0


def quantile(sorted_xs, q):
    """Linear-interpolated quantile of a sorted list (inf-safe at the ends)."""
    pos = q * (len(sorted_xs) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    if lo == hi or sorted_xs[lo] == sorted_xs[hi]:
        return sorted_xs[lo]
    if math.isinf(sorted_xs[hi]):
        return sorted_xs[hi] if pos - lo >= 0.5 else sorted_xs[lo]
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def paired_bootstrap(di, ds, seed, level=0.90):
    """Percentile bootstrap over repetitions (pairs kept together) of the median ratio and of
    the median paired difference: ((ratio lo, hi), (diff lo, hi), P(ratio >= 1))."""
    rng = random.Random(seed)
    n = len(di)
    ratios, diffs = [], []
    for _ in range(BOOT):
        idx = [rng.randrange(n) for _ in range(n)]
        bi = statistics.median(di[i] for i in idx)
        bs = statistics.median(ds[i] for i in idx)
        ratios.append(ratio_of(bi, bs))
        diffs.append(statistics.median(di[i] - ds[i] for i in idx))
    ratios.sort()
    diffs.sort()
    a = (1.0 - level) / 2.0
    p_ge1 = sum(r >= 1.0 for r in ratios) / BOOT
    return ((quantile(ratios, a), quantile(ratios, 1.0 - a)),
            (quantile(diffs, a), quantile(diffs, 1.0 - a)), p_ge1)


def verdict(lo, hi):
    if lo >= 1.0:
        return ">=1"
    if hi < 1.0:
        return "<1"
    return "tie"


def summarize(name, iso_args, sng_args, metric, direction, runs, seed):
    """One table row: medians, ratio with its interval, per-rep figures."""
    di = [degradation(r["base"][metric][0], r["isobench"][metric][0], direction) for r in runs]
    ds = [degradation(r["base"][metric][0], r["stress-ng"][metric][0], direction) for r in runs]
    mi, ms = statistics.median(di), statistics.median(ds)
    (rlo, rhi), (dlo, dhi), p_ge1 = paired_bootstrap(di, ds, seed)
    # A ratio only means something when stress-ng degrades the probe.
    ratio = mi / ms if ms >= MIN_EFFECT else None
    return {"stressor": name, "isobench": " ".join(iso_args), "stress-ng": " ".join(sng_args),
            "metric": metric, "direction": direction, "reps": len(runs),
            "baseline": statistics.median(r["base"][metric][0] for r in runs),
            "isobench_degr_pct": mi, "stressng_degr_pct": ms,
            "ratio": ratio, "ratio_ci90": [rlo, rhi], "p_ratio_ge_1": p_ge1,
            "verdict": "n/a" if ratio is None else verdict(rlo, rhi),
            "diff_median_pts": statistics.median(a - b for a, b in zip(di, ds)),
            "diff_ci90_pts": [dlo, dhi],
            "reps_isobench_ge": sum(a >= b for a, b in zip(di, ds)),
            "ratio_runs": [a / b if b >= MIN_EFFECT else None for a, b in zip(di, ds)],
            "isobench_degr_runs": di, "stressng_degr_runs": ds,
            "isobench_pressure_runs": [r.get("isobench_pressure", {}) for r in runs]}


def effect(only, reps, seed):
    rng = random.Random(seed)
    workdir = os.path.abspath(os.path.join(OUT, "stressdir"))
    os.makedirs(workdir, exist_ok=True)
    rows = []
    for name, iso_args, sng_args, probes in PAIRS:
        if only and name not in only:
            continue
        n = reps if reps else REPS.get(name, 3)
        runs = []
        try:
            for k in range(n):
                order = ["base", "isobench", "stress-ng"]
                rng.shuffle(order)
                rep = {}
                for cond in order:
                    if cond == "base":
                        rep[cond] = measure_all(probes, workdir)
                    elif cond == "isobench":
                        agg = iso_aggressor(name, iso_args, workdir)
                        with agg:
                            rep[cond] = measure_all(probes, workdir)
                        rep["isobench_pressure"] = pressure_of(agg.stdout)
                    else:
                        with SngAggressor(sng_args, workdir):
                            rep[cond] = measure_all(probes, workdir)
                runs.append(rep)
                shown = {c: {m: v[0] for m, v in r.items()} for c, r in rep.items()
                         if c != "isobench_pressure"}
                print(f"  {name} rep {k + 1}/{n}: {json.dumps(shown)} "
                      f"pressure {json.dumps(rep.get('isobench_pressure', {}))}", file=sys.stderr)
        except Exception as e:  # noqa: BLE001 - one failing pair must not lose the others
            rows.append({"stressor": name, "error": str(e)})
            print(f"{name}: {e}", file=sys.stderr)
            continue
        for j, metric in enumerate(runs[0]["base"]):
            direction = runs[0]["base"][metric][1]
            rows.append(summarize(name, iso_args, sng_args, metric, direction, runs, seed + j))
            print(fmt_effect(rows[-1]), file=sys.stderr)
    return rows


def fmt_num(x):
    if x is None:
        return "n/a"
    if math.isinf(x):
        return "inf"
    return f"{x:.2f}"


def fmt_effect(r):
    if "error" in r:
        return f"| {r['stressor']} | error: {r['error'][:120]} | | | | | | | |"
    lo, hi = r["ratio_ci90"]
    dlo, dhi = r["diff_ci90_pts"]
    per_rep = " ".join(fmt_num(x) for x in r["ratio_runs"])
    return (f"| {r['stressor']} | {r['stress-ng']} | {r['metric']} | {r['reps']} | "
            f"{r['isobench_degr_pct']:.1f} | {r['stressng_degr_pct']:.1f} | {fmt_num(r['ratio'])} | "
            f"{fmt_num(lo)}..{fmt_num(hi)} | {r['verdict']} | "
            f"{r['diff_median_pts']:+.1f} ({dlo:+.1f}..{dhi:+.1f}) | "
            f"{r['reps_isobench_ge']}/{r['reps']} | {per_rep} |")


EFFECT_HEADER = ["| stressor | stress-ng | victim metric | reps | isobench degr. % | stress-ng degr. % "
                 "| ratio | 90% CI | verdict | diff. pts (90% CI) | reps iso >= sng | per-rep ratio |",
                 "|---|---|---|---|---|---|---|---|---|---|---|---|"]


# ---------------------------------------------------------------------------------------------
# membw vs peak copy bandwidth

def likwid_copy(threads):
    out = sh(["likwid-bench", "-t", "copy_mem_avx", "-w", f"S0:1GB:{threads}"])
    return float(re.search(r"MByte/s:\s+([\d.]+)", out).group(1)) * 1e6


def iso_membw():
    doc = json.loads(sh([ISO, "stress", "membw", "--intensity", "100", "--duration", "5", "--json"]))
    rep = doc["report"]
    copied = next(p["value"] for p in rep["pressure"] if p["name"] == "bytes_per_sec")
    return 2.0 * copied, rep["notes"]


def membw(reps):
    iso, peak1, peak2, notes = [], [], [], None
    for _ in range(reps):
        peak1.append(likwid_copy(1))
        v, notes = iso_membw()
        iso.append(v)
        peak2.append(likwid_copy(2))
    peak = max(peak1 + peak2)
    res = {"isobench_traffic_Bps": iso, "likwid_1t_Bps": peak1, "likwid_2t_Bps": peak2,
           "peak_Bps": peak, "isobench_best_Bps": max(iso), "isobench_median_Bps": statistics.median(iso),
           "ratio_best": max(iso) / peak, "ratio_median": statistics.median(iso) / peak, "notes": notes}
    print(json.dumps(res, indent=1), file=sys.stderr)
    return res


def strict_json(x):
    """`x` with infinite floats written as the strings "inf" / "-inf" (JSON has no infinity)."""
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if isinstance(x, dict):
        return {k: strict_json(v) for k, v in x.items()}
    if isinstance(x, list):
        return [strict_json(v) for v in x]
    return x


def main():
    global ISO, OUT
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="?", default="all", choices=["all", "effect", "membw"])
    ap.add_argument("--isobench", default=ISO)
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--reps", type=int, default=0,
                    help="repetitions per pair (default: REPS per pair for effect, 3 for membw)")
    ap.add_argument("--only", default="", help="comma-separated stressors (effect)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    ISO, OUT = a.isobench, a.out
    os.makedirs(OUT, exist_ok=True)
    results, md = {}, ["# Stressor strength", ""]
    if a.what in ("all", "membw"):
        r = membw(a.reps or 3)
        results["membw"] = r
        md += ["## membw vs peak copy bandwidth (DRAM traffic, read + write)", "",
               "| isobench membw 100 (median / best) | likwid copy_mem_avx peak | ratio (median / best) |",
               "|---|---|---|",
               f"| {r['isobench_median_Bps'] / 1e9:.2f} / {r['isobench_best_Bps'] / 1e9:.2f} GB/s | "
               f"{r['peak_Bps'] / 1e9:.2f} GB/s | {r['ratio_median']:.2f} / {r['ratio_best']:.2f} |", ""]
    if a.what in ("all", "effect"):
        rows = effect([x for x in a.only.split(",") if x], a.reps, a.seed)
        results["effect"] = rows
        md += ["## Effect on the victim vs stress-ng (ratio = isobench degradation / stress-ng degradation)",
               "", "Ratio: median over repetitions; 90% CI: paired bootstrap over repetitions (one-sided "
               "95% bounds); verdict >=1 / <1 when the interval clears 1.", ""]
        md += EFFECT_HEADER + [fmt_effect(r) for r in rows] + [""]
    with open(os.path.join(OUT, "stressors.json"), "w") as f:
        json.dump(strict_json(results), f, indent=1)
    with open(os.path.join(OUT, "stressors.md"), "w") as f:
        f.write("\n".join(md))
    print("\n".join(md))
    if "effect" in results:
        record_effects(results["effect"], records.command_line("bench/stressors.py"))


def record_effects(rows, command, **stamp):
    """Each effect row as its record in bench/figures/02-stressors.json."""
    for r in rows:
        records.update("02-stressors", f"{r['stressor']} on {r['metric']}",
                       reference="stress-ng " + r["stress-ng"], figure=round(r["isobench_degr_pct"], 1),
                       unit="% degradation", reference_figure=round(r["stressng_degr_pct"], 1),
                       ratio=None if r["ratio"] is None else round(r["ratio"], 2),
                       interval=None if r["ratio"] is None else [round(x, 2) for x in r["ratio_ci90"]],
                       goal=">= 1", verdict=records.BOOTSTRAP_VERDICTS[r["verdict"]], command=command,
                       note=f"{r['reps']} repetitions; paired difference "
                            f"{r['diff_median_pts']:+.1f} points.", **stamp)


if __name__ == "__main__":
    main()
