#!/usr/bin/env bash
# Checks the checker: tests/browser/check_html.py must pass fixtures/good.html and fail
# fixtures/bad.html, naming each of its six faults (a console error, a chart with no marks,
# a request to the network, the verdict after the run's metadata, overlapping legend entries,
# a heading that repeats its word).
# Usage: tests/browser/selftest.sh [SCREENSHOT_DIR]
# The python is $ISOBENCH_BROWSER_PYTHON (scripts/test sets it), else the venv scripts/test
# builds; screenshots go to SCREENSHOT_DIR, else target/browser-screenshots/selftest.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${XDG_CACHE_HOME:-$HOME/.cache}/isobench/browser-venv"
python="${ISOBENCH_BROWSER_PYTHON:-$venv/bin/python}"
shots="${1:-${CARGO_TARGET_DIR:-$root/target}/browser-screenshots/selftest}"
if [ ! -x "$python" ]; then
  echo "selftest: no python with playwright at $python; run scripts/test (it installs one)" >&2
  exit 2
fi
mkdir -p "$shots" && rm -f "$shots/good.png" "$shots/bad.png"
check() { "$python" "$here/check_html.py" --screenshots "$shots" "$@"; }

failures=0
fail() { echo "selftest: FAIL: $*" >&2; failures=$((failures + 1)); }

out="$(check "$here/fixtures/good.html" 2>&1)"; rc=$?
printf '%s\n' "$out"
[ "$rc" = 0 ] || fail "good.html should pass (exit $rc)"
[ -s "$shots/good.png" ] || fail "no screenshot at $shots/good.png"

out="$(check "$here/fixtures/bad.html" 2>&1)"; rc=$?
printf '%s\n' "$out"
[ "$rc" = 1 ] || fail "bad.html should fail with exit 1 (exit $rc)"
for expected in \
  "console error (bad.html:" \
  "fixture: this console error must be reported" \
  'chart empty did not draw: no element of class "mark"' \
  "request to the network (blocked; a report must open offline): http://192.0.2.1/x.png" \
  "the report does not open with its verdict: the first section is #run" \
  "the run's metadata (#run," \
  'chart fine: legend entries "cpu@100" and "cache@100" overlap' \
  'a heading repeats a word: "Victim victim"'; do
  grep -qF -- "$expected" <<<"$out" || fail "bad.html: the checker did not say: $expected"
done
[ -s "$shots/bad.png" ] || fail "no screenshot at $shots/bad.png"

if [ "$failures" -gt 0 ]; then
  echo "selftest: $failures problems with the checker" >&2
  exit 1
fi
echo "selftest: ok (screenshots in $shots)"
