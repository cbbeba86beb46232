#!/usr/bin/env bash
# Launch counts a user can trust: explain's launch figure against the simulated runtime's own
# call counters (GWSIM_CALL_COUNTS_DIR), for `trace -- gw_train_loop`:
#   1. a 5 s job at the default duty cycle (counted 1 s in 10): within ±10%, shown as an
#      estimate with an error bar (before: ~2x, N x the count whatever the job's length);
#   2. a 30 s job at the default duty cycle: within ±10%;
#   3. --launch-duty 1 with two CPU burners beside it: exact, not an estimate (before: 3,776 of
#      4,672: the job's first launches ran before its libcudart was attached), or short by no
#      more than the drops the trace reports;
#      3b. every 50th launch stalled 6 ms inside the runtime call before its driver launch (a
#      preempted thread): still counted once (never more than the sim counted; at most 1% short);
#   4. MCP top_kernels and explain --json give the same figure;
#   5. a job that captures its step's 8 kernels into a CUDA graph once and replays it
#      (--graph): each graph launch counts as 8 kernels (graph_kernels = 8 x the sim's
#      cudaGraphLaunch count, exactly), the graph is named with its kernels in the kernel table,
#      the 8 captured launches are graph_node rows and not launches, one row per graph launch
#      (the runtime's call and the driver's cuGraphLaunch it makes are one), and `check` no longer
#      says graph launches are not seen;
#   6. re-captured every 20 steps (--graph-recapture): one graph_node row per captured kernel
#      and one instantiation per capture, against the sim's counters;
#   7. re-captured every 4th step with 40 ms of CPU inside each capture: the graph-recapture
#      finding's lost time against the captures' known cost; none for a graph captured once.
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
# 3b. Every 50th launch stalls 6 ms between the runtime's entry and the driver launch it makes
# (a thread preempted there): each still counts once (before: the driver launch counted again).
# Never more than the sim counted (a launch counted twice is the defect this guards). In two of
# three full-suite runs on 2026-12-07 it came out 6 and 16 short (0.2-0.6%, no drops; exact when
# run alone): a shortfall up to 1% passes here and is tracked in the notes, not hidden as exact.
if GWSIM_LAUNCH_STALL_EVERY=50 run stalled --launch-duty 1 -- "$SIM_BIN/gw_train_loop" --duration 3; then
  if [ "$est" -eq "$truth" ]; then
    pass "launches stalled inside the runtime call count once: $est"
  elif [ "$est" -lt "$truth" ] && [ $(( (truth - est) * 100 )) -le "$truth" ]; then
    pass "launches stalled inside the runtime call count once: $est of $truth (none twice)"
  else
    fail "with launches stalled inside the runtime call: $est counted for $truth"
  fi
fi

# ---- 5. CUDA Graphs: a step's kernels captured once and replayed --------------------------
sim_count() {  # sim_count NAME API: calls of API in the job's libcudart
  awk -v api="$2" '$1 == api {n += $2} END {print n + 0}' "$WORK/$1.counts"/libcudart.*.counts
}
if run graph --launch-duty 1 -- "$SIM_BIN/gw_train_loop" --duration 4 --graph; then
  graph_launches=$(sim_count graph cudaGraphLaunch)
  kernels=$(q "$WORK/graph.db" "SELECT COALESCE(SUM(count), 0) FROM op_seconds WHERE op = 27")  # graph_kernels
  nodes=$(q "$WORK/graph.db" "SELECT COUNT(*) FROM events WHERE op = 'graph_node'")
  rows=$(q "$WORK/graph.db" "SELECT COUNT(*) FROM events WHERE op = 'cudaGraphLaunch'")
  [ "$graph_launches" -gt 10 ] && [ "$kernels" -eq $((8 * graph_launches)) ] \
    && pass "graph launches: $kernels kernels run for $graph_launches launches of an 8-kernel graph" \
    || fail "graph_kernels $kernels for $graph_launches graph launches of 8 kernels"
  [ "$rows" -eq "$graph_launches" ] && pass "one cudaGraphLaunch row per graph launch ($rows)" \
    || fail "$rows cudaGraphLaunch rows for $graph_launches graph launches"
  [ "$nodes" -eq 8 ] && pass "the 8 captured launches are graph_node rows" \
    || fail "$nodes graph_node rows, want 8"
  # Kernels run: the direct launches the sim counted less the 8 captured, plus the graph's.
  direct=$(( truth - 8 ))
  [ "$est" -eq $(( direct + 8 * graph_launches )) ] \
    && pass "explain's launch figure counts the graph's kernels: $est" \
    || fail "explain says $est launches; want $direct direct + $((8 * graph_launches)) through the graph"
  "$GPUWHY" explain --db "$WORK/graph.db" > "$WORK/graph.txt" 2>&1
  grep -q "graph 1 (8 kernels: " "$WORK/graph.txt" && grep -q "run by CUDA Graph launches" "$WORK/graph.txt" \
    && pass "the kernel table names the graph and its kernels" \
    || fail "no named graph in the kernel table" "$(grep -A6 'Top kernels' "$WORK/graph.txt")"
