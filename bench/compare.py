#!/usr/bin/env python3
"""Compare isobench against reference tools, in one run on one machine.

Every figure printed is measured here, now: each comparison alternates isobench and the
reference tool (A B A B ...) so drift cancels, and reports the medians and their ratio.
Called by bench/run, which installs the tools and builds isobench.
"""
import argparse
import collections
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from functools import partial

import results as records  # bench/figures/ and bench/RESULTS.md

ISO = "target/release/isobench"
OUT = "bench/out"
REPS = 3


def sh(cmd, timeout=600, check=True):
    """Runs a command, returns stdout (text)."""
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-400:]}")
    return p.stdout


def iso_probe(name, sets=(), budget=1.0, pin=None, pin_peer=None, extra=()):
    cmd = [ISO, "probe", name, "--json", "--budget", str(budget)]
    for s in sets:
        cmd += ["--set", s]
    if pin is not None:
        cmd += ["--pin", str(pin)]
    if pin_peer is not None:
        cmd += ["--pin-peer", str(pin_peer)]
    cmd += list(extra)
    doc = json.loads(sh(cmd))
    return {m["name"]: m for m in doc["metrics"]}


def metric(ms, name):
    if name not in ms:
        raise KeyError(f"metric {name} not in {sorted(ms)}")
    return ms[name]["value"], ms[name]["unit"]


def to_mib_s(v, unit):
    factors = {"GB/s": 1e9 / 2**20, "GiB/s": 1024.0, "MB/s": 1e6 / 2**20, "MiB/s": 1.0}
    return v * factors[unit]


def alternate(a, b, reps=REPS):
    """Runs a() and b() alternately; returns (median a, median b, all a, all b)."""
    xs, ys = [], []
    for _ in range(reps):
        xs.append(a())
        ys.append(b())
    return statistics.median(xs), statistics.median(ys), xs, ys


# ---------------------------------------------------------------------------------------------
# probes vs reference tools

def cmp_mem_bandwidth():
    def iso():
        v, u = metric(iso_probe("mem-bandwidth", ["op=copy", "size=64M"], budget=2, pin=0), "copy_gbps")
        return to_mib_s(v, u)

    def ref(test):
        # mbw's AVG line includes the first iteration, which pays the page faults of a fresh
        # buffer; isobench reports the median of warm repetitions, so take mbw's median too.
        out = sh(["taskset", "-c", "0", "mbw", "-q", "-n", "10", f"-t{test}", "64"])
        its = [float(x) for x in re.findall(r"^\d+\s+Method: \w+.*?Copy:\s+([\d.]+) MiB/s", out, re.M)]
        return statistics.median(its)

    # Debian's mbw 1.2.2 prints its first two tests under each other's names: the row labelled
    # MEMCPY (-t0) runs an 8-byte assignment loop and the row labelled DUMB (-t1) runs
    # memcpy. Both are reported; -t1 is the memcpy comparison.
    return [
        row("mem-bandwidth copy 64 MiB", "mbw -t1 64 (memcpy; labelled DUMB)", "MiB/s",
            *alternate(iso, lambda: ref(1))),
        row("mem-bandwidth copy 64 MiB", "mbw -t0 64 (assignment loop; labelled MEMCPY)", "MiB/s",
            *alternate(iso, lambda: ref(0))),
    ]


def fio_job(path, rw, direct, bs, size, extra=()):
    cmd = ["fio", "--name=ref", f"--filename={path}", f"--rw={rw}", f"--bs={bs}",
           f"--size={size}", f"--direct={direct}", "--ioengine=psync", "--iodepth=1",
           "--invalidate=1", "--output-format=json", "--randrepeat=1"] + list(extra)
    doc = json.loads(sh(cmd))
    job = doc["jobs"][0]
    side = job["read"] if rw in ("read", "randread") else job["write"]
    return side["bw_bytes"] / 1e6


