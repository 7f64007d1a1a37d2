# The steps of crates/cli/tests/v2_knobs.rs, run inside the cgroup v2 guest by
# `scripts/v2-guest run` (bash, as root, from an ordinary system service; the static
# isobench is in /opt/isobench, first on the PATH). Each step sets cgroup v2 knobs through
# `isobench stress --limits` as a user would, and leaves in /opt/out:
#   STEP.out, STEP.err, STEP.rc  each command's stdout (JSON), stderr and exit code
#                                (STEP-a, STEP-b for two tenants run at the same time);
#   STEP.files                   every value seen in the tenants' v2 files while they
#                                held processes, one line `TENANT FILE: VALUE` each;
#   STEP.samples                 `TIME TENANT cpu_usage_usec io_rbytes io_wbytes` of each
#                                tenant at each look (every ~0.2 s), for the share of CPU
#                                and disk each got while both ran.
set -u
export NO_COLOR=1 ISOBENCH_WAIT=1
out=/opt/out
tenants=/sys/fs/cgroup/isobench.slice

# The v2 files read back while a step runs.
files="cpu.weight cpu.max cpu.max.burst cpuset.cpus cpuset.cpus.partition memory.min
  memory.low memory.high memory.max memory.swap.max io.weight io.bfq.weight io.latency io.max"

# Looks at every tenant of isobench every ~0.2 s until killed, with bash builtins only (no
# process per file: the guest's CPU is slow, and one step measures CPU shares). Runs on
# CPU 1, away from the CPU the cpu.weight step shares.
watch() {
  local step=$1 d t f line now usage rb wb k v
  local -A seen=()
  local -a lines
  while :; do
    now=$EPOCHREALTIME
    for d in "$tenants"/*.scope/isobench-*-*/; do
      [ -d "$d" ] || continue
      read -r line 2> /dev/null < "$d/cgroup.procs" || continue
      [ -n "$line" ] || continue
      t=${d%/}
      t=${t##*/}
      for f in $files memory.events memory.swap.current; do
        mapfile -t lines 2> /dev/null < "$d/$f" || continue
        case $f in
          memory.events)
            for line in "${lines[@]}"; do
              [ "${line%% *}" = high ] && [ "${line#high }" != 0 ] && lines=("high>0")
            done
            [ "${lines[0]:-}" = "high>0" ] || continue
            ;;
          memory.swap.current)
            [ "${lines[0]:-0}" != 0 ] || continue
            lines=(">0")
            ;;
        esac
        line="$t $f: ${lines[*]}"
        [ -n "${seen[$line]:-}" ] && continue
        seen[$line]=1
        echo "$line" >> "$out/$step.files"
      done
      usage=0 rb=0 wb=0
      mapfile -t lines < "$d/cpu.stat"
      for line in "${lines[@]}"; do
        [ "${line%% *}" = usage_usec ] && usage=${line#* }
      done
      mapfile -t lines < "$d/io.stat"
      for line in "${lines[@]}"; do
        for kv in $line; do
          k=${kv%%=*} v=${kv#*=}
          case $k in
            rbytes) rb=$((rb + v)) ;;
            wbytes) wb=$((wb + v)) ;;
          esac
        done
      done
      echo "$now $t $usage $rb $wb" >> "$out/$step.samples"
    done
    sleep 0.2
  done
}

watcher=
watch_start() {
  : > "$out/$1.files"
  : > "$out/$1.samples"
  watch "$1" &
  watcher=$!
  taskset -pc 1 "$watcher" > /dev/null 2>&1
}
watch_stop() {
  kill "$watcher" 2> /dev/null
  wait "$watcher" 2> /dev/null
}

# One isobench command: its output in STEP.out/.err/.rc.
run() {
  local name=$1
  shift
  "$@" > "$out/$name.out" 2> "$out/$name.err"
  local rc=$?
  echo "$rc" > "$out/$name.rc"
  echo "== $name: exit $rc"
  [ "$rc" = 0 ] || tail -n 5 "$out/$name.err"
}

# One step: a tenant (or two at once) with the watcher looking.
step() {
  local name=$1
  shift
  echo "== $name: $*"
  watch_start "$name"
  run "$name" "$@"
  watch_stop
}
# Two tenants at once, each from an `isobench stress` of its own. Weights divide what
# siblings get, and each run's tenants are in the run's own scope (siblings of other runs'
# scopes, all of weight 100): two runs compare their tenants' weights only when their
# tenants are siblings, so both commands run in one cgroup delegated to isobench, a
# systemd scope with Delegate=yes, named to each by ISOBENCH_CGROUP_PARENT.
pair() {
  local name=$1 a=$2 b=$3
  echo "== $name: $a | $b"
  watch_start "$name"
  systemd-run -q --scope -p Delegate=yes --slice=isobench.slice --unit="knobs-$name" -- \
    bash -c "out=$out; export ISOBENCH_CGROUP_PARENT=$tenants/knobs-$name.scope; $(declare -f run); run $name-a $a & run $name-b $b & wait"
  watch_stop
}

stress() { echo "isobench stress $* --platform cgroup --json"; }

# cpu.weight: two CPU stressors sharing CPU 0, weights 1:4.
pair cpu-weight "$(stress cpu --duration 12 --limits cpuset=0,weight=20)" \
  "$(stress cpu --duration 12 --limits cpuset=0,weight=80)"

