#!/usr/bin/env bash
# End-to-end for `gpuwhy trace --stack` (issue 5): trigger → capture → assert, as a user would.
# For every CPython here (pyenv 3.10-3.13 and the system python3), the Python training loop on
# the simulated CUDA runtime, pinned to one CPU with a competitor, traced with --stack:
#   - cudaStreamSync rows point at the exact line of train_loop.py that calls it, with
#     train ← main ← <module> up the stack (the executing lines, not the functions' first lines);
#   - `explain` prints "Top cudaStreamSync callers" with that line and its source text, and
#     "Top sched_switch victims" with the DataLoader workers preempted in augment_batch;
#   - `explain --json` carries the same.
# Then the native C++ loop (frame pointers, -g): the sync's caller resolves to train_loop.cc
# and the line of the call.
# Usage: stack_e2e.sh GPUWHY SIM_BIN_DIR SIM_LIB_DIR WORKLOADS_DIR
set -uo pipefail
GPUWHY=$1
SIM_BIN=$2
SIM_LIB=$3
WORKLOADS=$4
. "$(dirname "$0")/lib.sh"

e2e_require_root stack_e2e
e2e_workdir stack_e2e

PY_SCRIPT="$WORKLOADS/train_loop.py"
SYNC_LINE=$(grep -n 'rt.cudaStreamSynchronize(stream), "cudaStreamSynchronize")' "$PY_SCRIPT" | cut -d: -f1)
TRAIN_CALL=$(grep -n '^ *train(args, rt, kernels, workers, state, helper)' "$PY_SCRIPT" | cut -d: -f1)
MAIN_CALL=$(grep -n '^    sys.exit(main(sys.argv\[1:\]))' "$PY_SCRIPT" | cut -d: -f1)
[ -n "$SYNC_LINE" ] && [ -n "$TRAIN_CALL" ] && [ -n "$MAIN_CALL" ] \
  || { echo "FAIL - cannot find the call lines in $PY_SCRIPT"; exit 1; }

TRACE_EXTRA=()  # more trace flags for the next trace_run
# trace_run NAME CMD...: traces CMD (pinned to CPU 0 with a competitor there) into $WORK/NAME.db;
# sets LOOP to CMD's pid.
trace_run() {
  local name=$1; shift
  local db="$WORK/$name.db"
  "$GPUWHY" trace --stack "${TRACE_EXTRA[@]}" --duration 9s --cuda-lib "$SIM_LIB" --db "$db" --quiet \
    > "$WORK/$name.trace" 2>&1 &
  local trace=$!; PIDS="$PIDS $trace"
  sleep 2.5  # --quiet prints nothing until the end; attach takes well under this
  taskset -c 0 "$@" > "$WORK/$name.out" 2>&1 &
  local loop=$!; PIDS="$PIDS $loop"
  LOOP=$loop  # queries below look at this process only: other CUDA processes may be traced too
  sleep 0.5
  "$SIM_BIN/gw_competitor" --cpu 0 --duration 3 > /dev/null 2>&1 &
  local comp=$!; PIDS="$PIDS $comp"
  wait "$loop"; wait "$comp"; wait "$trace"
  local rc=$?
  [ $rc -eq 0 ] || fail "$name: trace exit $rc: $(cat "$WORK/$name.trace")"
  grep -q "note: stacks: " "$WORK/$name.trace" && pass "$name: $(grep 'note: stacks' "$WORK/$name.trace" | sed 's/^ *note: //')" \
    || fail "$name: no stacks note in the summary: $(cat "$WORK/$name.trace")"
}

e2e_pythons

# `check` says which Python CUDA processes --stack can walk.
"${pythons[0]}" "$PY_SCRIPT" --lib-dir "$SIM_LIB" --duration 3 --workers 1 > /dev/null 2>&1 &
CHECKED=$!; PIDS="$PIDS $CHECKED"
sleep 1.5
out=$("$GPUWHY" check --cuda-lib "$SIM_LIB" 2>&1)
echo "$out" | grep -qE "CPython .*pid $CHECKED: CPython 3\.[0-9]+(\.[0-9]+)?, --stack walks its Python frames" \
  && pass "check: $(echo "$out" | grep -oE "pid $CHECKED: [^;]*")" || fail "check CPython line: $out"
wait "$CHECKED"