def cmp_disk_io():
    d = os.path.abspath(os.path.join(OUT, "disk"))
    os.makedirs(d, exist_ok=True)
    blocks, bs = 20000, 8192
    size = blocks * bs
    sync_blocks = 300  # isobench's default for fsync writes (each costs milliseconds here)
    sync_size = sync_blocks * bs
    path = os.path.join(d, "fio.dat")
    rows = []
    cases = [
        # isobench reads a file it wrote moments before (buffered 8K writes + fsync) and gives
        # no fadvise hint: fio writes its file the same way right before reading it, and
        # fadvise_hint=0 keeps fio from doubling the readahead window (POSIX_FADV_SEQUENTIAL).
        ("read", "read", 0, ["--fadvise_hint=0"]),
        ("dioread", "read", 1, []),
        ("write", "write", 0, ["--end_fsync=1", "--fallocate=none"]),
        ("diowrite", "write", 1, []),
        ("randread", "randread", 1, []),
        # isobench's fsyncwrite overwrites the first blocks of its laid-out file with none of
        # its pages cached (fio: invalidate=1 on the laid-out file).
        ("fsyncwrite", "write", 0, ["--fsync=1"]),
    ]
    for op, rw, direct, extra in cases:
        def iso(op=op):
            ms = iso_probe("disk-io", [f"ops={op}", f"blocks={blocks}", "block_size=8K"],
                           budget=5, extra=["--dir", d])
            v, u = metric(ms, f"{op}_mbps")
            return v * (1.0 if u == "MB/s" else 2**20 / 1e6)

        def ref(rw=rw, direct=direct, extra=extra):
            # Buffered writes go to a fresh file, as isobench's do (block allocation is part
            # of the cost); the buffered read reads a file written just before it, as
            # isobench's does; direct ops and fsync writes use a laid-out file.
            fresh = "--fallocate=none" in extra
            just_written = rw == "read" and direct == 0
            if (fresh or just_written) and os.path.exists(path):
                os.remove(path)
            if just_written:
                fio_job(path, "write", 0, "8k", size, ["--end_fsync=1", "--fallocate=none"])
            elif not fresh and not os.path.exists(path):
                fio_job(path, "write", 1, "1M", size)
            r = fio_job(path, rw, direct, "8k", size if "--fsync=1" not in extra else sync_size, extra)
            if fresh or just_written:
                os.remove(path)
            return r

        rows.append(row(f"disk-io {op} {blocks}x8K", f"fio rw={rw} direct={direct} {' '.join(extra)}".strip(),
                        "MB/s", *alternate(iso, ref)))
    shutil.rmtree(d, ignore_errors=True)
    return rows


class Server:
    """A reference server in the background, killed on exit."""

    def __init__(self, cmd, settle=0.5):
        self.p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(settle)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(5)
        except subprocess.TimeoutExpired:
            self.p.kill()


def cmp_net_throughput():
    with Server(["iperf3", "-s", "-B", "127.0.0.1", "-p", str(IPERF_PORT), "-A", "1"]):
        def iso():
            v, _ = metric(iso_probe("net-throughput", ["proto=tcp", "msg_size=128K", "duration=3"],
                                    budget=3, pin=0, pin_peer=1), "tcp_mbps")
            return v

        return [row("net-throughput tcp 128K", "iperf3 -l 128K", "Mbit/s",
                    *alternate(iso, lambda: iperf3_mbps(0, secs=3)))]


def cmp_net_rtt():
    with Server(["taskset", "-c", "1", "sockperf", "server", "-i", "127.0.0.1", "-p", str(SOCKPERF_PORT)]):
        def iso():
            v, _ = metric(iso_probe("net-rtt", ["proto=udp", "size=64"], budget=3, pin=0, pin_peer=1),
                          "udp_rtt_p50_ns")
            return v / 1000.0

        return [row("net-rtt udp 64 B p50 (RTT)", "sockperf ping-pong -m 64 (2 x p50)", "us",
                    *alternate(iso, lambda: sockperf_p50(0, False, secs=3)))]


def cmp_cpu_int():
    def iso():
        v, _ = metric(iso_probe("cpu-int", ["kernel=primes", "threads=1", "max_prime=10000"],
                                budget=3, pin=0), "events_per_sec")
        return v

    def ref():
        out = sh(["taskset", "-c", "0", "sysbench", "cpu", "--threads=1", "--time=3",
                  "--cpu-max-prime=10000", "run"])
        return float(re.search(r"events per second:\s+([\d.]+)", out).group(1))

    return [row("cpu-int primes<10000", "sysbench cpu --cpu-max-prime=10000", "events/s", *alternate(iso, ref))]


def row(what, ref, unit, iso_med, ref_med, isos, refs):
    return {"probe": what, "reference": ref, "unit": unit, "isobench": iso_med, "ref": ref_med,
            "ratio": iso_med / ref_med if ref_med else float("nan"), "isobench_runs": isos, "ref_runs": refs}


