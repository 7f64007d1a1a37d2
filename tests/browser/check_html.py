#!/usr/bin/env python3
"""Opens isobench's HTML reports in headless Chromium and checks that a person could read them.

A report must open offline, draw every chart, stay readable with JavaScript off and in print.
For each file this checks:

- no request leaves the page other than file: and data: (each is blocked before it is sent,
  counted, and a failure);
- no console error and no uncaught page error;
- every chart drew: the contract is `<figure class="chart" data-chart="ID">` holding an inline
  `<svg>`; the svg has a non-zero box and at least one element of class `mark` of non-zero
  size, and at least one mark carries a `<title>` child (the exact value on hover);
- the page has a `<table>`, and with JavaScript off the same tables are there with data rows;
- a `@media print` rule in a `<style>`, and with print media emulated the tables still show;
- a run's report opens with its verdict: when the page has `#verdict`, it is the first
  section of the page, starts within the first screen, and lies above the run's metadata
  (`#run`);
- no two legend entries of a chart (`svg .key`: swatches and names) overlap, and each lies
  inside its svg;
- no heading or chart caption says a word twice in a row ("Victim victim").

It saves a full-page screenshot of each file into the screenshots folder, prints one line per
file, and exits 1 when any file failed (2 on a usage error).

Usage: check_html.py --screenshots DIR FILE.html [FILE.html ...]
Needs Playwright for Python and a Chromium (default: `chromium` on PATH, or --chromium PATH);
the browser is never downloaded.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

from playwright.sync_api import Browser, BrowserContext, Error, Page, sync_playwright

import chromium

# The flags a report is checked under. The proxy points at a closed local port and every host
# name resolves to nothing: the routing below aborts any request that is not local, and these
# make sure nothing the router does not see (a preconnect, a prefetch) can leave the machine.
EXTRA_ARGS = [
    "--proxy-server=http://127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND",
]
LOCAL_SCHEMES = ("file:", "data:")
VIEWPORT = {"width": 1280, "height": 900}
LOAD_TIMEOUT_MS = 30_000

# Measures every chart of the page: the figure, its svg's box, its marks and which drew.
# A mark drew when it is rendered and has a size: both sides for a filled shape, one side is
# enough for a stroke (a horizontal line has no height).
CHARTS_JS = """
() => {
  const FILLED = new Set(['rect', 'circle', 'ellipse', 'polygon', 'image', 'use', 'text']);
  const drawn = (el) => {
    const style = getComputedStyle(el);
    if (style.display === 'none' || style.visibility === 'hidden') return false;
    const r = el.getBoundingClientRect();
    const tag = el.tagName.toLowerCase();
    return FILLED.has(tag) ? (r.width > 0 && r.height > 0) : (r.width > 0 || r.height > 0);
  };
  return [...document.querySelectorAll('figure.chart')].map((fig, i) => {
    const svg = fig.querySelector('svg');
    const box = svg ? svg.getBoundingClientRect() : null;
    const marks = svg ? [...svg.querySelectorAll('.mark')] : [];
    return {
      id: fig.dataset.chart || `#${i + 1} (no data-chart)`,
      hasSvg: !!svg,
      svgWidth: box ? box.width : 0,
      svgHeight: box ? box.height : 0,
      marks: marks.length,
      drawnMarks: marks.filter(drawn).length,
      titledMarks: marks.filter((m) => {
        const t = m.querySelector(':scope > title');
        return t && t.textContent.trim() !== '';
      }).length,
    };
  });
}
"""

# Every table and how many data rows (rows with a td) it has.
TABLES_JS = """
() => [...document.querySelectorAll('table')].map(
  (t) => [...t.querySelectorAll('tr')].filter((r) => r.querySelector('td')).length)
