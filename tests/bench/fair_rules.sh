#!/usr/bin/env bash
# The benchmark suite's fairness rules, checked without running a benchmark
# (the peers need not be installed):
#  1. bench/run.sh and bench/commute/run.sh source the rule
#     (bench/alloc_rule.sh) and start every benchmark program through its
#     bench_cmd, which puts the allocator rule on its command line;
#  2. the rule: thp sets glibc's huge-page tunable (and oneTBB's) in the
#     program's environment; default removes them; thp on a glibc without
#     the tunable falls back to default and says so;
#  3. aggregate.awk keeps the dynamic and prebuilt classes apart (rows,
#     ratios to pto, summary sections) and reads files written before the
#     classes as dynamic.
#   fair_rules.sh REPOSITORY_ROOT
set -uo pipefail
root=$1
run_sh=$root/bench/run.sh
rule_sh=$root/bench/alloc_rule.sh
commute_sh=$root/bench/commute/run.sh
awk_file=$root/bench/aggregate.awk
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
bad() {
  echo "FAILED: $*"
  fails=$((fails + 1))
}

# ---- 1. every program starts through bench_cmd ----
# A line that runs a program names it by "$(bin_of ...)" (the [ -x ] test
# only looks at it).
direct=$(grep -n '"$(bin_of' "$run_sh" | grep -v 'bench_cmd "$(bin_of' | grep -v '\[ -x ')
[ -z "$direct" ] || bad "run.sh starts a program without the allocator rule (bench_cmd):
$direct"
grep -q '^bench_cmd() {.*"${ALLOC_ENV\[@\]}"' "$rule_sh" ||
  bad "alloc_rule.sh has no bench_cmd putting ALLOC_ENV on the command line"
for sh in "$run_sh" "$commute_sh"; do
  grep -q '^\. "\$[A-Z_]*/\(bench/\)\?alloc_rule.sh"' "$sh" ||
    bad "$(basename "$(dirname "$sh")")/$(basename "$sh") does not source alloc_rule.sh"
done
# the commute suite's programs: each through bench_cmd
direct=$(grep -nE '"\$B/(commute|dot)_' "$commute_sh" | grep -v 'bench_cmd "\$B/')
[ -z "$direct" ] || bad "commute/run.sh starts a program without the allocator rule (bench_cmd):
$direct"

# ---- 2. the rule ----
rule_fn=$(sed -n '/^alloc_rule() {/,/^}/p' "$rule_sh")
cmd_fn=$(grep '^bench_cmd() {' "$rule_sh")
if [ -z "$rule_fn" ] || [ -z "$cmd_fn" ]; then
  bad "alloc_rule.sh has no alloc_rule function"
else
  # Runs the rule ALLOC=$1 with PATH=$2 and prints the rule's token, its line
  # and what a program started through bench_cmd sees.
  rule() {
    (
      export PATH=$2
      ALLOC=$1
      eval "$rule_fn"
      eval "$cmd_fn"
      export GLIBC_TUNABLES=stale
      alloc_rule
      echo "token=$ALLOC"
      echo "line=$ALLOC_LINE"
      bench_cmd sh -c 'echo "env=${GLIBC_TUNABLES:-unset} ${TBB_MALLOC_USE_HUGE_PAGES:-unset}"'
    )
  }
  if getconf GNU_LIBC_VERSION >/dev/null 2>&1 &&
    [ -r /sys/kernel/mm/transparent_hugepage/enabled ] &&
    ! grep -q '\[never\]' /sys/kernel/mm/transparent_hugepage/enabled &&
    [ "$(printf '%s\n2.35\n' "$(getconf GNU_LIBC_VERSION | awk '{print $2}')" | sort -V | head -1)" = 2.35 ]; then
    out=$(rule thp "$PATH")
    grep -qx 'token=thp' <<<"$out" || bad "thp on this machine: token is not thp: $out"
    grep -qx 'env=glibc.malloc.hugetlb=1 1' <<<"$out" ||
      bad "thp: a program does not see GLIBC_TUNABLES=glibc.malloc.hugetlb=1 and TBB_MALLOC_USE_HUGE_PAGES=1: $out"
    grep -q '^line=thp: .*GLIBC_TUNABLES=glibc.malloc.hugetlb=1' <<<"$out" ||
      bad "thp: the printed rule does not name the tunable: $out"
  else
    echo "note: this machine cannot give thp (old glibc or THP off); only the fallback is checked"
  fi
  out=$(rule default "$PATH")
  grep -qx 'token=default' <<<"$out" || bad "default: token is not default: $out"
  grep -qx 'env=unset unset' <<<"$out" || bad "default: a program still sees the variables: $out"
  # A glibc without the tunable: thp falls back, and says so.
  mkdir -p "$tmp/oldglibc"
  printf '#!/bin/sh\necho "glibc 2.31"\n' >"$tmp/oldglibc/getconf"
  chmod +x "$tmp/oldglibc/getconf"
  out=$(rule thp "$tmp/oldglibc:$PATH")
  grep -qx 'token=default-fallback' <<<"$out" || bad "thp on glibc 2.31: token is not default-fallback: $out"
  grep -q '^line=FALLBACK, thp was asked for but glibc 2.31 has no glibc.malloc.hugetlb' <<<"$out" ||
    bad "thp on glibc 2.31: the printed rule does not say why it fell back: $out"
  grep -qx 'env=unset unset' <<<"$out" || bad "thp on glibc 2.31: a program sees the variables: $out"
