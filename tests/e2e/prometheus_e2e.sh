#!/usr/bin/env bash
# trace --prometheus end to end with a real Prometheus server (Debian's `prometheus`, run in the
# foreground of this script with its own config and storage, scraping every second):
#   1. bad --prometheus values (and --prometheus-linger/-analysis) are usage errors (exit 2) and
#      a taken port an error (exit 1),
#      before anything is traced;
#   2. a live `gpuwhy trace --prometheus -- gw_train_loop` with one slow DataLoader worker (the
#      simulated NVML sampled too): the endpoint answers /metrics in the text format, 404
#      elsewhere, and the trace's note says where it serves;
#   3. through Prometheus's HTTP API after the trace (the final values, read by a last scrape
#      thanks to --prometheus-linger): per-process series of the job equal `gpuwhy query` on the
#      same recording exactly (context switches, off-CPU and run-queue seconds, CUDA calls,
#      launches, sync count), the drops equal sessions.drops_detail, the GPU gauges are there,
#      and the findings and feed time equal `gpuwhy explain --json` over the window the final
#      analysis used.
# Usage: prometheus_e2e.sh GPUWHY SIM_BIN SIM_LIB   (root: trace loads BPF; ~40 s)
set -uo pipefail
GPUWHY=$1 SIM_BIN=$2 SIM_LIB=$3
. "$(dirname "$0")/lib.sh"
e2e_require_root prometheus_e2e
PROMETHEUS=$(command -v prometheus || echo /usr/bin/prometheus)
[ -x "$PROMETHEUS" ] || { echo "FAIL - no prometheus binary (apt-get install prometheus; scripts/setup.sh)"; exit 1; }
e2e_workdir prometheus_e2e
NVML="$SIM_LIB/libnvidia-ml.so.1"
export GWSIM_GPU_STATE_DIR="$WORK/gpustate"
mkdir -m 1777 "$GWSIM_GPU_STATE_DIR"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# promq EXPR: the value of an instant query's single result ("" when none).
promq() {
  python3 - "$PROM_URL" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
url, expr = sys.argv[1], sys.argv[2]
with urllib.request.urlopen(url + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})) as r:
    d = json.load(r)
assert d["status"] == "success", d
res = d["data"]["result"]
print(res[0]["value"][1] if len(res) == 1 else "")
PY
}

# ---- 1. refused before anything starts -----------------------------------------------------
for bad in gpu-node.example:9464 127.0.0.1 127.0.0.1:99999 ::1:9464 ":9464"; do
  out=$("$GPUWHY" trace --duration 1s --db "$WORK/bad.db" --prometheus "$bad" 2>&1); rc=$?
  [ $rc -eq 2 ] && echo "$out" | grep -q "hint: ADDR:PORT" && [ ! -e "$WORK/bad.db" ] \
    && pass "--prometheus $bad refused (exit 2)" || fail "--prometheus $bad: rc=$rc $out"