# io.weight under io.cost: two O_DIRECT disk stressors, weights 1:10.
dev=$(findmnt -no SOURCE -T /var/tmp)
dev=$(basename "$(readlink -f "$dev")")
disk() {
  stress disk --duration 12 --set direct=true --set threads=2 --set file_size=32M \
    --limits "io_weight=$1"
}
# The kernel's automatic QoS never finds the guest's emulated disk saturated (QEMU's CPU is
# the bottleneck, below io.cost's model of the device), and io.cost weighs only a saturated
# device: vrate held at 20% of the model makes it saturated for io.cost.
export ISOBENCH_IO_COST="enable=1 ctrl=user rpct=95 rlat=5000 wpct=95 wlat=5000 min=1 max=20"
pair io-weight "$(disk 100)" "$(disk 1000)"
unset ISOBENCH_IO_COST
grep -H . /sys/fs/cgroup/io.cost.qos > "$out/io-cost-after.txt" 2>&1
# The same with bfq as the disk's scheduler and io.cost off: io_weight sets bfq's own
# weight, io.bfq.weight.
if echo bfq > "/sys/block/${dev%p[0-9]*}/queue/scheduler" 2> /dev/null; then
  cat "/sys/block/${dev%p[0-9]*}/queue/scheduler" > "$out/bfq-scheduler.txt"
  pair io-weight-bfq "$(disk 100)" "$(disk 1000)"
  echo none > "/sys/block/${dev%p[0-9]*}/queue/scheduler" 2> /dev/null
fi

# memory.high: a hog of ~51M allowed 128M, throttled and reclaimed (to swap) above 32M.
step memory-high $(stress memhog --duration 4 --intensity 40 --set write=page \
  --limits memory=128M,memory_high=32M,swap=256M)
# swap: a hog of 64M in 64M of memory with 128M of swap goes to swap.
step swap $(stress memhog --duration 4 --limits memory=64M,swap=128M)
# memory.min, memory.low, cpu.max.burst: set and read back.
step protect $(stress cpu --duration 2 --limits memory=256M,memory_min=32M,memory_low=64M)
step burst $(stress cpu --duration 2 --limits cpus=0.5,cpu_burst=20ms)

# cpu.max.burst's effect: a hog allowed a fifth of CPU 0 (cpu.max 20000 100000), made
# bursty by freezing its tenant (cgroup.freeze) 400 ms of every 460 ms. With a burst of 20
# ms the quota left unused while frozen carries over, so a thaw may run past the quota of
# its period: the kernel counts such periods in cpu.stat (nr_bursts, burst_usec). Without
# it, none. Each cycle's CPU time goes to STEP.cycles (`usage_usec` after each thaw), the
# last cpu.stat to STEP.cpustat.
bursty() {
  local step=$1 d stat line
  : > "$out/$step.cycles"
  while :; do
    for d in "$tenants"/*.scope/isobench-*-*/; do
      [ -w "$d/cgroup.freeze" ] || continue
      echo 1 > "$d/cgroup.freeze" 2> /dev/null || continue
      sleep 0.4
      echo 0 > "$d/cgroup.freeze" 2> /dev/null
      sleep 0.06
      mapfile -t stat 2> /dev/null < "$d/cpu.stat" || continue
      for line in "${stat[@]}"; do
        [ "${line%% *}" = usage_usec ] && echo "${line#* }" >> "$out/$step.cycles"
      done
      printf '%s\n' "${stat[@]}" > "$out/$step.cpustat"
    done
    sleep 0.02
  done
}
burst_step() {
  local name=$1 limits=$2
  echo "== $name: $limits"
  bursty "$name" &
  local cycler=$!
  taskset -pc 1 "$cycler" > /dev/null 2>&1
  run "$name" $(stress cpu --duration 8 --limits "$limits")
  kill "$cycler" 2> /dev/null
  wait "$cycler" 2> /dev/null
}
burst_step burst-on cpuset=0,cpus=0.2,cpu_burst=20ms
burst_step burst-off cpuset=0,cpus=0.2

# io.max iops: O_DIRECT writes held to 50 operations per second.
step iops $(stress disk --duration 4 --set direct=true --set file_size=8M \
  --limits io_write_iops=50)
# A cpuset partition: CPU 1 for the tenant, CPU 0 left to the parent.
step partition $(stress cpu --duration 2 --limits cpuset=1,cpuset_partition=root)
# io.latency: Debian's kernel has no CONFIG_BLK_CGROUP_IOLATENCY.
ls /sys/fs/cgroup/isobench.slice > "$out/before-latency.txt" 2>&1
step io-latency $(stress cpu --duration 1 --limits io_latency=10ms)
ls /sys/fs/cgroup/isobench.slice > "$out/after-latency.txt" 2>&1
cat /sys/fs/cgroup/cgroup.controllers > "$out/controllers.txt"

# memory.low as the kernel's selftest test_memcg_low checks it.
echo "== check-memory-low"
run check-memory-low isobench check memory-low
cat "$out/check-memory-low.out"

find /sys/fs/cgroup -name 'isobench-*' > "$out/left.txt"
echo "isobench-v2-knobs: every step ran"
