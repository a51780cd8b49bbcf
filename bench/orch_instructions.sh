#!/bin/sh
# orch_instructions.sh — instructions the orchestrator executes per task,
# counted by callgrind (valgrind), for W1 (chain), W2 (indep), W4 (fanout)
# and two Task Bench patterns (stencil_1d, tree): everything inside the
# benchmark's orchestration function (its pto_tensor_init and
# pto_tensor_slice calls, pto_submit and all below it), divided by the
# number of pto_submit calls it made. An instruction count does not depend
# on the host's speed or on the other CPU, so two libraries compare within
# a percent or two where timings on a shared machine swing by 2x (the
# count includes the orchestrator's waits for ring room, which follow the
# schedule: W2's moves by up to 3% between runs); it says nothing of cache
# misses, which a timing shows (docs/benchmarks.md, "Submission cost").
#
#   bench/orch_instructions.sh BUILD/bench/bench_pto [OTHER_BUILD/bench/bench_pto]
#
# Prints one line per workload; with a second program, its figure too and
# the change from the first to the second (a library before and after a
# change: the first is the before). Needs valgrind; a Release build
# (bench/run.sh's) will do, symbols are enough. Takes 10-20 s a program.
set -eu
. "$(dirname "$0")/instructions_common.sh"

# per_task BIN FN ARGS...: instructions inside FN per pto_submit it made
per_task() {
  bin=$1 fn=$2
  shift 2
  valgrind --tool=callgrind --callgrind-out-file="$tmp.out" --toggle-collect="$fn" \
    "$bin" "$@" >/dev/null 2>&1
  callgrind_annotate --auto=no --tree=calling "$tmp.out" 2>/dev/null | awk -v fn="$fn" '
    /PROGRAM TOTALS/ { gsub(",", "", $1); total = $1 }
    # the calls FN makes to pto_submit: "N ( x%)  >   .../orch.c:pto_submit (Kx) [...]"
    $0 ~ ":" fn " " { in_fn = ($0 ~ /\*/) }
    in_fn && /> .*:pto_submit \(/ {
      match($0, /\([0-9,]+x\)/)
      n = substr($0, RSTART + 1, RLENGTH - 3)
      gsub(",", "", n)
      calls += n
    }
    /^$/ { in_fn = 0 }
    END { if (calls > 0) printf "%.0f\n", total / calls; else print "?" }'
}

# workload, the orchestration function of bench_pto that submits it, its arguments
run_all() {
  bin=$1
  per_task "$bin" orch_chain chain -w 2 -r 2 -n 20000 -k 1000
  per_task "$bin" orch_indep indep -w 2 -r 2 -n 20000 -k 1000
  per_task "$bin" orch_fanout fanout -w 2 -r 2 -n 100 -k 1000
  per_task "$bin" orch_graph stencil_1d -w 2 -k 1000 -g 5 -s 0 -m 4000
  per_task "$bin" orch_graph tree -w 2 -k 1000 -g 5 -s 0 -m 4000
}

instructions_main 'W1_chain
W2_indep
W4_fanout
stencil_1d
tree' "$@"
