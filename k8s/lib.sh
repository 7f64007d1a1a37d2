# Shared by scripts/k8s-up and scripts/k8s-down (sourced, not run): where the local cluster
# keeps its files, its addresses, and how it is torn down. See docs/k8s.md.
# shellcheck shell=bash disable=SC2034  # the variables are used by the scripts that source this

K8S_VERSION=v1.37.2
K8S_CACHE=${ISOBENCH_K8S_CACHE:-/var/cache/isobench-k8s}
K8S_STATE=${ISOBENCH_K8S_STATE:-/run/isobench-k8s}
# Disk-backed data: container layers, pod volumes and logs. Kept off /run so a tenant's
# disk workload writes to the disk and not to memory (/run is a tmpfs on most machines).
K8S_DATA=${ISOBENCH_K8S_DATA:-/var/lib/isobench-k8s}
K8S_BIN=$K8S_CACHE/bin/$K8S_VERSION
K8S_LOCK=/run/lock/isobench-k8s.lock
K8S_LAST_LOGS=$K8S_STATE.last-logs   # the components' logs, kept by k8s-down

# Host objects are named isok8s*, never isobench-*: isobench's own sweep of dead runs
# removes every cgroup and network namespace named isobench-* whose run it cannot parse.
NS=isok8s                   # network namespace that holds the whole cluster
NODE=isobench-k8s           # node name
VETH_HOST=isok8s0           # host end of the only link into the namespace
VETH_NS=isok8s1
BRIDGE=isok8s-br0           # pod bridge inside the namespace
CNI_NETWORK=isok8s          # CNI network name: libcni caches results as /var/lib/cni/results/NAME-ID-IF
NET_PREFIX=10.215.0.0/16    # everything below lies in here; checked against the host's routes
# (isobench itself gives tenant networks 10.213.X.0/24, see crates/platform/src/net.rs)
HOST_IP=10.215.0.1
NODE_IP=10.215.0.2          # the namespace's veth address: node IP and API server address
VETH_PLEN=30
POD_CIDR=10.215.1.0/24
POD_GW=10.215.1.1
SERVICE_CIDR=10.215.16.0/24
SERVICE_IP=10.215.16.1      # the `kubernetes` service; nothing routes it (no kube-proxy)
SYSTEM_CGROUP=isok8s-system # cgroup (v1) of the cluster's own daemons, pinned to CPU 0

# Started in this order, stopped in the reverse order.
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet)

CONTAINERD_SOCK=$K8S_STATE/containerd/containerd.sock
KUBECONFIG_ADMIN=$K8S_STATE/admin.kubeconfig
SANE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

log() { echo "k8s: $*" >&2; }
die() { echo "k8s: error: $*" >&2; exit 1; }
usage_error() { echo "k8s: error: $*" >&2; exit 2; }

# The start time (clock ticks after boot) of a live process, to tell it from a later
# process that reuses its pid. Nothing for a zombie: PID 1 on this machine reaps orphans
# only every second or two, and a zombie is as dead as a gone process.
proc_start() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  stat=${stat##*) }
  case "$stat" in Z* | X*) return 0 ;; esac
  echo "$stat" | cut -d' ' -f20
}

pidfile() { echo "$K8S_STATE/pids/$1.pid"; }

# Prints the pid of a component we started, if it still runs.
component_pid() {
  local file pid start
  file=$(pidfile "$1")
  [ -r "$file" ] || return 1
  read -r pid start < "$file" || return 1
  [ -n "$pid" ] && [ "$(proc_start "$pid")" = "$start" ] || return 1
  echo "$pid"
}

STOPPED_PIDS=()

