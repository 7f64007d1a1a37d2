#!/usr/bin/env python3
"""Drives isobench's web UI (`isobench serve`) in headless Chromium through one person's day.

Against a running server (best on the slow fake platform, `ISOBENCH_DEBUG_FAKE=slow`, so a run
takes long enough to watch), it:

0. (with --token) signs in through the login form;
1. opens the launch page and launches the `quick` preset from the form;
2. lands on the run's page and watches it progress (the "n / of" counter goes up);
3. stops it (the status becomes `interrupted`), resumes it (`running`, then `complete`);
4. sees the HTML report load in the page's iframe (its header names the run);
5. finds the run in the runs list and compares two runs;
6. fills the queue with three jobs: one runs, two wait; moves one down, cancels the waiting
   ones, stops the running one;
7. sends a scenario with an error on line 5 and sees the problem listed at line 5 and the line
   marked in the scenario's numbered view; its name, markup that would run a script, comes
   back in the error and must show as text.

No request may leave the server's origin (the UI works offline) and no console or page error
may happen. A screenshot of each step goes to the screenshots folder. Exit 0 when every step
passed, 1 on the first failure (with what was seen), 2 on a usage error or a missing Chromium.

With --token, the server has a token and the flow first signs in (a wrong token must be
refused in the form).

Usage: ui_flow.py --screenshots DIR [--chromium PATH] [--token TOKEN] URL
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from playwright.sync_api import Error, Page, expect, sync_playwright

import chromium

EXTRA_ARGS: list[str] = []
VIEWPORT = {"width": 1280, "height": 800}
# The machine is shared and noisy: waits are for states, with room to spare.
SHORT_MS = 30_000
RUN_MS = 600_000

# A scenario whose only error is on line 5 (`trial.duration`).
BAD_SCENARIO = """name = "ui-bad"
kind = "matrix"

[trial]
duration = "fast"

[[tenant]]
name = "victim"
role = "victim"

[[tenant]]
name = "aggressor"
role = "aggressor"

[[probe]]
name = "cpu-int"

[[stressor]]
name = "cpu"
"""
BAD_LINE = 5
XSS_NAME = "<img src=x onerror=window.__isobench_xss=1>ui-bad.toml"
EXPECTED_STATUS = re.compile(r"Failed to load resource: the server responded with a status of 4\d\d")
BAD_FIELD = "trial.duration"


class Failed(Exception):
    """A step did not see what it should have."""


class Flow:
    """One browser page on the UI, with what went wrong around it and the screenshots taken."""

    def __init__(self, page: Page, base: str, shots: Path):
        self.page = page
        self.base = base.rstrip("/")
        self.origin = "{0.scheme}://{0.netloc}".format(urlsplit(base))
        self.shots = shots
        self.errors: list[str] = []
        self.outside: list[str] = []
        self.step_no = 0
        page.on("console", self._console)
        page.on("pageerror", lambda err: self.errors.append(f"page error: {err}"))
        page.route("**/*", self._route)

    def _console(self, msg) -> None:
        # Chromium logs each 4xx answer as an error; the flow provokes some (a 401 before
        # signing in, the 422 of a bad scenario). A 5xx or a script error still counts.
        if msg.type == "error" and not EXPECTED_STATUS.match(msg.text):
            where = msg.location.get("url", "")
            self.errors.append(f"console error ({where}): {msg.text}")

    def _route(self, route) -> None:
        url = route.request.url
        if url.startswith(self.origin + "/") or url.startswith(("data:", "blob:", "about:")):
            route.continue_()
        else:
            self.outside.append(url)
            route.abort("blockedbyclient")

    def step(self, name: str) -> None:
        """Starts a step: says so, and fails at once on an error the last step left."""
        self.check_clean()
        self.step_no += 1
        print(f"ui_flow: {self.step_no}. {name}", flush=True)

    def shot(self, name: str) -> None:
        path = self.shots / f"{self.step_no:02d}-{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        print(f"ui_flow:    screenshot {path}", flush=True)

    def check_clean(self) -> None:
        if self.errors:
            raise Failed("the page logged errors:\n  " + "\n  ".join(self.errors))
        if self.outside:
            raise Failed("the page asked for something outside the server (it must work "
                         "offline):\n  " + "\n  ".join(dict.fromkeys(self.outside)))

    def go(self, hash_route: str) -> None:
        self.page.goto(f"{self.base}/{hash_route}", wait_until="load", timeout=SHORT_MS)

    def text(self, selector: str) -> str:
        return self.page.locator(selector).first.inner_text(timeout=SHORT_MS).strip()

    def wait_text(self, selector: str, pattern: str, timeout_ms: int, what: str) -> str:
        """Waits until the element's text matches the regex; fails saying what was there."""
        deadline = time.monotonic() + timeout_ms / 1000
        seen: list[str] = []
        while True:
            loc = self.page.locator(selector).first
            try:
                now = loc.inner_text(timeout=1000).strip() if loc.count() else "<absent>"
            except Error:
                now = "<absent>"
            if not seen or seen[-1] != now:
                seen.append(now)
            if re.fullmatch(pattern, now):
                return now
            if time.monotonic() > deadline:
                raise Failed(f"{what}: {selector} never matched /{pattern}/ in "
                             f"{timeout_ms // 1000}s; it showed, in turn: {seen[-12:]}")
            self.check_clean()
            self.page.wait_for_timeout(250)


