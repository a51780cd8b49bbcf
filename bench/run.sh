#!/usr/bin/env bash
# bench/run.sh — the benchmark suite in one command: installs the peers from
# Debian packages if missing, builds pto and every benchmark program, runs
# the workloads of both classes (dynamic, prebuilt) in A B B A order with
# repetitions, every system under the same allocator rule, writes
# bench/results/results.csv and summary.md, and draws the PNG plots.
#
#   bench/run.sh            quick mode (3-4 minutes on 2 quiet CPUs)
#   bench/run.sh --full     full mode (20-25 minutes on 2 quiet CPUs)
#   bench/run.sh --replot   redraw the plots from the results already there
#   bench/run.sh --help     all options
#
# docs/benchmarks.md says what each workload and figure means.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)
. "$ROOT/scripts/deps.sh" # cmake_configured
MODE=quick
WORKERS=""
ROUNDS=""
SYSTEMS_ALL="pto omp-gcc omp-clang starpu tbb"
SYSTEMS="$SYSTEMS_ALL"
INSTALL=1
BUILD_DIR="$ROOT/build-bench"
OUT_DIR="$BENCH_DIR/results"
ONLY=""
REPLOT=0
ALLOC=thp
CLASSES_ALL="dynamic prebuilt"
CLASSES="$CLASSES_ALL"
# The prebuilt class runs these workloads (the sweeps' programs support it
# too: `-c prebuilt` on a pattern).
PREBUILT_WORKLOADS="chain indep fanout"
PRE_EXECS=10

usage() {
  cat <<EOF
usage: bench/run.sh [options]
  --quick            small sizes, 2 rounds (default; 3-4 min on 2 quiet CPUs)
  --full             larger sizes, finer sweep, 3 rounds (20-25 min on 2 quiet CPUs)
  --workers N        worker CPUs for every system (default: CPUs available)
  --rounds N         A B B A rounds (each gives every system 2 repetitions)
  --systems "A B"    subset of: $SYSTEMS_ALL
  --only "W ..."     subset of workloads: chain indep fanout stencil_1d fft
                     nearest_r3 nearest_r5 tree all_to_all
  --classes "C ..."  subset of classes: $CLASSES_ALL (prebuilt: $PREBUILT_WORKLOADS)
  --alloc RULE       allocator rule for every system: thp (default) or default
                     (docs/benchmarks.md, "The allocator rule")
  --no-install       do not install missing packages, fail instead
  --build-dir DIR    build directory (default: build-bench in the repository)
  --out DIR          results directory (default: bench/results)
  --replot           run nothing: aggregate the results directory's raw.csv
                     again (or, without it, read its results.csv) and redraw
                     the plots
EOF
}

while [ $# -gt 0 ]; do
  case "$1" in
    --quick) MODE=quick ;;
    --full) MODE=full ;;
    --workers) WORKERS=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --systems) SYSTEMS=$2; shift ;;
    --only) ONLY=$2; shift ;;
    --classes) CLASSES=$2; shift ;;
    --alloc) ALLOC=$2; shift ;;
    --no-install) INSTALL=0 ;;
    --build-dir) BUILD_DIR=$2; shift ;;
    --out) OUT_DIR=$2; shift ;;
    --replot) REPLOT=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

case $ALLOC in
  thp | default) ;;
  *) echo "run.sh: --alloc $ALLOC: the rule is thp or default" >&2; exit 2 ;;
esac
for c in $CLASSES; do
  case $c in
    dynamic | prebuilt) ;;
    *) echo "run.sh: --classes: unknown class '$c' (dynamic, prebuilt)" >&2; exit 2 ;;
  esac
done

# In --replot the mode is the one the results were measured in.
if [ "$REPLOT" = 1 ] && [ -f "$OUT_DIR/machine.txt" ]; then
  m=$(awk -F'[:,] *' '/^mode:/ {print $2; exit}' "$OUT_DIR/machine.txt")
  case $m in quick | full) MODE=$m ;; esac
