# The steps of crates/cli/tests/v2_protection.rs, run inside the cgroup v2 guest by
# `scripts/v2-guest run` (bash, as root, from an ordinary system service; the static
# isobench is in /opt/isobench, first on the PATH). Two `protection` runs on platform
# cgroup, each with its settings side by side, as a user would run them; each leaves in
# /opt/out:
#   STEP.out, .err, .rc      `isobench run`'s output and exit code;
#   STEP-export.out, ...     the run exported as JSON (`isobench export latest`);
#   STEP.memory              with the tenants' memory as the kernel counts it, every ~1 s
#                            while they hold processes: `TIME TENANT anon file swap`
#                            (bytes: memory.stat's anon and file, memory.swap.current).
set -u
export NO_COLOR=1 ISOBENCH_WAIT=1
out=/opt/out
tenants=/sys/fs/cgroup/isobench.slice

. /opt/isobench/guest_steps.sh

free -m > "$out/free.txt"

# Looks at every tenant of isobench every ~1 s until killed, with bash builtins only (the
# guest's CPU is slow, and the runs measure it).
watch_memory() {
  local file=$1 d t line anon filebytes swap
  local -a lines
  while :; do
    for d in "$tenants"/*.scope/isobench-*-*/; do
      [ -d "$d" ] || continue
      read -r line 2> /dev/null < "$d/cgroup.procs" || continue
      [ -n "$line" ] || continue
      t=${d%/}
      t=${t##*-}
      anon=0 filebytes=0 swap=0
      mapfile -t lines 2> /dev/null < "$d/memory.stat" || continue
      for line in "${lines[@]}"; do
        case ${line%% *} in
          anon) anon=${line#* } ;;
          file) filebytes=${line#* } ;;
        esac
      done
      read -r swap 2> /dev/null < "$d/memory.swap.current" || swap=0
      echo "$EPOCHREALTIME $t $anon $filebytes $swap" >> "$file"
    done
    sleep 1
  done
}

# One protection run from scenario file NAME.toml, watched, then exported; with a second
# argument, in a cgroup of its own holding that much memory.
protection() {
  local name=$1
  : > "$out/$name.memory"
  watch_memory "$out/$name.memory" &
  local watcher=$!
  local t0=$SECONDS
  if [ -n "${2:-}" ]; then
    # In a scope of its own with MemoryMax=$2, named to isobench as its tenants' parent.
    step "$name" systemd-run -q --scope -p Delegate=yes -p "MemoryMax=$2" \
      --slice=isobench.slice --unit="protection-$name" -- env \
      ISOBENCH_CGROUP_PARENT="$tenants/protection-$name.scope" \
      isobench run "/var/tmp/$name.toml" --db "/var/tmp/$name.db" -q
  else
    step "$name" isobench run "/var/tmp/$name.toml" --db "/var/tmp/$name.db" -q
  fi
  echo "== $name: $((SECONDS - t0)) s"
  kill "$watcher" 2> /dev/null
  wait "$watcher" 2> /dev/null
  step "$name-export" isobench export latest --format json --db "/var/tmp/$name.db"
  cat "$out/$name.out"
}

# 1. A two-thread CPU hog beside the service, with the tenants' planned limits only
# (`none`) and with a setting for cgroup v2 hosts: cpu.weight 1000 for the service and 10
# for the hog, the hog's cpu.max a quarter of a CPU, and memory.low for the service. The
# service burns 4 ms of CPU a request at 40 requests/s: a rate given, not calibrated (under
# TCG the calibrated rate ranged from 20 to 210 requests/s with the host's load).
cat > /var/tmp/cpu.toml << 'TOML'
name = "v2-protection-cpu"
kind = "protection"
seed = 2
platform = "cgroup"
placement = "shared"

[trial]
warmup = "500ms"
solo = "2s"
timeout = "60s"
max_retries = 0

[repetitions]
min = 1
max = 1

[protection]
settle = "2s"
stable = "5s"
aggressor = "8s"
recover = "3s"
episodes = 1

[[protection.setting]]
name = "none"

[[protection.setting]]
name = "v2-knobs"
cgroup = "v2"
limits = { svc = { weight = 1000, memory_low = "32M" }, batch = { weight = 10, cpus = 0.25 } }

[[tenant]]
name = "svc"
role = "victim"
limits = { memory = "256M", pids = 256 }

[[tenant]]
name = "batch"
role = "aggressor"
limits = { memory = "128M", pids = 64 }

[[probe]]
name = "service"
params = { rate = 40, slo_ms = 300, cpu_us = 4000, mem = "16M" }

[[stressor]]
name = "cpu"
intensity = 100
TOML
protection cpu

# 2. A memory hog beside the service, both tenants in one cgroup delegated to isobench
# (ISOBENCH_CGROUP_PARENT: a systemd scope with MemoryMax=288M), so that they share its
# memory as tenants share a machine's, without pressing on the guest's own. The service's
# working set is 48M of anonymous memory (its tenant may swap) and a 64M file in the page
# cache, read evenly, at 20 requests/s over 2 connections, so that requests slower than
# 100 ms on average cost it its rate (it holds it beside a hog that only takes CPU); the hog holds 90% of its tenant's limit: 201M of 224M (`none`), more
# than the parent leaves beside the service, so reclaim takes the service's file and
# memory; or 43M of 48M (`limited`), which leaves the service all of it.
cat > /var/tmp/memory.toml << 'TOML'
name = "v2-protection-memory"
kind = "protection"
seed = 3
platform = "cgroup"
placement = "shared"

[trial]
warmup = "500ms"
solo = "2s"
timeout = "60s"
max_retries = 0

[repetitions]
min = 1
max = 1

[protection]
settle = "2s"
stable = "12s"
aggressor = "20s"
recover = "3s"
episodes = 1

[[protection.setting]]
name = "none"

[[protection.setting]]
name = "limited"
limits = { batch = { memory = "48M" } }

[[tenant]]
name = "svc"
role = "victim"
limits = { memory = "192M", swap = "256M", pids = 256 }

[[tenant]]
name = "batch"
role = "aggressor"
limits = { memory = "224M", pids = 64 }

[[probe]]
name = "service"
params = { rate = 20, slo_ms = 300, cpu_us = 1000, mem = "48M", file = "64M", touch = "128K", hot_pct = 0, connections = 2 }

[[stressor]]
name = "memhog"
intensity = 90
params = { write = "page" }
TOML
protection memory 288M
cat /sys/fs/cgroup/isobench.slice/memory.events > "$out/slice-memory.events" 2>&1

step left find /sys/fs/cgroup -name 'isobench-*'
echo "isobench-v2-protection: every step ran"
