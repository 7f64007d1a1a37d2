#!/usr/bin/env python3
"""Tests of bench/results.py and of the bench scripts' record writing, on fake outputs (no
measurement). Run: python3 bench/test_results.py (crates/cli/tests/bench_results.rs runs it)."""
import json
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402
import results  # noqa: E402
import stressors  # noqa: E402
import tail  # noqa: E402

STAMP = {"today": "2026-12-01", "commit": "abc1234"}


class FakeBench(unittest.TestCase):
    """A bench directory of its own: the real record files and passes, copied."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="bench-results-")
        for sub in ("figures", "history"):
            shutil.copytree(os.path.join(HERE, sub), os.path.join(self.dir, sub))
        results.write(self.dir)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def group(self, name):
        with open(os.path.join(self.dir, "figures", name + ".json")) as f:
            return {r["target"]: r for r in json.load(f)["figures"]}

    def results_md(self):
        with open(os.path.join(self.dir, "RESULTS.md")) as f:
            return f.read()


class Records(FakeBench):
    def test_the_committed_results_md_is_what_the_records_give(self):
        with open(os.path.join(HERE, "RESULTS.md")) as f:
            self.assertEqual(f.read(), results.generated(HERE))
        self.assertEqual(results.problems(results.load_groups(os.path.join(HERE, "figures")),
                                          os.path.join(HERE, "history")), [])

    def test_every_pass_is_listed(self):
        md = self.results_md()
        for name in os.listdir(os.path.join(HERE, "history")):
            self.assertIn(f"(history/{name})", md)

    def test_tail_writes_the_default_arms_and_leaves_custom_ones(self):
        rows = [
            {"group": "forkbomb", "arm": "isobench forkbomb", "metric": "p99_raised_pct", "reps": 4,
             "median": 150.4, "runs": [], "ref": "stress-ng --fork", "ref_median": 100.2,
             "ratio": 1.5009, "ratio_ci90": [1.2, float("inf")], "verdict": ">=1",
             "diff_ci90_pts": [10.0, 60.0]},
            {"group": "forkbomb", "arm": "stress-ng --fork", "metric": "p99_raised_pct", "reps": 4,
             "median": 100.2, "runs": []},
            {"group": "custom", "arm": "x", "metric": "p99_raised_pct", "reps": 4, "median": 1.0,
             "runs": [], "ref": "y", "ref_median": 2.0, "ratio": 0.5, "ratio_ci90": [0.1, 0.9],
             "verdict": "<1", "diff_ci90_pts": [-1, 0]},
        ]
        before = self.group("05-tail")
        tail.record(rows, "python3 bench/tail.py --reps 4", bench_dir=self.dir, **STAMP)
        after = self.group("05-tail")
        r = after["forkbomb: isobench forkbomb vs stress-ng --fork, p99_raised_pct"]
        self.assertEqual((r["ratio"], r["interval"], r["verdict"]), (1.5, [1.2, "inf"], "met"))
        self.assertEqual((r["figure"], r["reference_figure"]), (150, 100))
        self.assertEqual((r["date"], r["commit"], r["history"]), ("2026-12-01", "abc1234", None))
        self.assertEqual(r["command"], "python3 bench/tail.py --reps 4")
        self.assertEqual(len(after), len(before), "replaced in place, nothing added")
        self.assertFalse(any(t.startswith("custom") for t in after))
        md = self.results_md()
        self.assertIn("| 1.50 (1.20..inf) | >= 1 | **met** | 2026-12-01 | abc1234 |", md)
        self.assertIn("not written yet", md)
        self.assertEqual(results.problems(results.load_groups(os.path.join(self.dir, "figures")),
                                          os.path.join(self.dir, "history")), [])

    def test_stressors_write_their_effect_rows(self):
        row = {"stressor": "membw", "stress-ng": "--stream 2", "metric": "copy_gbps", "reps": 5,
               "isobench_degr_pct": 40.04, "stressng_degr_pct": 30.0, "ratio": 1.3347,
               "ratio_ci90": [1.1, 1.5], "verdict": ">=1", "diff_median_pts": 10.0}
        stressors.record_effects([row], "python3 bench/stressors.py effect", bench_dir=self.dir, **STAMP)
        r = self.group("02-stressors")["membw on copy_gbps"]
        self.assertEqual((r["figure"], r["ratio"], r["interval"], r["verdict"]), (40.0, 1.33, [1.1, 1.5], "met"))
        row.update(stressor="net-rx", metric="udp_rtt_p99_ns", ratio=None, verdict="n/a",
                   **{"stress-ng": "--udp 1"})
        stressors.record_effects([row], "c", bench_dir=self.dir, **STAMP)
        r = self.group("02-stressors")["net-rx on udp_rtt_p99_ns"]
        self.assertEqual((r["ratio"], r["interval"], r["verdict"]), (None, None, "n/a"))

    def test_compare_writes_probe_and_cv_ratios_and_keeps_failed_rows(self):
        out = {"probes": [
            {"probe": "cpu-int primes<10000", "reference": "sysbench cpu --cpu-max-prime=10000",
             "unit": "events/s", "isobench": 3000.0, "ref": 2500.0, "ratio": 1.2},
            {"probe": "cmp_disk_io", "error": "fio missing"}],
            "cv": [{"probe": "local-comm pipe 64K", "placement": "two CPUs", "unit": "GB/s",
                    "reference": "dd if=/dev/zero bs=64K, piped to dd of=/dev/null", "n": 10,
                    "median": 5.0, "cv_pct": 2.0, "ref_median": 5.0, "ref_cv_pct": 4.0,
                    "cv_ratio": 0.5, "ratio": 1.0},
                   {"probe": "cpu-float", "placement": "pinned", "unit": "MFLOP/s",
                    "reference": "-", "n": 10, "median": 1.0, "cv_pct": 0.1}]}
        disk = self.group("01-probes")["disk-io dioread 20000x8K vs fio rw=read direct=1"]
        compare.record(out, "python3 bench/compare.py all", bench_dir=self.dir, **STAMP)
        probes, cv = self.group("01-probes"), self.group("03-cv")
        cpu = probes["cpu-int primes<10000 vs sysbench cpu --cpu-max-prime=10000"]
        self.assertEqual((cpu["ratio"], cpu["verdict"]), (1.2, "missed"))
        pipe = "local-comm pipe 64K (two CPUs) vs dd if=/dev/zero bs=64K, piped to dd of=/dev/null"
        self.assertEqual((probes[pipe]["ratio"], probes[pipe]["verdict"]), (1.0, "met"))
        self.assertEqual((cv[pipe]["ratio"], cv[pipe]["verdict"]), (0.5, "met"))
        self.assertEqual(probes["disk-io dioread 20000x8K vs fio rw=read direct=1"], disk)
        self.assertFalse(any(t.startswith("cpu-float") for t in cv))


class Problems(unittest.TestCase):
    def test_bad_records_are_named(self):
        history = os.path.join(HERE, "history")
        good = {"target": "t", "verdict": "met", "date": "2026-11-29", "command": "c",
                "history": "2026-11-24-17-seventh-pass.md#every-stressor-against-stress-ng"}
        self.assertEqual(results.problems([("g.json", {"title": "T", "about": "A", "figures": [good]})],
                                          history), [])
        bad = [dict(good, verdict="great"), dict(good, target="u", history="nowhere.md"),
               dict(good, target="v", history="2026-11-24-17-seventh-pass.md#no-such-heading"),
               dict(good, target="w", colour="red"), dict(good, target="w", date="today")]
        found = results.problems([("g.json", {"title": "T", "about": "A", "figures": bad})], history)
        for what in ("verdict 'great'", "nowhere.md", "#no-such-heading", "unknown field `colour`",
                     "there twice", "is not YYYY-MM-DD"):
            self.assertTrue(any(what in p for p in found), f"{what} not in {found}")

    def test_anchors_are_githubs(self):
        self.assertEqual(results.slug(" Quick, A/A, standard"), "quick-aa-standard")
        self.assertEqual(results.slug(" Chaos (`bench/chaos --kills 50`)"), "chaos-benchchaos---kills-50")


if __name__ == "__main__":
    unittest.main()