# Stops components (by name) together: SIGTERM to all, up to 10 s, then SIGKILL.
stop_components() {
  local t0=$SECONDS c pid i
  local -a names=() pids=() starts=() left=()
  for c in "$@"; do
    pid=$(component_pid "$c") || continue
    names+=("$c") pids+=("$pid") starts+=("$(proc_start "$pid")")
    STOPPED_PIDS+=("$pid")
    kill -TERM "$pid" 2>/dev/null || true
  done
  [ "${#pids[@]}" -gt 0 ] || return 0
  for ((i = 0; i < 100; i++)); do
    left=()
    for c in "${!pids[@]}"; do
      [ "$(proc_start "${pids[c]}")" = "${starts[c]}" ] && left+=("$c")
    done
    [ "${#left[@]}" -gt 0 ] || break
    sleep 0.1
  done
  for c in "${left[@]}"; do
    log "${names[c]} (${pids[c]}) did not stop within 10s; killing it"
    kill -KILL "${pids[c]}" 2>/dev/null || true
  done
  for ((i = 0; i < 50 && ${#left[@]} > 0; i++)); do
    sleep 0.1
    for c in "${!left[@]}"; do
      [ "$(proc_start "${pids[left[c]]}")" = "${starts[left[c]]}" ] || unset 'left[c]'
    done
  done
  log "stopped ${names[*]} in $((SECONDS - t0))s"
}

# Mount points of cgroup hierarchies: v1 (cpu, memory, ..., name=systemd) and the hybrid
# cgroup2 one (/sys/fs/cgroup/unified, where the kubelet makes /kubepods too).
cgroup_roots() { awk '$3 == "cgroup" || $3 == "cgroup2" { print $2 }' /proc/mounts; }

# Pids in a cgroup subtree.
cgroup_tasks() {
  [ -d "$1" ] || return 0
  find "$1" -name cgroup.procs -exec cat {} + 2>/dev/null || true
}

# Whether a kubelet that is not ours runs on this machine (then /kubepods is not ours).
foreign_kubelet() {
  local ours p
  ours=$(component_pid kubelet || true)
  for p in $(pgrep -x kubelet || true); do
    [ "$p" = "$ours" ] || [ -z "$(proc_start "$p")" ] || return 0
  done
  return 1
}

# Containerd shims started by our containerd: they name its socket on their command line.
our_shims() {
  local d a
  local -a args
  for d in /proc/[0-9]*; do
    mapfile -d '' -t args < "$d/cmdline" 2>/dev/null || continue
    [ "${#args[@]}" -gt 0 ] || continue
    case "${args[0]}" in *containerd-shim*) ;; *) continue ;; esac
    for a in "${args[@]}"; do
      if [ "$a" = "$CONTAINERD_SOCK" ]; then
        echo "${d#/proc/}"
        break
      fi
    done
  done
}

# Mount points under a directory, deepest first.
mounts_under() {
  awk -v p="$1/" '{ gsub(/\\040/, " ", $2); if (index($2 "/", p) == 1) print $2 }' /proc/self/mounts | sort -r -u
}

unmount_under() {
  local dir=$1 m pass
  for pass in 1 2 3; do
    while IFS= read -r m; do
      [ -n "$m" ] || continue
      umount "$m" 2>/dev/null || { [ "$pass" = 3 ] && umount -l "$m" 2>/dev/null; } || true
    done < <(mounts_under "$dir")
    [ -z "$(mounts_under "$dir")" ] && return 0
  done
  [ -z "$(mounts_under "$dir")" ]
}

# Tears down everything k8s-up made, in an order that leaves nothing behind; safe to run
# when nothing is up, and again after a partial start.
cluster_down() {
  local c pid p root d n m
  local -a kill_list=()

  # 1. The kubelet first, so it restarts no containers.
  stop_components kubelet

  # 2. Every process in the pods' cgroups (pause processes and containers).
  if foreign_kubelet; then
    log "another kubelet runs on this machine: leaving /kubepods cgroups alone"
  else
    for root in $(cgroup_roots); do
      d=$root/kubepods
      [ -d "$d" ] || continue
      for n in 1 2 3 4 5 6 7 8 9 10; do
        mapfile -t kill_list < <(cgroup_tasks "$d")
        [ "${#kill_list[@]}" -gt 0 ] || break
        [ "$n" = 1 ] && log "killing ${#kill_list[@]} pod processes"
        kill -KILL "${kill_list[@]}" 2>/dev/null || true
        sleep 0.2
      done
    done
  fi

  # 3. Shims, then the rest of the components.
  for pid in $(our_shims); do
    kill -KILL "$pid" 2>/dev/null || true
  done
  # The API server's clients and containerd together, then the API server, then etcd.
  stop_components containerd kube-scheduler kube-controller-manager
  stop_components kube-apiserver
  stop_components etcd
  rm -rf "$K8S_STATE/pids"

  # 4. Mounts: pod volumes, container root filesystems, shm, the pods' network
  #    namespaces (containerd keeps them under its state directory), etcd's tmpfs.
  for d in "$K8S_DATA" "$K8S_STATE"; do
    [ -d "$d" ] || continue
    unmount_under "$d" || die "cannot unmount everything under $d: $(mounts_under "$d" | head -3 | tr '\n' ' ')"
  done

  # 5. The namespace, which takes the pod bridge and the veth pair with it.
  if [ -e "/run/netns/$NS" ]; then
    log "deleting network namespace $NS"
    ip netns delete "$NS"
  fi
  if ip link show "$VETH_HOST" >/dev/null 2>&1; then
    ip link delete "$VETH_HOST"
  fi

  # 6. Cgroups: the pods' (kubepods under every hierarchy) and the daemons'.
  for root in $(cgroup_roots); do
    for d in "$root/kubepods" "$root/$SYSTEM_CGROUP"; do
      [ -d "$d" ] || continue
      [ "$d" = "$root/kubepods" ] && foreign_kubelet && continue
      # Daemons still in our cgroup are ours (started by k8s-up); move any stragglers out.
      for p in $(cgroup_tasks "$d"); do echo "$p" > "$root/cgroup.procs" 2>/dev/null || true; done
      find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
      [ -d "$d" ] && log "warning: could not remove cgroup $d"
    done
  done

  # 7. Files: containerd's and the kubelet's state, certificates, logs; symlinks the
  #    kubelet made in /var/log/containers. The build cache stays.
  if [ -d /var/log/containers ]; then
    for m in /var/log/containers/*.log; do
      [ -L "$m" ] || continue
      case "$(readlink "$m")" in "$K8S_DATA"/*) rm -f "$m" ;; esac
    done
  fi
  if [ -d "$K8S_STATE/logs" ]; then
    rm -rf "$K8S_LAST_LOGS"
    mv "$K8S_STATE/logs" "$K8S_LAST_LOGS"
  fi
  for d in "$K8S_DATA" "$K8S_STATE"; do
    if [ -d "$d" ]; then rm -rf --one-file-system "$d"; fi
  done
  # The kubelet's device-plugin socket and checkpoint, in a fixed place whatever its
  # root directory.
  if ! foreign_kubelet && [ -d /var/lib/kubelet/device-plugins ]; then
    rm -f /var/lib/kubelet/device-plugins/kubelet.sock /var/lib/kubelet/device-plugins/kubelet_internal_checkpoint
    rmdir /var/lib/kubelet/device-plugins /var/lib/kubelet 2>/dev/null || true
  fi
  # libcni's result cache (fixed at /var/lib/cni): entries of our pods, which were killed
  # without a CNI DEL, are named after our network and the sandbox id.
  if [ -d /var/lib/cni/results ]; then
    for m in /var/lib/cni/results/"$CNI_NETWORK"-*; do
      [ -e "$m" ] || continue
      n=${m#/var/lib/cni/results/"$CNI_NETWORK"-}
      n=${n%-*}
      rm -f "$m" "/var/lib/cni/results/cni-loopback-$n-lo"
    done
    rmdir /var/lib/cni/results /var/lib/cni 2>/dev/null || true
  fi
  # Directories containerd's shims and the kubelet make in fixed places; only if empty
  # (another containerd or kubelet may use them).
  rmdir /run/containerd/s /run/containerd /var/log/containers 2>/dev/null || true
  # Until PID 1 has reaped them, stopped daemons linger as zombies; wait, so that `ps`
  # run right after k8s-down shows nothing.
  for ((n = 0; n < 50; n++)); do
    m=
    for pid in "${STOPPED_PIDS[@]}"; do
      if [ -e "/proc/$pid" ]; then m=1; fi
    done
    [ -n "$m" ] || break
    sleep 0.1
  done
  return 0
}
