#!/usr/bin/env python3
"""Drives isobench's web UI (`isobench serve`) in headless Chromium through a tune launched
from the launch form.

Against a running server (the instant fake platform), it:

0. (with --token) signs in through the login form;
1. opens the launch page, chooses *A tune*, and fills its fields: the victim's probe
   (service), the SLO (lat_p99_ms <= 20), the stressor (cpu), a first knob (batch.cpus from
   0.05 to 1), a second one added with *+ knob* naming a tenant the scenario lacks, and the
   resolution;
2. submits it and sees the refusal at the second knob's row (`tune.knobs[1]`), the tenant
   named, nothing queued;
3. corrects the tenant, submits again, lands on the run's page and waits for the run to end
   (`complete`);
4. sees the report load in the page (as ui_flow.py does) and hold the tune's answer (section `tune`, a row per knob) and
   the frontier chart of the cpu stressor.

The same rules as ui_flow.py hold: no request outside the server's origin, no console or page
error but the expected 4xx; a screenshot of each step. Exit 0 when every step passed, 1 on the
first failure, 2 on a usage error or a missing Chromium.

Usage: tune_flow.py --screenshots DIR [--chromium PATH] [--token TOKEN] URL
"""

from __future__ import annotations

import sys

from playwright.sync_api import expect

from ui_flow import (RUN_MS, SHORT_MS, Failed, Flow, drive, parse_args, report_loads,
                     run_id_from_url)


def fill_tune(f: Flow) -> None:
    f.step("choose a tune on the launch form and fill its fields, a second knob with + knob")
    f.go("#/launch")
    f.page.wait_for_selector("#launch-form", timeout=SHORT_MS)
    if f.page.locator("#tune-form").is_visible():
        raise Failed("the tune's fields show before a tune is chosen")
    f.page.check("#source-tune")
    expect(f.page.locator("#tune-form")).to_be_visible(timeout=SHORT_MS)
    f.page.select_option("#tune-probe", "service")
    f.page.select_option("#tune-metric", "lat_p99_ms")
    f.page.select_option("#tune-op", "<=")
    f.page.fill("#tune-bound", "20")
    f.page.select_option("#tune-stressors", ["cpu"])
    f.page.fill("#tune-knob-0-tenant", "batch")
    f.page.select_option("#tune-knob-0-key", "cpus")
    f.page.fill("#tune-knob-0-from", "0.05")
    f.page.fill("#tune-knob-0-to", "1")
    f.page.click("#tune-add-knob")
    expect(f.page.locator("#tune-knobs fieldset.knob")).to_have_count(2, timeout=SHORT_MS)
    f.page.fill("#tune-knob-1-tenant", "nobody")
    f.page.select_option("#tune-knob-1-key", "weight")
    f.page.fill("#tune-knob-1-from", "1")
    f.page.fill("#tune-knob-1-to", "10000")
    f.page.fill("#tune-resolution", "0.1")
    f.shot("tune-form")


def bad_knob_refused(f: Flow) -> None:
    f.step("a knob of a tenant the scenario lacks is refused at its row")
    f.page.click("#launch-submit")
    error = f.page.locator('[data-field="tune.knobs[1]"] .field-error')
    expect(error).to_be_visible(timeout=SHORT_MS)
    expect(error).to_contain_text("tune.knobs[1]")
    expect(error).to_contain_text("nobody")
    expect(f.page.locator('[data-field="tune.knobs[0]"] .field-error')).to_have_count(0)
    expect(f.page.locator("#tune-knob-1-tenant")).to_have_attribute("aria-invalid", "true")
    expect(f.page.locator("#launch-result")).to_be_hidden()
    f.shot("tune-bad-knob")


def launch_tune(f: Flow) -> str:
    f.step("correct the tenant and launch the tune: its run page opens and it completes")
    f.page.fill("#tune-knob-1-tenant", "batch")
    f.page.click("#launch-submit")
    run = run_id_from_url(f)
    print(f"tune_flow:    run {run}", flush=True)
    f.wait_text("#run-status", "complete", RUN_MS, "the tune's run")
    expect(f.page.locator("#run-status")).to_have_text("complete")
    f.shot("tune-complete")
    return run


def answer_shown(f: Flow, run: str) -> None:
    report_loads(f, run)
    f.step("the run's report shows the tune's answer and the frontier chart")
    frame = f.page.frame_locator("iframe#report-frame")
    answer = frame.locator("h3#section-tune")
    expect(answer).to_have_count(1, timeout=SHORT_MS)
    table = frame.locator("h3#section-tune + table")
    expect(table).to_contain_text("batch.cpus", timeout=SHORT_MS)
    expect(table).to_contain_text("batch.weight", timeout=SHORT_MS)
    # A stressor's sections are named by its label, `cpu@100` at full intensity.
    chart = frame.locator('figure.chart[data-chart*="-frontier-cpu"]')
    expect(chart).to_have_count(1, timeout=SHORT_MS)
    answer.scroll_into_view_if_needed()
    f.shot("tune-answer")


def main(argv: list[str]) -> int:
    args = parse_args(argv)

    def steps(f: Flow) -> None:
        fill_tune(f)
        bad_knob_refused(f)
        run = launch_tune(f)
        answer_shown(f, run)

    return drive("tune_flow", args, steps)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