done
out=$("$GPUWHY" trace --duration 1s --db "$WORK/bad.db" --prometheus-linger 5s 2>&1); rc=$?
[ $rc -eq 2 ] && pass "--prometheus-linger alone refused" || fail "--prometheus-linger alone: rc=$rc $out"
out=$("$GPUWHY" trace --duration 1s --db "$WORK/bad.db" --prometheus 127.0.0.1:0 --prometheus-analysis 5s 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "between 10s and 10m" && pass "--prometheus-analysis 5s refused" \
  || fail "--prometheus-analysis 5s: rc=$rc $out"
TAKEN=$(free_port)
# The holder says when it listens (python3 may be a slow shim, e.g. pyenv's: no fixed sleep).
python3 -c 'import socket, sys, time; s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); open(sys.argv[2], "w").write("listening\n"); time.sleep(30)' "$TAKEN" "$WORK/holder.ready" &
HOLDER=$!; PIDS="$HOLDER"
wait_for_line "$WORK/holder.ready" listening 15 || fail "the port holder did not start listening"

out=$("$GPUWHY" trace --duration 1s --db "$WORK/bad.db" --prometheus "127.0.0.1:$TAKEN" 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "listen on 127.0.0.1:$TAKEN: .*in use" && [ ! -e "$WORK/bad.db" ] \
  && pass "a taken port is an error before tracing: $out" || fail "taken port: rc=$rc $out"
kill "$HOLDER"; wait "$HOLDER" 2>/dev/null

# ---- 2. Prometheus scraping a live trace ------------------------------------------------------
GPORT=$(free_port); PPORT=$(free_port)
PROM_URL="http://127.0.0.1:$PPORT"
cat > "$WORK/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: gpuwhy
    static_configs:
      - targets: ["127.0.0.1:$GPORT"]
YML
"$PROMETHEUS" --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
  --web.listen-address="127.0.0.1:$PPORT" > "$WORK/prometheus.log" 2>&1 &
PROM=$!; PIDS="$PIDS $PROM"
for i in $(seq 100); do
  curl -sf "$PROM_URL/-/ready" > /dev/null 2>&1 && break
  sleep 0.2
done
curl -sf "$PROM_URL/-/ready" > /dev/null && pass "Prometheus $("$PROMETHEUS" --version 2>&1 | head -1 | awk '{print $3}') ready on :$PPORT" \
  || fail "Prometheus not ready: $(tail -5 "$WORK/prometheus.log")"

DB="$WORK/trace.db"
"$GPUWHY" trace --db "$DB" --prometheus "127.0.0.1:$GPORT" --prometheus-linger 20s \
  --nvml-lib "$NVML" -- "$SIM_BIN/gw_train_loop" --shape pytorch --workers 2 --duration 8 \
  --slow-worker-ms 40 > "$WORK/trace.out" 2>&1 &
TRACE=$!; PIDS="$PIDS $TRACE"
wait_for_line "$WORK/trace.out" "serving Prometheus metrics at http://127.0.0.1:$GPORT/metrics" 30 \
  && pass "the trace says where it serves" || fail "no serving note: $(cat "$WORK/trace.out")"
sleep 3
curl -s -D "$WORK/headers" "http://127.0.0.1:$GPORT/metrics" > "$WORK/page.txt"
grep -qi "^Content-Type: text/plain; version=0.0.4" "$WORK/headers" && grep -q "^# TYPE gpuwhy_context_switches_total counter" "$WORK/page.txt" \
  && grep -q '^gpuwhy_trace_running 1$' "$WORK/page.txt" \
  && pass "live /metrics in the text format ($(wc -l < "$WORK/page.txt") lines)" \
  || fail "live /metrics: $(cat "$WORK/headers") $(head -20 "$WORK/page.txt")"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$GPORT/")
[ "$code" = 404 ] && pass "/ is 404" || fail "/ answered $code"
# Prometheus's own parser accepts the page (promtool ships with the package).
if command -v promtool > /dev/null; then
  out=$(promtool check metrics < "$WORK/page.txt" 2>&1); rc=$?
  [ $rc -eq 0 ] && pass "promtool check metrics: clean" || fail "promtool check metrics: $out"
fi
wait "$TRACE"; rc=$?
[ $rc -eq 0 ] && pass "trace exited 0 after the final scrape" || fail "trace exit $rc: $(tail -20 "$WORK/trace.out")"
grep -q "no scrape read the final metrics" "$WORK/trace.out" && fail "the final values were not scraped"

# ---- 3. Prometheus's values against the recording ---------------------------------------------
# The tracer exits once a scrape has read its final page, so the scrape after that fails (up 0):
# what matters is that the target was scraped and that the last page read was the final one.
up=$(promq 'max_over_time(up{job="gpuwhy"}[5m])')
final=$(promq 'last_over_time(gpuwhy_trace_running[5m])')
[ "$up" = 1 ] && [ "$final" = 0 ] && pass "Prometheus scraped the final values (trace_running 0)" \
  || fail "up=$up trace_running=$final"
JOB=$(q "$DB" "SELECT pid FROM processes WHERE comm = 'gw_train_loop' AND ppid NOT IN (SELECT pid FROM processes WHERE comm = 'gw_train_loop') LIMIT 1")
NAME=$(q "$DB" "SELECT name FROM process_names WHERE pid = $JOB" | tr -d '"')
sel="pid=\"$JOB\",name=\"$NAME\""
same() {  # same WHAT PROMQL SQL: exact equality (numbers compared as floats to 1e-9)
  local got want
  got=$(promq "$2"); want=$(q "$DB" "$3")
  if python3 -c "import sys; g, w = sys.argv[1], sys.argv[2]; sys.exit(0 if g and w and abs(float(g) - float(w)) <= 1e-9 * max(1, abs(float(w))) else 1)" "$got" "$want"; then
    pass "$1: Prometheus $got = query $want"
  else
    fail "$1: Prometheus '$got' vs query '$want' ($2)"
  fi
}
same "context switches of the job" "last_over_time(gpuwhy_context_switches_total{$sel}[5m])" \
  "SELECT COUNT(*) FROM events WHERE op = 'sched_switch' AND pid = $JOB"
same "off-CPU seconds of the job" "last_over_time(gpuwhy_off_cpu_seconds_total{$sel}[5m])" \
  "SELECT SUM(duration_ns) / 1e9 FROM events WHERE op = 'sched_switch' AND pid = $JOB"
same "run-queue seconds of the job" "last_over_time(gpuwhy_runqueue_seconds_total{$sel}[5m])" \
  "SELECT SUM(runq_ns) / 1e9 FROM events WHERE op = 'sched_switch' AND pid = $JOB"
same "CUDA calls of the job (launches estimated)" "sum(last_over_time(gpuwhy_cuda_calls_total{$sel}[5m]))" \
  "SELECT SUM(CASE WHEN s.op IN ('cudaLaunchKernel','cudaLaunchKernelExC','cuLaunchKernel','cuLaunchKernelEx','cudaGraphLaunch') THEN s.count * (SELECT launch_duty FROM sessions ORDER BY id DESC LIMIT 1) ELSE s.count END) FROM op_stats_seconds s JOIN op_names o ON o.name = s.op WHERE o.layer <> 'host' AND s.pid = $JOB"
# Launches are counted one second in sessions.launch_duty: the live metric is the estimate.
same "kernel launches of the job (estimated: launch_duty × counted)" \
  "last_over_time(gpuwhy_kernel_launches_total{$sel}[5m])" \
  "SELECT SUM(count) * (SELECT launch_duty FROM sessions ORDER BY id DESC LIMIT 1) FROM op_stats_seconds WHERE op IN ('cudaLaunchKernel','cudaLaunchKernelExC','cuLaunchKernel','cuLaunchKernelEx','cudaGraphLaunch') AND pid = $JOB"
same "cudaStreamSync calls of the job (histogram count)" \
  "last_over_time(gpuwhy_cuda_sync_duration_seconds_count{$sel,op=\"cudaStreamSync\"}[5m])" \
  "SELECT COUNT(*) FROM events WHERE op = 'cudaStreamSync' AND pid = $JOB"
same "cudaStreamSync ≤ 1 ms (histogram bucket)" \
  "last_over_time(gpuwhy_cuda_sync_duration_seconds_bucket{$sel,op=\"cudaStreamSync\",le=\"0.001\"}[5m])" \
  "SELECT COUNT(*) FROM events WHERE op = 'cudaStreamSync' AND pid = $JOB AND duration_ns <= 1000000"
same "events decoded" "last_over_time(gpuwhy_events_total[5m])" \
  "SELECT events FROM sessions ORDER BY id DESC LIMIT 1"
same "host ring drops" "last_over_time(gpuwhy_dropped_events_total{where=\"host_sched_ring\"}[5m])" \
  "SELECT json_extract(drops_detail, '$.host_sched_ring') FROM sessions ORDER BY id DESC LIMIT 1"
workers=$(promq "count(last_over_time(gpuwhy_context_switches_total{name=~\"pt_data_worker.*|gw_train_loop\"}[5m]))")
[ "${workers:-0}" -ge 3 ] && pass "the job and its workers have series ($workers)" || fail "process series: $workers"
labels=$(curl -s "$PROM_URL/api/v1/labels" | python3 -c 'import json, sys; print(" ".join(json.load(sys.stdin)["data"]))')
echo "$labels" | grep -qw kernel && fail "a kernel label: $labels" || pass "labels: $labels"
util=$(promq 'last_over_time(gpuwhy_gpu_utilization_ratio{gpu="0"}[5m])')
sm=$(promq 'max_over_time(gpuwhy_gpu_sm_active_ratio{gpu="0"}[5m])')
python3 -c "import sys; u, s = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if 0 <= u <= 1 and 0 < s <= 1 else 1)" "${util:-x}" "${sm:-x}" 2>/dev/null \
  && pass "GPU 0: utilization $util, SM active up to $sm" || fail "GPU gauges: util '$util' sm '$sm'"

# The findings and feed time of the final analysis = explain over the same window.
from=$(promq 'last_over_time(gpuwhy_analysis_window_start_seconds[5m])')
to=$(promq 'last_over_time(gpuwhy_analysis_window_end_seconds[5m])')
runs=$(promq 'last_over_time(gpuwhy_analysis_runs_total[5m])')
python3 - "$PROM_URL" "$GPUWHY" "$DB" "$from" "$to" > "$WORK/findings.check" 2>&1 <<'PY'
import json, subprocess, sys, urllib.parse, urllib.request
url, gpuwhy, db, f, t = sys.argv[1:6]
def series(expr):
    with urllib.request.urlopen(url + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})) as r:
        return json.load(r)["data"]["result"]
