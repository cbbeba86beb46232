#!/usr/bin/env bash
# The GPU-time budget end to end (issue 30): every job shape of the simulated runtime's Python
# training loop traced with `gpuwhy trace -- …` and the simulated NVML, explained, and judged
# against the workload's own measured slowdown:
#   healthy        nothing above LOW; the budget comes from NVML split by process
#   start-up       ~2 s of CPU before the job's first CUDA call: outside the budget, quiet
#   gil-thread     gil-contention on top (the GIL hand-offs seen), naming a thread of the trainer
#   main batches   host-compute on top, fix: num_workers>0
#   tiny kernels   host-compute (dispatch) on top, fix: CUDA Graphs
#   helper thread  the same with an autograd helper thread launching the backward: its CPU time
#                  a budget line of its own
#   allocator      malloc-churn on top (torch.cuda.empty_cache()'s churn every step), fix:
#                  remove the empty_cache() call
#   neighbour      gpu-sharing on top (another process on a shared simulated GPU), and the
#                  verdict does not blame the job's own kernels
#   checkpoint     main-thread-io on top, fix: an asynchronous checkpoint
#   locked ckpt    the same checkpoint written by a thread holding a lock the loop takes every
#                  step: main-thread-io on top, naming that thread, fix: stop waiting for it
#   sleeps         host-sleep on top (time.sleep in the loop), fix: no sleep in the step
#   poll sleeps    a control: the same sleep after the step is queued, which the GPU works
#                  through (the sync's since_work_ns proves it): nothing above LOW, no host-sleep
#   subprocess     waits-for-program on top (a program run and waited for every 20 steps),
#                  naming it as started by the job, fix: subprocess.Popen
#   network loader loader-waits on top (each worker sleeps 30 ms a batch, as on a fetch), fix:
#                  more requests in flight
#   6 workers      cpu-oversubscription on top (the job's own processes crowd 2 CPUs)
#   1 slow worker  dataloader-starvation on top
#   faulting       dataloader-starvation on top, the workers' page faults named, fix: reuse buffers
#   pageable       memcpy-bottleneck on top (32 MiB pageable copies), fix: pin_memory=True
#   hogs           cpu-contention on top (two busy loops of other processes at nice -10), fix:
#                  renice them
#   CPU quota      cpu-quota on top (the loop's cgroup capped at 0.3 CPU), fix: raise the limit
# Where the shape has a healthy equivalent, the top finding's lost seconds must match the
# measured slowdown, (1 - faulted steps/s / healthy steps/s) x the job's loop, within ±25%
# (±20% is the bar on the H200; these 2 shared CPUs run the tracer, the loop and its workers at
# once; every case was within ±15% in the runs of 2026-12-07, docs/accuracy.md).
# Usage: budget_e2e.sh GPUWHY SIM_LIB WORKLOADS   (root: trace loads BPF; ~4 min; plain build only)
set -uo pipefail
GPUWHY=$1 SIM_LIB=$2 WORKLOADS=$3
. "$(dirname "$0")/lib.sh"
e2e_require_root budget_e2e
e2e_workdir budget_e2e
NVML="$SIM_LIB/libnvidia-ml.so.1"
[ -f "$NVML" ] || { echo "FAIL - missing $NVML (build gwsim_libs)"; exit 1; }
export GWSIM_GPU_STATE_DIR="$WORK/gpustate"
# The simulated GPU completes its work on time however crowded the 2 CPUs are, as a real one
# does (sim/README: GWSIM_EXECUTOR_RT).
export GWSIM_EXECUTOR_RT=1
mkdir -m 1777 "$GWSIM_GPU_STATE_DIR"
LOOP=(python3 "$WORKLOADS/train_loop.py" --lib-dir "$SIM_LIB" --duration 8 --report)
WRAP=()  # a command the loop runs under (the CPU-quota case's cgroup move)

# run NAME [train flags]: trace the loop, keep its steps/s and explain --json.
run() {
  local name=$1; shift
  "$GPUWHY" trace --quiet --db "$WORK/$name.db" --nvml-lib "$NVML" -- ${WRAP[@]+"${WRAP[@]}"} "${LOOP[@]}" "$@" \
    > "$WORK/$name.out" 2>&1 || { fail "$name: trace exit $?" "$(tail -5 "$WORK/$name.out")"; return 1; }
  "$GPUWHY" explain --json --db "$WORK/$name.db" > "$WORK/$name.json" 2> "$WORK/$name.err" \
    || { fail "$name: explain failed" "$(cat "$WORK/$name.err")"; return 1; }
  "$GPUWHY" explain --db "$WORK/$name.db" > "$WORK/$name.txt" 2>&1
  sed -n 's/.*steps_per_s=\([0-9.]*\).*/\1/p' "$WORK/$name.out" > "$WORK/$name.rate"
}

