#!/usr/bin/env bash
# The `pto` command line follows the conventions users know (issue 11):
# -h/--help at every level (stdout, exit 0), --version, `--opt=value` as well
# as `--opt value`, options before or after the operand, unknown words named
# in the error, errors on stderr only with stdout empty, the documented exit
# statuses (0 done, 1 failed, 2 usage), invalid PTO_* environment values
# refused by name, and a man page that documents the same options and
# variables as --help, which lists every PTO_ variable pto reads and shows
# every option of `pto run --help` (as do the man page and the README).
#   conventions.sh PTO_BINARY SOURCE_DIR VERSION
set -uo pipefail
pto=$1 src=$2 version=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() {
  echo "FAILED: $*"
  sed 's/^/  stdout: /' "$tmp/out" | head -4
  sed 's/^/  stderr: /' "$tmp/err" | head -4
  fails=$((fails + 1))
}

# ok STDOUT_PATTERN -- ARGS...: exit 0, stdout matching, stderr empty.
ok() {
  local pat=$1
  shift 2
  "$pto" "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  if [ "$got" -ne 0 ]; then fail "pto $*: exit status $got, expected 0"
  elif ! grep -Eq -- "$pat" "$tmp/out"; then fail "pto $*: stdout does not match '$pat'"
  elif [ -s "$tmp/err" ]; then fail "pto $*: wrote to stderr on success"
  fi
}

# err STATUS STDERR_PATTERN -- ARGS...: that exit status, stderr matching,
# stdout empty (a usage error runs nothing).
err() {
  local want=$1 pat=$2
  shift 3
  "$pto" "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  if [ "$got" -ne "$want" ]; then fail "pto $*: exit status $got, expected $want"
  elif ! grep -Eq -- "$pat" "$tmp/err"; then fail "pto $*: stderr does not match '$pat'"
  elif [ "$want" -eq 2 ] && [ -s "$tmp/out" ]; then fail "pto $*: a usage error wrote to stdout"
  fi
}

# help at every level, on stdout
ok '^usage: pto ' -- --help
ok '^usage: pto ' -- -h
ok '^usage: pto ' -- help
ok '^usage: pto run ' -- run --help
ok '^usage: pto run ' -- run -h
# multi-chip scenes print node statistics per chip, not the empty chip line
# (stderr may say it waits for a device another test holds)
"$pto" run ring_shuffle >"$tmp/out" 2>"$tmp/err" &&
  grep -Eq '^  chip 1: node tasks 1  tasks 1  blocks 1  Host [0-9.]+ us' "$tmp/out" ||
  fail "pto run ring_shuffle: no per-chip node statistics on stdout"
ok '^usage: pto run ' -- run vector_chain --help
ok '^usage: pto trace ' -- trace --help
ok '^usage: pto trace ' -- trace -h
ok 'Exit status: 0 done' -- --help
ok 'Exit status' -- run --help
# version
ok "^pto $version\$" -- --version
ok "^pto $version\$" -- -V
# --opt=value and --opt value, options before the operand
ok 'over 2 rounds' -- run vector_chain --clusters=1 --schedulers=1 --rounds=2
ok 'over 2 rounds' -- run --rounds 2 --clusters 1 vector_chain
ok "trace written to $tmp/t.json" -- run vector_chain --trace="$tmp/t.json"
[ -s "$tmp/t.json" ] || fail "pto run --trace=FILE wrote no trace"
ok 'vector_chain' -- run --list
# unknown words, named
err 2 "unknown command 'bogus'" -- bogus
err 2 "unknown option '--bogus'" -- --bogus
err 2 "unknown option '-x'" -- -x
err 2 "unknown option '--bogus=1'" -- run vector_chain --bogus=1
err 2 "unexpected argument 'extra'" -- run vector_chain extra
err 2 "unknown option '--bogus'" -- trace --bogus t.json
err 2 "which command" --
err 2 "--clusters needs an integer in 1\.\.[0-9]+, got '0'" -- run vector_chain --clusters=0
err 2 "--clusters needs a positive integer" -- run vector_chain --clusters
err 2 "--seed needs an integer in 1\.\.[0-9]+, got '-3'" -- run vector_chain --seed -3
# every option's range is the chip's: refused at once, naming the range
err 2 "--clusters needs an integer in 1\.\.4096, got '5000'" -- run views --clusters 5000
err 2 "--schedulers needs an integer in 1\.\.64, got '65'" -- run views --schedulers 65
# a shape the scene's chip cannot have is a usage error naming the cause, not
# clamped (chip and node scenes alike), and nothing goes to stdout
err 2 "vector_chain cannot run with --schedulers 64: pto_chip_config: schedulers = 64, must be 1\.\.min\(clusters = 2" -- \
  run vector_chain --schedulers 64
err 2 "cannot run with --clusters 1 --schedulers 2: pto_chip_config: schedulers = 2" -- \
  run vector_chain --clusters 1 --schedulers 2
