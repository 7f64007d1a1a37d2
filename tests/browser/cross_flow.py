#!/usr/bin/env python3
"""Drives isobench's web UI (`isobench serve`) in headless Chromium through a run on several
platforms.

Against a running server, it:

0. (with --token) signs in through the login form;
1. opens the launch page, ticks the given platforms (`--platform`, twice or more) and launches
   the `quick` preset on each of them in turn;
2. lands on the run's page and sees which platform runs (the live progress names it);
3. waits for the run to end (`complete`) and sees the table across the platforms: columns of
   every platform, and a link to each platform's run.

The same rules as ui_flow.py hold: no request outside the server's origin, no console or page
error; a screenshot of each step. Exit 0 when every step passed, 1 on the first failure, 2 on
a usage error or a missing Chromium.

Usage: cross_flow.py --screenshots DIR [--chromium PATH] [--token TOKEN]
       --platform NAME --platform NAME [...] URL
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from playwright.sync_api import expect

import chromium
from ui_flow import RUN_MS, SHORT_MS, Failed, Flow, drive, run_id_from_url, set_table


def launch_on_platforms(f: Flow, platforms: list[str]) -> str:
    f.step(f"launch the quick preset on {', '.join(platforms)} from the launch form")
    f.go("#/launch")
    f.page.wait_for_selector("#launch-form", timeout=SHORT_MS)
    f.page.select_option("#preset", "quick")
    for p in platforms:
        f.page.check(f"#platforms-{p}")
    f.shot("launch-platforms")
    f.page.click("#launch-submit")
    run = run_id_from_url(f)
    print(f"cross_flow:    run {run}", flush=True)
    return run


def progress_names_the_platform(f: Flow, platforms: list[str]) -> None:
    f.step("the run's page says which platform runs")
    names = "|".join(re.escape(p) for p in platforms)
    f.wait_text("#run-platform", rf"^({names}) \(\d of {len(platforms)}\)$", RUN_MS,
                "the platform running")
    f.shot("platform-running")


def cross_table(f: Flow, platforms: list[str]) -> None:
    f.step("the run ends and its page shows the table across the platforms")
    table = set_table(f, "#cross-table", "table across the platforms")
    headers = table.locator("thead th").all_text_contents()
    for p in platforms:
        if not any(h.startswith(p + " ") for h in headers):
            raise Failed(f"the table across the platforms has no column of {p}: {headers}")
        link = f.page.locator(f'#cross-runs a[data-platform="{p}"]')
        expect(link).to_have_count(1, timeout=SHORT_MS)
        expect(link).to_have_attribute("href", re.compile(r"#/runs/.+"))
    f.shot("cross-table")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Drive a run on several platforms through isobench's web UI.")
    parser.add_argument("--screenshots", required=True, type=Path, metavar="DIR",
                        help="folder for the screenshots (created if missing)")
    chromium.add_argument(parser)
    parser.add_argument("--token", metavar="TOKEN",
                        help="the server's token: the flow starts by signing in with it")
    parser.add_argument("--platform", action="append", required=True, metavar="NAME",
                        help="a platform to run on (repeat, at least twice)")
    parser.add_argument("url", metavar="URL", help="the server, e.g. http://127.0.0.1:8080/")
    args = parser.parse_args(argv)
    if len(args.platform) < 2:
        parser.error("give --platform at least twice")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)

    def steps(f: Flow) -> None:
        launch_on_platforms(f, args.platform)
        progress_names_the_platform(f, args.platform)
        cross_table(f, args.platform)

    return drive("cross_flow", args, steps)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
