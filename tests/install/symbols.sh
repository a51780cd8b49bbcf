#!/usr/bin/env bash
# libpto.so and libpto.a export the public API and nothing else: every
# global symbol they define starts with pto_, and every function a public
# header declares (which must be marked PTO_API, see pto/export.h) is among
# them.
#   symbols.sh LIBPTO_SO LIBPTO_A INCLUDE_DIR
set -euo pipefail
so=$1 ar=$2 inc=$3
fail=0
# Declarations start a line with their return type; static inline ones are
# not symbols.
declared=$(grep -hE '^(PTO_API )?[a-z][a-z0-9_ ]*[ *]pto_[a-z0-9_]*\(' "$inc"/pto/*.h |
  grep -vE '^(static|typedef|return) ' | grep -oE 'pto_[a-z0-9_]*\(' |
  tr -d '(' | sort -u || true)
for lib in "$so" "$ar"; do
  if [[ "$lib" == *.so* ]]; then
    syms=$(nm -D --defined-only "$lib" | awk 'NF == 3 {print $3}' | sed 's/@.*//' | sort -u)
  else
    syms=$(nm -g --defined-only "$lib" | awk 'NF == 3 {print $3}' | sort -u)
  fi
  bad=$(grep -v '^pto_' <<<"$syms" || true)
  if [ -n "$bad" ]; then
    echo "FAILED: $(basename "$lib") exports $(wc -l <<<"$bad") symbols without the pto_ prefix, e.g.:"
    head -n 10 <<<"$bad" | sed 's/^/  /'
    fail=1
  fi
  missing=$(comm -23 <(echo "$declared") <(echo "$syms"))
  if [ -n "$missing" ]; then
    echo "FAILED: $(basename "$lib") lacks $(wc -l <<<"$missing") functions its headers declare:"
    head -n 10 <<<"$missing" | sed 's/^/  /'
    fail=1
  fi
  echo "$(basename "$lib"): $(wc -l <<<"$syms") exported symbols"
done
[ "$fail" -eq 0 ] && echo "symbols: only pto_ symbols, the whole declared API ($(wc -l <<<"$declared") functions)"
exit "$fail"