err 2 "ring_shuffle cannot run with --schedulers 3: .*schedulers = 3" -- run ring_shuffle --schedulers 3
# extra operands and options that would do nothing are refused
err 2 "pto run --list: unexpected argument 'extra'" -- run --list extra
err 2 "pto --version: unexpected argument 'extra'" -- --version extra
err 2 "--seed: views has no random inputs" -- run views --seed 3
err 2 "--seed: ring_shuffle has no random inputs \(and --fault-inject is off\)" -- run ring_shuffle --seed 3
err 2 "--fault-inject: views runs one chip" -- run views --fault-inject
ok 'verified' -- run vector_chain --seed 3
# invalid environment values, named
for v in abc -3 0 ' 4' 4x ''; do
  PTO_CLUSTERS=$v err 2 "environment: PTO_CLUSTERS='$v' is not an integer in 1\.\.4096" -- \
    run vector_chain
done
PTO_WATCHDOG_MS=soon err 2 "PTO_WATCHDOG_MS='soon'" -- run vector_chain
PTO_SCHEDULERS=x err 2 "PTO_SCHEDULERS='x'" -- run --list
PTO_CLUSTERS=1 ok 'verified' -- run vector_chain
PTO_CHECK=everything err 2 "PTO_CHECK = 'everything', must be 'contracts' or 'off'" -- run vector_chain
PTO_CHECK_SEED=12x err 2 "PTO_CHECK_SEED = '12x', must be a decimal integer" -- run --list
# digits only, as every PTO_ number: a space or a sign before them is refused
for v in ' -5' ' 5' '+5'; do
  PTO_CHECK=contracts PTO_CHECK_SEED=$v err 2 "PTO_CHECK_SEED = '${v/+/\\+}', must be a decimal" \
    -- run --list
done
PTO_CHECK=contracts ok 'verified' -- run vector_chain
# --help lists the environment variables; the man page documents the same
# variables and options and has the usual sections
"$pto" --help >"$tmp/help" 2>&1
vars=$(grep -Eo '^  PTO_[A-Z_]+' "$tmp/help" | tr -d ' ')
[ "$(wc -l <<<"$vars")" -ge 10 ] || { cp "$tmp/help" "$tmp/out"; : >"$tmp/err"; fail "--help lists too few PTO_ variables"; }
man=$tmp/pto.1.txt
sed 's/\\//g' "$src/tools/pto.1" >"$man" # roff escapes out: \-\-trace is --trace
for sec in NAME SYNOPSIS OPTIONS ENVIRONMENT 'EXIT STATUS'; do
  grep -q "^\.SH \"\?$sec\"\?\$" "$man" || { : >"$tmp/out"; : >"$tmp/err"; fail "pto.1 has no $sec section"; }
done
for v in $vars; do
  grep -q "$v" "$man" || { : >"$tmp/out"; : >"$tmp/err"; fail "pto.1 does not document $v (pto --help lists it)"; }
done
for o in clusters schedulers rounds seed trace fault-inject list check merge help version \
  schedule-seed fuzz-schedules record replay; do
  grep -q -- "-\?-$o" "$man" || { : >"$tmp/out"; : >"$tmp/err"; fail "pto.1 does not document --$o"; }
done
# every PTO_ variable the library or the command reads (a getenv of a
# literal name, or a name in the options table) is listed by --help
read_vars=$({ grep -rhoE 'getenv\("PTO_[A-Z0-9_]+"' "$src/src" "$src/tools"
  grep -hoE '"PTO_[A-Z0-9_]+"' "$src/src/common/options.c"; } | grep -oE 'PTO_[A-Z0-9_]+' | sort -u)
[ "$(wc -l <<<"$read_vars")" -ge 10 ] || { : >"$tmp/out"; : >"$tmp/err"; fail "found too few PTO_ variables read in src/"; }
for v in $read_vars; do
  grep -qx "$v" <<<"$vars" || { : >"$tmp/out"; : >"$tmp/err"; fail "pto --help does not list $v, which pto reads"; }
done
# every option of `pto run --help` is in the synopsis of `pto --help`, of
# the man page and of the README's command line
"$pto" run --help >"$tmp/run_help" 2>&1
run_opts=$(grep -oE '^  --[a-z-]+' "$tmp/run_help" | tr -d ' ')
[ "$(wc -l <<<"$run_opts")" -ge 10 ] || { : >"$tmp/out"; : >"$tmp/err"; fail "pto run --help lists too few options"; }
sed -n '/^usage: pto /,/^$/p' "$tmp/help" >"$tmp/synopsis"
sed -n '/^\.SH SYNOPSIS/,/^\.SH /p' "$man" >"$tmp/man_synopsis"
awk '/^The command line:/ {s = 1} s && /^$/ {exit} s' "$src/README.md" >"$tmp/readme_cli"
[ -s "$tmp/readme_cli" ] || { : >"$tmp/out"; : >"$tmp/err"; fail "README.md has no 'The command line:' paragraph"; }
for o in $run_opts; do
  for f in synopsis:"pto --help" man_synopsis:"pto.1's SYNOPSIS" readme_cli:"README.md's command line"; do
    grep -q -- "$o\b" "$tmp/${f%%:*}" || { : >"$tmp/out"; : >"$tmp/err"; fail "${f#*:} does not show $o (pto run --help has it)"; }
  done
done

if [ "$fails" -gt 0 ]; then
  echo "$fails CLI convention checks failed"
  exit 1
fi
echo "cli: help at every level, --version, --opt=value, unknown words named, stderr only for errors, exit statuses, environment checked, man page in step"
