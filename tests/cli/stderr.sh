#!/usr/bin/env bash
# The `pto` command line reports every failure on stderr, naming what was
# wrong, with a non-zero exit status, and keeps stdout for results
# (issue 8, item 16); so does scripts/test.sh for a bad mode.
#   stderr.sh PTO_BINARY
set -uo pipefail
pto=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

# expect STATUS STDERR_PATTERN -- ARGS...: exit status STATUS, stderr
# matching the pattern (grep -E), and no FAILED/error line on stdout.
expect() {
  local want=$1 pat=$2
  shift 3
  "$pto" "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  local why=""
  [ "$got" -eq "$want" ] || why="exit status $got, expected $want"
  grep -Eq -- "$pat" "$tmp/err" || why="${why:+$why; }stderr does not match '$pat'"
  if grep -Eiq 'FAILED|error|unknown|needs|cannot|no scene' "$tmp/out"; then
    why="${why:+$why; }stdout holds an error: $(grep -Ei 'FAILED|error|unknown|needs|cannot|no scene' "$tmp/out" | head -1)"
  fi
  if [ -n "$why" ]; then
    echo "FAILED: pto $*: $why"
    sed 's/^/  stdout: /' "$tmp/out" | head -5
    sed 's/^/  stderr: /' "$tmp/err" | head -5
    fails=$((fails + 1))
  fi
}

# expect_exact STATUS STDERR -- ARGS...: exit status STATUS, stderr exactly
# STDERR (its lines), stdout empty.
expect_exact() {
  local want=$1 text=$2
  shift 3
  "$pto" "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  if [ "$got" -ne "$want" ] || [ -s "$tmp/out" ] || [ "$(cat "$tmp/err")" != "$text" ]; then
    echo "FAILED: pto $*: exit $got, expected $want, stdout empty and stderr exactly:"
    sed 's/^/  want: /' <<<"$text"
    sed 's/^/  stdout: /' "$tmp/out" | head -5
    sed 's/^/  stderr: /' "$tmp/err" | head -5
    fails=$((fails + 1))
  fi
}

# a trace path that cannot be written is reported before the run: a million
# rounds would take hours (the timeout is a safety net only)
timeout 60 "$pto" run vector_chain --rounds 1000000 --trace /nonexistent-pto-dir/t.json \
  >"$tmp/out" 2>"$tmp/err"
got=$?
if [ $got -ne 1 ] || [ -s "$tmp/out" ] ||
  ! grep -q -- '--trace /nonexistent-pto-dir/t.json: cannot write it: No such file or directory' "$tmp/err"; then
  echo "FAILED: pto run --trace to a missing directory: exit $got (expected 1, before the run)"
  sed 's/^/  stdout: /' "$tmp/out" | head -5
  sed 's/^/  stderr: /' "$tmp/err" | head -5
  fails=$((fails + 1))
fi
"$pto" run vector_chain --trace "$tmp/t.json" >/dev/null 2>&1
[ -s "$tmp/t.json" ] || { echo "FAILED: pto run --trace FILE wrote no trace"; fails=$((fails + 1)); }
expect 1 '/dev/full: write failed: No space left on device' -- run vector_chain --trace /dev/full
# a failed run prints no statistics block
if grep -q 'tasks [0-9]*  blocks' "$tmp/out"; then
  echo "FAILED: a failed run printed statistics on stdout:"
  sed 's/^/  stdout: /' "$tmp/out" | head -5
  fails=$((fails + 1))
fi
expect 2 "no scene or example named 'nosuch'" -- run nosuch
expect 2 "--clusters needs an integer in 1\.\.[0-9]+, got 'x'" -- run vector_chain --clusters x
expect 2 "--rounds needs a positive integer" -- run vector_chain --rounds
expect 2 "unknown option '--bogus'" -- run vector_chain --bogus
# a flag given a value: named as such (before: "unknown option 'check'")
expect 2 "--check takes no value \(got '--check=yes'\)" -- run vector_chain --check=yes
# a directory where a file goes: named (before: "out of memory reading", "truncated")
mkdir -p "$tmp/adir.json"
expect 1 "cannot read $tmp/adir.json: Is a directory" -- trace "$tmp/adir.json"
# --replay and --record are checked before the run, like --trace: one line
# naming the option, the path and the errno, nothing on stdout (before:
# the chip ran, then PTO_EREPLAY's hint, the cause on a third line; and
# "schedule record DIR: 4096 bytes" on stdout for a directory to record to)
expect_exact 1 "pto run: --replay /nonexistent-pto-dir/r.rec: cannot read it: No such file or directory" \
  -- run vector_chain --replay /nonexistent-pto-dir/r.rec
