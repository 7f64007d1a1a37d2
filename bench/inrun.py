#!/usr/bin/env python3
"""A probe's baseline variation inside stored runs, to set beside its standalone CV.

    bench/inrun.py RUN.db|EXPORT.json... [--probe cpu-int] [--metric ops_per_sec]
    bench/inrun.py --standalone [--probe cpu-int] [--metric ops_per_sec] [--set k=v] [--pin 0]
    bench/inrun.py --both-cpus [--probe cpu-int] ...

For each stored run: the CV of the value of its baseline trials (trial to trial), and in its
on/off trials the baseline ("off") windows the analysis uses (wholly inside an off phase,
after the guard): their CV window to window, the CV of the off-phase means phase to phase,
the CV of each trial's off mean trial to trial, their lag-1 autocorrelation, and the share of
windows below half the median (windows in which the probe lost the CPU for most of the time).
In a null (A/A) run every phase is idle, so its "on" windows are baseline windows too.

--standalone runs `isobench probe NAME --window 5` itself and prints the same window figures
for the series it returns; --both-cpus runs it pinned to CPU 0 and CPU 1 at the same time and
says whether their slow windows coincide (wrap both in the measurement lock on a shared machine).
"""
import argparse
import json
import sqlite3
import statistics
import subprocess
import sys

from compare import cv_pct


def load_db(path):
    """Trials of a run database: condition, value of each metric, series, modulation."""
    c = sqlite3.connect(path)
    trials = []
    q = ("SELECT t.id, t.probe, t.condition, t.status, d.data FROM trials t "
         "LEFT JOIN trial_details d ON d.trial_id = t.id ORDER BY t.id")
    for tid, probe, cond, status, data in c.execute(q):
        det = json.loads(data) if data else {}
        samples = {m: v for m, v in c.execute("SELECT metric, value FROM samples WHERE trial_id = ?", (tid,))}
        trials.append({"probe": probe, "condition": cond, "status": status, "samples": samples,
                       "series": det.get("series") or [], "modulation": det.get("modulation")})
    return trials


def load_export(path):
    doc = json.load(open(path))
    trials = []
    for t in doc["results"]["trials"]:
        trials.append({"probe": t["probe"], "condition": t["condition"], "status": t["status"],
                       "samples": {s["metric"]: s["value"] for s in t.get("samples") or []},
                       "series": t.get("series") or [], "modulation": t.get("modulation")})
    return trials


def phases(m):
    """(start_ns, end_ns, on) of a modulated trial, as crates/experiment/src/onoff.rs cuts them."""
    out, start, on = [], m["start_ns"], m["initially_on"]
    for s in m["switches"]:
        if s["requested_ns"] > start:
            out.append((start, s["requested_ns"], on))
        start, on = s["done_ns"], s["on"]
    if m["end_ns"] > start:
        out.append((start, m["end_ns"], on))
    return out


def phase_windows(windows, m, want_on):
    """Per phase in the wanted state: the values of the windows wholly inside it after the guard."""
    out = []
    for start, end, on in phases(m):
        if on != want_on:
            continue
        vals = [w["value"] for w in windows
                if w["start_ns"] >= start + m["guard_ns"] and w["end_ns"] <= end]
        if vals:
            out.append(vals)
    return out


def lag1(xs):
    if len(xs) < 3:
        return float("nan")
    m = statistics.mean(xs)
    den = sum((x - m) ** 2 for x in xs)
    return sum((a - m) * (b - m) for a, b in zip(xs, xs[1:])) / den if den else float("nan")


def window_figures(vals):
    """Spread of a window series: CV, lag-1 autocorrelation, windows below half the median
    (the probe off the CPU for most of the window) and below 0.8 x the 90th percentile (the
    slower of this machine's two vCPU speeds, about 2/3 of the faster)."""
    med, p90 = statistics.median(vals), statistics.quantiles(vals, n=10)[-1]
    share = lambda pred: 100.0 * sum(map(pred, vals)) / len(vals)  # noqa: E731
    return {"windows": len(vals), "mean": statistics.mean(vals), "median": med, "cv_pct": cv_pct(vals),
            "lag1": lag1(vals), "starved_pct": share(lambda v: v < med / 2),
            "slow_pct": share(lambda v: v < 0.8 * p90),
            "p10": statistics.quantiles(vals, n=10)[0], "p90": p90}


def series_of(t, metric):
    return next((s["windows"] for s in t["series"] if s["metric"] == metric), None)


