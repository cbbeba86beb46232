#!/usr/bin/env bash
# End-to-end: every evidence query `gpuwhy explain --json` prints runs in `gpuwhy query` as a
# user would paste it, on every demo scenario (no root needed). Each query succeeds, returns
# rows, reads the views (`events`/`events_all`, `op_stats_seconds`) with op names, never
# `event_rows`/`op_seconds` or numeric op ids, and reproduces the finding's numbers it backs:
# sync p50/p99 per 10 s window (baseline and peak), the peak and lowest CUDA throughput, the
# slow-sync count and seconds, the main process's context switches, the feeders' block I/O
# p99 and baseline p50, their major faults, the main thread's pageable share of copied bytes. A second session is then
# appended: explaining the older one must read `events_all WHERE session = N` and still agree.
# Usage: evidence_e2e.sh GPUWHY
set -uo pipefail
GPUWHY=$1
. "$(dirname "$0")/lib.sh"
e2e_workdir evidence_e2e

# check_evidence DB LABEL [EXPLAIN ARGS...]: explain DB, run its evidence, compare numbers.
check_evidence() {
  local db=$1 label=$2; shift 2
  local json
  json=$("$GPUWHY" explain --db "$db" --json "$@" 2>"$WORK/explain.err") \
    || { fail "$label: explain failed: $(cat "$WORK/explain.err")"; return; }
  local out
  out=$(echo "$json" | GPUWHY="$GPUWHY" DB="$db" EXPECT_SESSION="${EXPECT_SESSION:-}" python3 -c '
import json, os, re, subprocess, sys

report = json.load(sys.stdin)
gpuwhy, db, expect_session = os.environ["GPUWHY"], os.environ["DB"], os.environ["EXPECT_SESSION"]
problems, ran = [], 0

def query(sql):
    r = subprocess.run([gpuwhy, "query", "--db", db, "--json", "--limit", "1000000", sql],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("rc=%d: %s" % (r.returncode, r.stderr.strip()))
    return json.loads(r.stdout)

def close(a, b):
    return a is not None and b is not None and abs(a - b) <= 0.0015 + 1e-6 * abs(b)

for f in report["findings"]:
    rule = f["rule"]
    metrics = {m["name"]: m["value"] for m in f["metrics"]}
    results = {}
    for ev in f["evidence"]:
        sql, what = ev["sql"], ev["what"]
        where = "%s / %s" % (rule, what)
        if re.search(r"\bevent_rows\b|\bop_seconds\b", sql):
            problems.append(where + ": reads a raw table: " + sql)
        if re.search(r"\bop(_id)?\s*(=|<|>|<=|>=|!=)\s*\d|\bop(_id)?\s+(NOT\s+)?IN\s*\(\s*\d", sql):
            problems.append(where + ": numeric op id comparison: " + sql)
        if expect_session and "events_all" in sql and "session = " + expect_session not in sql:
            problems.append(where + ": events_all without session = " + expect_session)
        if expect_session and re.search(r"\bevents\b(?!_all)", sql):
            problems.append(where + ": the newest-session view for an older session")
        if not expect_session and "events_all" in sql:
            problems.append(where + ": events_all for the newest session")
        try:
            rows = query(sql)
        except Exception as e:
            problems.append(where + ": " + str(e) + ": " + sql)
            continue
        ran += 1
        if not rows:
            problems.append(where + ": no rows: " + sql)
        results[what] = rows

    def rows_of(prefix):
        return next((r for w, r in results.items() if w.startswith(prefix)), None)

    if "sync_p99_peak_us" in metrics:
        rows = rows_of("the training process\x27s syncs per 10 s window") or []
        base = [r for r in rows if r.get("note") in ("baseline", "baseline, peak")]
        peak = [r for r in rows if r.get("note") in ("peak", "baseline, peak")]
        if len(base) != 1 or not close(base[0]["p99_us"], metrics["sync_p99_baseline_us"]):
            problems.append("%s: baseline p99 %s != %s" % (rule, base, metrics["sync_p99_baseline_us"]))
        if len(peak) != 1 or not close(peak[0]["p99_us"], metrics["sync_p99_peak_us"]):
            problems.append("%s: peak p99 %s != %s" % (rule, peak, metrics["sync_p99_peak_us"]))
    if "cuda_ops_per_s_peak" in metrics:
        rows = {r["bucket"]: r for r in rows_of("CUDA calls per second in the peak") or []}
        for key, name in (("peak", "cuda_ops_per_s_peak"), ("lowest", "cuda_ops_per_s_low")):
            got = rows.get(key, {}).get("ops_per_s")
            if not (got is not None and abs(got - metrics[name]) <= 0.051):
                problems.append("%s: %s ops/s %s != %s" % (rule, key, got, metrics[name]))
    if "slow_syncs" in metrics:
        rows = rows_of("slow syncs of the training process") or [{}]
        if rows[0].get("slow_syncs") != metrics["slow_syncs"] or \
           not close(rows[0].get("seconds"), metrics["slow_sync_s"]):
            problems.append("%s: slow syncs %s != %s / %s s" % (rule, rows[0], metrics["slow_syncs"],
                                                                metrics["slow_sync_s"]))
    if "block_io_p99_ms" in metrics:
        rows = {r["rows"]: r for r in rows_of("the feeders\x27 block I/O") or []}
        got = rows.get("block_io", {}).get("p99_ms")
        if not close(got, metrics["block_io_p99_ms"]):
            problems.append("%s: block I/O p99 %s != %s" % (rule, got, metrics["block_io_p99_ms"]))
        base = rows.get("block_io, baseline window", rows.get("block_io", {})).get("p50_ms")
        if not close(base, metrics["block_io_baseline_p50_ms"]):
            problems.append("%s: block I/O baseline p50 %s != %s" % (rule, base,
                                                                   metrics["block_io_baseline_p50_ms"]))
    if "major_faults" in metrics:
        rows = rows_of("major page faults and direct reclaim") or [{}]
        if rows[0].get("major_faults") != metrics["major_faults"]:
            problems.append("%s: major faults %s != %s" % (rule, rows[0], metrics["major_faults"]))
    if "pageable_bytes_share" in metrics:
        rows = {r["host_memory"]: r for r in rows_of("the main thread\x27s host-device copies") or []}
        got = rows.get("pageable", {}).get("bytes_pct", 0.0 if rows else None)
        if got is None or abs(got - metrics["pageable_bytes_share"]) > 0.051:
            problems.append("%s: pageable share %s != %s" % (rule, got, metrics["pageable_bytes_share"]))
    if "main_context_switches" in metrics:
        pid = int(re.search(r"\(PID (\d+)\)", f["root"][0]).group(1))
        rows = rows_of("context switches, run-queue wait") or []
        got = [r["switches"] for r in rows if r["pid"] == pid]
        if got != [metrics["main_context_switches"]]:
            problems.append("%s: switches of PID %d %s != %s" % (rule, pid, got,
                                                                metrics["main_context_switches"]))

print("%d queries of %d findings" % (ran, len(report["findings"])))
for p in problems:
    print("PROBLEM " + p)
sys.exit(1 if problems else 0)
' 2>&1)
  if [ $? -eq 0 ]; then pass "$label: $out"; else fail "$label: $out"; fi
}

scenarios=$("$GPUWHY" demo 2>&1 | awk '/^Scenarios/ {on = 1; next} /^$/ {on = 0} on {print $1}')
[ -n "$scenarios" ] || { echo "FAIL - no scenarios in: $("$GPUWHY" demo 2>&1)"; exit 1; }
for scenario in $scenarios; do
  db=$WORK/$scenario.db
  "$GPUWHY" demo "$scenario" --keep "$db" > /dev/null 2>&1 || { fail "demo $scenario"; continue; }
  check_evidence "$db" "$scenario"
done

# An older session: evidence reads events_all with its session id, and agrees all the same.
db=$WORK/two.db
if "$GPUWHY" demo cpu-contention --keep "$db" > /dev/null 2>&1 &&
   "$GPUWHY" demo healthy --duration 30s --keep "$db" > /dev/null 2>&1; then
  EXPECT_SESSION=1 check_evidence "$db" "cpu-contention as session 1 of 2" --session 1
else
  fail "demo cpu-contention + healthy into one file"
fi

e2e_finish evidence_e2e
