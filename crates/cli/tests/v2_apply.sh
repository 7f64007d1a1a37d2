# The steps of crates/cli/tests/v2_apply.rs, run inside the cgroup v2 guest under systemd.
# The test wrote the lines `isobench_platform::apply` prints for one tenant's limits into
# /opt/isobench: systemd.lines (one `systemctl set-property UNIT ...`) and cgroupv2.lines
# (`echo VALUE > /sys/fs/cgroup/GROUP/FILE`), with the placeholders a user replaces: the
# unit, the group, and the disk (/dev/DEVICE, MAJ:MIN), here the disk of /var/tmp. Each
# step leaves its stdout, stderr and exit code in /opt/out/STEP.out, .err and .rc.
set -u
export NO_COLOR=1
out=/opt/out
in=/opt/isobench
files="cpu.max cpu.weight memory.high memory.low io.max io.weight"

. /opt/isobench/guest_steps.sh

# The whole disk of /var/tmp, as a run finds its workdir's.
src=$(readlink -f "$(findmnt -no SOURCE -T /var/tmp)")
part=$(basename "$src")
if [ -e "/sys/class/block/$part/partition" ]; then
  disk=$(basename "$(readlink -f "/sys/class/block/$part/..")")
else
  disk=$part
fi
devnum=$(cat "/sys/class/block/$disk/dev")
echo "disk: /dev/$disk ($devnum)"
echo "/dev/$disk $devnum" > "$out/disk.txt"

# Each v2 file of a cgroup, one line `FILE: VALUE` (a file's lines joined by spaces).
show_files() {
  for f in $files; do
    echo "$f: $(tr '\n' ' ' < "$1/$f" | sed 's/ *$//')"
  done
}

# systemd: a running transient service, the printed line for it, then what systemd and the
# kernel hold.
unit=isobench-apply-check.service
step unit systemd-run --unit="$unit" --property=Type=simple sleep 600
sed -e "s| UNIT | $unit |" -e "s|/dev/DEVICE|/dev/$disk|g" "$in/systemd.lines" > /var/tmp/systemd.sh
cat /var/tmp/systemd.sh
step systemd-set bash -e /var/tmp/systemd.sh
step systemd-show systemctl show "$unit" -p CPUQuotaPerSecUSec -p CPUWeight -p MemoryHigh \
  -p MemoryLow -p IOWeight -p IOWriteBandwidthMax
step systemd-files show_files "/sys/fs/cgroup/system.slice/$unit"
systemctl stop "$unit"

# Raw cgroup v2: a cgroup below the root, its controllers enabled as the recipe's note says.
grp=isobench-apply-raw
step raw-controllers sh -c 'echo "+cpu +memory +io +pids" > /sys/fs/cgroup/cgroup.subtree_control'
mkdir -p "/sys/fs/cgroup/$grp"
sed -e "s|/GROUP/|/$grp/|" -e "s|MAJ:MIN|$devnum|g" "$in/cgroupv2.lines" > /var/tmp/raw.sh
cat /var/tmp/raw.sh
step raw-set bash -e /var/tmp/raw.sh
step raw-files show_files "/sys/fs/cgroup/$grp"
rmdir "/sys/fs/cgroup/$grp"

echo "isobench-v2-apply: every step ran"
