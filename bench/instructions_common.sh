# instructions_common.sh — what orch_instructions.sh and core_instructions.sh
# share, sourced by both after they define run_all (BIN: one figure a
# workload, a line each, in the order of the names given here):
#
#   instructions_main NAMES "$@"
#
# NAMES: the workloads' names, one per line. With no program: the calling
# script's usage; without valgrind: says so. Prints one line per workload
# for one program, or the figures of two and the change from the first.
instructions_main() {
  names=$1
  shift
  [ $# -ge 1 ] || { sed -n '2,/^set/s/^# \{0,1\}//p' "$0"; exit 2; }
  command -v valgrind >/dev/null && command -v callgrind_annotate >/dev/null ||
    { echo "$(basename "$0"): needs valgrind (apt-get install valgrind)" >&2; exit 2; }
  tmp=${TMPDIR:-/tmp}/$(basename "$0" .sh).$$
  trap 'rm -f "$tmp".*' EXIT
  run_all "$1" >"$tmp.a"
  if [ $# -ge 2 ]; then
    run_all "$2" >"$tmp.b"
    echo "workload instructions_per_task($1) instructions_per_task($2) change"
    printf '%s\n' "$names" | paste - "$tmp.a" "$tmp.b" |
      awk '{ printf "%s %s %s %+.1f%%\n", $1, $2, $3, ($3 / $2 - 1) * 100 }'
  else
    echo "workload instructions_per_task($1)"
    printf '%s\n' "$names" | paste - "$tmp.a" | tr '\t' ' '
  fi
}
