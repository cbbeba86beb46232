#!/usr/bin/env bash
# Launch counts a user can trust: explain's launch figure against the simulated runtime's own
# call counters (GWSIM_CALL_COUNTS_DIR), for `trace -- gw_train_loop`:
#   1. a 5 s job at the default duty cycle (counted 1 s in 10): within ±10%, shown as an
#      estimate with an error bar (before: ~2x, N x the count whatever the job's length);
#   2. a 30 s job at the default duty cycle: within ±10%;
#   3. --launch-duty 1 with two CPU burners beside it: exact, not an estimate (before: 3,776 of
#      4,672: the job's first launches ran before its libcudart was attached), or short by no
#      more than the drops the trace reports;
#   4. MCP top_kernels and explain --json give the same figure.
# Usage: launch_count_e2e.sh GPUWHY SIM_BIN
set -uo pipefail
GPUWHY=$1 SIM_BIN=$2
. "$(dirname "$0")/lib.sh"
e2e_require_root launch_count_e2e
e2e_workdir launch_count_e2e

# run NAME TRACE_ARGS... -- JOB_ARGS: traces the job; sets truth (the sim's cudaLaunchKernel
# count), est (explain's launches), counted, estimated (true/false), drops.
run() {
  local name=$1; shift
  mkdir -p "$WORK/$name.counts"
  GWSIM_CALL_COUNTS_DIR="$WORK/$name.counts" "$GPUWHY" trace --quiet --db "$WORK/$name.db" "$@" \
    > "$WORK/$name.out" 2>&1 || { fail "$name: trace failed" "$(tail -5 "$WORK/$name.out")"; return 1; }
  truth=$(awk '$1 == "cudaLaunchKernel" {n += $2} END {print n + 0}' "$WORK/$name.counts"/libcudart.*.counts)
  "$GPUWHY" explain --db "$WORK/$name.db" --json > "$WORK/$name.json" 2>&1
  read -r est counted estimated < <(python3 -c '
import json, sys
k = json.load(open(sys.argv[1]))["kernels"]
print(k["launches"], k["counted"], str(k["estimated"]).lower())' "$WORK/$name.json")
  drops=$(q "$WORK/$name.db" "SELECT COALESCE(drops, 0) FROM sessions ORDER BY id DESC LIMIT 1")
  echo "# $name: sim $truth, explain $est (counted $counted, estimated $estimated), drops $drops"
}

within() {  # within NAME PCT: est within ±PCT% of truth
  python3 -c 'import sys; t, e, p = map(float, sys.argv[1:]); sys.exit(0 if t > 0 and abs(e - t) <= p / 100 * t else 1)' \
    "$truth" "$est" "$2" && pass "$1: $est launches for $truth (±$2%)" || fail "$1: $est launches for $truth, beyond ±$2%"
}

# ---- 1. 5 s at the default duty cycle -------------------------------------------------------
if run short -- "$SIM_BIN/gw_train_loop" --duration 5; then
  within "5 s job, default duty" 10
  [ "$estimated" = true ] && grep -q '± ' <("$GPUWHY" explain --db "$WORK/short.db") \
    && pass "shown as an estimate with an error bar" \
    || fail "the estimate is not shown as one" "$(grep -i launches "$WORK/short.json" | head -3)"
  # 4. MCP top_kernels: the same figure.
  mcp=$(printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}' \
    '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
    '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"top_kernels","arguments":{}}}' \
    | "$GPUWHY" mcp --db "$WORK/short.db" 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("id") == 2:
        print(m["result"]["structuredContent"]["launches"])')
  [ "$mcp" = "$est" ] && pass "MCP top_kernels says $mcp too" || fail "MCP top_kernels says '$mcp', explain $est"
fi

# ---- 2. 30 s at the default duty cycle ------------------------------------------------------
run long -- "$SIM_BIN/gw_train_loop" --duration 30 && within "30 s job, default duty" 10

# ---- 3. every launch counted, with the CPUs busy --------------------------------------------
for i in 1 2; do
  ( end=$((SECONDS + 14)); while [ $SECONDS -lt $end ]; do :; done ) &
  PIDS="$PIDS $!"
done
if run every --launch-duty 1 -- "$SIM_BIN/gw_train_loop" --duration 5; then
  if [ "$est" -eq "$truth" ] && [ "$estimated" = false ]; then
    pass "--launch-duty 1 under load: exact ($est), not an estimate"
  elif [ "$drops" -gt 0 ] && [ "$est" -lt "$truth" ] && [ $((truth - est)) -le "$drops" ]; then
    pass "--launch-duty 1 under load: $est of $truth, the rest counted as $drops drops"
  else
    fail "--launch-duty 1 under load: $est launches (estimated $estimated) for $truth, drops $drops"
  fi
fi
wait

e2e_finish launch_count_e2e