expect_exact 1 "pto run: --replay $tmp/adir.json: cannot read it: Is a directory" \
  -- run vector_chain --replay "$tmp/adir.json"
expect_exact 1 "pto run: --replay /dev/null: cannot read it: not a regular file" -- run vector_chain --replay /dev/null
expect_exact 1 "pto run: --record $tmp/adir.json: cannot write it: Is a directory" \
  -- run vector_chain --record "$tmp/adir.json"
expect_exact 1 "pto run: --record /nonexistent-pto-dir/r.rec: cannot write it: No such file or directory" \
  -- run vector_chain --schedule-seed 1 --record /nonexistent-pto-dir/r.rec
expect_exact 1 "pto run: --record /nonexistent-pto-dir/r.rec: cannot write it: No such file or directory" \
  -- run vector_chain --fuzz-schedules 2 --record /nonexistent-pto-dir/r.rec
# recording over the record being replayed (by another spelling of its
# path): refused before the run, the record kept (before: a departing
# replay, here on another chip shape, wrote its own record over it)
"$pto" run vector_chain --clusters 2 --schedule-seed 3 --record "$tmp/v.rec" >/dev/null 2>&1
cp "$tmp/v.rec" "$tmp/v.kept"
expect 2 "pto run: --record $tmp/\\./v.rec and --replay $tmp/v.rec are the same file: the record would overwrite the one being replayed" \
  -- run vector_chain --clusters 3 --replay "$tmp/v.rec" --record "$tmp/./v.rec"
if ! cmp -s "$tmp/v.rec" "$tmp/v.kept"; then
  echo "FAILED: pto run --replay X --record X changed the record X"
  fails=$((fails + 1))
fi
# a run mode no chip accepts, from the options and the environment
# together, is a usage error before anything runs (before: each run
# failed with PTO_EINVAL, or was ignored, and --fuzz-schedules listed
# every seed as failing: "3 seeds, 3 failed (the first: seed 1; pto run
# ... --schedule-seed 1 reproduces it)")
refused_mode() { # STDERR_PATTERN -- ARGS...: exit 2, nothing on stdout
  expect 2 "$@"
  if [ -s "$tmp/out" ]; then
    echo "FAILED: pto ${*:3}: a refused run mode wrote to stdout: $(head -1 "$tmp/out")"
    fails=$((fails + 1))
  fi
}
refused_mode "pto run: --check and --schedule-seed do not go together" \
  -- run race_undeclared --check --schedule-seed 2
refused_mode "pto run: --check and --replay do not go together" \
  -- run race_undeclared --replay "$tmp/v.rec" --check
PTO_REPLAY=$tmp/v.rec refused_mode \
  "pto run: --fuzz-schedules with the environment: schedule_seed = 1 \\(PTO_SCHEDULE_SEED\\) with replay_path '$tmp/v.rec' \\(PTO_REPLAY\\)" \
  -- run race_undeclared --fuzz-schedules 3
PTO_SCHEDULE_SEED=5 refused_mode "pto run: --replay with the environment: schedule_seed = 5" \
  -- run race_undeclared --replay "$tmp/v.rec"
PTO_CHECK=contracts refused_mode "pto run: --fuzz-schedules with the environment: check = 1 with a controlled schedule" \
  -- run race_undeclared --fuzz-schedules 3
PTO_SCHEDULE_SEED=5 PTO_REPLAY=$tmp/v.rec refused_mode "^pto: schedule_seed = 5 \\(PTO_SCHEDULE_SEED\\) with replay_path" \
  -- run race_undeclared
