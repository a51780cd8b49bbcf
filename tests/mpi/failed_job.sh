# failed_job.sh — sourced by rank_fault.sh and coll_frozen.sh: the checks
# every job that must fail shares.
# failed_job_run MPIEXEC NP PROGRAM MODE LIMIT_S PATTERN... runs
# `MPIEXEC -np NP PROGRAM MODE` (killed LIMIT_S + 30 s on), prints its
# output, and checks that it fails (a non-zero exit status), ends within
# LIMIT_S seconds, prints every PATTERN (grep -E), crashes nowhere (no
# segmentation fault) and leaves no process of PROGRAM MODE behind. Sets
# out (the output's file, for the caller's own checks; it removes it),
# rc, ms, and fail=1 on any failed check (said on a FAILED line).
failed_job_run() {
  _mpiexec=$1 _np=$2 _prog=$3 _mode=$4 _limit=$5
  shift 5
  out=$(mktemp)
  _start=$(date +%s%N)
  timeout -k 5 $((_limit + 30)) "$_mpiexec" -np "$_np" --oversubscribe "$_prog" "$_mode" >"$out" 2>&1
  rc=$?
  ms=$((($(date +%s%N) - _start) / 1000000))
  cat "$out"
  fail=0
  if [ "$rc" -eq 0 ]; then
    echo "FAILED: the job exited 0, expected a failure"; fail=1
  fi
  if [ "$ms" -ge $(((_limit + 30) * 1000)) ]; then
    echo "FAILED: the job hung (ended by timeout after $((_limit + 30)) s)"; fail=1
  fi
  if [ "$ms" -gt $((_limit * 1000)) ]; then
    echo "FAILED: the job took $ms ms, expected at most $((_limit * 1000)) ms"; fail=1
  fi
  for _p in "$@"; do
    if ! grep -Eq "$_p" "$out"; then
      echo "FAILED: the output does not say /$_p/"; fail=1
    fi
  done
  if grep -Eq "Segmentation fault|signal 11|SIGSEGV" "$out"; then
    echo "FAILED: a process crashed (segmentation fault)"; fail=1
  fi
  sleep 0.5
  _left=$(pgrep -f -x "$_prog $_mode" || true)
  if [ -n "$_left" ]; then
    echo "FAILED: processes left behind: $_left"; fail=1
  fi
}
