# The steps of crates/cli/tests/v2_plain.rs, run inside the cgroup v2 guest booted without
# systemd (`scripts/v2-guest run --init plain`: a shell script is PID 1, cgroup2 is mounted
# on /sys/fs/cgroup and nothing manages the tree). The static isobench is in /opt/isobench,
# first on the PATH. Each step leaves its stdout, stderr and exit code in
# /opt/out/STEP.out, .err and .rc, which come back to the host.
set -u
export NO_COLOR=1 ISOBENCH_WAIT=1
out=/opt/out
cg=/sys/fs/cgroup

. /opt/isobench/guest_steps.sh

# The host as isobench finds it.
step host sh -c 'echo "pid1: $(tr "\0" " " < /proc/1/cmdline)";
  echo "mount: $(findmnt -no FSTYPE /sys/fs/cgroup)";
  echo "systemd: $([ -d /run/systemd/system ] && echo yes || echo no)";
  echo "controllers: $(cat /sys/fs/cgroup/cgroup.controllers)";
  echo "own: $(cat /proc/self/cgroup)"'
step doctor isobench doctor --json
step stress isobench stress cpu --platform cgroup --limits cpus=0.5 --duration 2 --json

# Containment.
# 4 s: in a loaded TCG guest the bomb's root took most of 2 s to start its forkers.
step forkbomb isobench stress forkbomb --platform cgroup --limits pids=64 --duration 4 --json
# The hog for 6 s: at its limit the kernel first reclaims file pages (the binary's), and a
# loaded TCG guest was seen not to reach the OOM kill within 2 s.
step memhog isobench stress memhog --platform cgroup --limits memory=64M --duration 6 --json
step disk isobench stress disk --platform cgroup --limits io_write_bps=4M --set direct=true \
  --set threads=2 --duration 3 --json

# A short matrix run, each tenant's limits read from its v2 files while it holds processes
# (one line `TENANT FILE: VALUE` per value seen, in readback.txt).
cat > /var/tmp/scenario.toml << 'TOML'
name = "v2-plain"
kind = "matrix"
seed = 3
platform = "cgroup"

[trial]
duration = "150ms"
warmup = "100ms"
solo = "150ms"
max_retries = 0
pilot = "300ms"
onoff_max = "1s"

[repetitions]
min = 2
max = 2

[[tenant]]
name = "victim"
role = "victim"
limits = { cpus = 1, memory = "256M", pids = 128 }

[[tenant]]
name = "aggressor"
role = "aggressor"
limits = { cpus = 0.5, memory = "128M", pids = 64, io_write_bps = "20M" }

[[probe]]
name = "syscall"
metrics = ["getppid_ns"]

[[stressor]]
name = "cpu"
TOML
readback() {
  local d t f v
  while sleep 0.1; do
    for d in "$cg"/isobench-*/; do
      [ -n "$(cat "$d/cgroup.procs" 2> /dev/null)" ] || continue
      t=${d%/}
      t=${t##*/isobench-}
      t=${t#*-}
      for f in cpu.max memory.max pids.max io.max; do
        v=$(tr '\n' ' ' < "$d/$f" 2> /dev/null) || continue
        v="$t $f: ${v% }"
        grep -qxF "$v" "$out/readback.txt" 2> /dev/null || echo "$v" >> "$out/readback.txt"
      done
    done
  done
}
: > "$out/readback.txt"
readback &
reader=$!
step matrix isobench run /var/tmp/scenario.toml --db "$out/guest.db" -q
kill "$reader" 2> /dev/null
wait "$reader" 2> /dev/null

# A controller killed in the middle of a run (SIGKILL, as a crash or the OOM killer would):
# its tenants and their processes stay behind until `isobench cleanup` removes them
# (cgroup.kill, then rmdir).
isobench stress cpu --platform cgroup --limits cpus=0.5 --duration 60 --json \
  > "$out/killed.out" 2> "$out/killed.err" &
killed=$!
for _ in $(seq 300); do
  ls -d "$cg"/isobench-* > /dev/null 2>&1 && [ -n "$(cat "$cg"/isobench-*/cgroup.procs 2> /dev/null)" ] && break
  sleep 0.1
done
sleep 1
find "$cg" -mindepth 1 -type d -name 'isobench-*' > "$out/before-kill.txt"
cat "$cg"/isobench-*/cgroup.procs > "$out/procs-before-kill.txt" 2> /dev/null
kill -KILL "$killed"
wait "$killed" 2> /dev/null
sleep 0.5
find "$cg" -mindepth 1 -type d -name 'isobench-*' > "$out/after-kill.txt"
step cleanup isobench cleanup
find "$cg" -mindepth 1 -type d -name 'isobench-*' > "$out/after-cleanup.txt"
: > "$out/procs-after-cleanup.txt"
while read -r p; do
  [ -d "/proc/$p" ] && echo "$p $(tr '\0' ' ' < "/proc/$p/cmdline")" >> "$out/procs-after-cleanup.txt"
done < "$out/procs-before-kill.txt"

# A cpuset partition: a parent made a partition root of CPUs 1-2 (root keeps CPU 0), named
# to isobench by ISOBENCH_CGROUP_PARENT; a tenant asking for CPU 2 as a partition root of
# its own takes CPU 2 from the parent's effective CPUs while it runs.
echo +cpuset > "$cg/cgroup.subtree_control"
mkdir -p "$cg/part"
echo 1-2 > "$cg/part/cpuset.cpus"
echo root > "$cg/part/cpuset.cpus.partition"
{
  echo "part partition: $(cat "$cg/part/cpuset.cpus.partition")"
  echo "part effective before: $(cat "$cg/part/cpuset.cpus.effective")"
} > "$out/partition.txt"
watch_part() {
  local v seen=" "
  while sleep 0.1; do
    v=$(cat "$cg/part/cpuset.cpus.effective")
    case "$seen" in *" $v "*) ;; *) seen="$seen$v "; echo "part effective during: $v" >> "$out/partition.txt" ;; esac
    for d in "$cg"/part/isobench-*/; do
      [ -r "$d/cpuset.cpus.partition" ] || continue
      v="tenant $(cat "$d/cpuset.cpus.partition") $(cat "$d/cpuset.cpus.effective")"
      case "$seen" in *" $v "*) ;; *) seen="$seen$v "; echo "$v" >> "$out/partition.txt" ;; esac
    done
  done
}
watch_part &
watcher=$!
step partition env ISOBENCH_CGROUP_PARENT="$cg/part" isobench stress cpu --platform cgroup \
  --limits cpuset=2,cpuset_partition=root --duration 2 --json
kill "$watcher" 2> /dev/null
wait "$watcher" 2> /dev/null
echo "part effective after: $(cat "$cg/part/cpuset.cpus.effective")" >> "$out/partition.txt"
cat "$out/partition.txt"

step left find "$cg" -mindepth 1 -name 'isobench-*'
echo "isobench-v2-plain: every step ran"