# check NAME RULE FIX_WORDS [HEALTHY_NAME]: the top finding is RULE at MEDIUM or above, one fix
# line holds FIX_WORDS, and with HEALTHY_NAME its lost seconds match the measured slowdown.
# check NAME RULE FIX [HEALTHY [TOLERANCE]]: the top finding, its fix, and its lost seconds
# against the slowdown measured in steps/s (within TOLERANCE, default 25%).
check() {
  local name=$1 rule=$2 fix=$3 healthy=${4:-} tolerance=${5:-0.25}
  local verdict
  verdict=$(python3 - "$WORK/$name.json" "$rule" "$fix" "$WORK/$name.rate" \
    "${healthy:+$WORK/$healthy.rate}" "$tolerance" <<'EOF'
import json, sys
path, rule, fix, rate_file = sys.argv[1:5]
healthy_file = sys.argv[5] if len(sys.argv) > 5 else ""
tolerance = float(sys.argv[6]) if len(sys.argv) > 6 else 0.25
d = json.load(open(path))
f = d["findings"]
if not f:
    print("FAIL no finding"); sys.exit()
top = f[0]
if top["rule"] != rule or top["severity"] == "LOW":
    print("FAIL top finding [%s] %s, want %s" % (top["severity"], top["rule"], rule)); sys.exit()
if not any(fix in line for line in top["fix"]):
    print("FAIL no fix line with %r: %s" % (fix, top["fix"])); sys.exit()
msg = "[%s] %s, %.2f s lost" % (top["severity"], rule, top["lost_s"])
if healthy_file:
    rate, base = float(open(rate_file).read()), float(open(healthy_file).read())
    measured = (1 - rate / base) * d["budget"]["window_s"]
    err = (top["lost_s"] - measured) / measured if measured > 0 else 0
    msg += "; measured slowdown %.2f s (%.1f vs %.1f steps/s): %+.0f%%" % (
        measured, rate, base, 100 * err)
    if abs(err) > tolerance:
        print("LOST " + msg); sys.exit()
print("OK " + msg)
EOF
)
  case "$verdict" in
    OK*) pass "$name: ${verdict#OK }" ;;
    LOST*) fail "$name: ${verdict#LOST }" ;;
    *) fail "$name: ${verdict#FAIL }" "$(sed -n '/Causal/,/GPU feed/p' "$WORK/$name.txt" | head -20)" ;;
  esac
}

# ---- healthy: the reference, and quiet ---------------------------------------------------------
if run healthy; then
  python3 - "$WORK/healthy.json" <<'EOF' && pass "healthy: nothing above LOW, budget from nvml-process" \
    || fail "healthy" "$(head -30 "$WORK/healthy.txt")"
import json, sys
d = json.load(open(sys.argv[1]))
assert all(f["severity"] == "LOW" for f in d["findings"]), [(f["rule"], f["severity"], f["root"]) for f in d["findings"]]
b = d["budget"]
assert b["source"] == "nvml-process", b["source"]
total = sum(c["path_s"] for c in b["causes"])
assert abs(total - b["window_s"]) < 0.05 * b["window_s"], (total, b["window_s"])
assert b["gpu_busy_job_s"] > 0.5 * b["window_s"], b
EOF
fi

# ---- start-up: the job computes ~2 s on the CPU before its first CUDA call (a shell loop, then
# exec: imports and set-up look alike), then runs the healthy loop. The start-up is outside the
# loop the budget covers: nothing above LOW, and the budget says what it left out.
WRAP=(sh -c 'i=0; while [ $i -lt 1000000 ]; do i=$((i+1)); done; exec "$@"' sh)
run startup
WRAP=()
python3 - "$WORK/startup.json" <<'EOF' && pass "startup: CPU start-up before the first CUDA call is outside the budget" \
  || fail "startup" "$(sed -n '/GPU time over/,/GPU feed/p' "$WORK/startup.txt" | head -30)"
import json, sys
d = json.load(open(sys.argv[1]))
assert all(f["severity"] == "LOW" for f in d["findings"]), [(f["rule"], f["severity"], f["lost_s"]) for f in d["findings"]]
assert d["budget"]["startup_s"] > 1.0, d["budget"]["startup_s"]
EOF
# diff reads the same critical path over the same loop as explain's table (one definition).
"$GPUWHY" diff --json "$WORK/startup.db" "$WORK/healthy.db" > "$WORK/diff.json" 2>&1
python3 - "$WORK/startup.json" "$WORK/diff.json" <<'EOF' && pass "startup: diff's critical path is explain's (the loop's)" \
  || fail "startup: diff and explain disagree on the critical path" "$(head -c 600 "$WORK/diff.json")"
