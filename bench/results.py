#!/usr/bin/env python3
"""bench/RESULTS.md, generated from the figure records under bench/figures/.

    python3 bench/results.py           # writes bench/RESULTS.md from the records
    python3 bench/results.py --check   # exit 1 when RESULTS.md is not what the records give,
                                       # or a record is malformed or links a missing pass

RESULTS.md shows, for each target, today's figure: what was measured, against what, the
verdict against the target's goal, the date, the commit and the command, and a link to the
pass in bench/history/ that produced it. The passes themselves (the measurements, their
caveats and what was found) are the dated files of bench/history/, kept as written.

A record file, bench/figures/NN-name.json, holds one group of targets (one bench script's
figures, or one kind of figure), in the order of NN:

    {"title": "...", "about": "what the ratio is and its goal", "script": "bench/tail.py",
     "figures": [RECORD, ...]}

and a RECORD:

    target     what is measured, unique in its file (the key the bench scripts update by)
    reference  what it is held against (a tool, a target), or null
    figure     the figure: a number (with `unit`) or a text, or null when there is none
    unit       the figure's unit, or null
    reference_figure  the reference's own figure, where there is one
    ratio      figure / reference (or as `about` says), or null
    interval   [low, high] of the ratio (or of the figure) where there is one, else null
    goal       the target's goal, as text ("0.90..1.10", ">= 1", "<= 2")
    verdict    one of VERDICTS
    date       YYYY-MM-DD of the measurement
    commit     the commit measured (the binary's), or of the pass that recorded it
    command    the command that measured it
    history    the pass: a file of bench/history/, optionally with #anchor; null when a
               bench script wrote the record and the pass is not written yet
    note       anything the reader needs to read the figure right (optional)

The bench scripts update their records when run (`update`); nothing here measures.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VERDICTS = {
    "met": "the goal is met",
    "missed": "the goal is not met",
    "tie": "the interval holds the goal's bound: neither met nor missed",
    "unsettled": "the figure moves more between runs than the goal allows",
    "n/a": "no ratio exists (the reference has no effect to compare with)",
    "measured": "a figure with no goal to hold it against",
    "missing": "not measured yet",
    "stale": "measured, but at code or on a machine that no longer holds",
}
FIELDS = ("target", "reference", "figure", "unit", "reference_figure", "ratio", "interval",
          "goal", "verdict", "date", "commit", "command", "history", "note")
REQUIRED = ("target", "verdict", "date", "command", "history")
# The verdicts of bench/stressors.py's paired bootstrap (`stressors.verdict`), as records say them.
BOOTSTRAP_VERDICTS = {">=1": "met", "<1": "missed", "tie": "tie", "n/a": "n/a"}


def load_groups(figures_dir):
    """The record files of `figures_dir`, in the order of their names."""
    groups = []
    for name in sorted(os.listdir(figures_dir)):
        if name.endswith(".json"):
            with open(os.path.join(figures_dir, name)) as f:
                groups.append((name, json.load(f)))
    return groups


def problems(groups, history_dir):
    """What is wrong with the records: fields missing or unknown, a verdict not in VERDICTS,
    a target twice, a pass that is not in `history_dir` or an anchor not in it."""
    out = []
    for name, g in groups:
        for key in ("title", "about", "figures"):
            if key not in g:
                out.append(f"{name}: no `{key}`")
        seen = set()
        for r in g.get("figures", []):
            where = f"{name}: {r.get('target')!r}"
            out += [f"{where}: no `{k}`" for k in REQUIRED if k not in r]
            out += [f"{where}: unknown field `{k}`" for k in r if k not in FIELDS]
            if r.get("verdict") not in VERDICTS:
                out.append(f"{where}: verdict {r.get('verdict')!r} is not one of {sorted(VERDICTS)}")
            if r.get("target") in seen:
                out.append(f"{where}: the target is there twice")
            seen.add(r.get("target"))
            if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(r.get("date"))):
                out.append(f"{where}: date {r.get('date')!r} is not YYYY-MM-DD")
            if r.get("history"):
                out += [f"{where}: {p}" for p in link_problems(r["history"], history_dir)]
    return out


def link_problems(link, history_dir):
    path, _, anchor = link.partition("#")
    full = os.path.join(history_dir, path)
    if not os.path.isfile(full):
        return [f"pass {path} is not in {history_dir}"]
    if anchor:
        with open(full) as f:
            anchors = {slug(line.lstrip("#")) for line in f if line.startswith("#")}
        if anchor not in anchors:
            return [f"no heading in {path} has the anchor #{anchor}"]
    return []


def slug(heading):
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to -."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def number(x):
    """A figure as written: up to 4 significant digits, thousands not grouped."""
    if isinstance(x, bool) or x is None:
        return "-" if x is None else str(x)
    if isinstance(x, (int, float)):
        if x != x:
            return "n/a"
        if x in (float("inf"), float("-inf")):
            return "inf" if x > 0 else "-inf"
        if isinstance(x, int) or (abs(x) >= 100 and float(x).is_integer()):
            return str(int(x))
        return f"{x:.4g}" if abs(x) < 1e4 else f"{x:.0f}"
    return str(x)


def cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def code(text):
    """`text` as inline code, or `-` when there is none."""
    return f"`{text}`" if text and text != "-" else "-"


def figure_text(r):
    if r.get("figure") is None:
        return "-"
    text = number(r["figure"])
    if r.get("unit"):
        text += f" {r['unit']}"
    if r.get("reference_figure") is not None:
        text += f" (reference {number(r['reference_figure'])})"
    return text


def ratio_text(r):
    text = "" if r.get("ratio") is None else two_decimals(r["ratio"])
    if r.get("interval"):
        lo, hi = r["interval"]
        text += f" ({two_decimals(lo)}..{two_decimals(hi)})"
    return text.strip() or "-"


def two_decimals(x):
    """A ratio as written: two decimals (a text, an infinite bound or n/a as it is)."""
    if isinstance(x, float) and x == x and x not in (float("inf"), float("-inf")):
        return f"{x:.2f}"
    return number(x)


def render(groups, history_dir):
    """RESULTS.md from the record groups, with the passes of `history_dir` listed at the end."""
    md = [
        "# Bench results",
        "",
        "<!-- Generated by `python3 bench/results.py` from bench/figures/*.json: edit the records,",
        "     not this file (a test checks that the two agree). -->",
        "",
        "Today's figure for each target: the latest measurement of it, with its date, the commit",
        "measured, the command and the pass that produced it. A pass in [history/](history/) has",
        "the measurement's setting, caveats and reasoning; a bench script that is run updates its",
        "records in [figures/](figures/) (their format: the head of `bench/results.py`). The",
        "machine is the project's shared 2-vCPU KVM guest unless the pass says otherwise.",
        "",
        "Verdicts: " + "; ".join(f"**{v}**: {what}" for v, what in VERDICTS.items()) + ".",
        "",
    ]
    for _, g in groups:
        md += [f"## {g['title']}", "", g["about"]]
        if g.get("script"):
            md[-1] += f" Measured by `{g['script']}`."
        md += ["",
               "| target | against | figure | ratio (interval) | goal | verdict | date | commit | command | pass |",
               "|---|---|---|---|---|---|---|---|---|---|"]
        notes = []
        for r in g["figures"]:
            target = r["target"]
            if r.get("note"):
                notes.append(r["note"])
                target += f" [{len(notes)}]"
            link = f"[{r['history'].partition('#')[0][:10]}](history/{r['history']})" \
                if r.get("history") else ("-" if r["verdict"] == "missing" else "not written yet")
            row = [target, r.get("reference") or "-", figure_text(r), ratio_text(r),
                   r.get("goal") or "-", f"**{r['verdict']}**", r["date"],
                   r.get("commit") or "-", code(r.get("command")), link]
            md.append("| " + " | ".join(cell(c) for c in row) + " |")
        md.append("")
        md += [f"[{i}] {n}" for i, n in enumerate(notes, 1)]
        if notes:
            md.append("")
    md += ["## History", "",
           "The passes, oldest first (a file per pass; the numbers keep the order in which they",
           "were written):", ""]
    for name in sorted(os.listdir(history_dir), key=lambda n: (n[:10], n)):
        if name.endswith(".md"):
            with open(os.path.join(history_dir, name)) as f:
                title = next((line.lstrip("#").strip() for line in f
                              if line.startswith("## ") or line.startswith("### ")), name)
            md.append(f"- [{name[:-3]}](history/{name}): {title}")
    return "\n".join(md) + "\n"


def git_commit(repo=HERE):
    """The checkout's commit, short, with `+` when it has changes; None outside git."""
    try:
        head = subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+" if dirty else "")