"""

# Whether a <style> element holds an @media print rule (or is itself media="print").
PRINT_RULE_JS = """
() => [...document.querySelectorAll('style')].some((el) => {
  if (/\\bprint\\b/.test(el.media || '')) return true;
  const sheet = el.sheet;
  if (!sheet) return false;
  const walk = (rules) => [...rules].some((r) =>
    (r instanceof CSSMediaRule && /\\bprint\\b/.test(r.media.mediaText)) ||
    (r.cssRules ? walk(r.cssRules) : false));
  return walk(sheet.cssRules);
})
"""


# Where the verdict and the run's metadata start, and which section comes first.
LAYOUT_JS = """
() => {
  const top = (sel) => {
    const el = document.querySelector(sel);
    return el ? el.getBoundingClientRect().top + window.scrollY : null;
  };
  const first = document.querySelector('main h2');
  return {verdict: top('#verdict'), run: top('#run'), first: first ? first.id : null};
}
"""

# Legend entries of each chart that overlap one another or leave their svg.
LEGENDS_JS = """
() => {
  const out = [];
  document.querySelectorAll('figure.chart').forEach((fig, i) => {
    const svg = fig.querySelector('svg');
    if (!svg) return;
    const id = fig.dataset.chart || `#${i + 1}`;
    const box = svg.getBoundingClientRect();
    const keys = [...svg.querySelectorAll('.key, text.legend')]
      .map((t) => [t, t.getBoundingClientRect()]);
    const name = (t) => t.textContent || 'a colour swatch';
    keys.forEach(([t, r], a) => {
      if (r.left < box.left - 0.5 || r.right > box.right + 0.5)
        out.push(`chart ${id}: legend entry "${name(t)}" leaves its svg`);
      keys.slice(a + 1).forEach(([u, q]) => {
        const x = Math.min(r.right, q.right) - Math.max(r.left, q.left);
        const y = Math.min(r.bottom, q.bottom) - Math.max(r.top, q.top);
        if (x > 0.5 && y > 0.5)
          out.push(`chart ${id}: legend entries "${name(t)}" and "${name(u)}" overlap`);
      });
    });
  });
  return out;
}
"""

# Headings and chart captions that say a word twice in a row.
REPEATS_JS = """
() => [...document.querySelectorAll('h1, h2, h3, h4, figcaption, caption')]
  .map((h) => h.textContent.trim())
  .filter((t) => /\\b(\\w+)\\s+\\1\\b/i.test(t))
"""


@dataclass
class FileResult:
    """What was found in one file, and every problem with it."""

    path: Path
    charts: int = 0
    marks: int = 0
    tables: int = 0
    errors: int = 0
    blocked: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    screenshot: Path | None = None

    def error(self, text: str) -> None:
        """A console or page error; both contexts see most of them, each counts once."""
        if text not in self.problems:
            self.errors += 1
            self.problems.append(text)


def new_context(browser: Browser, blocked: list[str], *, javascript: bool) -> BrowserContext:
    """A fresh context where any request that is not file: or data: is aborted and recorded."""
    context = browser.new_context(viewport=VIEWPORT, java_script_enabled=javascript)

    def route(r):
        url = r.request.url
        if url.startswith(LOCAL_SCHEMES):
            r.continue_()
        else:
            blocked.append(url)
            r.abort("blockedbyclient")

    context.route("**/*", route)
    return context


def open_page(context: BrowserContext, url: str, result: FileResult) -> Page:
    """Opens url, recording console errors and page errors into result."""
    page = context.new_page()

    def on_console(msg):
        if msg.type != "error":
            return
        # A request this checker blocked is reported as blocked, not twice.
        if msg.location.get("url") in result.blocked:
            return
        where = msg.location.get("url", "")
        line = msg.location.get("lineNumber")
        at = f" ({Path(where).name}:{line + 1})" if where and line is not None else ""
        result.error(f"console error{at}: {msg.text}")

    def on_page_error(err):
        result.error(f"page error: {err}")

    page.on("console", on_console)
    page.on("pageerror", on_page_error)
    page.goto(url, wait_until="load", timeout=LOAD_TIMEOUT_MS)
    return page


def check_charts(page: Page, result: FileResult) -> None:
    """Every figure.chart must hold an svg that drew, with a titled mark."""
    charts = page.evaluate(CHARTS_JS)
    result.charts = len(charts)
    result.marks = sum(c["drawnMarks"] for c in charts)
    if not charts:
        result.problems.append('no chart: no <figure class="chart" data-chart="ID"> found')
    for c in charts:
        name = f"chart {c['id']}"
        if not c["hasSvg"]:
            result.problems.append(f"{name} did not draw: no inline <svg> in its figure")
        elif c["svgWidth"] <= 0 or c["svgHeight"] <= 0:
            result.problems.append(
                f"{name} did not draw: its svg is {c['svgWidth']:g}x{c['svgHeight']:g}")
        elif c["marks"] == 0:
            result.problems.append(f'{name} did not draw: no element of class "mark"')
        elif c["drawnMarks"] == 0:
            result.problems.append(
                f"{name} did not draw: none of its {c['marks']} marks has a size")
        elif c["titledMarks"] == 0:
            result.problems.append(
                f"{name}: no mark has a <title> child (the value shown on hover)")


def check_tables(page: Page, result: FileResult) -> list[int]:
    """The page has tables, each with data rows; returns the rows per table."""
    rows = page.evaluate(TABLES_JS)
    result.tables = len(rows)
    if not rows:
        result.problems.append("no <table> in the page")
    empty = [i + 1 for i, n in enumerate(rows) if n == 0]
    if empty:
        result.problems.append(
            "tables without data rows (no row with a <td>): " + ", ".join(f"#{i}" for i in empty))
    return rows


def check_layout(page: Page, result: FileResult) -> None:
    """A report with a verdict opens with it: first section, on the first screen, above the
    run's metadata."""
    at = page.evaluate(LAYOUT_JS)
    if at["verdict"] is None:
        return
    if at["first"] != "verdict":
        result.problems.append(
            f"the report does not open with its verdict: the first section is #{at['first']}")
    if at["verdict"] >= VIEWPORT["height"]:
        result.problems.append(
            f"the verdict starts {at['verdict']:.0f} px down, below the first screen "
            f"({VIEWPORT['height']} px)")
    if at["run"] is not None and at["run"] <= at["verdict"]:
        result.problems.append(
            f"the run's metadata (#run, {at['run']:.0f} px) comes before the verdict "
            f"({at['verdict']:.0f} px)")


