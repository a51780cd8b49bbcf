#!/bin/sh
# core_instructions.sh — instructions the cores execute per task, counted
# by callgrind (valgrind), for W1 (chain), W2 (indep) and W4 (fanout), each
# replayed (a captured graph's launches, `-c prebuilt`) and dynamic: every
# instruction of the threads that ran kernels (their kernels, the
# completions, hand-offs and passes they made, their waits), divided by the
# number of kernel calls. The orchestrator's side is orch_instructions.sh.
# An instruction count does not depend on the host's speed or on the other
# CPU (callgrind runs one thread at a time, so the schedule differs from a
# timed run's: a dynamic run's waits and hand-offs move the count by a few
# percent between runs; a replay's by less); it says nothing of cache
# misses, which a timing shows.
#
#   bench/core_instructions.sh BUILD/bench/bench_pto [OTHER_BUILD/bench/bench_pto]
#
# Prints one line per workload; with a second program, its figure too and
# the change from the first to the second (a library before and after a
# change: the first is the before). Needs valgrind; a Release build
# (bench/run.sh's) will do. Takes 1-2 minutes a program.
set -eu
. "$(dirname "$0")/instructions_common.sh"

# per_task BIN ARGS...: instructions of the kernel-running threads per
# kernel call (bench_pto's kernels are its k_* functions)
per_task() {
  bin=$1
  shift
  rm -f "$tmp".out*
  valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$tmp.out" \
    "$bin" "$@" >/dev/null 2>&1
  for f in "$tmp".out-*; do
    callgrind_annotate --auto=no --tree=calling "$f" 2>/dev/null | awk '
      /PROGRAM TOTALS/ { gsub(",", "", $1); total = $1 }
      # calls to a kernel: "N ( x%)  >   .../bench_pto.c:k_empty (Kx) [...]"
      /> .*:k_[a-z_]+ \(/ {
        match($0, /\([0-9,]+x\)/)
        n = substr($0, RSTART + 1, RLENGTH - 3)
        gsub(",", "", n)
        calls += n
      }
      END { print total + 0, calls + 0 }'
  done | awk '$2 > 0 { i += $1; k += $2 } END { if (k > 0) printf "%.0f\n", i / k; else print "?" }'
}

# workload and class; -k skips the kernel's calibration (its loop is not
# the runtime's)
run_all() {
  bin=$1
  for c in prebuilt dynamic; do
    for w in chain indep fanout; do
      per_task "$bin" "$w" -w 2 -r 1 -c "$c" -k 1000
    done
  done
}

instructions_main 'W1_chain_replay
W2_indep_replay
W4_fanout_replay
W1_chain_dynamic
W2_indep_dynamic
W4_fanout_dynamic' "$@"
