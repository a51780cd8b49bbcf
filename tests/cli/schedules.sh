#!/usr/bin/env bash
# Controlled schedules through `pto run` (docs/schedules.md):
#   - a deliberate race (race_undeclared) fails under --fuzz-schedules 200,
#     and the record of its first failing seed, replayed 20 times, gives
#     the very wrong values of that seed's run each time;
#   - the same seed records the same schedule; a replay that records
#     writes the record it replays;
#   - correct scenes pass under every seed tried;
#   - a truncated, corrupt or foreign record stops with PTO_EREPLAY naming
#     where.
# No timing is involved: every run's schedule is the seed's or the record's.
#   schedules.sh PTO_BINARY [SEEDS [FUZZ]]
# SEEDS: the correct scenes' seeds (default 20); FUZZ: the race's (default
# 200; fewer under sanitizers, where every chip costs far more).
set -uo pipefail
. "$(dirname "$0")/replays.sh"
pto=$1 seeds=${2:-20} fuzz=${3:-200}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() {
  echo "FAILED: $*"
  fails=$((fails + 1))
}

# 1. The race is found.
"$pto" run race_undeclared --fuzz-schedules "$fuzz" --record "$tmp/race.rec" >"$tmp/fuzz.out" \
  2>"$tmp/fuzz.err"
rc=$?
[ "$rc" -eq 1 ] || fail "fuzz of race_undeclared: exit $rc, expected 1 (a failing seed)"
first=$(sed -n 's/.*(the first: seed \([0-9]*\);.*/\1/p' "$tmp/fuzz.out")
nfailed=$(sed -n "s/^fuzz-schedules: $fuzz seeds, \([0-9]*\) failed.*/\1/p" "$tmp/fuzz.out")
if [ -z "$first" ] || [ -z "$nfailed" ] || [ "$nfailed" -lt 1 ]; then
  fail "fuzz of race_undeclared: no failing seed of $fuzz reported"
  cat "$tmp/fuzz.out"
  echo "$fails failed"
  exit 1
fi
[ -s "$tmp/race.rec" ] || fail "no record of seed $first in $tmp/race.rec"
[ -e "$tmp/race.rec.part" ] && fail "the fuzz left its working record behind"
echo "race_undeclared: $nfailed of $fuzz seeds fail, the first is $first"

# The wrong values of that seed's run: the scene prints its whole output.
"$pto" run race_undeclared --schedule-seed "$first" >/dev/null 2>"$tmp/seed.err"
[ $? -eq 1 ] || fail "seed $first alone does not fail again"
grep -A4 ' actual \[64\]' "$tmp/seed.err" >"$tmp/seed.values"
[ -s "$tmp/seed.values" ] || fail "seed $first: no values printed"

# 2. 20 replays of its record give the same wrong values.
same=$(replays_alike "$pto" race_undeclared "$tmp/race.rec" ' actual \[64\]' 4 "$tmp/seed.values" 20 "$tmp")
[ "$same" -eq 20 ] || fail "replays of seed $first's record: $same of 20 gave its values"
echo "replays of seed $first's record: $same of 20 gave the same wrong values"

# 3. Same seed, same schedule; a replay re-records the record it replays.
"$pto" run race_undeclared --schedule-seed 7 --record "$tmp/a.rec" >/dev/null 2>&1
"$pto" run race_undeclared --schedule-seed 7 --record "$tmp/b.rec" >/dev/null 2>&1
cmp -s "$tmp/a.rec" "$tmp/b.rec" || fail "seed 7 recorded two different schedules"
PTO_RECORD="$tmp/c.rec" "$pto" run race_undeclared --replay "$tmp/a.rec" >/dev/null 2>&1
cmp -s "$tmp/a.rec" "$tmp/c.rec" || fail "the replay of seed 7 recorded another schedule"
# a seed that passes replays as a pass, and the record names its seed
"$pto" run vector_chain --schedule-seed 3 --record "$tmp/vc.rec" >"$tmp/vc.out" 2>&1 ||
  fail "vector_chain under seed 3 failed"