def progress_of(text: str) -> tuple[int, int] | None:
    m = re.fullmatch(r"(\d+) / (\d+)", text)
    return (int(m[1]), int(m[2])) if m else None


def set_table(f: Flow, selector: str, what: str):
    """The table `selector` of a set of runs (a fleet's hosts, the platforms of a run on
    several), once the page's run, the first of the set, is complete; checked to have rows."""
    f.wait_text("#run-status", "complete", RUN_MS, "the run's status")
    table = f.page.locator(selector)
    # The page's run is the first's, complete while the others still run: the table comes
    # when the last one ends, which on a loaded machine takes long.
    expect(table).to_be_visible(timeout=RUN_MS)
    if table.locator("tbody tr").count() == 0:
        raise Failed(f"the {what} has no rows")
    return table


def launch_preset(f: Flow, preset: str) -> None:
    f.go("#/launch")
    f.page.wait_for_selector("#launch-form", timeout=SHORT_MS)
    f.page.select_option("#preset", preset)
    f.page.click("#launch-submit")


def run_id_from_url(f: Flow) -> str:
    f.page.wait_for_url(re.compile(r".*#/runs/[^/]+$"), timeout=RUN_MS)
    return f.page.url.rsplit("#/runs/", 1)[1]


def sign_in(f: Flow, token: str) -> None:
    f.step("sign in with the token")
    f.go("#/runs")
    f.page.wait_for_selector("#login-form", timeout=SHORT_MS)
    # The 401 that shows the form is expected; a wrong token must be refused in the form.
    f.errors.clear()
    f.page.fill("#token", token + "-wrong")
    f.page.click("#login-submit")
    expect(f.page.locator("#login-error")).to_be_visible(timeout=SHORT_MS)
    f.shot("login-refused")
    f.errors.clear()
    f.page.fill("#token", token)
    f.page.click("#login-submit")
    f.page.wait_for_selector("#runs-table", timeout=SHORT_MS)
    f.errors.clear()


def launch_watch_stop_resume(f: Flow) -> str:
    f.step("launch the quick preset from the launch form")
    f.go("#/launch")
    f.page.wait_for_selector("#launch-form", timeout=SHORT_MS)
    options = f.page.locator("#preset option").all_inner_texts()
    if not any(o.startswith("quick") for o in options):
        raise Failed(f"the preset select has no quick: {options}")
    f.page.select_option("#preset", "quick")
    f.shot("launch")
    f.page.click("#launch-submit")
    run = run_id_from_url(f)
    print(f"ui_flow:    run {run}", flush=True)

    f.step("watch it progress")
    f.wait_text("#run-status", "running", RUN_MS, "the new run's status")
    first = f.wait_text("#run-progress", r"[1-9]\d* / \d+", RUN_MS, "the first trial")
    n0, of = progress_of(first)
    deadline = time.monotonic() + RUN_MS / 1000
    while True:
        now = progress_of(f.text("#run-progress"))
        if now and now[0] > n0:
            break
        status = f.text("#run-status")
        if status != "running" or time.monotonic() > deadline:
            raise Failed(f"the progress stayed at {first} (status {status}); "
                         "it should count the trials up")
        f.page.wait_for_timeout(250)
    print(f"ui_flow:    progress {first} -> {now[0]} / {now[1]} (of {of})", flush=True)
    for sel in ("#run-condition", "#run-probe", "#run-eta"):
        if not f.text(sel):
            raise Failed(f"{sel} is empty while the run progresses")
    f.shot("running")

    f.step("stop it: it becomes interrupted")
    f.page.click("#stop-run")
    f.wait_text("#run-status", "interrupted", RUN_MS, "the stopped run")
    expect(f.page.locator("#resume-run")).to_be_visible(timeout=SHORT_MS)
    f.shot("interrupted")

    f.step("resume it: it runs again, then completes")
    f.page.click("#resume-run")
    f.wait_text("#run-status", "queued|running|complete", SHORT_MS, "the resumed run")
    f.wait_text("#run-status", "complete", RUN_MS, "the resumed run")
    return run


