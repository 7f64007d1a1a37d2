# Sourced by the guest scripts of the cgroup v2 tests (v2_guest.sh, v2_plain.sh), which
# `scripts/v2-guest run` copies with it into /opt/isobench. `step NAME CMD...` runs one
# command and leaves its stdout, stderr and exit code in $out/NAME.out, .err and .rc,
# which come back to the host; the console shows the exit code and, on failure, the last
# lines of stderr.
step() {
  local name=$1
  shift
  echo "== $name: $*"
  "$@" > "$out/$name.out" 2> "$out/$name.err"
  local rc=$?
  echo "$rc" > "$out/$name.rc"
  echo "== $name: exit $rc"
  [ "$rc" = 0 ] || tail -n 5 "$out/$name.err"
}
