#!/usr/bin/env bash
# End-to-end for `gpuwhy export --format folded` and `--format perfetto` on a live
# `trace --stack` recording (issue 17): the Python training loop on the simulated CUDA runtime,
# pinned to one CPU with a competitor, traced with --stack (root; ~15 s):
#   - folded off-CPU samples and --op cudaStreamSynchronize callers come out as
#     `process;outer;…;inner count` lines whose counts add up to the rows with stacks (gpuwhy
#     query), with train_loop.py's sync line in the sync stacks, outermost frame first;
#   - --weight time sums duration_ns in µs;
#   - the Perfetto export of the same live file decodes (protoc, tests/export/perfetto_decode.py)
#     with one CUDA slice per CUDA row.
# Usage: export_stack_e2e.sh GPUWHY SIM_BIN_DIR SIM_LIB_DIR WORKLOADS_DIR SOURCE_DIR
set -uo pipefail
GPUWHY=$1
SIM_BIN=$2
SIM_LIB=$3
WORKLOADS=$4
SRC=$5
. "$(dirname "$0")/lib.sh"
e2e_require_root export_stack_e2e
e2e_workdir export_stack_e2e

PY_SCRIPT="$WORKLOADS/train_loop.py"
SYNC_LINE=$(grep -n 'rt.cudaStreamSynchronize(stream), "cudaStreamSynchronize")' "$PY_SCRIPT" | cut -d: -f1)
PY=$(command -v python3)
DB="$WORK/live.db"
"$GPUWHY" trace --stack --duration 9s --cuda-lib "$SIM_LIB" --db "$DB" --quiet > "$WORK/trace.out" 2>&1 &
TRACE=$!; PIDS="$PIDS $TRACE"
sleep 2.5
taskset -c 0 "$PY" "$PY_SCRIPT" --lib-dir "$SIM_LIB" --duration 4 --workers 2 --batch-cpu-ms 3 \
  > "$WORK/loop.out" 2>&1 &
LOOP=$!; PIDS="$PIDS $LOOP"
sleep 0.5
"$SIM_BIN/gw_competitor" --cpu 0 --duration 3 > /dev/null 2>&1 &
COMP=$!; PIDS="$PIDS $COMP"
wait "$LOOP"; wait "$COMP"; wait "$TRACE" || fail "trace: $(cat "$WORK/trace.out")"

# Off-CPU samples (the default): the counts add up to the sched_switch rows with a stack.
"$GPUWHY" export --format folded -o "$WORK/offcpu.folded" --db "$DB" --pid "$LOOP" 2> "$WORK/f1.err" \
  || fail "folded off-cpu: $(cat "$WORK/f1.err")"
tree=$(q "$DB" "SELECT group_concat(pid) FROM processes WHERE session = (SELECT id FROM current_session) AND (pid = $LOOP OR ppid = $LOOP)" | tr -d '"')
want=$(q "$DB" "SELECT COUNT(*) FROM events WHERE op = 'sched_switch' AND stack_id IS NOT NULL AND pid IN ($tree) AND stack_id IN (SELECT id FROM stacks)")
got=$(awk '{s += $NF} END {print s + 0}' "$WORK/offcpu.folded")
[ "$want" -gt 0 ] && [ "$got" = "$want" ] && pass "folded off-CPU: $(wc -l < "$WORK/offcpu.folded") stacks, $got samples" \
  || fail "folded off-CPU: $got samples, want $want"
bad=$(grep -cvE '^[^;]+(;[^;]+)+ [0-9]+$' "$WORK/offcpu.folded")
[ "$bad" -eq 0 ] && pass "every line is 'frame;…;frame count'" || fail "$bad malformed lines: $(grep -vE '^[^;]+(;[^;]+)+ [0-9]+$' "$WORK/offcpu.folded" | head -2)"

# The syncs' callers: the line of train_loop.py that calls cudaStreamSynchronize, under
# <module> and main (outermost first), above the probed function.
"$GPUWHY" export --format folded --op cudaStreamSynchronize -o "$WORK/sync.folded" --db "$DB" --pid "$LOOP" 2> "$WORK/f2.err" \
  || fail "folded --op: $(cat "$WORK/f2.err")"
want=$(q "$DB" "SELECT COUNT(*) FROM events WHERE op = 'cudaStreamSync' AND stack_id IS NOT NULL AND pid IN ($tree)")
got=$(awk '{s += $NF} END {print s + 0}' "$WORK/sync.folded")
[ "$want" -gt 0 ] && [ "$got" = "$want" ] && pass "folded --op cudaStreamSynchronize: $got calls" || fail "folded sync: $got, want $want"
top=$(awk '$NF > max {max = $NF; line = $0} END {print line}' "$WORK/sync.folded")
echo "$top" | grep -qE "^python3[^;]*;(.*;)?<module> \(train_loop.py:[0-9]+\);main \(train_loop.py:[0-9]+\);.*train \(train_loop.py:$SYNC_LINE\);.*cudaStreamSynchronize [0-9]+$" \
  && pass "top sync stack: ${top:0:160}…" || fail "top sync stack: $top"
"$GPUWHY" export --format folded --op cudaStreamSync --weight time -o "$WORK/sync_us.folded" --db "$DB" --pid "$LOOP" 2>/dev/null
want=$(q "$DB" "SELECT SUM(duration_ns) / 1000 FROM events WHERE op = 'cudaStreamSync' AND stack_id IS NOT NULL AND pid IN ($tree)")
got=$(awk '{s += $NF} END {print s + 0}' "$WORK/sync_us.folded")
# per-stack integer division: within one µs per stack
diff=$(( want - got )); lines=$(wc -l < "$WORK/sync_us.folded")
[ "$diff" -ge 0 ] && [ "$diff" -le "$lines" ] && pass "--weight time: $got µs (SQL $want)" || fail "--weight time: $got µs, want $want"

# The Perfetto export of the same live recording.
"$GPUWHY" export --format perfetto -o "$WORK/live.pftrace" --db "$DB" 2> "$WORK/p.err" || fail "perfetto: $(cat "$WORK/p.err")"
protoc --decode_raw < "$WORK/live.pftrace" > /dev/null 2>&1 && pass "protoc --decode_raw reads the live trace" || fail "protoc on the live trace"
python3 "$SRC/tests/export/perfetto_decode.py" "$WORK/live.pftrace" > "$WORK/live.json"
want=$(q "$DB" "SELECT COUNT(*) FROM events e JOIN op_names o ON o.id = e.op_id WHERE o.layer != 'host'")
python3 - "$WORK/live.json" "$want" <<'PY' && pass "live trace: well formed, $want CUDA slices" || fail "live trace content"
import json, sys
s = json.load(open(sys.argv[1]))
assert not s["problems"], s["problems"][:5]
n = sum(c for u, t in s["tracks"].items() if t["kind"] == "thread"
        for name, c in s["per_track"].get(u, {"names": {}})["names"].items() if name.startswith("cu"))
assert n == int(sys.argv[2]), (n, sys.argv[2])
PY
e2e_finish export_stack_e2e
