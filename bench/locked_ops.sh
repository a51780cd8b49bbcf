#!/bin/sh
# locked_ops.sh — locked instructions, fences and futex calls per task, by
# function, counted exactly (not sampled) with uprobes: every lock-prefixed
# instruction, every xchg with a memory operand (implicitly locked) and
# every mfence of a statically linked benchmark program is counted by a
# probe on a neighbour that runs as often (locked_sites.py). Two
# runs of different sizes are counted and subtracted, so the chip's
# creation, warm-ups and teardown cancel out; what is left is the cost of
# the extra tasks, divided by their number.
#
#   sudo bench/locked_ops.sh BUILD/bench/bench_pto chain [-w 2] [-c prebuilt]
#
# Needs root (uprobes), perf and objdump. A probe hit traps into the
# kernel (microseconds), so the run is much slower than a plain one and
# its schedule is the slowed one: the counts are exact for that schedule,
# not for a fast run's (a chain's producer, for one, has mostly finished
# before its consumer is submitted, so no edge is linked; in a fast run
# the orchestrator is ahead and links most). Instructions inside libc
# (pthread, malloc) are not probed; futex calls, which are the waits and
# wakes that reach the kernel, are counted by their tracepoint in two
# more runs without probes (at full speed).
#
# LOCKED_OPS_PER: tasks per unit of -n, warm-ups included (bench_pto's
# warm-up is a run of the same -n: 2 for chain and indep, 132 for fanout's
# 66-task rounds; the prebuilt class runs each build 12 times, its capture
# and 11 launches: 24 and 1584).
set -eu
bin=$1
shift
workload=$1
shift
small=${LOCKED_OPS_SMALL:-20000}
per=${LOCKED_OPS_PER:-1}
large=${LOCKED_OPS_LARGE:-40000}
name=$(basename "$bin" | tr -c 'a-zA-Z0-9_\n' '_')
group="probe_$name"
tmp=${TMPDIR:-/tmp}/locked_ops.$$

if [ ! -d /sys/kernel/tracing/events ] && [ -d /sys/kernel/tracing ]; then
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
fi

# a probe site for every locked instruction, with the number it stands for
# (locked_sites.py: Linux does not probe a lock-prefixed instruction itself)
python3 "$(dirname "$0")/locked_sites.py" "$bin" >"$tmp.sites"
grep '^# unprobed' "$tmp.sites" >&2 || true
grep -v '^#' "$tmp.sites" | while read -r site weight; do
  echo "$site" >>"$tmp"
  echo "$group:${site%%=*} $weight" >>"$tmp.w"
done
trap 'perf probe -q -d "$group:*" >/dev/null 2>&1 || true; rm -f "$tmp" "$tmp.s" "$tmp.l" "$tmp.sites" "$tmp.w"' EXIT
perf probe -q -d "$group:*" >/dev/null 2>&1 || true
# perf probe takes a bounded number of events per call
xargs -n 64 sh -c 'args=""; for p in "$@"; do args="$args -a $p"; done
  perf probe -q -x "'"$bin"'" $args' sh <"$tmp"

counts() { # $1 = events, $2 = tasks, then the program's options: "event count" lines
  ev=$1 n=$2
  shift 2
  perf stat -x, -e "$ev" "$bin" "$workload" -n "$n" -r 1 "$@" 2>&1 >/dev/null |
    awk -F, '$1 ~ /^[0-9]+$/ { print $3, $1 }' | sort
}
counts "$group:*" "$small" "$@" >"$tmp.s"
counts "$group:*" "$large" "$@" >"$tmp.l"
perf probe -q -d "$group:*" >/dev/null 2>&1 || true
counts syscalls:sys_enter_futex "$small" "$@" >>"$tmp.s"
counts syscalls:sys_enter_futex "$large" "$@" >>"$tmp.l"
sort -o "$tmp.s" "$tmp.s"
sort -o "$tmp.l" "$tmp.l"
sort -o "$tmp.w" "$tmp.w"
join -a 2 -e 0 -o 0,1.2,2.2 "$tmp.s" "$tmp.l" | join -a 1 -e 1 -o 0,1.2,1.3,2.2 - "$tmp.w" |
  awk -v d=$((large - small)) -v per="$per" -v g="$group:" '
    { ev = $1; sub(g, "", ev); fn = ev; sub(/_[0-9]+$/, "", fn)
      if (ev ~ /futex/) fn = "futex syscalls (no probes)"
      n[fn] += ($3 - $2) * $4 / (d * per) }
    END { for (f in n) if (n[f] >= 0.005) { printf "%7.2f  %s\n", n[f], f
            if (f !~ /futex/) tot += n[f] }
          printf "%7.2f  %s\n", tot, "locked instructions and fences in all" }' | sort -rn
