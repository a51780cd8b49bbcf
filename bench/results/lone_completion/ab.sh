#!/bin/sh
# ab.sh — two builds of bench_pto (before and after a change) alternated
# with oneTBB in the same minutes, both classes: each cell is the median of
# bench's 5 repetitions; odd rounds run the build before first, even rounds
# the build after first. Prints CSV: round,class,workload,system,ns_per_task.
#   sh bench/results/lone_completion/ab.sh BEFORE/bench AFTER/bench [ROUNDS]
set -eu
A=$1 B=$2 rounds=${3:-6}
export GLIBC_TUNABLES=glibc.malloc.hugetlb=1 TBB_MALLOC_USE_HUGE_PAGES=1
med() { grep RAW | awk -F, '{print $8}' | sort -n | awk '{a[NR]=$1} END{printf "%.1f", a[int((NR+1)/2)]}'; }
echo "round,class,workload,system,ns_per_task"
for r in $(seq 1 "$rounds"); do
  for c in prebuilt dynamic; do
    for w in chain indep fanout; do
      if [ $((r % 2)) = 1 ]; then order="before after"; else order="after before"; fi
      for s in $order; do
        d=$A; [ "$s" = after ] && d=$B
        echo "$r,$c,$w,pto-$s,$("$d/bench_pto" "$w" -w 2 -r 5 -c "$c" 2>&1 | med)"
      done
      echo "$r,$c,$w,tbb,$("$B/bench_tbb" "$w" -w 2 -r 5 -c "$c" 2>&1 | med)"
    done
  done
done