fi
"$GPUWHY" check > "$WORK/check.txt" 2>&1
grep -qi "graph.*not seen\|not seen.*graph" "$WORK/check.txt" \
  && fail "check still says graph launches are not seen" "$(grep -i graph "$WORK/check.txt")" \
  || pass "check no longer reports graph launches as unseen"

# ---- 6. re-captured every 20 steps -----------------------------------------------------------
if run recapture --launch-duty 1 -- "$SIM_BIN/gw_train_loop" --duration 3 --graph-recapture 20; then
  captures=$(sim_count recapture cudaStreamEndCapture)
  nodes=$(q "$WORK/recapture.db" "SELECT COUNT(*) FROM events WHERE op = 'graph_node'")
  inst=$(q "$WORK/recapture.db" "SELECT COUNT(*) FROM events WHERE op = 'cudaGraphInstantiate'")
  [ "$captures" -gt 2 ] && [ "$nodes" -eq $((8 * captures)) ] && [ "$inst" -eq "$captures" ] \
    && pass "re-captured $captures times: $nodes graph_node rows, $inst instantiations" \
    || fail "$captures captures: $nodes graph_node rows (want $((8 * captures))), $inst instantiations"
fi

# ---- 7. re-captured often enough to cost time: the graph-recapture finding --------------------
# Every 4th step records the graph again with 40 ms of the main thread's CPU inside the capture
# (a framework running the step to record it). The GPU idles meanwhile: graph-recapture's lost
# time is those captures' seconds after warm-up (the sim's capture count x 40 ms, less the first
# tenth of the session), within ±35%; a graph captured once (section 5) has no such finding.
# The simulated NVML gives the budget its GPU samples (the sim device's real busy time).
NVML="$SIM_BIN/../lib/libnvidia-ml.so.1"
export GWSIM_GPU_STATE_DIR="$WORK/gpustate"
mkdir -m 1777 "$GWSIM_GPU_STATE_DIR"
if run costly --launch-duty 1 --nvml-lib "$NVML" -- "$SIM_BIN/gw_train_loop" --duration 8 \
    --graph-recapture 4 --capture-cpu-ms 40; then
  captures=$(sim_count costly cudaStreamEndCapture)
  read -r lost sev fix < <(python3 -c '
import json, sys
for x in json.load(open(sys.argv[1]))["findings"]:
    if x["rule"] == "graph-recapture":
        print(x["lost_s"], x["severity"], int(any("bucket" in f for f in x["fix"])))
        break
else:
    print("none none 0")' "$WORK/costly.json")
  python3 -c 'import sys; n, l = int(sys.argv[1]), float(sys.argv[2]); want = n * 0.040 * 0.9
sys.exit(0 if n > 20 and abs(l - want) <= 0.35 * want else 1)' "$captures" "${lost/none/0}" \
    && [ "$fix" = 1 ] \
    && pass "graph-recapture ($sev): $lost s lost for $captures captures of 40 ms" \
    || fail "graph-recapture: lost '$lost' ($sev) for $captures captures of 40 ms (want ~$captures x 36 ms), bucket fix $fix" \
      "$("$GPUWHY" explain --db "$WORK/costly.db" | head -40)"
  grep -q '"rule": *"graph-recapture"' "$WORK/graph.json" \
    && fail "a graph captured once is reported as re-captured" \
    || pass "no graph-recapture finding for a graph captured once"
fi

e2e_finish launch_count_e2e