fi

T_START=$(date +%s)
say() { printf '[bench %s] %s\n' "$(elapsed)" "$*"; }
elapsed() { local s=$(( $(date +%s) - T_START )); printf '%d:%02d' $((s / 60)) $((s % 60)); }
mmss() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }
# "1 round", "2 rounds"
plural() { if [ "$1" -eq 1 ]; then printf '%s %s' "$1" "$2"; else printf '%s %ss' "$1" "$2"; fi; }
# Text written before the plurals were fixed ("1 clusters", "2 round(s)").
fix_plurals() {
  sed -E 's/(^|[^0-9])1 clusters/\11 cluster/g; s/(^|[^0-9])1 kernel cores/\11 kernel core/g;
          s/(^|[^0-9])1 ([a-z]+)\(s\)/\11 \2/g; s/([0-9]+) ([a-z]+)\(s\)/\1 \2s/g'
}

# ---------------------------------------------------------------- peers ----
# Each check names the Debian package that provides what it looks for.
missing_packages() {
  local miss=()
  command -v cmake >/dev/null || miss+=(cmake)
  command -v ninja >/dev/null || command -v make >/dev/null || miss+=(ninja-build)
  command -v gcc >/dev/null || miss+=(gcc)
  command -v g++ >/dev/null || miss+=(g++)
  command -v pkg-config >/dev/null || miss+=(pkg-config)
  command -v clang >/dev/null || miss+=(clang)
  command -v gnuplot >/dev/null || miss+=(gnuplot-nox)
  if command -v clang >/dev/null; then
    echo 'int main(void){return 0;}' | clang -fopenmp -x c - -o /dev/null 2>/dev/null ||
      miss+=(libomp-dev)
  else
    miss+=(libomp-dev)
  fi
  if command -v pkg-config >/dev/null; then
    pkg-config --exists starpu-1.3 || miss+=(libstarpu-dev)
  else
    miss+=(libstarpu-dev)
  fi
  [ -e /usr/include/oneapi/tbb/flow_graph.h ] || [ -e /usr/local/include/oneapi/tbb/flow_graph.h ] ||
    miss+=(libtbb-dev)
  echo "${miss[@]:-}"
}

setup_peers() {
  local miss
  miss=$(missing_packages)
  if [ -z "$miss" ]; then
    say "peers present (gcc/libgomp, clang/libomp, StarPU 1.3, oneTBB, gnuplot)"
    return
  fi
  if [ "$INSTALL" = 0 ]; then
    echo "run.sh: missing packages: $miss (rerun without --no-install, as root)" >&2
    exit 1
  fi
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null; then sudo="sudo -n"; else
      echo "run.sh: missing packages: $miss; run as root (or install them) and retry" >&2
      exit 1
    fi
  fi
  say "installing missing packages: $miss"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
  # shellcheck disable=SC2086
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $miss >/dev/null
  miss=$(missing_packages)
  if [ -n "$miss" ]; then
    echo "run.sh: still missing after install: $miss" >&2
    exit 1
  fi
}

# ---------------------------------------------------------------- build ----
build() {
  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  say "configuring $BUILD_DIR (Release, PTO_BUILD_BENCH=ON)"
  # (scripts/deps.sh: a failed configure leaves a cache, no build files)
  if ! cmake_configured "$BUILD_DIR"; then
    rm -f "$BUILD_DIR/CMakeCache.txt"
    cmake -S "$ROOT" -B "$BUILD_DIR" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DPTO_BUILD_BENCH=ON -DPTO_BUILD_TESTS=OFF >"$OUT_DIR/build.log" 2>&1 ||
      { tail -30 "$OUT_DIR/build.log" >&2; exit 1; }
  fi
  say "building benchmark programs (log: $OUT_DIR/build.log)"
  local jobs
  jobs=$(nproc 2>/dev/null || echo 2)
  # One target at a time, so that a system that fails to build is reported
  # and skipped instead of stopping the whole suite.
  local t
  for t in bench_omp bench_starpu bench_tbb bench_pto; do
    if ! cmake --build "$BUILD_DIR" -j "$jobs" --target "$t" >>"$OUT_DIR/build.log" 2>&1; then
      say "WARNING: $t failed to build (see $OUT_DIR/build.log); its system is skipped"
    fi
  done
}

