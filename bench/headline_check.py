#!/usr/bin/env python3
"""Usage: headline_check.py ISOBENCH DB RUN_ID (BROWSER_PY=venv python for the web UI).

One run's headline in show, the JSON export, the HTML report, the API, /metrics and the web UI: printed side by side, compared."""
import html as H, json, re, subprocess, sys, time, urllib.request, os, signal
exe, db, run = sys.argv[1], sys.argv[2], sys.argv[3]
py = os.environ.get("BROWSER_PY")
out = {}
show = subprocess.run([exe, "show", run, "--db", db], capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"}).stdout
rows = {}
on = False
for l in show.splitlines():
    if l.startswith("Headline:"): on = True; continue
    if on:
        m = re.match(r"\s+(\w+)\s+(.+?)\s{2}\[", l) or re.match(r"\s+(\w+)\s+(DNR|no result)", l)
        if not m: break
        rows[m.group(1)] = m.group(2).strip()
out["show"] = rows
doc = json.loads(subprocess.run([exe, "export", run, "--format", "json", "--db", db], capture_output=True, text=True).stdout)
out["json (cell estimate)"] = {x["resource"]: (x["verdict"], round(x["cell"]["estimate"], 1) if x.get("cell") else None) for x in doc["headline"]["resources"]}
cells = doc["results"]["cells"]
found = all(any(c["tenant"] == x["cell"]["tenant"] and c["probe"] == x["cell"]["probe"] and c["metric"] == x["cell"]["metric"] and c["condition"] == x["cell"]["condition"] and c["comparison"]["degradation"]["estimate"] == x["cell"]["estimate"] for c in cells) for x in doc["headline"]["resources"] if x.get("cell"))
subprocess.run([exe, "report", run, "--db", db, "-o", "/tmp/headline-check.html"], capture_output=True)
page = open("/tmp/headline-check.html").read()
table = page.split('<table class="verdict">')[1].split("</table>")[0]
out["report"] = {m.group(1): H.unescape(m.group(2)) for m in re.finditer(r'<tr class="\w+"><th>(\w+)</th><td>[^<]*</td><td class="num">([^<]*)</td>', table)}
srv = subprocess.Popen([exe, "serve", "--db", db, "--listen", "127.0.0.1:0", "--state-dir", "/tmp/headline-check-state"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
addr = None
for l in srv.stdout:
    if "listening on http://" in l: addr = l.split("http://")[1].strip().rstrip("/"); break
try:
    runs = json.load(urllib.request.urlopen(f"http://{addr}/api/v1/runs"))
    runs = runs["runs"] if isinstance(runs, dict) else runs
    r = next(x for x in runs if x["id"] == run)
    out["api"] = {x["resource"]: x["figure"] for x in r["headline"]["resources"]}
    api_text = r["headline"]["text"]
    metrics = urllib.request.urlopen(f"http://{addr}/metrics").read().decode()
    out["/metrics"] = {m.group(1): m.group(2) for m in re.finditer(r'isobench_run_victim_degradation_percent\{[^}]*resource="(\w+)"[^}]*\} (\S+)', metrics) if f'run="{run}"' in m.group(0)}
    out["/metrics verdict"] = {m.group(1): m.group(2) for m in re.finditer(r'isobench_run_victim_degradation_percent\{[^}]*resource="(\w+)"[^}]*verdict="(\w+)"', metrics) if f'run="{run}"' in m.group(0)}
    if py:
        code = f"""
from playwright.sync_api import sync_playwright
import json
with sync_playwright() as p:
    b = p.chromium.launch(executable_path='/usr/bin/chromium', headless=True, args=['--headless','--no-sandbox','--disable-gpu'])
    pg = b.new_page(); pg.goto('http://{addr}/'); pg.wait_for_selector('td.headline')
    print(json.dumps([t.inner_text() for t in pg.query_selector_all('td.headline')]))
    b.close()
"""
        ui = json.loads(subprocess.run([py, "-c", code], capture_output=True, text=True, timeout=120).stdout)
        out["ui runs list"] = ui
        out["api text"] = api_text
finally:
    os.killpg(srv.pid, signal.SIGTERM); srv.wait()
for k, v in out.items(): print(f"{k}: {v}")
print("every headline cell found in the JSON export's cells with the same estimate:", found)
same = out["show"] == out["report"] == out["api"]
print("show == report == api:", same)
if py: print("ui shows the api text:", api_text in out["ui runs list"])