# ---------------------------------------------------------------------------------------------
# stressor effects vs stress-ng

class Stress:
    """Runs a stressor in the background for the duration of a with-block."""

    def __init__(self, cmd):
        self.cmd = cmd

    def __enter__(self):
        self.p = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True)
        time.sleep(1.0)
        if self.p.poll() is not None:
            raise RuntimeError(f"{' '.join(self.cmd)} exited early ({self.p.returncode})")
        return self

    def __exit__(self, *a):
        try:
            os.killpg(self.p.pid, signal.SIGINT)
            self.p.wait(10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.p.wait()


PAIRS = [
    # stressor, isobench stress args, stress-ng args, probe, probe sets, metric, pin
    ("cpu", ["--intensity", "100"], ["--cpu", "2"], "cpu-int", ["kernel=primes", "threads=2"], "events_per_sec"),
    ("cache", ["--intensity", "50"], ["--cache", "1"], "cache-latency", ["level=llc"], "llc_ns"),
    ("membw", ["--intensity", "50"], ["--stream", "1"], "mem-bandwidth", ["op=copy"], "copy_gbps"),
    ("memhog", ["--intensity", "50", "--allow-unsafe-host"], ["--vm", "1", "--vm-bytes", "1G"], "mem-latency", [], "rand_ns"),
    ("forkbomb", ["--intensity", "50", "--allow-unsafe-host"], ["--fork", "1"], "fork-latency", ["mode=fork"], "fork_p50_ns"),
    ("disk", ["--intensity", "100", "--allow-unsafe-host", "--set", "threads=1", "--set", "direct=true"], ["--hdd", "1"], "disk-io", ["ops=dioread", "blocks=5000"], "dioread_mbps"),
    ("net-tx", ["--intensity", "50"], ["--udp", "1"], "net-throughput", ["proto=udp", "duration=1"], "udp_mbps"),
    ("net-rx", ["--intensity", "100", "--set", "threads=1"], ["--udp", "1"], "net-throughput", ["proto=udp", "duration=1"], "udp_mbps"),
]


def degradation(base, cont, direction):
    d = (base - cont) / base if direction == "higher" else (cont - base) / base
    return 100.0 * d


def cmp_stressors(only=None):
    rows = []
    d = os.path.abspath(os.path.join(OUT, "stressdir"))
    os.makedirs(d, exist_ok=True)
    only = only or [x for x in os.environ.get("BENCH_ONLY", "").split(",") if x]
    for name, iso_args, sng_args, probe, sets, mname in PAIRS:
        if only and name not in only:
            continue
        extra = ["--dir", d] if probe == "disk-io" else []

        def measure():
            ms = iso_probe(probe, sets, budget=2, extra=extra)
            return ms[mname]["value"], ms[mname]["direction"]

        try:
            base, contended_iso, contended_sng = [], [], []
            direction = "higher"
            for _ in range(REPS):
                v, direction = measure()
                base.append(v)
                with Stress([ISO, "stress", name, "--dir", d] + iso_args):
                    contended_iso.append(measure()[0])
                with Stress(["stress-ng", "--temp-path", d] + sng_args + ["--timeout", "600"]):
                    contended_sng.append(measure()[0])
            b = statistics.median(base)
            di = degradation(b, statistics.median(contended_iso), direction)
            ds = degradation(b, statistics.median(contended_sng), direction)
            rows.append({"stressor": name, "stress-ng": " ".join(sng_args), "probe": f"{probe} {mname}",
                         "baseline": b, "isobench_degr_pct": di, "stressng_degr_pct": ds,
                         # A ratio only means something when stress-ng degrades the probe.
                         "ratio": di / ds if ds > 0.5 else float("nan"),
                         "runs": {"base": base, "isobench": contended_iso, "stress-ng": contended_sng}})
        except Exception as e:  # noqa: BLE001 - one failing pair must not lose the others
            rows.append({"stressor": name, "stress-ng": " ".join(sng_args), "probe": f"{probe} {mname}",
                         "error": str(e)})
        print_partial(rows[-1])
    shutil.rmtree(d, ignore_errors=True)
    return rows


# ---------------------------------------------------------------------------------------------
# baseline coefficient of variation beside the reference tools' own, and the two-process probes
# with both ends on one CPU and on two

LOCK = None  # a file held with an exclusive flock(2) while cases measure (shared machines)
LOCK_HOLD_S = 240  # longest stretch of cases in one hold of LOCK, so others measure between
IPERF_PORT, SOCKPERF_PORT, QPERF_PORT = 5911, 11911, 19911


class Measuring:
    """Holds LOCK (when set) across consecutive cases, handing it back between cases once it
    has been held for LOCK_HOLD_S, so others sharing the machine measure in between."""

    def __init__(self):
        self.f, self.since = None, 0.0

    def case(self):
        if not LOCK:
            return
        if self.f and time.monotonic() - self.since > LOCK_HOLD_S:
            self.release()
        if not self.f:
            self.f = open(LOCK, "a")
            fcntl.flock(self.f, fcntl.LOCK_EX)
            self.since = time.monotonic()

    def release(self):
        if self.f:
            self.f.close()  # closing the file drops the lock
            self.f = None


def cv_pct(xs):
    m = statistics.mean(xs)
    return 100.0 * statistics.stdev(xs) / abs(m) if len(xs) > 1 and m else float("nan")


def iso_value(name, sets, mname, budget=1.0, pin=0, pin_peer=None, scale=1.0):
    v, _ = metric(iso_probe(name, sets, budget=budget, pin=pin, pin_peer=pin_peer), mname)
    return v * scale


def ref_sysbench():
    out = sh(["taskset", "-c", "0", "sysbench", "cpu", "--threads=1", "--time=1",
              "--cpu-max-prime=10000", "run"])
    return float(re.search(r"events per second:\s+([\d.]+)", out).group(1))


def ref_mbw():
    out = sh(["taskset", "-c", "0", "mbw", "-q", "-n", "10", "-t1", "64"])
    its = [float(x) for x in re.findall(r"^\d+\s+Method: \w+.*?Copy:\s+([\d.]+) MiB/s", out, re.M)]
    return statistics.median(its)


def disk_dir():
    d = os.path.abspath(os.path.join(OUT, "disk"))
    os.makedirs(d, exist_ok=True)
    return d


def ref_fio_randread():
    path = os.path.join(disk_dir(), "fio-cv.dat")
    if not os.path.exists(path):
        fio_job(path, "write", 1, "1M", 20000 * 8192)
    return fio_job(path, "randread", 1, "8k", 20000 * 8192)


def qperf_value(test, cpu, size):
    """qperf client on `cpu` against the server on loopback: latency in us (qperf's one-way
    figure, half the mean round trip) or bandwidth in MB/s (1e6 bytes)."""
    out = sh(["taskset", "-c", str(cpu), "qperf", "127.0.0.1", "-lp", str(QPERF_PORT), "-t", "1",
              "-m", str(size), test])
    m = re.search(r"(latency|bw)\s*=\s*([\d.]+)\s*(\S+)", out)
    v, unit = float(m.group(2)), m.group(3)
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "sec": 1e6, "KB/sec": 1e-3, "MB/sec": 1.0,
             "GB/sec": 1e3}
    return v * scale[unit]


