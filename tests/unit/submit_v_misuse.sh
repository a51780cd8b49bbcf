#!/bin/sh
# submit_v_misuse.sh CC INCLUDE_DIR — the compact submit's misuse that C can
# catch is a compile error: each snippet below must fail to compile (with
# -std=c11 -Wall -Wextra -Werror), and the correct one must compile, so that
# a broken harness cannot pass.
set -u
cc=$1 inc=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/pto_submit_v_misuse.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail=0
try() { # try EXPECT NAME BODY
  printf '#include "pto/pto.h"\nvoid f(pto_orch *o, int k, pto_tensor *t, const pto_tensor *ct,\n       pto_tensor tv, float *fp, int *ip, pto_task_id *id) {\n  (void)o; (void)k; (void)t; (void)ct; (void)tv; (void)fp; (void)ip; (void)id;\n  %s;\n}\n' "$3" >"$dir/$2.c"
  if "$cc" -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$inc" "$dir/$2.c" >"$dir/$2.log" 2>&1; then
    got=compiles
  else
    got=fails
  fi
  if [ "$got" != "$1" ]; then
    echo "FAIL $2: expected it to be '$1', it $got: $3"
    cat "$dir/$2.log"
    fail=1
  else
    echo "ok   $2 ($got)"
  fi
}
try compiles correct 'pto_submit_v(o, k, PTO_IN(ct), PTO_IN(t), PTO_OUT(t), PTO_INOUT(t), PTO_SCALAR(1), PTO_SCALAR(2.5f), PTO_SCALAR((unsigned char)3), PTO_BLOCKS(2), PTO_SYNC_START, PTO_TASK_ID(id))'
try fails double_scalar 'pto_submit_v(o, k, PTO_IN(t), PTO_SCALAR(2.5))'
try fails pointer_scalar 'pto_submit_v(o, k, PTO_SCALAR(fp))'
try fails tensor_by_value 'pto_submit_v(o, k, PTO_IN(tv))'
try fails not_a_tensor 'pto_submit_v(o, k, PTO_IN(fp))'
try fails const_output 'pto_submit_v(o, k, PTO_OUT(ct))'
try fails raw_pointer_in_list 'pto_submit_v(o, k, t)'
try fails int_in_list 'pto_submit_v(o, k, PTO_IN(t), 3)'
try fails task_id_of_int 'pto_submit_v(o, k, PTO_IN(t), PTO_TASK_ID(ip))'
exit $fail