import json, sys
e, d = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
table = {c["cause"]: c["pct"] for c in e["feed_time"][0]["causes"]}
rows = {r["key"]: r["before"] for r in d["rows"] if r["key"].startswith("feed_")}
assert rows, d["rows"]
for key, pct in rows.items():
    cause = key[len("feed_"):-len("_pct")]
    assert abs(pct - table[cause]) < 0.1, (key, pct, table[cause])
EOF

run gil --gil-thread && check gil gil-contention "GIL" healthy
grep -q "thread [0-9]* of python3" "$WORK/gil.txt" && pass "gil: the holding thread is named" \
  || fail "gil: no holding thread named" "$(sed -n '/Causal/,/Fix/p' "$WORK/gil.txt")"
run batches --main-thread-batches --batch-cpu-ms 20 && check batches host-compute "num_workers>0" healthy
run tiny --kernels-per-step 2000 --kernel-us 5 && check tiny host-compute "reduce-overhead"
# The same loop with its backward launched by a second Python thread (pt_autograd_0), which the
# main thread waits for: the helper's CPU is its own budget line, named in the root.
if run helper --helper-thread --kernels-per-step 2000 --kernel-us 5; then
  check helper host-compute "reduce-overhead"
  python3 - "$WORK/helper.json" <<'EOF' && pass "helper: the autograd helper's CPU time is its own line" \
    || fail "helper: helper_compute missing" "$(sed -n '/GPU time over/,/Fix/p' "$WORK/helper.txt" | head -30)"
import json, sys
d = json.load(open(sys.argv[1]))
line = [c for c in d["budget"]["causes"] if c["cause"] == "helper_compute"][0]
assert line["lost_s"] > 0.1, line
assert any("CUDA helper threads" in r for r in d["findings"][0]["root"]), d["findings"][0]["root"]
EOF
fi
# torch.cuda.empty_cache() every step: 8 blocks of 4 MiB allocated before the launches and freed
# back to back after them, the first free waiting out the step's kernels. 12 s, so that the
# start-up before the CUDA probes attach (no rows: its idle time has no cause) weighs less.
run churn --empty-cache 8 --empty-cache-mb 4 --duration 12 \
  && check churn malloc-churn "remove torch.cuda.empty_cache()" healthy
# The checkpoint's writes under 1 ms are not recorded (only slow reads and writes are); the CPU
# it spends in them comes from the on-CPU profile's writing samples (host_write). One 64 MB
# checkpoint costs ~65 ms here (15 ms writing, 50 ms fsync): every 25 steps, so that its ~2 s
# of slowdown stands well above the run-to-run noise of the steps/s (±4%).
run ckpt --checkpoint-file "$WORK/ckpt.bin" --checkpoint-mb 64 --checkpoint-every 25 \
  && check ckpt main-thread-io "checkpoint asynchronously" healthy
run lockedckpt --checkpoint-file "$WORK/ckpt2.bin" --checkpoint-mb 64 --checkpoint-every 25 \
  --checkpoint-thread \
  && check lockedckpt main-thread-io "stop the training loop waiting for thread" healthy
run sleeps --main-sleep-ms 10 && check sleeps host-sleep "time.sleep()" healthy
# 3 ms after queuing 8 ms of kernels: the sync still waits, so the GPU worked through it.
if run poll --poll-sleep-ms 3; then
  python3 - "$WORK/poll.json" <<'EOF' && pass "poll: a sleep the GPU works through is quiet" \
    || fail "poll: a sleep the GPU works through was blamed" "$(sed -n '/GPU time over/,/GPU feed/p' "$WORK/poll.txt" | head -30)"
import json, sys
d = json.load(open(sys.argv[1]))
assert all(f["severity"] == "LOW" for f in d["findings"]), [(f["rule"], f["severity"], f["lost_s"]) for f in d["findings"]]
assert not any(f["rule"] == "host-sleep" for f in d["findings"]), [f["rule"] for f in d["findings"]]
sleep = [c for c in d["budget"]["causes"] if c["cause"] == "host_sleep"][0]
assert sleep["path_s"] > 1.0, sleep  # the sleeps were on the path (the case tests something)
assert sleep["lost_s"] < 0.1 * sleep["path_s"], sleep
EOF
fi
run program --wait-program-every 20 --wait-program-ms 150 \
  && check program waits-for-program "subprocess.Popen" healthy
