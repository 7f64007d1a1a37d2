# The steps of crates/cli/tests/v2_guest.rs, run inside the cgroup v2 guest by
# `scripts/v2-guest run` (bash, as root, from an ordinary system service; the files the test
# passed are in /opt/isobench, first on the PATH). Each step leaves its stdout, stderr and
# exit code in /opt/out/STEP.out, .err and .rc, which come back to the host.
set -u
export NO_COLOR=1 ISOBENCH_WAIT=1
out=/opt/out

. /opt/isobench/guest_steps.sh

# isobench as a user runs it on a cgroup v2 host under systemd.
step doctor isobench doctor --json
step probe isobench probe syscall --platform cgroup --limits cpus=1,memory=256M,pids=64 \
  --budget 0.2 --json
step stress isobench stress cpu --platform cgroup --limits cpus=0.5 --duration 2 --json

# Containment: each aggressive stressor in a tenant of its own.
# 4 s: in a loaded TCG guest the bomb's root took most of 2 s to start its forkers.
step forkbomb isobench stress forkbomb --platform cgroup --limits pids=64 --duration 4 --json
step memhog isobench stress memhog --platform cgroup --limits memory=64M --duration 2 --json
step disk isobench stress disk --platform cgroup --limits io_write_bps=4M --set direct=true \
  --set threads=2 --duration 3 --json
# Where tenants go: a per-run delegated scope under systemd (the stress steps above), the
# unit's own cgroup when systemd delegated it, or the cgroup ISOBENCH_CGROUP_PARENT names.
step delegated systemd-run --quiet --wait --pipe --collect -p Delegate=yes \
  --unit=isobench-test-delegated /opt/isobench/isobench stress cpu --platform cgroup \
  --limits cpus=0.5 --duration 1 --json
step named sh -c 'systemd-run --quiet --wait --pipe \
  --collect -p Delegate=yes --slice=bench.slice --unit=isobench-test-named sh -c \
  "ISOBENCH_CGROUP_PARENT=/sys/fs/cgroup/bench.slice/isobench-test-named.service \
  /opt/isobench/isobench stress cpu --platform cgroup --limits cpus=0.5 --duration 1 --json"'
# The kernel's own memory.low selftest, with isobench's cgroups.
step memlow isobench check memory-low --json
# Buffered writes under io.max: v2 throttles the tenant's writeback, and the stressor must
# still stop when asked.
step diskbuffered isobench stress disk --platform cgroup --limits io_write_bps=4M \
  --duration 3 --json
# The system after them: still running, nothing of isobench's left in the cgroup tree.
step survived sh -c 'systemctl is-system-running; cat /proc/loadavg; free -m'
step left find /sys/fs/cgroup -name 'isobench-*'
step units systemctl list-units --all --plain --no-legend 'isobench-*'

# While a run's tenants exist, their limits as the kernel's v2 files hold them: each value
# seen, one line `FILE: VALUE` each, in /opt/out/readback/TENANT. Bash builtins only, a look
# every 50 ms: a short run's tenants exist for seconds, and the guest's CPU is slow (and,
# under a loaded host, slower still).
readback() {
  mkdir -p "$out/readback"
  local d t f v
  local -a lines
  local -A seen=()
  while sleep 0.05; do
    for d in $(find /sys/fs/cgroup -mindepth 1 -type d -name 'isobench-*-*' 2> /dev/null); do
      t=${d##*/isobench-}
      t=${t#*-}
      for f in cpu.max memory.max pids.max io.max; do
        mapfile -t lines 2> /dev/null < "$d/$f" || continue
        v="$f: ${lines[*]}"
        [ -n "${seen[$t $v]:-}" ] && continue
        seen[$t $v]=1
        echo "$v" >> "$out/readback/$t"
      done
    done
  done
}
readback &
readback_pid=$!

# A short matrix run. With a listen address (the guest has --net), as a fleet host: the
# host's `isobench run --hosts` drives it and gets the stored run back; the guest waits
# until a coordinator's session has come and gone. Without, the run is stored in
# /opt/out/guest.db.
if [ -r /opt/isobench/listen ]; then
  listen=$(cat /opt/isobench/listen)
  port=${listen##*:}
  isobench agent --listen "$listen" --token-file /opt/isobench/token --db /var/tmp/host.db \
    > "$out/agent.out" 2> "$out/agent.err" &
  agent=$!
  for _ in $(seq 600); do
    grep -q listening "$out/agent.err" && break
    kill -0 "$agent" 2> /dev/null || break
    sleep 0.1
  done
  # The host waits for this line.
  echo "isobench-v2-guest: agent listening on $listen"
  seen=
  t0=$SECONDS
  while kill -0 "$agent" 2> /dev/null && [ $((SECONDS - t0)) -lt 900 ]; do
    if [ -n "$(ss -Htn state established "( sport = :$port )")" ]; then
      seen=1
    elif [ -n "$seen" ]; then
      break
    fi
    sleep 0.5
  done
  [ -n "$seen" ] || echo "isobench-v2-guest: no coordinator came" >&2
  kill -TERM "$agent" 2> /dev/null
  wait "$agent"
  echo "$?" > "$out/agent.rc"
  cp /var/tmp/host.db "$out/host.db" 2> /dev/null
else
  step matrix isobench run /opt/isobench/scenario.toml --db "$out/guest.db" -q
fi
kill "$readback_pid" 2> /dev/null
wait "$readback_pid" 2> /dev/null
echo "isobench-v2-guest: every step ran"
