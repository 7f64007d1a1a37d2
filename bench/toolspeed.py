#!/usr/bin/env python3
"""How fast isobench reads its own results: `show`, `report` and `export` of stored runs.

For each database given (a copy of a real run, e.g. a quick run), and for a large run made
from it (its trials repeated until the run holds --samples samples, written by the store's
`bulk_run` example into a temporary database), times each command (best of --repeat, wall
clock), prints the JSON export's size by top-level field (and by trial field), and ends with
one table. These commands only read a stored run: they take no measurement slot.

    bench/toolspeed.py --isobench target/release/isobench --db quick-copy.db
    bench/toolspeed.py --isobench OLD --isobench NEW --db quick-copy.db --samples 1000000

The databases given are never written: each command runs on a copy. A run id is `latest`
unless --run names one. Each command is timed twice:
- cold: on a fresh copy without the run's stored results document (a fresh copy for every
  repetition, migrated to the binary's schema first, untimed), so the command analyses the
  run from its rows (and, the copy being writable, stores the document: a first read);
- warm: on a copy where the document is stored as a run stores it when it ends (one
  `isobench show` on the copy before timing, untimed; a database made by an older isobench
  or by the store's `bulk_run` example has none until then).
A binary without stored documents reads the same way twice. A database made with --samples
has the schema of this tree's store: an older binary may refuse it.
"""

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def best_of(cmd, repeat):
    """The shortest wall-clock time of `repeat` runs of `cmd`, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - start)
    return best


def bulk_db(source, run, samples, into):
    """A database holding `run` of `source` grown to `samples` samples (the store's example)."""
    target = os.path.join(into, f"bulk-{samples}.db")
    subprocess.run(
        ["cargo", "run", "--quiet", "--release", "-p", "isobench-store",
         "--example", "bulk_run", "--", source, run, target, str(samples)],
        check=True, cwd=ROOT,
    )
    return target


def run_id(db, run):
    """The whole id of `run` (`latest` or a prefix) in `db`, read without isobench (whose
    first open would migrate the copy to its schema, which an older binary then refuses)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    ids = [r[0] for r in con.execute("SELECT id FROM runs ORDER BY started_at, rowid")]
    con.close()
    if run == "latest":
        return ids[-1]
    return next(i for i in ids if i.startswith(run) or i.rsplit("-", 1)[-1].startswith(run))


def sizes(doc):
    """Compact JSON bytes of each top-level field, `results.*` and the trials' fields."""
    size = lambda v: len(json.dumps(v, separators=(",", ":")))
    out = [(k, size(v)) for k, v in doc.items()]
    results = doc.get("results", {})
    out += [(f"results.{k}", size(v)) for k, v in results.items()]
    fields = {}
    for t in results.get("trials", []):
        for k, v in t.items():
            fields[k] = fields.get(k, 0) + size(v)
    out += [(f"results.trials[].{k}", n) for k, n in fields.items()]
    return sorted(out, key=lambda kv: -kv[1])


COMMANDS = ["show", "report", "export", "export --series"]


def command(isobench, name, db, run, out):
    """The command line of `name` (one of COMMANDS) on `run` of `db`, writing beside `out`."""
    if name == "show":
        return [isobench, "show", run, "--db", db]
    if name == "report":
        return [isobench, "report", run, "--db", db, "-o", out + ".html"]
    if name == "export":
        return [isobench, "export", run, "--db", db, "-o", out + ".json"]
    return [isobench, "export", run, "--db", db, "--series", "-o", out + "-series.json"]


def documents(db):
    """How many results documents `db` holds (0 for a schema without them)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT count(*) FROM run_documents").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        con.close()


def remove_db(path):
    """Removes a database with its log and index: a log left beside the next database
    copied to the same name would be replayed into it, and damage it."""
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)


def fresh_copy(src, dst):
    """Copies the database file `src` to `dst`, with nothing left of an earlier `dst`."""
    remove_db(dst)
    shutil.copyfile(src, dst)


def measure(isobench, db, run, repeat, work):
    """Cold and warm times of each command (see the module's doc), the export's bytes and
    fields, and whether the warm copy held a stored document."""
    out = os.path.join(work, "out")
    has_series = subprocess.run([isobench, "export", "--help"], capture_output=True,
                                text=True).stdout.find("--series") >= 0
    names = [c for c in COMMANDS if has_series or c != "export --series"]
    cold_db = os.path.join(work, "cold.db")
    times = {}
    for name in names:
        best = float("inf")
        for _ in range(repeat):
            fresh_copy(db, cold_db)
            subprocess.run([isobench, "runs", "--db", cold_db], check=True,
                           stdout=subprocess.DEVNULL)
            best = min(best, best_of(command(isobench, name, cold_db, run, out), 1))
        times[f"{name} (cold)"] = best
    warm_db = os.path.join(work, "warm.db")
    fresh_copy(db, warm_db)
    subprocess.run([isobench, "show", run, "--db", warm_db], check=True,
                   stdout=subprocess.DEVNULL)
    stored = documents(warm_db)
    for name in names:
        times[f"{name} (warm)"] = best_of(command(isobench, name, warm_db, run, out), repeat)
    remove_db(warm_db)
    export_bytes = os.path.getsize(out + ".json")
    with open(out + ".json") as f:
        doc = json.load(f)
    return times, export_bytes, sizes(doc), stored


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--isobench", action="append", required=True,
                   help="an isobench binary (repeat to compare builds)")
    p.add_argument("--db", action="append", required=True, help="a database with a stored run")
    p.add_argument("--run", default="latest", help="the run in each database (default latest)")
    p.add_argument("--samples", type=int, default=1_000_000,
                   help="samples of the generated large run (0: none; default 10^6)")
    p.add_argument("--repeat", type=int, default=5, help="runs of each command (best is kept)")
    a = p.parse_args()

    with tempfile.TemporaryDirectory() as work:
        dbs = []
        for db in a.db:
            copy = os.path.join(work, os.path.basename(db))
            shutil.copyfile(db, copy)
            run = run_id(copy, a.run)
            dbs.append((os.path.basename(db), copy, run))
            if a.samples:
                dbs.append((f"{a.samples} samples", bulk_db(copy, run, a.samples, work), run))
        rows = []
        for binary in a.isobench:
            for name, db, run in dbs:
                times, nbytes, fields, stored = measure(binary, db, run, a.repeat, work)
                print(f"\n{binary} on {name} (run {run}): export {nbytes / 1e6:.2f} MB; "
                      f"warm copy holds {stored} stored document(s) after one `show`; "
                      "compact JSON bytes by field:")
                for k, n in fields[:12]:
                    print(f"  {k:40} {n / 1e6:8.3f} MB")
                rows.append((binary, name, times, nbytes))
        print("\ncold: no stored document (the command analyses the run, and stores the "
              "document in the writable copy); warm: the document stored as a run stores it")
        print(f"\n{'isobench':40} {'run':16} {'command':22} {'best s':>8}  (of {a.repeat})")
        for binary, name, times, nbytes in rows:
            for cmd, t in times.items():
                print(f"{binary[-40:]:40} {name:16} {cmd:22} {t:8.3f}")
            print(f"{binary[-40:]:40} {name:16} {'export MB':22} {nbytes / 1e6:8.2f}")


if __name__ == "__main__":
    sys.exit(main())
