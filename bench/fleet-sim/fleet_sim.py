#!/usr/bin/env python3
"""Fleet coordinator at scale, by simulation: fake host agents drive the real coordinator.

`isobench run --hosts hosts.toml` (crates/cli/src/hostsrun.rs) is run against N simulated
hosts, all served by this one process on a few loopback ports (hosts.toml entries may share an
address). Each simulated host speaks the real agent protocol (docs/agent-protocol.md): it
checks the token in `hello`, answers with protocol 1.1, takes `run_scenario`, sends the
progress lines of a real run spread over the run's duration, then the stored run in
`run_data` pieces of at most 1 MiB, then `scenario_done` with the pieces and bytes. Every
host returns a valid stored run with an id of its own, taken from a template that a real
fake-mode host agent produced (`template` below); one host in 25 is noisy (its victim fares
worse under every stressor).

While the coordinator runs, the driver samples its /proc entry (resident memory, threads,
open descriptors), counts the connections open on the fake side, times every "imported" line
of the coordinator, and afterwards counts the rows of its database.

    fleet_sim.py template --isobench target/release/isobench --out bench/fleet-sim/out
    fleet_sim.py run --hosts 1000 --payload lean --isobench target/release/isobench \
        --out bench/fleet-sim/out

Loopback only: every socket here is bound to or connects to 127.0.0.1.
"""

import argparse
import asyncio
import json
import os
import random
import resource
import shutil
import socket
import sqlite3
import subprocess
import sys
import time

LOOPBACK = "127.0.0.1"
CHUNK = 1 << 20  # run_data pieces of at most 1 MiB, as a real host agent sends
NOISY_EVERY = 25


# ---------------------------------------------------------------------------------------------
# template: one real run from a fake-mode host agent


