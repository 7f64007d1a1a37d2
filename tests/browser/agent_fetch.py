"""A web page of another origin tries to drive an isobench agent listening on loopback TCP.

Serves one page on http://localhost:PORT/ (an origin that is not the agent's), opens it in
headless Chromium (Debian's, through Playwright) and has it send what any page can send to
any address without asking: `fetch(AGENT_URL, {method: 'POST', mode: 'no-cors', body})`
whose body is JSON lines, the agent's protocol. Prints one JSON object: how the fetch ended
in the page (`fetch`) and the network error Chromium saw (`failure`, null when there was an
answer). Exit 0 when the page ran its fetch to the end, 2 on a usage error or no Chromium.

Usage: agent_fetch.py [--chromium PATH] AGENT_URL BODY_FILE
"""

from __future__ import annotations

import argparse
import http.server
import json
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chromium  # noqa: E402

PAGE = """<!doctype html><meta charset="utf-8"><title>another site</title>
<script>
window.result = null;
async function attack(url, body) {
  try {
    const r = await fetch(url, {method: 'POST', mode: 'no-cors', body});
    window.result = 'resolved: ' + r.type + ' ' + r.status;
  } catch (e) {
    window.result = 'rejected: ' + e;
  }
  return window.result;
}
</script>
"""


class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (the name http.server calls)
        body = PAGE.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    chromium.add_argument(ap)
    ap.add_argument("agent_url")
    ap.add_argument("body_file")
    a = ap.parse_args()
    if chromium.missing(a.chromium, "agent_fetch.py"):
        return 2
    body = Path(a.body_file).read_text()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    page_url = f"http://localhost:{server.server_address[1]}/"

    from playwright.sync_api import sync_playwright

    failures: list[str] = []
    with sync_playwright() as p:
        browser = chromium.launch(p, a.chromium)
        page = browser.new_page()
        page.on("requestfailed",
                lambda r: failures.append(r.failure or "?") if r.url.startswith(a.agent_url)
                else None)
        page.goto(page_url)
        outcome = page.evaluate("([u, b]) => attack(u, b)", [a.agent_url, body])
        browser.close()
    server.shutdown()
    print(json.dumps({"page": page_url, "fetch": outcome,
                      "failure": failures[0] if failures else None}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