def check_text(page: Page, result: FileResult) -> None:
    """Legends that overlap or leave their chart, and headings that repeat a word."""
    result.problems.extend(page.evaluate(LEGENDS_JS))
    for heading in page.evaluate(REPEATS_JS):
        result.problems.append(f'a heading repeats a word: "{heading}"')


def check_without_js(browser: Browser, url: str, rows_with_js: list[int],
                     result: FileResult) -> None:
    """With JavaScript off the same tables are there, each with data rows."""
    context = new_context(browser, result.blocked, javascript=False)
    try:
        page = open_page(context, url, result)
        rows = page.evaluate(TABLES_JS)
        if len(rows) < len(rows_with_js):
            result.problems.append(
                f"with JavaScript off the page has {len(rows)} tables, not {len(rows_with_js)}")
        empty = [i + 1 for i, n in enumerate(rows)
                 if n == 0 and i < len(rows_with_js) and rows_with_js[i] > 0]
        if empty:
            result.problems.append(
                "with JavaScript off these tables lose their data rows: "
                + ", ".join(f"#{i}" for i in empty))
    finally:
        context.close()


def check_print(page: Page, result: FileResult) -> None:
    """A print stylesheet exists, and under print media the tables still show."""
    if not page.evaluate(PRINT_RULE_JS):
        result.problems.append("no print stylesheet: no @media print rule in a <style>")
    page.emulate_media(media="print")
    try:
        tables = page.locator("table")
        shown = sum(1 for i in range(tables.count()) if tables.nth(i).is_visible())
        if result.tables and shown == 0:
            result.problems.append("under print media no table is shown")
    finally:
        page.emulate_media(media="screen")


def screenshot_path(directory: Path, path: Path, taken: set[Path]) -> Path:
    """DIR/<file stem>.png, numbered when two files share a stem."""
    out = directory / f"{path.stem}.png"
    n = 2
    while out in taken:
        out = directory / f"{path.stem}-{n}.png"
        n += 1
    taken.add(out)
    return out


def check_file(browser: Browser, path: Path, shots: Path, taken: set[Path]) -> FileResult:
    """Runs every check on one file and saves its screenshot."""
    result = FileResult(path)
    if not path.is_file():
        result.problems.append("no such file")
        return result
    url = path.resolve().as_uri()
    context = new_context(browser, result.blocked, javascript=True)
    try:
        page = open_page(context, url, result)
        result.screenshot = screenshot_path(shots, path, taken)
        page.screenshot(path=str(result.screenshot), full_page=True)
        check_charts(page, result)
        check_layout(page, result)
        check_text(page, result)
        rows = check_tables(page, result)
        check_print(page, result)
    except Error as err:
        result.problems.append(f"the browser failed: {err.message.splitlines()[0]}")
        return result
    finally:
        context.close()
    if result.tables:
        try:
            check_without_js(browser, url, rows, result)
        except Error as err:
            result.problems.append(
                f"the browser failed with JavaScript off: {err.message.splitlines()[0]}")
    for url in dict.fromkeys(result.blocked):
        result.problems.append(
            f"request to the network (blocked; a report must open offline): {url}")
    return result


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Check isobench HTML reports in headless Chromium.")
    parser.add_argument("--screenshots", required=True, type=Path, metavar="DIR",
                        help="folder for one full-page PNG per file (created if missing)")
    chromium.add_argument(parser)
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE.html")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if chromium.missing(args.chromium, "check_html"):
        return 2
    args.screenshots.mkdir(parents=True, exist_ok=True)
    failed = 0
    taken: set[Path] = set()
    with sync_playwright() as p:
        browser = chromium.launch(p, args.chromium, EXTRA_ARGS)
        try:
            for path in args.files:
                r = check_file(browser, path, args.screenshots, taken)
                status = "FAIL" if r.problems else "ok"
                print(f"{status} {path}: {r.charts} charts, {r.marks} marks, {r.tables} tables, "
                      f"{r.errors} errors, {len(set(r.blocked))} blocked requests"
                      + (f"; screenshot {r.screenshot}" if r.screenshot else ""), flush=True)
                for problem in r.problems:
                    print(f"  - {problem}", flush=True)
                failed += bool(r.problems)
        finally:
            browser.close()
    if failed:
        print(f"check_html: {failed} of {len(args.files)} files failed the checks above",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
