#!/usr/bin/env bash
# Controlled schedules of a node through `pto run` (docs/schedules.md,
# "Several chips"):
#   - a deliberate multi-chip race (dist_race_publisher: data and signal
#     stored separately, without pto_notify) fails under --fuzz-schedules
#     FUZZ, and the record of its first failing seed, replayed 20 times,
#     gives that seed's wrong values each time;
#   - the same seed records the same files; a replay that records writes
#     the files it replays;
#   - correct multi-chip scenes pass under every seed tried, with and
#     without fault injection;
#   - a node record changed stops the replay with PTO_EREPLAY naming the line;
#   - a directory given as the node record is named with its errno;
#   - a record file --fuzz-schedules cannot keep is named with its errno.
# No timing is involved: every run's schedule is a seed's or a record's.
#   node_schedules.sh PTO_BINARY [SEEDS [FUZZ]]
set -uo pipefail
. "$(dirname "$0")/replays.sh"
pto=$1 seeds=${2:-5} fuzz=${3:-200}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() {
  echo "FAILED: $*"
  fails=$((fails + 1))
}

# 1. The race is found.
"$pto" run dist_race_publisher --fuzz-schedules "$fuzz" --record "$tmp/race.rec" \
  >"$tmp/fuzz.out" 2>"$tmp/fuzz.err"
rc=$?
[ "$rc" -eq 1 ] || fail "fuzz of dist_race_publisher: exit $rc, expected 1 (a failing seed)"
first=$(sed -n 's/.*(the first: seed \([0-9]*\);.*/\1/p' "$tmp/fuzz.out")
nfailed=$(sed -n "s/^fuzz-schedules: $fuzz seeds, \([0-9]*\) failed.*/\1/p" "$tmp/fuzz.out")
if [ -z "$first" ] || [ -z "$nfailed" ] || [ "$nfailed" -lt 1 ]; then
  fail "fuzz of dist_race_publisher: no failing seed of $fuzz reported"
  cat "$tmp/fuzz.out"
  echo "$fails failed"
  exit 1
fi
for f in race.rec race.rec.t0.c0 race.rec.t0.c1 race.rec.t0.c0.land race.rec.t0.c1.land; do
  [ -s "$tmp/$f" ] || fail "no $f in the record of seed $first"
done
ls "$tmp" | grep -q part && fail "the fuzz left its working record behind: $(ls "$tmp")"
echo "dist_race_publisher: $nfailed of $fuzz seeds fail, the first is $first"

# The wrong values of that seed's run: the scene prints its whole output.
"$pto" run dist_race_publisher --schedule-seed "$first" >/dev/null 2>"$tmp/seed.err"
[ $? -eq 1 ] || fail "seed $first alone does not fail again"
grep -A8 ' actual \[128\]' "$tmp/seed.err" >"$tmp/seed.values"
grep -q ' 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0$' "$tmp/seed.values" ||
  fail "seed $first: no quarter of the destination stayed zero"

# 2. 20 replays of its record give the same wrong values.
same=$(replays_alike "$pto" dist_race_publisher "$tmp/race.rec" ' actual \[128\]' 8 "$tmp/seed.values" 20 "$tmp")
[ "$same" -eq 20 ] || fail "replays of seed $first's record: $same of 20 gave its values"
echo "dist_race_publisher: $same of 20 replays of seed $first's record gave its wrong values"