def sockperf_p50(cpu, tcp, size=64, secs=1):
    """sockperf ping-pong client on `cpu`: p50 round trip in us (2 x its one-way figure)."""
    cmd = ["taskset", "-c", str(cpu), "sockperf", "ping-pong", "-i", "127.0.0.1",
           "-p", str(SOCKPERF_PORT), "-m", str(size), "-t", str(secs)]
    out = sh(cmd + (["--tcp"] if tcp else []))
    return float(re.search(r"percentile 50\.000 =\s+([\d.]+)", out).group(1)) * 2.0


def iperf3_mbps(cpu, secs=1):
    doc = json.loads(sh(["iperf3", "-c", "127.0.0.1", "-p", str(IPERF_PORT), "-t", str(secs), "-l", "128K",
                         "-A", str(cpu), "-J"]))
    return doc["end"]["sum_received"]["bits_per_second"] / 1e6


def dd_pipe_gbps(writer, reader, total=2 << 30, bs=65536):
    """`dd if=/dev/zero | dd of=/dev/null` in 64 KiB writes, each end pinned: 1e9 bytes/s
    through the pipe as the reader's dd reports it."""
    cmd = (f"taskset -c {writer} dd if=/dev/zero bs={bs} count={total // bs} status=none | "
           f"taskset -c {reader} dd of=/dev/null bs={bs}")
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, LC_ALL="C"))
    m = re.search(r"^(\d+) bytes .* copied, ([\d.]+) s", p.stderr, re.M)
    if p.returncode != 0 or not m:
        raise RuntimeError(f"{cmd} failed ({p.returncode}): {p.stderr.strip()[-300:]}")
    return int(m.group(1)) / float(m.group(2)) / 1e9