expect 2 "unknown command 'bogus'" -- bogus
expect 2 'which trace file' -- trace
expect 1 '/nonexistent-pto-dir/t.json: No such file or directory' -- trace /nonexistent-pto-dir/t.json
echo '{"traceEvents":[{"ph":"X","name":"k","pid":1,"tid":1,"ts":0,"dur":1}]}' >"$tmp/bad.json"
expect 1 'schema: FAILED' -- trace --check "$tmp/bad.json"
expect 1 "/dev/full: write failed: No space left on device" -- trace --merge /dev/full "$tmp/bad.json"
expect 1 "input $tmp/none.json: cannot open" -- trace --merge "$tmp/o.json" "$tmp/none.json"
# a merge whose write fails (past the file size limit, RLIMIT_FSIZE: fails
# as root too) leaves the file it would replace as it was, and no
# temporary file beside it (before: the file was truncated, then cut at
# the limit)
mkdir "$tmp/m"
echo 'the old merged trace' >"$tmp/m/merged.json"
(ulimit -f 1 && trap '' XFSZ && exec "$pto" trace --merge "$tmp/m/merged.json" "$tmp/t.json") \
  >"$tmp/out" 2>"$tmp/err"
got=$?
if [ $got -ne 1 ] || ! grep -q "pto trace: merging into $tmp/m/merged.json failed: .*File too large" "$tmp/err" ||
  [ "$(cat "$tmp/m/merged.json")" != 'the old merged trace' ] || [ "$(ls "$tmp/m")" != merged.json ]; then
  echo "FAILED: pto trace --merge over a file, the write failing: exit $got (expected 1), the old file kept, no temporary left:"
  sed 's/^/  stderr: /' "$tmp/err" | head -5
  ls -l "$tmp/m" | sed 's/^/  /'
  head -c 200 "$tmp/m/merged.json" | sed 's/^/  merged.json: /'
  echo
  fails=$((fails + 1))
fi
"$pto" trace --merge "$tmp/m/merged.json" "$tmp/t.json" >/dev/null 2>&1
if ! "$pto" trace --check "$tmp/m/merged.json" >/dev/null 2>&1 || [ "$(ls "$tmp/m")" != merged.json ]; then
  echo "FAILED: pto trace --merge over a file did not replace it with the merged trace"
  fails=$((fails + 1))
fi
# a file that is not JSON is named as not a trace (before: "line 1 (byte
# 0): bad number")
echo 'hello, world' >"$tmp/hello.txt"
expect_exact 1 "pto trace: $tmp/hello.txt: not a JSON trace: it starts with 'h', not '{' or '['" \
  -- trace "$tmp/hello.txt"
: >"$tmp/empty.json"
expect_exact 1 "pto trace: $tmp/empty.json: not a JSON trace: the file is empty" -- trace "$tmp/empty.json"
# a usage error: the error and where the usage is, not the whole usage
# that scrolled the error away; one hint (before: `pto` gave two)
expect_exact 2 "pto run: --clusters needs an integer in 1..4096, got 'x'
(pto run --help for usage)" -- run vector_chain --clusters x
expect_exact 2 "pto trace: which trace file?
(pto trace --help for usage)" -- trace
expect_exact 2 "pto: which command? (run or trace)
(pto --help lists the commands)" --
expect_exact 2 "pto: unknown command 'bogus' (run or trace)
(pto --help lists the commands)" -- bogus
# options --list would ignore are refused, named (before: ignored)
expect_exact 2 "pto run --list: --clusters, --trace would do nothing (--list runs no scene)
(pto run --help for usage)" -- run --list --trace t.json --clusters 3

# scripts/test.sh: --help prints its usage and a bad mode is refused, both
# before anything is installed (before: "unknown mode '--help'", after the
# packages)
test_sh=$(dirname "$0")/../../scripts/test.sh
timeout 20 "$test_sh" --help >"$tmp/out" 2>"$tmp/err"
got=$?
if [ $got -ne 0 ] || [ -s "$tmp/err" ] || ! grep -q '^  scripts/test.sh plain ' "$tmp/out"; then
  echo "FAILED: scripts/test.sh --help: exit $got, expected 0 and the usage on stdout"
  sed 's/^/  stderr: /' "$tmp/err" | head -5
  fails=$((fails + 1))
fi
timeout 20 "$test_sh" bogus >"$tmp/out" 2>"$tmp/err"
got=$?
if [ $got -ne 2 ] || [ -s "$tmp/out" ] || ! grep -q "^unknown mode 'bogus' (plain " "$tmp/err"; then
  echo "FAILED: scripts/test.sh bogus: exit $got, expected 2 naming the mode, nothing run"
  sed 's/^/  stdout: /' "$tmp/out" | head -5
  fails=$((fails + 1))
fi

if [ "$fails" -gt 0 ]; then
  echo "$fails CLI error reports are wrong"
  exit 1
fi
echo "cli: every failure on stderr, naming what was wrong"
