#!/usr/bin/env bash
# On the GPU machine: what gpuwhy records and explains on a real PyTorch training loop, healthy
# and with CPU contention injected (busy processes pinned to the training process's cores).
# With --stack, traces with `trace --stack` and also saves the top call sites per op.
# Usage (root): [CASES="healthy contention"] bench/gpu/diagnose.sh GPUWHY OUTDIR [--stack]
set -uo pipefail
GPUWHY=$1
OUT=$2
STACK=${3:-}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
mkdir -p "$OUT"

"$GPUWHY" check > "$OUT/check.txt" 2>&1
echo "check exit $?" >> "$OUT/check.txt"

run_case() {  # name, seconds, contention(0/1)
  local name=$1 secs=$2 contention=$3
  taskset -c 0-3 "$PY" "$HERE/torch_train.py" --duration $((secs + 25)) --log "$OUT/$name.steps" \
    --workers 4 > "$OUT/$name.train.log" 2>&1 &
  local train=$!
  sleep 12   # CUDA context, workers, warm-up
  "$GPUWHY" check > "$OUT/$name.check.txt" 2>&1  # with the job running: its CPython line
  "$GPUWHY" trace $STACK --duration "${secs}s" --db "$OUT/$name.db" --quiet > "$OUT/$name.trace.log" 2>&1 &
  local tracer=$!
  local burners=()
  if [ "$contention" = 1 ]; then
    sleep $((secs / 3))
    for c in 0 1 2 3 0 1 2 3; do
      taskset -c $c bash -c 'exec -a noisy_neighbor bash -c "while :; do :; done"' &
      burners+=($!)
    done
    sleep $((secs / 3))
    kill "${burners[@]}" 2>/dev/null
  fi
  wait $tracer
  echo "trace exit $?" >> "$OUT/$name.trace.log"
  kill -INT $train 2>/dev/null; wait $train 2>/dev/null
  "$GPUWHY" explain --db "$OUT/$name.db" --since "${secs}s" > "$OUT/$name.explain.txt" 2>&1
  "$GPUWHY" explain --db "$OUT/$name.db" --since "${secs}s" --json > "$OUT/$name.explain.json" 2>&1
  "$GPUWHY" query --db "$OUT/$name.db" "SELECT op, COUNT(*) AS n, SUM(duration_ns)/1e6 AS total_ms FROM events GROUP BY op ORDER BY n DESC" > "$OUT/$name.ops.txt" 2>&1
  "$GPUWHY" query --db "$OUT/$name.db" "SELECT op, name, SUM(count) AS calls FROM op_stats_seconds WHERE name IS NOT NULL GROUP BY op, name ORDER BY calls DESC LIMIT 25" > "$OUT/$name.kernels.txt" 2>&1
  "$GPUWHY" query --db "$OUT/$name.db" "SELECT pid, ppid, name, tracked FROM processes WHERE tracked = 1" > "$OUT/$name.procs.txt" 2>&1
  "$GPUWHY" query --db "$OUT/$name.db" "SELECT pn . name as process , COUNT ( * ) as context_switches , SUM ( duration_ns ) / 1e9 as total_off_cpu_sec , MAX ( duration_ns ) / 1e6 as worst_stall_ms FROM events e JOIN process_names pn ON e . pid = pn . pid WHERE op = 'sched_switch' AND timestamp > ( SELECT MAX ( timestamp ) - 120000000000 FROM events ) GROUP BY pn . name ORDER BY total_off_cpu_sec DESC LIMIT 10 ;" > "$OUT/$name.step2.txt" 2>&1
  "$GPUWHY" query --db "$OUT/$name.db" "SELECT id, events, drops, drops_detail, gpu_model, gpu_driver FROM sessions" > "$OUT/$name.session.txt" 2>&1
  if [ -n "$STACK" ]; then
    "$GPUWHY" query --db "$OUT/$name.db" "SELECT e.op, s.location, COUNT(*) AS n, AVG(e.duration_ns)/1e3 AS avg_us FROM events e JOIN stacks s ON s.id = e.stack_id GROUP BY 1, 2 ORDER BY n DESC LIMIT 40" > "$OUT/$name.stacks.txt" 2>&1
    "$GPUWHY" query --db "$OUT/$name.db" "SELECT stack_id, depth, kind, function, file, line, module FROM stack_frames WHERE stack_id IN (SELECT stack_id FROM events WHERE op = 'cudaDeviceSync' AND stack_id IS NOT NULL GROUP BY stack_id ORDER BY COUNT(*) DESC LIMIT 1) ORDER BY depth" > "$OUT/$name.sync_stack.txt" 2>&1
  fi
}

for c in ${CASES:-healthy contention}; do
  case $c in
    healthy) run_case healthy 40 0 ;;
    contention) run_case contention 45 1 ;;
    *) echo "diagnose.sh: unknown case $c (healthy, contention)" >&2; exit 2 ;;
  esac
done
ls -la "$OUT"