def update(group, target, bench_dir=HERE, today=None, commit=None, **fields):
    """Writes one target's record after a bench script measured it, and RESULTS.md again.

    `group` is the record file's name without `.json` (`05-tail`); the record of `target`
    is replaced by `fields` (see the module's head), stamped with today's date (UTC) and
    the checkout's commit, its pass left to be written (`history` null). A target not in the
    file yet is added at its end."""
    path = os.path.join(bench_dir, "figures", group + ".json")
    with open(path) as f:
        g = json.load(f)
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown record fields {sorted(unknown)}")
    record = {"target": target, **strict(fields),
              "date": today or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
              "commit": commit or git_commit(bench_dir), "history": None}
    record = {k: record[k] for k in FIELDS if k in record}
    figures = g["figures"]
    at = next((i for i, r in enumerate(figures) if r["target"] == target), None)
    if at is None:
        figures.append(record)
    else:
        figures[at] = record
    with open(path, "w") as f:
        json.dump(g, f, indent=1, ensure_ascii=False)
        f.write("\n")
    write(bench_dir)
    return record


def strict(x):
    """`x` as strict JSON holds it: an infinite float as "inf" / "-inf", NaN as None."""
    if isinstance(x, float):
        if x != x:
            return None
        if x in (float("inf"), float("-inf")):
            return "inf" if x > 0 else "-inf"
        return x
    if isinstance(x, dict):
        return {k: strict(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [strict(v) for v in x]
    return x


def command_line(script):
    """How the calling bench script was run, for a record's `command`."""
    return " ".join(["python3", script] + [arg if re.fullmatch(r"[\w@%+=:,./-]+", arg)
                                            else "'" + arg.replace("'", "'\\''") + "'"
                                            for arg in sys.argv[1:]])


def generated(bench_dir=HERE):
    return render(load_groups(os.path.join(bench_dir, "figures")),
                  os.path.join(bench_dir, "history"))


def write(bench_dir=HERE):
    with open(os.path.join(bench_dir, "RESULTS.md"), "w") as f:
        f.write(generated(bench_dir))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="only check that RESULTS.md is what the records give")
    ap.add_argument("--bench", default=HERE, help="the bench directory (default: this one)")
    a = ap.parse_args()
    bad = problems(load_groups(os.path.join(a.bench, "figures")), os.path.join(a.bench, "history"))
    for p in bad:
        print(f"bench/figures/{p}", file=sys.stderr)
    if not a.check:
        write(a.bench)
        return 1 if bad else 0
    with open(os.path.join(a.bench, "RESULTS.md")) as f:
        current = f.read()
    if current != generated(a.bench):
        print("bench/RESULTS.md is not what bench/figures/ gives: run `python3 bench/results.py` "
              "and commit the result (edit the records, not RESULTS.md)", file=sys.stderr)
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