ns = lambda s: str(round(float(s) * 1e9)) + "ns"
rep = json.loads(subprocess.run([gpuwhy, "explain", "--json", "--db", db, "--from", ns(f), "--to", ns(t)],
                                capture_output=True, text=True, check=True).stdout)
sev = {"LOW": 1, "MEDIUM": 2, "HIGH": 3}
want = {}
for x in rep["findings"]:
    want[x["rule"]] = max(want.get(x["rule"], 0), sev[x["severity"]])
got = {s["metric"]["rule"]: int(float(s["value"][1]))
       for s in series("last_over_time(gpuwhy_finding_severity[5m])") if float(s["value"][1]) > 0}
assert want, "explain found nothing on a slow-worker run"
assert got == want, (got, want)
feed = {(s["metric"]["group"], s["metric"]["cause"]): float(s["value"][1])
        for s in series("last_over_time(gpuwhy_feed_time_seconds[5m])")}
n = 0
for g in rep["feed_time"]:
    key = ("critical_path" if g["group"].startswith("main thread's critical path") else
           "training" if g["group"].startswith("training threads") else "workers")
    for c in g["causes"]:
        assert abs(feed[(key, c["cause"])] - c["seconds"]) <= 0.006, (key, c, feed.get((key, c["cause"])))
        n += 1
print(f"findings {got} and {n} feed-time rows as explain --from {ns(f)} --to {ns(t)}")
PY
[ $? -eq 0 ] && pass "$(cat "$WORK/findings.check") (analysis runs: $runs)" \
  || fail "findings vs explain: $(cat "$WORK/findings.check")"

kill "$PROM"; wait "$PROM" 2>/dev/null
e2e_finish prometheus_e2e