def analyse(trials, probe, metric, null_run):
    """Baseline variation of one probe's metric in one run's trials."""
    mine = [t for t in trials if t["probe"] == probe and t["status"] == "ok"]
    base = [t["samples"][metric] for t in mine if t["condition"] == "baseline" and metric in t["samples"]]
    out = {"baseline_trials": len(base)}
    if len(base) > 1:
        out.update({"baseline_trial_values": base, "baseline_trial_cv_pct": cv_pct(base)})
    windows, phase_means, trial_means, within = [], [], [], []
    for t in mine:
        ws, m = series_of(t, metric), t["modulation"]
        if not ws or not m:
            continue
        ph = phase_windows(ws, m, False) + (phase_windows(ws, m, True) if null_run else [])
        flat = [v for p in ph for v in p]
        if len(flat) < 2:
            continue
        windows += flat
        phase_means += [statistics.mean(p) for p in ph]
        trial_means.append(statistics.mean(flat))
        within.append(cv_pct(flat))
    if windows:
        out.update({"onoff_trials": len(trial_means), "off_windows": window_figures(windows),
                    "off_window_cv_within_trial_pct_median": statistics.median(within),
                    "off_phase_cv_pct": cv_pct(phase_means), "off_phases": len(phase_means),
                    "off_trial_mean_cv_pct": cv_pct(trial_means) if len(trial_means) > 1 else None})
    return out


def probe_cmd(a, pin):
    cmd = [a.isobench, "probe", a.probe, "--json", "--budget", str(a.budget), "--window", "5"]
    for s in a.set or []:
        cmd += ["--set", s]
    if pin is not None:
        cmd += ["--pin", str(pin)]
    return cmd + (a.extra or [])


def series_out(cmd, stdout, metric):
    m = next((m for m in json.loads(stdout)["metrics"] if m["name"] == metric and m.get("series")), None)
    if m is None:
        raise SystemExit(f"no {metric} series in {' '.join(cmd)}")
    return m


def standalone(a):
    cmd = probe_cmd(a, a.pin)
    m = series_out(cmd, subprocess.run(cmd, capture_output=True, text=True, check=True).stdout, a.metric)
    return {"command": " ".join(cmd), "value": m["value"], **window_figures([w["value"] for w in m["series"]])}


def both_cpus(a):
    """The probe pinned to CPU 0 and to CPU 1 at the same time: whether the slow windows of
    one CPU coincide with the other's (a host-wide speed change) or not (a per-vCPU one)."""
    cmds = [probe_cmd(a, cpu) for cpu in (0, 1)]
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, text=True) for c in cmds]
    series = [series_out(c, p.communicate()[0], a.metric)["series"] for c, p in zip(cmds, procs)]
    out = {"command": " & ".join(" ".join(c) for c in cmds)}
    for cpu, ws in enumerate(series):
        out[f"cpu{cpu}"] = window_figures([w["value"] for w in ws])
    # Pair windows by time (both series are on CLOCK_MONOTONIC) and classify each as slow.
    by_start = {round(w["start_ns"] / 5e6): w["value"] < 0.8 * out["cpu1"]["p90"] for w in series[1]}
    pairs = [(w["value"] < 0.8 * out["cpu0"]["p90"], by_start[k]) for w in series[0]
             if (k := round(w["start_ns"] / 5e6)) in by_start]
    n = len(pairs) or 1
    out["paired_windows"] = len(pairs)
    out["both_slow_pct"] = 100.0 * sum(x and y for x, y in pairs) / n
    out["only_cpu0_slow_pct"] = 100.0 * sum(x and not y for x, y in pairs) / n
    out["only_cpu1_slow_pct"] = 100.0 * sum(y and not x for x, y in pairs) / n
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", help="run databases (.db) or exports (.json)")
    ap.add_argument("--probe", default="cpu-int")
    ap.add_argument("--metric", default="ops_per_sec")
    ap.add_argument("--null", action="append", default=[], help="a run given is an A/A run: every phase is baseline")
    ap.add_argument("--standalone", action="store_true")
    ap.add_argument("--both-cpus", action="store_true", help="standalone, pinned to CPU 0 and CPU 1 at once")
    ap.add_argument("--isobench", default="target/release/isobench")
    ap.add_argument("--budget", type=float, default=3.0)
    ap.add_argument("--set", action="append")
    ap.add_argument("--pin", type=int)
    ap.add_argument("--extra", nargs=argparse.REMAINDER, help="more `isobench probe` arguments")
    a = ap.parse_args()
    if a.standalone or a.both_cpus:
        print(json.dumps(both_cpus(a) if a.both_cpus else standalone(a), indent=1))
        return 0
    for path in a.runs + a.null:
        trials = load_db(path) if path.endswith(".db") else load_export(path)
        r = analyse(trials, a.probe, a.metric, path in a.null)
        print(json.dumps({"run": path, **r}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