# 3. Same seed, same files; a replay re-records the files it replays.
mkdir "$tmp/a" "$tmp/b" "$tmp/c"
for s in dist_separate_reader dist_overlap; do
  "$pto" run "$s" --fault-inject --schedule-seed 7 --record "$tmp/a/r" >/dev/null 2>&1 ||
    fail "$s, seed 7: failed"
  "$pto" run "$s" --fault-inject --schedule-seed 7 --record "$tmp/b/r" >/dev/null 2>&1
  diff -r "$tmp/a" "$tmp/b" >/dev/null || fail "$s: seed 7 recorded two different schedules"
  PTO_RECORD="$tmp/c/r" "$pto" run "$s" --fault-inject --replay "$tmp/a/r" >"$tmp/rr.out" 2>&1 ||
    fail "$s: the replay of seed 7 failed: $(head -3 "$tmp/rr.out")"
  diff -r "$tmp/a" "$tmp/c" >/dev/null || fail "$s: the replay of seed 7 recorded another schedule"
  [ "$(ls "$tmp/a" | wc -l)" -gt 3 ] || fail "$s: the record has no chip files: $(ls "$tmp/a")"
  rm -f "$tmp"/a/* "$tmp"/b/* "$tmp"/c/*
done

# 4. Correct multi-chip scenes pass under every seed, with and without
# fault injection (dist_epochs among them: its blocks wait for the other
# chip's publisher block, and a waiting block yields to its chip's other
# blocks: docs/schedules.md, "Blocks that wait").
n=0
for s in ring_shuffle subview_halves dist_push_computed dist_put dist_get dist_notify_wait \
  dist_separate_reader dist_overlap dist_epochs; do
  for fi in "" --fault-inject; do
    "$pto" run "$s" $fi --fuzz-schedules "$seeds" >"$tmp/ok.out" 2>"$tmp/ok.err" ||
      fail "$s $fi: $(tail -1 "$tmp/ok.out") $(head -1 "$tmp/ok.err")"
    n=$((n + 1))
  done
done
echo "9 correct multi-chip scenes: every one of $seeds seeds passed, with and without fault injection"

# 5. A departure from the node record: PTO_EREPLAY naming the line.
"$pto" run dist_separate_reader --schedule-seed 3 --record "$tmp/a/r" >/dev/null 2>&1
awk '/^T / && !done { $2 = ($2 + 1) % 4; done = 1 } { print }' "$tmp/a/r" >"$tmp/a/r.new"
mv "$tmp/a/r.new" "$tmp/a/r"
"$pto" run dist_separate_reader --replay "$tmp/a/r" >"$tmp/d.out" 2>"$tmp/d.err"
rc=$?
[ "$rc" -eq 1 ] && grep -q PTO_EREPLAY "$tmp/d.err" && grep -Eq 'diverged at line 4: ' "$tmp/d.err" ||
  fail "a changed node record: exit $rc, expected PTO_EREPLAY at line 4: $(head -3 "$tmp/d.err")"

# 6. A directory where a node record goes: named with its errno (before:
# "truncated" for a replay, no cause for a record, whose directory's size
# was printed as the record's). The library's own report: through the
# environment, since pto run --replay and --record check the path first.
mkdir "$tmp/ndir"
PTO_REPLAY="$tmp/ndir" "$pto" run dist_separate_reader >"$tmp/n.out" 2>"$tmp/n.err"
rc=$?
[ "$rc" -eq 1 ] && grep -q "node schedule record $tmp/ndir: cannot read: Is a directory" "$tmp/n.err" ||
  fail "--replay DIR on a node: exit $rc: $(head -3 "$tmp/n.err")"
PTO_RECORD="$tmp/ndir" "$pto" run dist_separate_reader --schedule-seed 3 >"$tmp/n.out" 2>"$tmp/n.err"
rc=$?
[ "$rc" -eq 1 ] && grep -q "node schedule record $tmp/ndir: cannot be written: Is a directory" "$tmp/n.err" ||
  fail "--record DIR on a node: exit $rc: $(head -3 "$tmp/n.err")"
grep -q 'schedule record' "$tmp/n.out" && fail "--record DIR on a node printed a size: $(grep 'schedule record' "$tmp/n.out")"

# 7. A record whose file cannot be kept: the fuzz names that file and its
# own errno (before: "--record PATH: <errno text>", naming neither the
# file nor, when another rename failed later, its errno). Directories are
# in the way of chip 1's files (renamed after chip 0's); the first, chip
# 1's schedule, is the one named.
mkdir -p "$tmp/e/race.rec.t0.c1/x" "$tmp/e/race.rec.t0.c1.land/x"
"$pto" run dist_race_publisher --fuzz-schedules "$first" --record "$tmp/e/race.rec" \
  >"$tmp/e.out" 2>"$tmp/e.err"
rc=$?
want="pto run: --record $tmp/e/race.rec: cannot rename $tmp/e/race.rec.part.t0.c1 to $tmp/e/race.rec.t0.c1: Is a directory"
[ "$rc" -eq 1 ] && grep -qxF "$want" "$tmp/e.err" ||
  fail "a record file that cannot be renamed: exit $rc, expected \"$want\"; got: $(grep -- --record "$tmp/e.err")"
[ "$(grep -c -- '--record' "$tmp/e.err")" -eq 1 ] ||
  fail "a record file that cannot be renamed: more than one report: $(grep -- --record "$tmp/e.err")"
# ... and does not announce the record as kept (before: "the record of
# seed N is PATH: pto run ... --replay PATH", a record missing files)
grep -q "record of seed [0-9]* is" "$tmp/e.out" &&
  fail "a record that could not be kept was announced: $(grep 'record of seed' "$tmp/e.out")"
grep -q "record of seed [0-9]* could not be kept at $tmp/e/race.rec" "$tmp/e.out" ||
  fail "a record that could not be kept: no line saying so: $(tail -2 "$tmp/e.out")"

echo "$fails failed"
[ "$fails" -eq 0 ]