bin_of() {
  case "$1" in
    pto) echo "$BUILD_DIR/bench/bench_pto" ;;
    omp-gcc) echo "$BUILD_DIR/bench/bench_omp_gcc" ;;
    omp-clang) echo "$BUILD_DIR/bench/bench_omp_clang" ;;
    starpu) echo "$BUILD_DIR/bench/bench_starpu" ;;
    tbb) echo "$BUILD_DIR/bench/bench_tbb" ;;
  esac
}

# ------------------------------------------------------- allocator rule ----
# alloc_rule and bench_cmd (bench/alloc_rule.sh, shared with
# bench/commute/run.sh): every program runs under one allocator rule
# (thp, the default: glibc malloc on huge pages, GLIBC_TUNABLES=
# glibc.malloc.hugetlb=1, for every system).
. "$BENCH_DIR/alloc_rule.sh"

# ------------------------------------------------------------- the plan ----
# Sizes per mode. Sweep points have ~TARGET_US of ideal parallel work,
# capped at MAX_TASKS tasks (the finest grains then run shorter).
if [ "$MODE" = quick ]; then
  N_TASKS=20000; N_ROUNDS_FAN=300; TARGET_US=30000; MAX_TASKS=4000
  GRAINS="1000,500,200,100,50,20,10,5,2,1,0.5,0.2"
  : "${ROUNDS:=2}"
else
  N_TASKS=100000; N_ROUNDS_FAN=1500; TARGET_US=60000; MAX_TASKS=10000
  GRAINS="1000,500,300,200,100,70,50,30,20,15,10,7,5,3,2,1.5,1,0.7,0.5,0.3,0.2"
  : "${ROUNDS:=3}"
fi
if [ -z "$WORKERS" ]; then WORKERS=$(nproc 2>/dev/null || echo 2); fi
WORKLOADS_ALL="chain indep fanout stencil_1d fft nearest_r3 nearest_r5 tree all_to_all"
WORKLOADS=${ONLY:-$WORKLOADS_ALL}

args_of() {
  local w=$1
  case "$w" in
    chain|indep) echo "$w -n $N_TASKS" ;;
    fanout) echo "fanout -n $N_ROUNDS_FAN" ;;
    nearest_r*) echo "nearest -R ${w#nearest_r} -g $GRAINS -t $TARGET_US -m $MAX_TASKS -k $IPUS" ;;
    *) echo "$w -g $GRAINS -t $TARGET_US -m $MAX_TASKS -k $IPUS" ;;
  esac
}

# ---------------------------------------------------- results and plots ----
# raw.csv -> results.csv, plot data, summary.md
aggregate_raw() {
  say "aggregating $OUT_DIR/raw.csv"
  local rule
  rule=$(sed -n 's/^allocator rule[^:]*: //p' "$OUT_DIR/machine.txt" 2>/dev/null | head -1)
  awk -F, -v systems="${RUN_SYSTEMS[*]}" -v plotdir="$OUT_DIR/plotdata" -v grains="$GRAINS" \
    -v summary="$OUT_DIR/summary.md" -v machine="$OUT_DIR/machine.txt" -v rule="$rule" \
    -f "$BENCH_DIR/aggregate.awk" "$OUT_DIR/raw.csv" >"$OUT_DIR/results.csv.tmp"
  mv "$OUT_DIR/results.csv.tmp" "$OUT_DIR/results.csv"
}

