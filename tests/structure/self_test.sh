#!/usr/bin/env bash
# The cycle check itself: on a small tree it finds an include cycle and a
# call cycle, refuses a new cycle and a stale allow-list entry, and passes
# an exact list.   self_test.sh FILE_CYCLES_PY
set -uo pipefail
check=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/a"
printf '#include "a/b.h"\n' >"$tmp/src/a/a.h"
printf '#include "a/a.h"\n' >"$tmp/src/a/b.h"
printf 'int f(void) { return g(); }\n' >"$tmp/src/a/f.c"
printf 'int g(void) { return 0; }\nint h(void) { return f(); }\n' >"$tmp/src/a/g.c"
printf 'static int s(void) { return g(); }\n' >"$tmp/src/a/one_way.c"
fails=0
expect() { # STATUS PATTERN -- ARGS
  local want=$1 pat=$2
  shift 3
  out=$(python3 "$check" "$@" 2>&1)
  local got=$?
  if [ "$got" -ne "$want" ] || ! grep -Eq -- "$pat" <<<"$out"; then
    echo "FAILED: file_cycles.py $*: exit $got (expected $want), output does not match '$pat':"
    sed 's/^/  /' <<<"$out"
    fails=$((fails + 1))
  fi
}
expect 1 'cycle: src/a/a.h <-> src/a/b.h' -- "$tmp"
expect 1 'cycle: src/a/f.c <-> src/a/g.c' -- "$tmp"
printf 'src/a/a.h <-> src/a/b.h\nsrc/a/g.c <-> src/a/f.c\n' >"$tmp/exact"
expect 0 '2 known, none new' -- "$tmp" "$tmp/exact"
printf 'src/a/a.h <-> src/a/b.h\n' >"$tmp/short"
expect 1 'new file cycle .*: src/a/f.c <-> src/a/g.c' -- "$tmp" "$tmp/short"
printf 'src/a/a.h <-> src/a/b.h\nsrc/a/f.c <-> src/a/g.c\nsrc/a/x.c <-> src/a/y.c\n' >"$tmp/stale"
expect 1 'no longer exists .*: src/a/x.c <-> src/a/y.c' -- "$tmp" "$tmp/stale"
grep -q one_way <<<"$(python3 "$check" "$tmp")" && { echo "FAILED: one_way.c is in no cycle"; fails=$((fails + 1)); }
[ "$fails" -eq 0 ] && echo "file_cycles.py: finds include and call cycles, refuses new and stale entries"
exit $((fails > 0))
