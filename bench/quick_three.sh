#!/usr/bin/env bash
# Three default runs (`isobench run`) on the idle machine, each timed, with its exit code.
set -u
cd "$(dirname "$0")/.."
out=${1:-/tmp/isobench-quick-three}; rm -rf "$out"; mkdir -p "$out"
s=$(date +%s); scripts/setup > $out/setup.log 2>&1; echo "setup rc=$? took $(( $(date +%s)-s )) s"
for i in 1 2 3; do
  echo "load before run $i: $(cut -d' ' -f1-3 /proc/loadavg)"
  s=$(date +%s)
  flock -x /tmp/isobench-measure.lock target/release/isobench run --db $out/q.db --export-json $out/run$i.json > $out/run$i.txt 2> $out/run$i.err; rc=$?
  echo "run $i rc=$rc took $(( $(date +%s)-s )) s"
done
