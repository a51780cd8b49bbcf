#!/bin/sh
# ab.sh — the orchestrator's gather on and off (PTO_ORCH_GATHER), the same
# bench_pto, alternated with oneTBB in the same minutes: each cell is the
# median of bench's 5 repetitions; odd rounds run "off" first, even rounds
# "on" first. Prints CSV: round,workload,system,ns_per_task.
#   sh bench/results/orch_gather/ab.sh BUILD/bench [ROUNDS]
set -eu
B=$1 rounds=${2:-8}
export GLIBC_TUNABLES=glibc.malloc.hugetlb=1 TBB_MALLOC_USE_HUGE_PAGES=1
med() { grep RAW | awk -F, '{print $8}' | sort -n | awk '{a[NR]=$1} END{printf "%.1f", a[int((NR+1)/2)]}'; }
echo "round,workload,system,ns_per_task"
for r in $(seq 1 "$rounds"); do
  for w in indep fanout chain; do
    if [ $((r % 2)) = 1 ]; then order="off on"; else order="on off"; fi
    for s in $order; do
      v=1; [ "$s" = off ] && v=0
      echo "$r,$w,pto-gather-$s,$(PTO_ORCH_GATHER=$v "$B/bench_pto" "$w" -w 2 -r 5 2>&1 | med)"
    done
    echo "$r,$w,tbb,$("$B/bench_tbb" "$w" -w 2 -r 5 2>&1 | med)"
  done
done