grep -q 'schedule record .*bytes per task' "$tmp/vc.out" || fail "--record printed no size"
grep -qx 'seed 3' "$tmp/vc.rec" || fail "the record does not name seed 3"
"$pto" run vector_chain --replay "$tmp/vc.rec" >/dev/null 2>&1 || fail "vector_chain's replay failed"

# 4. Correct scenes pass under every seed (one chip; the scenes that
# check the default scheduler's own policies are not among them:
# docs/schedules.md).
for s in vector_chain matmul_add fanin_dag manual_scope views war_order all_shapes spmd_blocks \
  wide_mix_pair tiny_rings heap_rebase dummy_tasks tensor_data sync_normal sync_barrier \
  paged_attention_small redux_dot; do
  "$pto" run "$s" --fuzz-schedules "$seeds" >"$tmp/ok.out" 2>"$tmp/ok.err" ||
    fail "$s: $(tail -1 "$tmp/ok.out") $(head -1 "$tmp/ok.err")"
done
echo "17 correct scenes: every one of $seeds seeds passed"
# Error scenes whose failure does not need blocks to overlap fail as they
# expect under seeds too (err_async_overflow: its blocks' async completions
# wait until no block is left to start, so the third and fourth find no
# slot, as in a free run).
for s in err_async_overflow err_kernel err_fatal err_heap_deadlock err_invalid_args \
  err_scope_deadlock err_scope_overflow err_sched_timeout_deps err_sched_timeout_stuck; do
  for seed in 1 2; do
    "$pto" run "$s" --schedule-seed "$seed" >"$tmp/ok.out" 2>"$tmp/ok.err" ||
      fail "$s, seed $seed: $(head -1 "$tmp/ok.err")"
  done
done
echo "9 error scenes: each failed as it expects under seeds 1 and 2"

# 5. Divergence and bad records: PTO_EREPLAY naming where.
expect_ereplay() { # PATTERN -- ARGS...
  local pat=$1
  shift 2
  "$pto" "$@" >"$tmp/d.out" 2>"$tmp/d.err"
  local rc=$?
  if [ "$rc" -ne 1 ] || ! grep -q PTO_EREPLAY "$tmp/d.err" || ! grep -Eq -- "$pat" "$tmp/d.err"
  then
    fail "pto $*: exit $rc, expected 1 with PTO_EREPLAY and '$pat'"
    sed 's/^/  /' "$tmp/d.err" | head -5
  fi
}
head -c $(($(wc -c <"$tmp/a.rec") - 10)) "$tmp/a.rec" >"$tmp/trunc.rec"
expect_ereplay 'truncated' -- run race_undeclared --replay "$tmp/trunc.rec"
sed 's/^S \([0-9]*\) 1 /S \1 0 /' "$tmp/a.rec" >"$tmp/kernel.rec" # "use" recorded as "bump"
expect_ereplay "diverged at line [0-9]+: task [0-9]+ runs kernel 1 'use', the record kernel 0" \
  -- run race_undeclared --replay "$tmp/kernel.rec"
sed 's/^S 1 1 0:.*/S 1 1 0:x/' "$tmp/a.rec" >"$tmp/bad.rec"
expect_ereplay 'line [0-9]+: malformed action' -- run race_undeclared --replay "$tmp/bad.rec"
expect_ereplay "kernel 0 is 'bump' in the record, 'add' here" -- run vector_chain \
  --replay "$tmp/a.rec"
sed 's/^tasks 2 /tasks 3 /' "$tmp/a.rec" >"$tmp/count.rec"
expect_ereplay 'the run submitted 2 tasks, the record 3' -- run race_undeclared \
  --replay "$tmp/count.rec"
# (the library's own report: pto run --replay checks the file before the run)
PTO_REPLAY="$tmp/none.rec" expect_ereplay 'cannot open' -- run race_undeclared

echo "$fails failed"
[ "$fails" -eq 0 ]