fi

# ---- 3. the classes in the results ----
{
  echo "round,invocation,tag,system,workload,params,tasks,wall_ns,metric,value,class,alloc"
  for r in 1 2; do
    echo "$r,1$r,RAW,pto,chain,n=100,100,40000,ns_per_task,400,dynamic,thp"
    echo "$r,2$r,RAW,tbb,chain,n=100,100,50000,ns_per_task,500,dynamic,thp"
    echo "$r,3$r,RAW,omp-gcc,chain,n=100,100,80000,ns_per_task,800,dynamic,thp"
    echo "$r,4$r,RAW,tbb,chain,n=100,100,10000,ns_per_task,100,prebuilt,thp"
    echo "$r,5$r,RAW,omp-gcc,chain,n=100,100,70000,ns_per_task,700,prebuilt,thp"
  done
} >"$tmp/raw.csv"
echo "mode: quick" >"$tmp/machine.txt"
agg() { # RAW SYSTEMS -> results on stdout, summary in $tmp/summary.md
  awk -F, -v systems="$2" -v plotdir="$tmp/plot" -v grains="1" -v summary="$tmp/summary.md" \
    -v machine="$tmp/machine.txt" -v rule="thp: test" -f "$awk_file" "$1"
}
res=$(agg "$tmp/raw.csv" "pto omp-gcc tbb")
head -1 <<<"$res" | grep -qx 'system,workload,params,metric,median,min,max,ratio_to_pto,reps,class,alloc' ||
  bad "results.csv header has no class and alloc columns: $(head -1 <<<"$res")"
grep -qx 'tbb,chain,n=100,ns_per_task,500,500,500,1.25,2,dynamic,thp' <<<"$res" ||
  bad "tbb's dynamic row is not its own, with its ratio to pto's dynamic one: $res"
grep -qx 'tbb,chain,n=100,ns_per_task,100,100,100,,2,prebuilt,thp' <<<"$res" ||
  bad "tbb's prebuilt row is mixed with its dynamic one, or has a ratio with no pto prebuilt row: $res"
grep -q '^## Dynamic class' "$tmp/summary.md" && grep -q '^## Prebuilt class' "$tmp/summary.md" ||
  bad "summary.md has no section per class"
grep -q 'pto did not run in this class' "$tmp/summary.md" ||
  bad "summary.md does not say that pto has no prebuilt row in this run"
grep -q '^| W1_chain | 0.88 | 0.2 |$' "$tmp/summary.md" ||
  bad "summary.md has no prebuilt / dynamic row (tbb 100/500, omp-gcc 700/800): $(cat "$tmp/summary.md")"
# With pto in the prebuilt class: pto against the best dynamic peer (tbb,
# 500) and against tbb's prebuilt graph (100).
sed 's/^\([12]\),4\([12]\),RAW,tbb,\(.*\),prebuilt,thp$/&\n\1,6\2,RAW,pto,\3,prebuilt,thp/' "$tmp/raw.csv" |
  sed '/RAW,pto,.*prebuilt/s/,10000,ns_per_task,100,/,5000,ns_per_task,50,/' >"$tmp/raw_pto.csv"
res=$(agg "$tmp/raw_pto.csv" "pto omp-gcc tbb")
grep -qx 'tbb,chain,n=100,ns_per_task,100,100,100,2,2,prebuilt,thp' <<<"$res" ||
  bad "tbb's prebuilt ratio is not to pto's prebuilt row: $res"
grep -q '^| W1_chain | 50 (50-50) x1 | 700 (700-700) x14 | 100 (100-100) x2 | 0.10 | 0.50 |$' \
  "$tmp/summary.md" || bad "summary.md's prebuilt table lacks pto ÷ best dynamic peer (0.10) and ÷ tbb prebuilt (0.50): $(cat "$tmp/summary.md")"
# A raw.csv written before the classes (10 columns) is read as dynamic.
cut -d, -f1-10 "$tmp/raw.csv" | grep -v ',prebuilt' | grep -v '^[12],[45]' >"$tmp/raw_old.csv"
res=$(agg "$tmp/raw_old.csv" "pto omp-gcc tbb")
grep -qx 'tbb,chain,n=100,ns_per_task,500,500,500,1.25,2,dynamic,' <<<"$res" ||
  bad "a raw.csv without the class column is not read as dynamic: $res"

[ $fails -eq 0 ] && echo "fair_rules: all checks passed"
exit $((fails > 0))