grep -q "python3 (-c).*started by the job" "$WORK/program.txt" \
  && pass "program: the program the job waited for is named" \
  || fail "program: the program is not named" "$(sed -n '/Causal/,/Fix/p' "$WORK/program.txt")"
run netload --batch-sleep-ms 30 && check netload loader-waits "more requests in flight" healthy
run crowded --workers 6 --batch-cpu-ms 25 && check crowded cpu-oversubscription "num_workers="
run starved --workers 1 --batch-cpu-ms 25 && check starved dataloader-starvation "DataLoader(" healthy
# Pageable 32 MiB batches: each copy is staged through a bounce buffer and waited for.
run pageable --pageable --batch-bytes 32M && check pageable memcpy-bottleneck "pin_memory=True" healthy
# Two busy loops of other processes at nice -10 on the 2 CPUs: the workers wait for a CPU.
for _ in 1 2; do timeout 13 nice -n -10 python3 -c 'while True: pass' & PIDS="$PIDS $!"; done
run hogs && check hogs cpu-contention "renice -n 19" healthy
wait
# Workers that fault in 256 MiB of fresh memory a batch: starvation, its computing named as
# page faults, and the first fix is to reuse the buffers (not more prefetching).
run faulting --touch-mb 256 && check faulting dataloader-starvation "reuse each batch's buffers" healthy
grep -q "The workers' CPU time was .* in the kernel, with .* page faults a second" "$WORK/faulting.txt" \
  && pass "faulting: the workers' page faults are named" \
  || fail "faulting: page faults not named" "$(sed -n '/Causal/,/Fix/p' "$WORK/faulting.txt")"

# ---- a CPU quota: the loop's own cgroup capped at 0.3 CPU (cgroup v1 cpu controller) ----------
# The simulated GPU's executor threads move back to the root cgroup (GWSIM_EXECUTOR_TASKS_FILE):
# a real GPU is not throttled by the job's CPU limit. Fix: raise the limit; never pinning.
CPU_V1=/sys/fs/cgroup/cpu
if [ -w "$CPU_V1/tasks" ] && [ -f "$CPU_V1/cpu.cfs_quota_us" ]; then
  QCG="$CPU_V1/gw_budget_e2e.$$"
  mkdir "$QCG" && echo 100000 > "$QCG/cpu.cfs_period_us" && echo 30000 > "$QCG/cpu.cfs_quota_us"
  WRAP=(sh -c "echo \$\$ > '$QCG/cgroup.procs' && exec \"\$@\"" sh)
  GWSIM_EXECUTOR_TASKS_FILE="$CPU_V1/tasks" run quota
  WRAP=()
  rmdir "$QCG" 2>/dev/null
  check quota cpu-quota "raise the CPU limit to at least" healthy
  python3 - "$WORK/quota.json" <<'EOF' && pass "quota: the cgroup, its limit and throttling are named; no pinning advice" \
    || fail "quota: evidence or fixes" "$(sed -n '/Causal/,/GPU feed/p' "$WORK/quota.txt" | head -24)"
import json, sys
d = json.load(open(sys.argv[1]))
top = d["findings"][0]
root = " ".join(top["root"])
assert "gw_budget_e2e" in root and "0.30 CPUs" in root and "Throttled in" in root, root
assert "period timer refilled the quota" in root, root  # the waits' ends found the refill
for f in d["findings"]:
    for line in f["fix"]:
        assert "taskset -" not in line and not line.startswith("pin the job"), (f["rule"], line)
m = {x["name"]: x["value"] for x in top["metrics"]}
assert m["throttled_periods"] > 0.5 * m["periods"], m
EOF
else
  e2e_skip budget_e2e "no writable cgroup v1 cpu hierarchy at $CPU_V1 for the CPU-quota case"
fi

# ---- a neighbour on the same (shared) simulated GPU ---------------------------------------------
export GWSIM_SHARED_DEVICE=1
"${LOOP[@]}" --neighbour --duration 11 > "$WORK/neighbour.out" 2>&1 &
PIDS="$PIDS $!"
sleep 1
run neighbour_job
wait
unset GWSIM_SHARED_DEVICE
# The reference for the shared run is the healthy run above (same loop, GPU to itself).
check neighbour_job gpu-sharing "own GPU" healthy
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
v = d.get("gpu_verdict", "")
assert "faster kernels" not in v, v
' "$WORK/neighbour_job.json" && pass "neighbour: the verdict does not blame the job's kernels" \
  || fail "neighbour: verdict blames the job's kernels"

e2e_finish budget_e2e