def report_loads(f: Flow, run: str) -> None:
    f.step("its report loads in the page")
    frame_el = f.page.locator("iframe#report-frame")
    expect(frame_el).to_have_attribute("src", f"/api/v1/runs/{run}/report", timeout=SHORT_MS)
    frame = f.page.frame_locator("iframe#report-frame")
    expect(frame.locator("body")).to_contain_text(f"isobench run {run}", timeout=SHORT_MS)
    expect(frame.locator("body")).to_contain_text("How far to trust it", timeout=SHORT_MS)
    for fmt in ("json", "csv", "markdown"):
        link = f.page.locator(f'a[href="/api/v1/runs/{run}/export?format={fmt}"]')
        expect(link).to_have_count(1)
    frame_el.scroll_into_view_if_needed()
    f.shot("report")


def runs_list(f: Flow, run: str) -> None:
    f.step("the runs list shows it, complete")
    f.go("#/runs")
    row = f.page.locator(f'#runs-table tr[data-run="{run}"]')
    expect(row).to_have_count(1, timeout=SHORT_MS)
    expect(row.locator(".badge")).to_have_text("complete", timeout=SHORT_MS)
    f.shot("runs")
    f.page.fill("#runs-filter", "no-such-run-anywhere")
    expect(row).to_be_hidden(timeout=SHORT_MS)
    f.page.fill("#runs-filter", run)
    expect(row).to_be_visible(timeout=SHORT_MS)
    f.page.fill("#runs-filter", "")


def queue_page(f: Flow) -> list[str]:
    """Three jobs: one runs, two wait; reorders, cancels and stops them. Returns the runs."""
    f.step("the queue: one job runs, two wait")
    launch_preset(f, "quick")
    first_run = run_id_from_url(f)
    for _ in range(2):
        launch_preset(f, "quick")
        expect(f.page.locator("#launch-result")).to_contain_text("Queued as", timeout=SHORT_MS)
    f.go("#/queue")
    rows = f.page.locator("#queue-table tbody tr[data-job]")
    table_js = """() => [...document.querySelectorAll('#queue-table tbody tr[data-job]')]
                      .map((r) => [r.dataset.job, r.querySelector('.badge').textContent.trim()])"""
    try:
        f.page.wait_for_function(
            f"() => {{ const t = ({table_js})(); return t.length === 3"
            " && t[0][1] === 'running' && t[1][1] === 'queued' && t[2][1] === 'queued'; }",
            timeout=RUN_MS)
    except Error:
        raise Failed("expected one running job and two queued below it; the table shows "
                     f"{f.page.evaluate(table_js)}") from None
    queued = [job for job, _ in f.page.evaluate(table_js)[1:]]
    f.shot("queue")

    f.step("move the first waiting job down, then cancel both")
    first, second = queued
    f.page.locator(f'tr[data-job="{first}"] .move-down').click()
    f.page.wait_for_function(
        """([a, b]) => {
             const ids = [...document.querySelectorAll('#queue-table tr[data-job]')]
               .map((r) => r.dataset.job);
             return ids.indexOf(b) >= 0 && ids.indexOf(b) < ids.indexOf(a);
           }""", arg=[first, second], timeout=SHORT_MS)
    f.shot("queue-moved")
    for job in (first, second):
        f.page.locator(f'#queue-table tr[data-job="{job}"] .cancel').click()
        expect(f.page.locator(f'#queue-table tr[data-job="{job}"]')).to_have_count(
            0, timeout=SHORT_MS)
        expect(f.page.locator(f'#finished-table tr[data-job="{job}"] .badge')).to_have_text(
            "cancelled", timeout=SHORT_MS)

    f.step("stop the running job from the queue")
    f.page.locator("#queue-table tr[data-job] .stop").first.click()
    expect(rows).to_have_count(0, timeout=RUN_MS)
    f.shot("queue-empty")
    return [first_run]


