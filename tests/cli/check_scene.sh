#!/bin/sh
# check_scene.sh PTO SCENE pass|refused — `pto run --check SCENE` in
# checking mode (docs/contracts.md) with seed 1: `pass`, it verifies (a
# correct program has no false positive; an err_contract_* scene verifies
# the breach it expects); `refused`, it exits 2 saying that checking mode
# does not cover the scene.
pto=$1 scene=$2 want=$3
for seed in 1; do
  out=$(PTO_CHECK_SEED=$seed "$pto" run --check "$scene" 2>&1)
  rc=$?
  case $want in
  pass)
    if [ $rc -ne 0 ]; then
      printf '%s\n' "$out"
      echo "FAIL: pto run --check $scene (PTO_CHECK_SEED=$seed) exited $rc, expected 0"
      exit 1
    fi ;;
  refused)
    if [ $rc -ne 2 ] || ! printf '%s' "$out" | grep -q "checking mode does not cover"; then
      printf '%s\n' "$out"
      echo "FAIL: pto run --check $scene exited $rc, expected 2 naming what is not covered"
      exit 1
    fi
    exit 0 ;;
  esac
done
echo "ok: pto run --check $scene ($want)"