# A case: `iso` and `ref` return values in `unit` (the same unit, so their ratio means
# something); `servers` are the reference tool's, started for the case.
Case = collections.namedtuple("Case", "probe placement unit iso reference ref servers")

# Placements of the two-process probes: (label, client CPU, server CPU).
PLACEMENTS = [("one CPU", 0, 0), ("two CPUs", 0, 1)]


def two_process_cases(label, c, s):
    """The two-process probes with the client (writer) on CPU `c` and the server (reader) on
    `s`, each beside a reference tool pinned the same way."""
    qperf = [["taskset", "-c", str(s), "qperf", "-lp", str(QPERF_PORT)]]
    tput = partial(iso_value, "net-throughput", ["proto=tcp", "msg_size=128K"], "tcp_mbps",
                   pin=c, pin_peer=s)
    cases = [
        Case("net-throughput tcp 128K", label, "Mbit/s", tput, "iperf3 -l 128K",
             partial(iperf3_mbps, c),
             [["iperf3", "-s", "-B", "127.0.0.1", "-p", str(IPERF_PORT), "-A", str(s)]]),
        Case("net-throughput tcp 128K", label, "Mbit/s", tput, "qperf -m 128K tcp_bw",
             lambda: qperf_value("tcp_bw", c, 128 * 1024) * 8, qperf),
    ]
    for proto in ("udp", "tcp"):
        rtt = partial(iso_value, "net-rtt", [f"proto={proto}", "size=64"], pin=c, pin_peer=s,
                      scale=1e-3)
        sockperf = ["taskset", "-c", str(s), "sockperf", "server", "-i", "127.0.0.1",
                    "-p", str(SOCKPERF_PORT)] + (["--tcp"] if proto == "tcp" else [])
        cases += [
            Case(f"net-rtt {proto} 64 B p50 RTT", label, "us", partial(rtt, f"{proto}_rtt_p50_ns"),
                 f"sockperf ping-pong{' --tcp' if proto == 'tcp' else ''} -m 64 (2 x p50)",
                 partial(sockperf_p50, c, proto == "tcp"), [sockperf]),
            Case(f"net-rtt {proto} 64 B mean RTT", label, "us", partial(rtt, f"{proto}_rtt_mean_ns"),
                 f"qperf -m 64 {proto}_lat (2 x latency)",
                 lambda proto=proto: qperf_value(f"{proto}_lat", c, 64) * 2, qperf),
        ]
    for mode in ("pipe", "unix"):
        iso = partial(iso_value, "local-comm", [f"mode={mode}"], f"{mode}_gbps", pin=c, pin_peer=s)
        if mode == "pipe":
            cases.append(Case("local-comm pipe 64K", label, "GB/s", iso,
                              "dd if=/dev/zero bs=64K, piped to dd of=/dev/null", partial(dd_pipe_gbps, c, s), []))
        else:
            cases.append(Case("local-comm unix 64K", label, "GB/s", iso, None, None, []))
    return cases