for py in "${pythons[@]}"; do
  ver=$("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
  name="py$ver"
  trace_run "$name" "$py" "$PY_SCRIPT" --lib-dir "$SIM_LIB" --duration 4 --workers 2 \
    --batch-cpu-ms 3 --report
  db="$WORK/$name.db"
  # The stack most cudaStreamSync rows point at.
  top=$(q "$db" "SELECT e.stack_id FROM events e JOIN stacks s ON s.id = e.stack_id WHERE e.op = 'cudaStreamSync' AND e.pid = $LOOP GROUP BY e.stack_id ORDER BY COUNT(*) DESC LIMIT 1")
  [ -n "$top" ] || { fail "$name: no cudaStreamSync row with a stack"; continue; }
  loc=$(q "$db" "SELECT location FROM stacks WHERE id = $top")
  [ "$loc" = "$PY_SCRIPT:$SYNC_LINE" ] && pass "$name: sync location $loc" \
    || fail "$name: sync location '$loc', want $PY_SCRIPT:$SYNC_LINE"
  chain=$(q "$db" "SELECT group_concat(function || ':' || line, ' < ') FROM (SELECT function, line FROM stack_frames WHERE stack_id = $top AND kind = 'py' ORDER BY depth)")
  want="train:$SYNC_LINE < main:$TRAIN_CALL < <module>:$MAIN_CALL"
  [ "$chain" = "$want" ] && pass "$name: Python frames $chain" \
    || fail "$name: Python frames '$chain', want '$want'"
  native=$(q "$db" "SELECT function FROM stack_frames WHERE stack_id = $top AND depth = 0")
  [ "$native" = "cudaStreamSynchronize" ] && pass "$name: innermost frame is the probed function" \
    || fail "$name: innermost frame '$native'"

  "$GPUWHY" explain --db "$db" --pid $LOOP > "$WORK/$name.explain" 2>&1
  if grep -q "^Top cudaStreamSync callers" "$WORK/$name.explain" \
     && grep -q "^  train_loop.py:$SYNC_LINE in train → cudaStreamSync | " "$WORK/$name.explain" \
     && grep -qF '↳ check(rt, rt.cudaStreamSynchronize(stream), "cudaStreamSynchronize")' "$WORK/$name.explain"; then
    pass "$name: explain names train_loop.py:$SYNC_LINE with its source line"
  else
    fail "$name: explain callers section: $(sed -n '/^Top /,$p' "$WORK/$name.explain")"
  fi
  # Workers pinned with a competitor on their CPU are preempted while producing batches.
  victim=$(sed -n '/^Top sched_switch victims/,/^$/p' "$WORK/$name.explain" \
           | grep -E "^  train_loop.py:[0-9]+ in augment_batch → pt_data_worker" | head -1)
  preempted=$(echo "$victim" | sed -nE 's/.*preempted ([0-9,]+) times.*/\1/p' | tr -d ,)
  [ "${preempted:-0}" -gt 0 ] && pass "$name: victim ${victim%%|*}(preempted $preempted)" \
    || fail "$name: no preempted DataLoader site: $(sed -n '/^Top sched_switch victims/,/^$/p' "$WORK/$name.explain")"
  "$GPUWHY" explain --db "$db" --pid $LOOP --json > "$WORK/$name.json" 2>&1
  python3 - "$WORK/$name.json" "$SYNC_LINE" <<'PY' && pass "$name: explain --json carries callers and victims" || fail "$name: explain --json"
import json, sys
r = json.load(open(sys.argv[1]))
sync = next(c for c in r["callers"] if c["op"] == "cudaStreamSync")
top = sync["sites"][0]
assert top["line"] == int(sys.argv[2]) and top["function"] == "train", top
assert top["source_line"].startswith("check(rt, rt.cudaStreamSynchronize(stream)"), top
assert top["count"] > 0 and top["max_ms"] >= top["avg_ms"] > 0, top
v = r["sched_victims"]
assert v["op"] == "sched_switch" and v["with_stacks"] > 0 and v["sites"], v
PY
done

# ---- `trace --stack -- CMD`: the job starts under the tracer, through wrappers that exec ------
# The process is first seen before it is Python (gpuwhy's child, `env`, a shell shim): Python
# frames must still be walked once it execs the interpreter (issue 31 item 4).
py="${pythons[0]}"
cmd_run() {  # cmd_run NAME CMD...: trace -- CMD, then explain's callers must name the script
  local name=$1; shift
  "$GPUWHY" trace --stack --quiet --cuda-lib "$SIM_LIB" --db "$WORK/$name.db" -- "$@" \
    --lib-dir "$SIM_LIB" --duration 3 --workers 1 --batch-cpu-ms 3 > "$WORK/$name.trace" 2>&1 \
    || { fail "$name: trace -- exit $?: $(tail -5 "$WORK/$name.trace")"; return; }
  "$GPUWHY" explain --db "$WORK/$name.db" > "$WORK/$name.explain" 2>&1
  if grep -q "^  train_loop.py:$SYNC_LINE in train → cudaStreamSync | " "$WORK/$name.explain"; then
    pass "$name: explain names train_loop.py:$SYNC_LINE"
  else
    fail "$name: no train_loop.py:$SYNC_LINE caller" "$(sed -n '/^Top cudaStreamSync/,/^$/p' "$WORK/$name.explain")"
  fi
}
cmd_run cmd-direct "$py" "$PY_SCRIPT"
cmd_run cmd-env env GWSIM_E2E=1 "$py" "$PY_SCRIPT"
cmd_run cmd-module env PYTHONPATH="$WORKLOADS" "$py" -m train_loop
if [ -x /root/.pyenv/shims/python3 ]; then
  shim_ver=$(basename "$(dirname "$(dirname "$py")")")
  cmd_run cmd-pyenv-shim env PYENV_VERSION="$shim_ver" /root/.pyenv/shims/python3 "$PY_SCRIPT"
else
  echo "note - no pyenv shim here: the shim case is not run"
fi

# ---- native: the C++ loop (frame pointers, line info) ----------------------------------------
CC_SRC=$(cd "$WORKLOADS" && pwd)/train_loop.cc
CC_LINE=$(grep -n 'if (!Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize")) return false;' "$CC_SRC" | cut -d: -f1)
trace_run native "$SIM_BIN/gw_train_loop" --duration 4 --workers 2 --batch-cpu-ms 3
db="$WORK/native.db"
top=$(q "$db" "SELECT e.stack_id FROM events e WHERE e.op = 'cudaStreamSync' AND e.pid = $LOOP AND e.stack_id IS NOT NULL GROUP BY e.stack_id ORDER BY COUNT(*) DESC LIMIT 1")
caller=$(q "$db" "SELECT file || ':' || line FROM stack_frames WHERE stack_id = ${top:-0} AND depth = 1")
function=$(q "$db" "SELECT function FROM stack_frames WHERE stack_id = ${top:-0} AND depth = 1")
[ "$caller" = "$CC_SRC:$CC_LINE" ] && [ -n "$function" ] && pass "native: caller $caller in $function" \
  || fail "native: caller '$caller' in '$function', want $CC_SRC:$CC_LINE"
"$GPUWHY" explain --db "$db" --pid $LOOP > "$WORK/native.explain" 2>&1
grep -q "^  train_loop.cc:$CC_LINE in .* → cudaStreamSync | " "$WORK/native.explain" \
  && pass "native: explain names train_loop.cc:$CC_LINE" \
  || fail "native: explain: $(sed -n '/^Top /,$p' "$WORK/native.explain")"

# ---- the stack budget: --stack-rate 5 ----------------------------------------------------------
# A thread's CUDA rows shorter than 1 ms get at most 5 stacks a second (burst 1); slower calls
# (the per-step syncs wait for the simulated kernels) always get theirs; the rest are counted.
TRACE_EXTRA=(--stack-rate 5)
trace_run budget "${pythons[0]}" "$PY_SCRIPT" --lib-dir "$SIM_LIB" --duration 4 --workers 2 \
  --batch-cpu-ms 3
TRACE_EXTRA=()
db="$WORK/budget.db"
short="pid = $LOOP AND op LIKE 'cu%' AND duration_ns < 1000000"
most=$(q "$db" "SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM events WHERE $short AND stack_id IS NOT NULL GROUP BY tid, timestamp / 1000000000)")
bare=$(q "$db" "SELECT COUNT(*) FROM events WHERE $short AND stack_id IS NULL")
[ "$most" -ge 1 ] && [ "$most" -le 6 ] && [ "$bare" -gt 0 ] \
  && pass "budget: at most $most short-call stacks per thread and second (rate 5, burst 1); $bare short rows without one" \
  || fail "budget: $most short-call stacks in a thread-second (want 1..6), $bare short rows without a stack (want > 0)"
slow=$(q "$db" "SELECT COUNT(*) FROM events WHERE pid = $LOOP AND op LIKE 'cu%' AND duration_ns >= 1000000")
slow_bare=$(q "$db" "SELECT COUNT(*) FROM events WHERE pid = $LOOP AND op LIKE 'cu%' AND duration_ns >= 1000000 AND stack_id IS NULL")
[ "$slow" -gt 0 ] && [ "$slow_bare" -eq 0 ] && pass "budget: all $slow calls of 1 ms or more have their stack" \
  || fail "budget: $slow_bare of $slow calls of 1 ms or more have no stack"
grep -qE "note: stacks: .*, [1-9][0-9,]* CUDA call rows without one \(over --stack-rate 5 a second per thread\)" "$WORK/budget.trace" \
  && pass "budget: the summary counts the rows without a stack" \
  || fail "budget: summary: $(grep 'note: stacks' "$WORK/budget.trace")"
out=$("$GPUWHY" trace --stack-rate 5 --duration 1s 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q -- "--stack-rate needs --stack" && pass "--stack-rate without --stack is refused" \
  || fail "--stack-rate without --stack: rc $rc: $out"
out=$("$GPUWHY" trace --stack --stack-rate 0 --duration 1s 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q -- "--stack-rate 0: " && pass "--stack-rate 0 is refused" \
  || fail "--stack-rate 0: rc $rc: $out"

e2e_finish stack_e2e