def compare(f: Flow, a: str, b: str) -> None:
    f.step("compare two runs from the runs list")
    f.go("#/runs")
    for run in (a, b):
        f.page.locator(f'#runs-table tr[data-run="{run}"] input.pick-run').check()
    f.page.click("#compare-selected")
    f.page.wait_for_url(re.compile(r".*#/compare\?runs=.+"), timeout=SHORT_MS)
    out = f.page.locator("#compare-text")
    err = f.page.locator("#compare-error")
    f.page.wait_for_function(
        """() => [document.querySelector('#compare-text'),
                  document.querySelector('#compare-error')].some((e) => e && !e.hidden)""",
        timeout=RUN_MS)
    if err.is_visible():
        raise Failed(f"comparing {a} and {b} failed: {err.inner_text()}")
    text = out.inner_text()
    if a not in text and b not in text:
        raise Failed(f"the comparison names neither run:\n{text[:2000]}")
    f.shot("compare")


def bad_scenario(f: Flow) -> None:
    f.step(f"a scenario with an error on line {BAD_LINE} is refused, the problem at its line")
    f.go("#/launch")
    f.page.wait_for_selector("#launch-form", timeout=SHORT_MS)
    f.page.fill("#scenario", BAD_SCENARIO)
    # The name comes back in the error message: it must show as text, never as markup.
    f.page.fill("#scenario-name", XSS_NAME)
    f.page.click("#launch-submit")
    item = f.page.locator(f'#problems li[data-line="{BAD_LINE}"]')
    expect(item).to_have_count(1, timeout=SHORT_MS)
    expect(item).to_contain_text(f"line {BAD_LINE}, column")
    expect(item).to_contain_text(BAD_FIELD)
    expect(f.page.locator("#problems li[data-line]")).to_have_count(1)
    marked = f.page.locator(f'#scenario-lines li.bad[data-line="{BAD_LINE}"]')
    expect(marked).to_have_count(1)
    expect(marked).to_contain_text('duration = "fast"')
    expect(f.page.locator("#launch-error")).to_contain_text("nothing was run")
    injected = f.page.evaluate(
        "() => [window.__isobench_xss, document.querySelectorAll('#app img').length]")
    if injected != [None, 0]:
        raise Failed(f"a scenario's name was put into the page as HTML: {injected}")
    f.shot("problems")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Drive isobench's web UI in headless Chromium.")
    parser.add_argument("--screenshots", required=True, type=Path, metavar="DIR",
                        help="folder for the screenshots (created if missing)")
    chromium.add_argument(parser)
    parser.add_argument("--token", metavar="TOKEN",
                        help="the server's token: the flow starts by signing in with it")
    parser.add_argument("url", metavar="URL", help="the server, e.g. http://127.0.0.1:8080/")
    return parser.parse_args(argv)


def drive(name: str, args: argparse.Namespace, steps, extra_args: list[str] | None = None) -> int:
    """Runs `steps(flow)` in a fresh headless Chromium page against `args.url`, signing in
    first when `args.token` is given, and checks that nothing outside the origin was asked
    for and no error was logged. Exit code: 0 when every step passed, 1 on the first failure
    (with a screenshot of it), 2 without Chromium."""
    if chromium.missing(args.chromium, name):
        return 2
    args.screenshots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = chromium.launch(p, args.chromium, extra_args)
        context = browser.new_context(viewport=VIEWPORT)
        page = context.new_page()
        f = Flow(page, args.url, args.screenshots)
        try:
            if args.token:
                sign_in(f, args.token)
            steps(f)
            f.check_clean()
        except (Failed, Error, AssertionError) as err:
            print(f"{name}: FAIL at step {f.step_no}: {err}", file=sys.stderr, flush=True)
            try:
                f.shot("failure")
            except Error:
                pass
            return 1
        finally:
            context.close()
            browser.close()
    print(f"{name}: ok, {f.step_no} steps; screenshots in {args.screenshots}", flush=True)
    return 0


def all_steps(f: Flow) -> None:
    """The whole UI flow after signing in."""
    run = launch_watch_stop_resume(f)
    report_loads(f, run)
    runs_list(f, run)
    others = queue_page(f)
    compare(f, run, others[0])
    bad_scenario(f)


def main(argv: list[str]) -> int:
    return drive("ui_flow", parse_args(argv), all_steps, EXTRA_ARGS)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