def cv_cases():
    """Every probe's main metric, pinned, beside its reference tool where there is one; the
    two-process probes in each placement."""
    pinned = [
        Case("cpu-int primes", "pinned", "events/s",
             partial(iso_value, "cpu-int", ["kernel=primes"], "events_per_sec"),
             "sysbench cpu --cpu-max-prime=10000", ref_sysbench, []),
        Case("cpu-int mix", "pinned", "ops/s", partial(iso_value, "cpu-int", [], "ops_per_sec"),
             "sysbench cpu --cpu-max-prime=10000", ref_sysbench, []),
        Case("cpu-float", "pinned", "MFLOP/s", partial(iso_value, "cpu-float", [], "mflops"),
             None, None, []),
        Case("mem-bandwidth copy 64 MiB", "pinned", "MiB/s",
             lambda: to_mib_s(iso_value("mem-bandwidth", ["op=copy", "size=64M"], "copy_gbps"), "GB/s"),
             "mbw -t1 64 (memcpy)", ref_mbw, []),
        Case("cache-latency llc", "pinned", "ns", partial(iso_value, "cache-latency", ["level=llc"], "llc_ns"),
             None, None, []),
        Case("mem-latency rand", "pinned", "ns", partial(iso_value, "mem-latency", ["mode=rand"], "rand_ns"),
             None, None, []),
        Case("disk-io randread 8K", "pinned", "MB/s",
             lambda: iso_value("disk-io", ["ops=randread", "blocks=20000", "block_size=8K",
                                           f"dir={disk_dir()}"], "randread_mbps", budget=5),
             "fio randread direct=1 bs=8k QD1", ref_fio_randread, []),
    ]
    return pinned + [c for label, cl, srv in PLACEMENTS for c in two_process_cases(label, cl, srv)]


class Servers(contextlib.ExitStack):
    """The reference servers of one case, each checked to be running."""

    def __init__(self, cmds):
        super().__init__()
        for cmd in cmds:
            srv = self.enter_context(Server(cmd))
            if srv.p.poll() is not None:
                self.close()
                raise RuntimeError(f"{' '.join(cmd)} exited at once ({srv.p.returncode})")


def cmp_cv(cases, runs=10):
    """For each case, `runs` runs of the probe (each its own process) alternated with its
    reference tool (A B A B, so both see the same drift): CV of each, CV ratio = probe CV /
    tool CV (target <= 2), and the ratio of medians."""
    rows, lock = [], Measuring()
    for case in cases:
        lock.case()
        r = {"probe": case.probe, "placement": case.placement, "unit": case.unit,
             "reference": case.reference or "-"}
        try:
            xs, ys = [], []
            with Servers(case.servers):
                for _ in range(runs):
                    xs.append(case.iso())
                    if case.ref:
                        ys.append(case.ref())
            r.update({"n": len(xs), "values": xs, "median": statistics.median(xs), "cv_pct": cv_pct(xs)})
            if ys:
                cvr = cv_pct(xs) / cv_pct(ys) if cv_pct(ys) else float("nan")
                r.update({"ref_values": ys, "ref_median": statistics.median(ys), "ref_cv_pct": cv_pct(ys),
                          "cv_ratio": cvr, "within_2x": "yes" if cvr <= 2 else "**no**",
                          "ratio": statistics.median(xs) / statistics.median(ys)})
        except Exception as e:  # noqa: BLE001 - one failing case must not lose the others
            r["error"] = str(e)[-300:]
        rows.append(r)
        print_partial(r)
    lock.release()
    return rows


# ---------------------------------------------------------------------------------------------
# rendering

def fmt(v):
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"
    return str(v)