def free_port():
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def make_template(isobench, out):
    """Runs a real host agent in fake mode, asks it for the quick preset over the protocol
    and keeps what it said: the hello answer, the progress lines and the stored run."""
    os.makedirs(out, exist_ok=True)
    work = os.path.join(out, "template-agent")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    tok = os.path.join(work, "token")
    with open(tok, "w") as f:
        f.write(os.urandom(16).hex() + "\n")
    os.chmod(tok, 0o600)
    token = open(tok).read().strip()
    port = free_port()
    env = dict(os.environ, ISOBENCH_DEBUG_FAKE="1")
    agent = subprocess.Popen(
        [isobench, "agent", "--listen", f"{LOOPBACK}:{port}", "--token-file", tok,
         "--db", os.path.join(work, "agent.db")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                s = socket.create_connection((LOOPBACK, port))
                break
            except OSError:
                time.sleep(0.1)
        f = s.makefile("rwb")

        def send(o):
            f.write((json.dumps(o) + "\n").encode())
            f.flush()

        send({"id": 1, "type": "hello", "protocol_version": "1.1", "tool_version": "0.1.0",
              "token": token})
        hello = json.loads(f.readline())
        send({"id": 2, "type": "run_scenario", "scenario": "", "file_name": "quick.toml",
              "preset": "quick", "seed": 7})
        progress, chunks, done = [], [], None
        while done is None:
            m = json.loads(f.readline())
            if m["type"] == "run_progress":
                progress.append(m["line"])
            elif m["type"] == "run_data":
                chunks.append(m["chunk"])
            elif m["type"] == "scenario_done":
                done = m
            else:
                raise SystemExit(f"template: unexpected message {m['type']}: {m}")
        send({"id": 3, "type": "bye"})
        run = "".join(chunks)
        assert len(run.encode()) == done["bytes"], "template run incomplete"
    finally:
        agent.terminate()
        agent.wait()
    del hello["id"]
    t = {"hello": hello, "progress": progress, "run": json.loads(run), "run_id": done["run_id"]}
    path = os.path.join(out, "template.json")
    with open(path, "w") as f:
        json.dump(t, f)
    print(f"template: run {done['run_id']}, {len(progress)} progress lines, "
          f"{done['bytes']} bytes in {done['chunks']} pieces -> {path}")


# ---------------------------------------------------------------------------------------------
# payloads


def scale_victim(run, factor):
    """The victim's values in stressed trials made worse by `factor` (a noisy host)."""
    for t in run["trials"]:
        if t["tenant"] != "victim" or t["condition"] == "baseline":
            continue
        for s in t["samples"]:
            f = factor if s["direction"] == "lower" else 1 / factor
            s["value"] *= f
        for se in t.get("series") or []:
            for w in se["windows"]:
                w["value"] *= factor


def jitter(run, rng, sd):
    for t in run["trials"]:
        for s in t["samples"]:
            s["value"] *= 1 + rng.gauss(0, sd)


def lean(run, keep_every):
    """Keeps one window in `keep_every` of every series: a run of the same trials and
    samples, a tenth or so of the bytes (the series windows are 99% of a quick run)."""
    for t in run["trials"]:
        for se in t.get("series") or []:
            se["windows"] = se["windows"][::keep_every]


class Payloads:
    """A few variants of the template run (ordinary hosts with a little jitter, a noisy
    host), as JSON text with the template's run id, to be replaced per host."""

    def __init__(self, template, payload, seed=7):
        self.run_id = template["run_id"]
        self.hello = template["hello"]
        self.progress = template["progress"]
        rng = random.Random(seed)
        variants = []
        for v in range(5):
            run = json.loads(json.dumps(template["run"]))
            if payload == "lean":
                lean(run, 40)
            jitter(run, rng, 0.01)
            if v == 0:
                scale_victim(run, 1.6)
            variants.append(json.dumps(run, separators=(",", ":")))
        self.bytes = len(variants[1].encode())
        # Each variant's run_data lines, encoded once; a host's are these with its own run id
        # (the id is digits and dashes, so it reads the same escaped; no piece cuts one).
        self.lines = []
        for text in variants:
            parts = pieces(text)
            for a, b in zip(parts, parts[1:]):
                edge = a[-len(self.run_id):] + b[:len(self.run_id)]
                assert edge.count(self.run_id) == a[-len(self.run_id):].count(self.run_id) \
                    + b[:len(self.run_id)].count(self.run_id), "a piece cuts the run id"
            self.lines.append((
                [(json.dumps({"type": "run_data", "seq": seq, "chunk": c},
                             separators=(",", ":")) + "\n").encode()
                 for seq, c in enumerate(parts)],
                len(text.encode())))
        self.progress_lines = [
            (json.dumps({"type": "run_progress", "line": l}, separators=(",", ":")) + "\n").encode()
            for l in self.progress]

    def for_host(self, n):
        """Host `n`'s run id, run_data lines, run bytes and progress lines."""
        new_id = f"20240101-1{n // 1000000:05d}-{n % 1000000:06d}"
        assert len(new_id) == len(self.run_id)
        v = 0 if n % NOISY_EVERY == 0 else 1 + n % (len(self.lines) - 1)
        old, new = self.run_id.encode(), new_id.encode()
        data, size = self.lines[v]
        return (new_id, [l.replace(old, new) for l in data], size,
                [l.replace(old, new) for l in self.progress_lines])


def pieces(text):
    """`text` in pieces of at most CHUNK bytes, cut on character boundaries."""
    b = text.encode()
    out, i = [], 0
    while i < len(b):
        j = min(i + CHUNK, len(b))
        while j < len(b) and (b[j] & 0xC0) == 0x80:
            j -= 1
        out.append(b[i:j].decode())
        i = j
    return out


# ---------------------------------------------------------------------------------------------
# the simulated hosts


class Fleet:
    def __init__(self, payloads, token, duration, spread, rng):
        self.p = payloads
        self.spread = spread
        self.token = token
        self.duration = duration
        self.rng = rng
        self.next_host = 0
        self.open = 0
        self.peak_open = 0
        self.accepted = 0
        self.done = 0
        self.failed = 0
        self.first_done = None
        self.last_done = None
        self.sent_bytes = 0

    async def handle(self, reader, writer):
        self.open += 1
        self.accepted += 1
        self.peak_open = max(self.peak_open, self.open)
        n = self.next_host
        self.next_host += 1
        try:
            await self.session(n, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            self.failed += 1
        finally:
            self.open -= 1
            try:
                writer.close()
            except Exception:
                pass

    async def send(self, writer, obj):
        writer.write((json.dumps(obj, separators=(",", ":")) + "\n").encode())
        await writer.drain()

    async def session(self, n, reader, writer):
        line = await reader.readline()
        if not line:
            return
        req = json.loads(line)
        if req.get("type") != "hello" or req.get("token") != self.token:
            await self.send(writer, {"id": req.get("id"), "type": "error",
                                     "code": "unauthorized", "message": "token wrong"})
            return
        await self.send(writer, {"id": req["id"], "type": "hello", **self.p.hello})
        while True:
            line = await reader.readline()
            if not line:
                return
            req = json.loads(line)
            kind = req.get("type")
            if kind == "bye":
                await self.send(writer, {"id": req["id"], "type": "bye", "stopped": []})
                return
            if kind == "ping":
                await self.send(writer, {"id": req["id"], "type": "pong"})
                continue
            if kind != "run_scenario":
                await self.send(writer, {"id": req.get("id"), "type": "error",
                                         "code": "unknown_request", "message": kind})
                continue
            await self.scenario(n, req["id"], writer)

    async def scenario(self, n, rid, writer):
        run_id, data, size, lines = self.p.for_host(n)
        # The run's progress, spread over its duration (+-spread per host), sent once a second
        # as a real run's lines come in bursts of the trials that just ended.
        took = self.duration * self.rng.uniform(1 - self.spread, 1 + self.spread)
        start = time.monotonic()
        sent = 0
        while sent < len(lines):
            await asyncio.sleep(min(1.0, took / len(lines) * 4))
            due = min(len(lines), int(len(lines) * (time.monotonic() - start) / took) + 1)
            writer.write(b"".join(lines[sent:due]))
            sent = due
            await writer.drain()
        for l in data:
            writer.write(l)
            await writer.drain()
        await self.send(writer, {"id": rid, "type": "scenario_done", "run_id": run_id,
                                 "status": "complete", "exit_code": 0, "chunks": len(data),
                                 "bytes": size})
        now = time.monotonic()
        self.first_done = self.first_done or now
        self.last_done = now
        self.done += 1
        self.sent_bytes += size


# ---------------------------------------------------------------------------------------------
# the driver


def proc_status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for l in f:
                k, _, v = l.partition(":")
                if k in ("VmRSS", "VmHWM", "Threads", "VmSize"):
                    out[k] = int(v.split()[0])
        out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError):
        return None
    return out


def file_size(p):
    try:
        return os.path.getsize(p)
    except OSError:
        return 0


async def drive(args):
    out = os.path.abspath(args.out)
    with open(os.path.join(out, "template.json")) as f:
        template = json.load(f)
    payloads = Payloads(template, args.payload)
    tag = args.tag or f"{args.hosts}-{args.payload}"
    work = os.path.join(out, tag)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    token = os.urandom(16).hex()
    tok = os.path.join(work, "token")
    with open(tok, "w") as f:
        f.write(token + "\n")
    os.chmod(tok, 0o600)

    fleet = Fleet(payloads, token, args.duration, args.spread, random.Random(11))
    servers, ports = [], []
    for _ in range(args.ports):
        srv = await asyncio.start_server(fleet.handle, LOOPBACK, 0, backlog=4096,
                                         limit=64 << 20)
        servers.append(srv)
        ports.append(srv.sockets[0].getsockname()[1])
    with open(os.path.join(work, "hosts.toml"), "w") as f:
        f.write('token_file = "token"\n')
        for i in range(args.hosts):
            kind = "sim-a" if i % 2 == 0 else "sim-b"
            f.write(f'\n[[host]]\nname = "h{i:05d}"\naddress = "{LOOPBACK}:{ports[i % len(ports)]}"\n'
                    f'type = "{kind}"\n')

    db = os.path.join(work, "coord.db")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    def raise_nofile():
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    # the fake side needs one descriptor per host too
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    cmd = [args.isobench, "run", "--hosts", os.path.join(work, "hosts.toml"), "--db", db]
    if args.preset:
        cmd += ["--preset", args.preset]
    stdout = open(os.path.join(work, "stdout.txt"), "wb")
    t0 = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *cmd, stdout=stdout, stderr=asyncio.subprocess.PIPE, preexec_fn=raise_nofile,
        limit=64 << 20)

    imports = []
    errors = {}
    stderr_log = open(os.path.join(work, "stderr.txt"), "w")

    async def read_stderr():
        while True:
            l = await proc.stderr.readline()
            if not l:
                return
            now = time.monotonic() - t0
            s = l.decode(errors="replace").rstrip("\n")
            if len(s) < 2000:
                stderr_log.write(f"{now:9.3f} {s}\n")
            if s.endswith(", imported"):
                imports.append(now)
            elif s.startswith("isobench: host ") and "trial" not in s:
                why = s.split(": ", 2)[-1]
                why = why.split(" at ")[0][:160]
                errors[why] = errors.get(why, 0) + 1

    samples = []
    killed = []

    async def sample():
        while proc.returncode is None:
            st = proc_status(proc.pid)
            if st:
                st["t"] = time.monotonic() - t0
                st["open"] = fleet.open
                st["db"] = file_size(db) + file_size(db + "-wal")
                st["imported"] = len(imports)
                samples.append(st)
                if st.get("VmRSS", 0) > args.max_rss_gib * 2**20 and not killed:
                    killed.append(st["t"])
                    proc.kill()
            await asyncio.sleep(args.interval)

    reader = asyncio.create_task(read_stderr())
    sampler = asyncio.create_task(sample())
    rc = await proc.wait()
    t_exit = time.monotonic() - t0
    await reader
    await sampler
    for s in servers:
        s.close()
    stdout.close()
    stderr_log.close()

    rows = {}
    with sqlite3.connect(db) as c:
        for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type='table'"):
            rows[t] = c.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
    db_bytes = file_size(db) + file_size(db + "-wal")
    n_imp = len(imports)
    first_done = (fleet.first_done - t0) if fleet.first_done else None
    last_done = (fleet.last_done - t0) if fleet.last_done else None
    first_imp = imports[0] if imports else None
    last_imp = imports[-1] if imports else None
    ingest = (last_imp - first_done) if imports and first_done else None
    run_rows = sum(v for k, v in rows.items() if k not in ("fleet_links",))
    r = {
        "hosts": args.hosts,
        "payload": args.payload,
        "run_bytes": payloads.bytes,
        "duration_s": args.duration,
        "spread": args.spread,
        "ports": args.ports,
        "nofile": hard,
        "exit_code": rc,
        "killed_for_rss_at_s": killed[0] if killed else None,
        "accepted": fleet.accepted,
        "peak_connections": fleet.peak_open,
        "sent_done": fleet.done,
        "imported": n_imp,
        "errors": errors,
        "peak_rss_mib": max((s.get("VmHWM", 0) for s in samples), default=0) / 1024,
        "ingest_peak_rss_mib": max((s.get("VmRSS", 0) for s in samples
                                    if last_imp is None or s["t"] <= last_imp), default=0) / 1024,
        "fleet_peak_rss_mib": max((s.get("VmRSS", 0) for s in samples
                                   if last_imp is not None and s["t"] > last_imp),
                                  default=0) / 1024,
        "peak_threads": max((s.get("Threads", 0) for s in samples), default=0),
        "peak_fds": max((s.get("fds", 0) for s in samples), default=0),
        "peak_vmsize_mib": max((s.get("VmSize", 0) for s in samples), default=0) / 1024,
        "first_done_s": first_done,
        "last_done_s": last_done,
        "first_import_s": first_imp,
        "last_import_s": last_imp,
        "ingest_s": ingest,
        "import_lag_s": (last_imp - last_done) if imports and last_done else None,
        "runs_per_s": n_imp / ingest if ingest else None,
        "backlogged_runs_per_s": (n_imp - 1) / (last_imp - first_imp)
        if imports and last_imp > first_imp else None,
        "mb_per_s": n_imp * payloads.bytes / 1e6 / ingest if ingest else None,
        "rows": rows,
        "rows_per_s": run_rows / ingest if ingest else None,
        "tx_per_s": 2 * n_imp / ingest if ingest else None,
        "db_mib": db_bytes / 2**20,
        "db_bytes_per_run": db_bytes / n_imp if n_imp else None,
        "fleet_table_s": (t_exit - last_imp) if imports else None,
        "total_s": t_exit,
        "stdout_bytes": file_size(os.path.join(work, "stdout.txt")),
        "command": " ".join(cmd),
    }
    with open(os.path.join(work, "samples.json"), "w") as f:
        json.dump(samples, f)
    with open(os.path.join(work, "result.json"), "w") as f:
        json.dump(r, f, indent=1)
    print(json.dumps(r, indent=1))
    if not args.keep_db:
        for suffix in ("", "-wal", "-shm"):
            try:
                os.remove(db + suffix)
            except OSError:
                pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("template", help="capture a real fake-mode run to copy")
    t.add_argument("--isobench", default="target/release/isobench")
    t.add_argument("--out", default="bench/fleet-sim/out")
    r = sub.add_parser("run", help="drive the coordinator against N simulated hosts")
    r.add_argument("--hosts", type=int, required=True)
    r.add_argument("--payload", choices=["full", "lean"], default="full",
                   help="full: the quick run as it is stored; lean: one series window in 40")
    r.add_argument("--duration", type=float, default=60.0,
                   help="seconds each simulated run takes; its progress is spread over it")
    r.add_argument("--spread", type=float, default=0.2,
                   help="each run takes duration*(1 +- spread), uniformly: how spread out the "
                        "hosts finish (0.01: all at once, to measure the import capacity)")
    r.add_argument("--ports", type=int, default=4, help="loopback ports the hosts share")
    r.add_argument("--interval", type=float, default=0.25, help="sampling interval, s")
    r.add_argument("--isobench", default="target/release/isobench")
    r.add_argument("--preset", default=None)
    r.add_argument("--out", default="bench/fleet-sim/out")
    r.add_argument("--tag", default=None, help="name of the run's folder under --out")
    r.add_argument("--max-rss-gib", type=float, default=14.0,
                   help="kill the coordinator when its resident memory passes this (the "
                        "machine is shared)")
    r.add_argument("--keep-db", action="store_true")
    args = ap.parse_args()
    if args.cmd == "template":
        make_template(args.isobench, args.out)
    else:
        asyncio.run(drive(args))


if __name__ == "__main__":
    sys.exit(main())