draw_plots() {
  say "drawing plots"
  local pto_conf sub1 sub2 patterns w
  pto_conf=$(awk -F': ' '/^config pto: / {print $2; exit}' "$OUT_DIR/machine.txt" | tr -d "'" |
    fix_plurals)
  sub1="$WORKERS worker CPUs per system, $MODE mode, $(awk -F': ' '/^cpu:/ {print $2}' \
    "$OUT_DIR/machine.txt" | tr -d "'" | fix_plurals)"
  sub2="${pto_conf:+pto: $pto_conf}"
  patterns=$(for w in $WORKLOADS; do case $w in chain | indep | fanout) ;; *) printf '%s ' "$w" ;; esac; done)
  if ! gnuplot -e "dir='$OUT_DIR'; sub1='$sub1'; sub2='$sub2'; systems='${RUN_SYSTEMS[*]}'; patterns='$patterns'" \
    "$BENCH_DIR/plot.gp" 2>>"$OUT_DIR/run.log"; then
    say "WARNING: gnuplot failed (see $OUT_DIR/run.log)"
    return 1
  fi
}

# --replot: the systems and workloads are those of the results; raw.csv is
# aggregated again when it is there, else the plot data come from
# results.csv (summary.md is then left as it is).
replot() {
  local src=results.csv w s
  [ -f "$OUT_DIR/raw.csv" ] && src=raw.csv
  [ -f "$OUT_DIR/$src" ] || { echo "run.sh: nothing to replot in $OUT_DIR (no raw.csv, no results.csv)" >&2; exit 1; }
  command -v gnuplot >/dev/null || { echo "run.sh: --replot needs gnuplot" >&2; exit 1; }
  RUN_SYSTEMS=()
  for s in $SYSTEMS; do
    if awk -F, -v s="$s" -v c="$([ $src = raw.csv ] && echo 4 || echo 1)" '$c == s {f = 1; exit} END {exit !f}' \
      "$OUT_DIR/$src"; then RUN_SYSTEMS+=("$s"); fi
  done
  WORKLOADS=""
  for w in $WORKLOADS_ALL; do
    if awk -F, -v w="$w" -v c="$([ $src = raw.csv ] && echo 5 || echo 2)" '$c == w {f = 1; exit} END {exit !f}' \
      "$OUT_DIR/$src"; then WORKLOADS="$WORKLOADS $w"; fi
  done
  WORKERS=$(awk -F'[:,] *' '/^mode:/ {for (i = 1; i <= NF; i++) if ($i ~ /worker CPUs/) {print $i + 0; exit}}' \
    "$OUT_DIR/machine.txt" 2>/dev/null)
  : "${WORKERS:=?}"
  say "replotting $OUT_DIR from $src ($MODE mode; systems: ${RUN_SYSTEMS[*]}; grains: $GRAINS)"
  if [ $src = raw.csv ]; then
    aggregate_raw
  else
    awk -F, -v systems="${RUN_SYSTEMS[*]}" -v plotdir="$OUT_DIR/plotdata" -v grains="$GRAINS" \
      -f "$BENCH_DIR/aggregate.awk" "$OUT_DIR/results.csv" >/dev/null
  fi
  draw_plots
  say "done: $(cd "$OUT_DIR" && ls *.png 2>/dev/null | tr '\n' ' ')"
}

# ------------------------------------------------------------------ main ---
if [ "$REPLOT" = 1 ]; then
  replot
  exit 0
fi
mkdir -p "$OUT_DIR"
setup_peers
build

RUN_SYSTEMS=()
for s in $SYSTEMS; do
  if [ -x "$(bin_of "$s")" ]; then RUN_SYSTEMS+=("$s"); else say "WARNING: no program for $s, skipped"; fi
done
[ ${#RUN_SYSTEMS[@]} -gt 0 ] || { echo "run.sh: nothing to run" >&2; exit 1; }

# StarPU keeps its calibration files under STARPU_HOME: keep them in the
# build directory, not in the user's home.
export STARPU_HOME="$BUILD_DIR/starpu-home"
export STARPU_SILENT=1
mkdir -p "$STARPU_HOME"

alloc_rule
case $ALLOC_LINE in
  FALLBACK*) say "WARNING: allocator rule $ALLOC_LINE" ;;
  *) say "allocator rule for every system: $ALLOC_LINE" ;;
