#!/bin/sh
# two_hosts.sh — a node on two "hosts" under mpirun: two network namespaces
# on this machine joined by a veth pair (10.231.0.1/24 and 10.231.0.2/24, a
# private test range), each with its own host name (a UTS namespace), so Open
# MPI sees two hosts and talks TCP between them (pml ob1, btl tcp,self; OOB
# and BTL on the veth only; one-sided: osc/ucx with UCX over TCP, the
# component that supports MPI_THREAD_MULTIPLE there). Ranks are not bound
# (--bind-to none): each "host" would bind its one rank to its core 0, the
# same CPU of this machine for both, so the two ranks took turns on one CPU
# while the other idled, which two hosts never do. One rank in each; the
# program (default: tests/mpi/test_node_two_ranks.c with "across": the ring
# shuffle, a node-level allreduce, host data and window reads, verified)
# prints what it verified or the named error that stopped it.
#
#   scripts/two_hosts.sh [BUILD_DIR] [PROGRAM [ARGS...]]
#
# PTO_TWO_HOSTS_WRAP, when set, is a command each rank's program runs
# under (a profiler: perf record, strace -c), e.g. a script that execs
# `perf record -o /tmp/rank_$OMPI_COMM_WORLD_RANK.perf "$@"`.
#
# Needs root (ip netns, unshare), iproute2 and Open MPI's mpirun (and gdb for
# the stacks of a job that hangs, where present). Cleans up
# the namespaces and the veth pair on exit, also when interrupted. Exit
# status: the job's (0 when everything was verified), 2 when the namespaces
# cannot be made here (the reason is printed).
set -u
build=${1:-build-plain}
[ $# -gt 0 ] && shift
if [ $# -gt 0 ]; then
  prog=$1
  shift
else # the default program, told that its ranks are on two hosts
  prog=$build/tests/test_node_two_ranks
  set -- across
fi

A=pto2h_a B=pto2h_b HA=pto-host-a HB=pto-host-b
IPA=10.231.0.1 IPB=10.231.0.2 NET=10.231.0.0/24
say() { echo "two_hosts: $*"; }

if [ "$(id -u)" != 0 ]; then say "needs root (ip netns, unshare)"; exit 2; fi
for t in ip unshare mpirun; do
  command -v $t >/dev/null 2>&1 || { say "needs $t"; exit 2; }
done
[ -x "$prog" ] || { say "no program $prog (build it first: cmake --build $build)"; exit 2; }
prog=$(cd "$(dirname "$prog")" && pwd)/$(basename "$prog")

tmp=$(mktemp -d)
# deleting a namespace deletes its end of the veth
del_namespaces() { ip netns del $A 2>/dev/null; ip netns del $B 2>/dev/null; }
cleanup() {
  del_namespaces
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
del_namespaces # leftovers of an interrupted earlier run

say "namespaces $A ($HA, $IPA) and $B ($HB, $IPB), veth pair"
if ! { ip netns add $A && ip netns add $B &&
  ip link add pto2h-va netns $A type veth peer name pto2h-vb netns $B &&
  ip -n $A addr add $IPA/24 dev pto2h-va && ip -n $B addr add $IPB/24 dev pto2h-vb &&
  ip -n $A link set pto2h-va up && ip -n $B link set pto2h-vb up &&
  ip -n $A link set lo up && ip -n $B link set lo up; }; then
  say "cannot create the namespaces or the veth pair here"
  exit 2
fi
# UCX takes only interfaces whose operstate is "up"; a new veth pair gets
# there a moment after "ip link set up" (the kernel's link watch)
for i in 1 2 3 4 5 6 7 8 9 10; do
  [ "$(ip netns exec $A cat /sys/class/net/pto2h-va/operstate)" = up ] &&
    [ "$(ip netns exec $B cat /sys/class/net/pto2h-vb/operstate)" = up ] && break
  sleep 0.5
done
if command -v ping >/dev/null 2>&1; then
  ip netns exec $A ping -c 1 -W 2 $IPB >/dev/null 2>&1 && say "veth: $IPA reaches $IPB" ||
    say "veth: ping $IPA -> $IPB failed (continuing)"
fi

# Both names resolve inside the namespaces (a private /etc/hosts, bound in a
# mount namespace of each rank's process tree only).
printf '127.0.0.1 localhost\n%s %s\n%s %s\n' $IPA $HA $IPB $HB >"$tmp/hosts"
printf '%s slots=1\n%s slots=1\n' $HA $HB >"$tmp/hostfile"
# Open MPI starts its daemon on "host B" through this agent instead of ssh:
# the command runs in namespace B, under B's host name.
cat >"$tmp/agent" <<AGENT
#!/bin/sh
host=\$1; shift
exec ip netns exec $B unshare --uts --mount sh -c 'hostname $HB && mount --bind $tmp/hosts /etc/hosts && exec sh -c "\$0"' "\$*"
AGENT
chmod +x "$tmp/agent"

# A job still running after STACKS_AFTER seconds (of the 120 it has;
# PTO_TWO_HOSTS_STACKS_AFTER) is stuck: every process of the two hosts
# (mpirun, its daemon, the ranks) is listed, and the stacks of mpirun's,
# the daemon's and the ranks' threads printed (gdb where there is one,
# else the kernel's side) before timeout ends the job, so that the hang
# says where it was.
STACKS_AFTER=${PTO_TWO_HOSTS_STACKS_AFTER:-80}
stacks() {
  real=$(readlink -f "$prog") # what /proc/PID/exe names
  for pid in $(ip netns pids $A) $(ip netns pids $B); do
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || continue
    say "stuck after $STACKS_AFTER s: process $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"
    case $exe in "$real" | */orterun | */orted | */prterun | */prted) ;; *) continue ;; esac
    if command -v gdb >/dev/null 2>&1; then
      timeout 10 gdb -p "$pid" -batch -nx -ex 'thread apply all bt' 2>&1 |
        grep -v '^\[New LWP\|^\[Thread debugging\|^Using host libthread_db'
    else
      for t in /proc/"$pid"/task/*; do
        echo "thread ${t##*/} ($(cat "$t/comm" 2>/dev/null)): $(cat "$t/wchan" 2>/dev/null)"
        cat "$t/stack" 2>/dev/null
      done
    fi
  done
}
watch_job() {
  i=0
  while [ $i -lt $STACKS_AFTER ]; do
    [ -e "$tmp/done" ] || [ ! -d "$tmp" ] && return
    sleep 1
    i=$((i + 1))
  done
  stacks
}
watch_job &
watcher=$!

say "mpirun -np 2 (one rank on $HA, one on $HB, TCP over the veth): $prog $*"
ip netns exec $A unshare --uts --mount sh -c '
  hostname '$HA' && mount --bind '"$tmp/hosts"' /etc/hosts && exec "$@"' sh \
  env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 \
  timeout -k 5 120 mpirun -np 2 --hostfile "$tmp/hostfile" --map-by node --bind-to none \
  --mca plm_rsh_agent "$tmp/agent" --mca pml ob1 --mca btl tcp,self \
  --mca oob_tcp_if_include $NET --mca btl_tcp_if_include $NET \
  --mca osc ucx -x UCX_TLS=tcp,self \
  -x OMPI_MCA_mpi_yield_when_idle ${PTO_TWO_HOSTS_WRAP:-} "$prog" "$@"
rc=$?
touch "$tmp/done"
wait $watcher
say "job exit status $rc"
exit $rc
