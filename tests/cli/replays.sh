# replays.sh — sourced (bash) by the schedule tests: how many of N replays
# of a record give exactly the wrong values a failing seed's run printed.
#   replays_alike PTO SCENE RECORD PATTERN LINES VALUES N TMP
# runs `PTO run SCENE --replay RECORD` N times and counts the runs that
# fail (exit 1) and print, from the line matching PATTERN and the LINES
# after it, what the file VALUES holds; TMP is a scratch directory.
replays_alike() {
  local pto=$1 scene=$2 rec=$3 pat=$4 lines=$5 values=$6 n=$7 tmp=$8 same=0 rc i
  for i in $(seq 1 "$n"); do
    "$pto" run "$scene" --replay "$rec" >/dev/null 2>"$tmp/replay.err"
    rc=$?
    grep -A"$lines" "$pat" "$tmp/replay.err" >"$tmp/replay.values"
    if [ "$rc" -eq 1 ] && cmp -s "$values" "$tmp/replay.values"; then
      same=$((same + 1))
    fi
  done
  echo "$same"
}