esac

# The classes each system runs (its program says: `classes`).
declare -A HAS_CLASS
for s in "${RUN_SYSTEMS[@]}"; do
  for c in $(bench_cmd "$(bin_of "$s")" classes | awk -F, '/^CLASSES,/ {print $3}'); do
    HAS_CLASS[$s/$c]=1
  done
  [ -n "${HAS_CLASS[$s/dynamic]:-}" ] || say "WARNING: $(bin_of "$s") names no class; $s is skipped"
done

say "calibrating the compute-bound kernel"
IPUS=$(bench_cmd "$(bin_of "${RUN_SYSTEMS[0]}")" calibrate | awk -F, '/^CAL,/ {print $2}')
say "kernel: $IPUS iterations per microsecond (one core, best of 9)"

RAW="$OUT_DIR/raw.csv"
LOG="$OUT_DIR/run.log"
echo "round,invocation,tag,system,workload,params,tasks,wall_ns,metric,value,class,alloc" >"$RAW"
: >"$LOG"

# A B B A: each round runs every workload with the systems in order, then in
# reverse, so drift over time (thermal, other load) hits all systems alike.
ORDER=("${RUN_SYSTEMS[@]}")
for ((i = ${#RUN_SYSTEMS[@]} - 1; i >= 0; i--)); do ORDER+=("${RUN_SYSTEMS[$i]}"); done
# Even rounds take the workloads in reverse order too, so that a burst of
# outside load does not always land on the same workloads.
WORKLOADS_REV=$(echo $WORKLOADS | tr ' ' '\n' | tac | tr '\n' ' ')
# The classes of a workload: dynamic for all, prebuilt for PREBUILT_WORKLOADS.
classes_of() {
  local c
  for c in $CLASSES; do
    case "$c" in
      dynamic) echo dynamic ;;
      prebuilt) case " $PREBUILT_WORKLOADS " in *" $1 "*) echo prebuilt ;; esac ;;
    esac
  done
}
PLAN_R=(); PLAN_W=(); PLAN_C=(); PLAN_S=()
for ((r = 1; r <= ROUNDS; r++)); do
  if [ $((r % 2)) = 1 ]; then wl_order=$WORKLOADS; else wl_order=$WORKLOADS_REV; fi
  for w in $wl_order; do
    for c in $(classes_of "$w"); do
      for s in "${ORDER[@]}"; do
        [ -n "${HAS_CLASS[$s/$c]:-}" ] || continue
        PLAN_R+=("$r"); PLAN_W+=("$w"); PLAN_C+=("$c"); PLAN_S+=("$s")
      done
    done
  done