def table(rows, cols):
    lines = ["| " + " | ".join(c for c, _ in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(fmt(r.get(k, "")) if k in r else ("error: " + r["error"] if k == cols[-1][1] and "error" in r else "") for _, k in cols) + " |")
    return "\n".join(lines)


def print_partial(r):
    print("  " + json.dumps({k: v for k, v in r.items() if not isinstance(v, list)}), flush=True)


def main():
    global ISO, OUT, LOCK
    ap = argparse.ArgumentParser()
    ap.add_argument("--isobench", default=ISO)
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--lock", help="file to hold an exclusive flock on while cv/placement cases measure")
    ap.add_argument("--runs", type=int, default=10, help="cv/placement: runs of each side per case")
    ap.add_argument("--only", action="append", help="cv/placement: cases whose probe or reference contains this")
    ap.add_argument("what", nargs="*", default=["all"], help="all, probes, stressors, cv, placement")
    a = ap.parse_args()
    ISO, OUT, LOCK = a.isobench, a.out, a.lock
    what = set(a.what)
    results = {"host": json.loads(sh([ISO, "list", "--json"]))["host"], "when": time.strftime("%Y-%m-%dT%H:%M:%S")}
    md = []
    if what & {"all", "probes"}:
        rows = []
        for f in (cmp_cpu_int, cmp_mem_bandwidth, cmp_net_throughput, cmp_net_rtt, cmp_disk_io):
            try:
                for r in f():
                    rows.append(r)
                    print_partial(r)
            except Exception as e:  # noqa: BLE001
                rows.append({"probe": f.__name__, "error": str(e)})
                print_partial(rows[-1])
        results["probes"] = rows
        md += ["## Probes vs reference tools (ratio = isobench / reference; target 0.90..1.10)", "",
               table(rows, [("probe", "probe"), ("reference", "reference"), ("unit", "unit"),
                            ("isobench", "isobench"), ("reference value", "ref"), ("ratio", "ratio")]), ""]
    if what & {"all", "stressors"}:
        rows = cmp_stressors()
        results["stressors"] = rows
        md += ["## Stressor effect on its probe vs stress-ng (ratio = isobench degradation / stress-ng degradation; target >= 1)", "",
               table(rows, [("stressor", "stressor"), ("stress-ng", "stress-ng"), ("probe", "probe"),
                            ("baseline", "baseline"), ("isobench degr %", "isobench_degr_pct"),
                            ("stress-ng degr %", "stressng_degr_pct"), ("ratio", "ratio")]), ""]
    if what & {"all", "cv", "placement"}:
        cases = cv_cases() if what & {"all", "cv"} else [c for c in cv_cases() if c.placement != "pinned"]
        cases = [c for c in cases if not a.only or any(o in f"{c.probe} {c.reference}" for o in a.only)]
        rows = cmp_cv(cases, a.runs)
        results["cv"] = rows
        if what & {"all", "cv"}:
            md += [f"## Baseline CV, each probe beside its reference tool in the same loop ({a.runs} "
                   "alternated runs, each its own process; target: CV ratio <= 2)", "",
                   table(rows, [("probe", "probe"), ("placement", "placement"), ("reference", "reference"),
                                ("isobench CV %", "cv_pct"), ("reference CV %", "ref_cv_pct"),
                                ("CV ratio", "cv_ratio"), ("within 2x", "within_2x")]), ""]
        md += ["## Two-process probes: one CPU and two CPUs (medians of the same runs; "
               "ratio = isobench / reference)", "",
               table([r for r in rows if r["placement"] != "pinned"],
                     [("probe", "probe"), ("placement", "placement"), ("reference", "reference"),
                      ("unit", "unit"), ("isobench", "median"), ("reference value", "ref_median"),
                      ("ratio", "ratio")]), ""]
    text = "\n".join(md)
    print()
    print(text)
    with open(os.path.join(OUT, "report.md"), "w") as f:
        f.write(f"# isobench bench report ({results['when']}, {results['host'].get('cpu_model')})\n\n" + text)
    with open(os.path.join(OUT, "report.json"), "w") as f:
        json.dump(results, f, indent=2)
    record(results, records.command_line("bench/compare.py"))


def record(results, command, **stamp):
    """The probe ratios and the CV ratios as their records in bench/figures/ (01-probes,
    03-cv); a row that failed is left as it was."""
    def within(x, lo, hi):
        return "met" if lo <= x <= hi else "missed"

    for r in results.get("probes", []):
        if "error" in r:
            continue
        records.update("01-probes", f"{r['probe']} vs {r['reference']}", reference=r["reference"],
                       figure=round(r["isobench"], 1), unit=r["unit"], reference_figure=round(r["ref"], 1),
                       ratio=round(r["ratio"], 2), goal="0.90..1.10",
                       verdict=within(r["ratio"], 0.90, 1.10), command=command, **stamp)
    for r in results.get("cv", []):
        if "error" in r or "cv_ratio" not in r:
            continue
        target = f"{r['probe']} ({r['placement']}) vs {r['reference']}"
        records.update("03-cv", target, reference=r["reference"], figure=round(r["cv_pct"], 3),
                       unit="% CV", reference_figure=round(r["ref_cv_pct"], 3),
                       ratio=round(r["cv_ratio"], 2), goal="<= 2",
                       verdict=within(r["cv_ratio"], 0, 2), command=command,
                       note=f"{r['n']} runs a side.", **stamp)
        if r["placement"] != "pinned":
            records.update("01-probes", target, reference=r["reference"], figure=round(r["median"], 3),
                           unit=r["unit"], reference_figure=round(r["ref_median"], 3),
                           ratio=round(r["ratio"], 2), goal="0.90..1.10",
                           verdict=within(r["ratio"], 0.90, 1.10), command=command,
                           note=f"Medians of the CV runs, {r['n']} a side.", **stamp)


if __name__ == "__main__":
    sys.exit(main())
