#!/bin/sh
# check_scene.sh PTO SCENE pass|timing — `pto run --check SCENE` in
# checking mode (docs/contracts.md) with seed 1: `pass`, it verifies (a
# correct program has no false positive; an err_contract_* scene verifies
# the breach it expects); `timing`, a scene that verifies the scheduler's
# timing verifies its data and says, on a line of its own, that checking
# mode left the timing unasserted.
pto=$1 scene=$2 want=$3
for seed in 1; do
  out=$(PTO_CHECK_SEED=$seed "$pto" run --check "$scene" 2>&1)
  rc=$?
  if [ $rc -ne 0 ]; then
    printf '%s\n' "$out"
    echo "FAIL: pto run --check $scene (PTO_CHECK_SEED=$seed) exited $rc, expected 0"
    exit 1
  fi
  if [ "$want" = timing ] &&
    ! printf '%s\n' "$out" | grep -q "^  checking mode runs blocks one at a time, so the scheduler's timing is not asserted: "; then
    printf '%s\n' "$out"
    echo "FAIL: pto run --check $scene passed without saying which timing it did not assert"
    exit 1
  fi
done
echo "ok: pto run --check $scene ($want)"