done
TOTAL=${#PLAN_R[@]}
declare -A LAST_MS
FAILS=0
: >"$OUT_DIR/conf.tmp"
: >"$OUT_DIR/mem.txt"
say "$MODE mode: $(plural "$WORKERS" worker), $(plural "$ROUNDS" round) of A B B A over $(plural ${#RUN_SYSTEMS[@]} system): $TOTAL runs"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
T_RUN0=$(date +%s%N)
for ((k = 0; k < TOTAL; k++)); do
  r=${PLAN_R[$k]}; w=${PLAN_W[$k]}; c=${PLAN_C[$k]}; s=${PLAN_S[$k]}
  # Time left: each remaining run is assumed to take what the same
  # (workload, class, system) took last time, else the mean run so far.
  eta="?"
  if [ $k -gt 0 ]; then
    mean=$(( ($(date +%s%N) - T_RUN0) / 1000000 / k ))
    left=0
    for ((j = k; j < TOTAL; j++)); do
      left=$(( left + ${LAST_MS[${PLAN_W[$j]}/${PLAN_C[$j]}/${PLAN_S[$j]}]:-$mean} ))
    done
    eta=$(mmss $(( left / 1000 )))
  fi
  printf '[bench %s] [%3d/%d] round %d/%d  %-11s %-8s %-9s  time left ~%s\n' "$(elapsed)" \
    $((k + 1)) "$TOTAL" "$r" "$ROUNDS" "$w" "$c" "$s" "$eta"
  t0=$(date +%s%N)
  rc=0
  # shellcheck disable=SC2046
  out=$(bench_cmd "$(bin_of "$s")" $(args_of "$w") -w "$WORKERS" -c "$c" \
    -e "$PRE_EXECS" 2>>"$LOG") || rc=$?
  printf '%s\n' "$out" | awk -F, -v r="$r" -v k=$((k + 1)) -v a="$ALLOC" \
    '/^RAW,/ {print r "," k "," $0 "," a}' >>"$RAW"
  printf '%s\n' "$out" | grep '^CONF,' >>"$OUT_DIR/conf.tmp" || true
  printf '%s\n' "$out" | grep '^MEM,' >>"$OUT_DIR/mem.txt" || true
  if [ $rc -ne 0 ]; then
    FAILS=$((FAILS + 1))
    say "WARNING: $s $w ($c) failed with status $rc (see $LOG)"
    echo "FAILED: $s $w $c round $r status $rc" >>"$LOG"
  fi
  LAST_MS[$w/$c/$s]=$(( ($(date +%s%N) - t0) / 1000000 ))
done
sort -u "$OUT_DIR/conf.tmp" >"$OUT_DIR/conf.txt"
rm -f "$OUT_DIR/conf.tmp"

# ------------------------------------------------------------- results ----
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "mode: $MODE, $(plural "$ROUNDS" round) A B B A, $WORKERS worker CPUs per system"
  echo "allocator rule (every system's command line): $ALLOC_LINE"
  echo "classes: $(for c in $CLASSES; do case $c in
    dynamic) printf 'dynamic (every workload; clock: build + execution, no teardown) ' ;;
    prebuilt) printf 'prebuilt (%s; built once, clock: one execution, mean of %d) ' \
      "$PREBUILT_WORKLOADS" "$PRE_EXECS" ;; esac; done)"
  echo "grains (us, coarse to fine; a sweep stops early once below 50%): $GRAINS"
  echo "cpu: $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null), $(nproc) CPUs online"
  echo "kernel: $(uname -sr)"
  echo "gcc: $(gcc -dumpfullversion 2>/dev/null), clang: $(clang -dumpversion 2>/dev/null)," \
    "StarPU: $(pkg-config --modversion starpu-1.3 2>/dev/null)"
  echo "calibrated kernel: $IPUS iterations/us"
  # Other load on the machine lowers every system's efficiency: say how much there was.
  echo "load average (1/5/15 min) before the runs: $LOAD0, after: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
  sed 's/^CONF,\([^,]*\),/config \1: /' "$OUT_DIR/conf.txt"
  # Whether the rule took: each program's huge pages and first touches.
  awk -F, '{ k = $2 " " $3; if (!(k in lo) || $6 + 0 < lo[k]) lo[k] = $6 + 0
               if ($6 + 0 > hi[k]) hi[k] = $6 + 0; if ($5 + 0 > h[k]) h[k] = $5 + 0 }
    END { for (k in lo) printf "memory %s: minor page faults per program run %d-%d, AnonHugePages at exit up to %d KiB\n", k, lo[k], hi[k], h[k] }' \
    "$OUT_DIR/mem.txt" | sort
} >"$OUT_DIR/machine.txt"
aggregate_raw
draw_plots || true

say "done: $OUT_DIR/results.csv, $OUT_DIR/summary.md, $(cd "$OUT_DIR" && ls *.png 2>/dev/null | tr '\n' ' ')"
cat "$OUT_DIR/summary.md"
if [ $FAILS -gt 0 ]; then
  say "$(plural "$FAILS" run) failed; see $LOG"
  exit 1
fi
