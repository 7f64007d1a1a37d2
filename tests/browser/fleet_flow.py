#!/usr/bin/env python3
"""Drives isobench's web UI (`isobench serve`) in headless Chromium through a fleet run.

Against a running server and host agents (`isobench agent --listen`), it:

0. (with --token) signs in through the login form;
1. opens the launch page, enters the hosts (one `ADDR:PORT NAME TYPE` line each) and the
   agents' token, and launches the `quick` preset on them;
2. lands on the run's page and waits for the run to end (`complete`);
3. sees the fleet table: a column per host type, and every host in the hosts table with a
   link to its run.

The same rules as ui_flow.py hold: no request outside the server's origin, no console or page
error; a screenshot of each step. Exit 0 when every step passed, 1 on the first failure, 2 on
a usage error or a missing Chromium.

Usage: fleet_flow.py --screenshots DIR [--chromium PATH] [--token TOKEN] --agent-token T
       --host 'ADDR:PORT NAME TYPE' [--host ...] URL
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from playwright.sync_api import expect

import chromium
from ui_flow import SHORT_MS, Failed, Flow, drive, run_id_from_url, set_table


def launch_fleet(f: Flow, hosts: list[str], agent_token: str) -> str:
    f.step(f"launch the quick preset on {len(hosts)} hosts from the launch form")
    f.go("#/launch")
    f.page.wait_for_selector("#launch-form", timeout=SHORT_MS)
    f.page.select_option("#preset", "quick")
    f.page.fill("#hosts", "\n".join(hosts))
    f.page.fill("#hosts-token", agent_token)
    f.shot("launch-fleet")
    f.page.click("#launch-submit")
    run = run_id_from_url(f)
    print(f"fleet_flow:    run {run}", flush=True)
    return run


def fleet_table(f: Flow, hosts: list[str]) -> None:
    f.step("the run ends and its page shows the fleet table with every host")
    table = set_table(f, "#fleet-table", "fleet table")
    headers = table.locator("thead th").all_text_contents()
    for line in hosts:
        _, name, host_type = line.split()
        if not any(h.startswith(f"{host_type} (1 hosts)") for h in headers):
            raise Failed(f"the fleet table has no column of type {host_type}: {headers}")
        row = f.page.locator(f'#fleet-hosts tr[data-host="{name}"]')
        expect(row).to_have_count(1, timeout=SHORT_MS)
        expect(row.locator("a")).to_have_attribute("href", re.compile(r"#/runs/.+"))
    f.shot("fleet-table")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Drive a fleet run through isobench's web UI.")
    parser.add_argument("--screenshots", required=True, type=Path, metavar="DIR",
                        help="folder for the screenshots (created if missing)")
    chromium.add_argument(parser)
    parser.add_argument("--token", metavar="TOKEN",
                        help="the server's token: the flow starts by signing in with it")
    parser.add_argument("--agent-token", required=True, metavar="TOKEN",
                        help="the host agents' token")
    parser.add_argument("--host", action="append", required=True, metavar="'ADDR NAME TYPE'",
                        help="a host agent, its name and its type (repeat per host)")
    parser.add_argument("url", metavar="URL", help="the server, e.g. http://127.0.0.1:8080/")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)

    def steps(f: Flow) -> None:
        launch_fleet(f, args.host, args.agent_token)
        fleet_table(f, args.host)

    return drive("fleet_flow", args, steps)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
