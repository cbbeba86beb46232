#!/usr/bin/env bash
# End-to-end: `trace --sink` into a real ClickHouse server (Debian's clickhouse-server, started
# here on free ports), `fleet`, `query --clickhouse` and `explain --clickhouse` (root; ~90 s).
#   1. node-a traces a slow DataLoader worker; ClickHouse is killed mid-trace and restarted:
#      every row arrives once (ClickHouse count = local count), the summary says so.
#   2. node-b traces synchronous pageable copies.
#   3. fleet ranks both, each with its injected fault as the top finding, in lost-seconds order.
#   4. explain --clickhouse --node gives the same report as explain on the node's own file;
#      query --clickhouse --node runs the brief's SQL unchanged with the local result.
#   5. ClickHouse down for a whole trace: the rows wait in the file; the next trace --sink on
#      that file (server back) sends them, nothing lost, nothing twice.
set -uo pipefail
GPUWHY="$1"
SIM_BIN="$2"
. "$(dirname "$0")/lib.sh"
e2e_require_root clickhouse_e2e
e2e_workdir clickhouse_e2e
CH_SERVER=$(command -v clickhouse-server || echo /usr/sbin/clickhouse-server)
[ -x "$CH_SERVER" ] || { echo "FAIL - clickhouse-server not installed (scripts/setup.sh installs it)"; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
HTTP_PORT=$(free_port); TCP_PORT=$(free_port)
mkdir -p "$WORK/ch"
cat > "$WORK/ch/config.xml" <<EOF
<yandex>
  <logger><level>warning</level><log>$WORK/ch/server.log</log><errorlog>$WORK/ch/error.log</errorlog></logger>
  <http_port>$HTTP_PORT</http_port>
  <tcp_port>$TCP_PORT</tcp_port>
  <listen_host>127.0.0.1</listen_host>
  <path>$WORK/ch/data/</path>
  <tmp_path>$WORK/ch/tmp/</tmp_path>
  <user_files_path>$WORK/ch/user_files/</user_files_path>
  <format_schema_path>$WORK/ch/format_schemas/</format_schema_path>
  <users_config>$WORK/ch/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>67108864</mark_cache_size>
</yandex>
EOF
# Users: default (no password, as Debian ships it) and admin, whose password §6 guards.
PW="PW-s3cret-$$"
cat > "$WORK/ch/users.xml" <<EOF
<yandex>
  <profiles><default/><readonly><readonly>1</readonly></readonly></profiles>
  <users>
    <default><password></password><networks><ip>::/0</ip></networks><profile>default</profile><quota>default</quota></default>
    <admin><password>$PW</password><networks><ip>::/0</ip></networks><profile>default</profile><quota>default</quota></admin>
  </users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
EOF
CH_PID=""
start_ch() {
  "$CH_SERVER" --config-file="$WORK/ch/config.xml" > "$WORK/ch/stdout" 2>&1 &
  CH_PID=$!; PIDS="$PIDS $CH_PID"
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$HTTP_PORT/ping" > /dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "FAIL - clickhouse-server did not start: $(tail -5 "$WORK/ch/error.log" 2>/dev/null)"; exit 1
}
stop_ch() { kill -9 "$CH_PID" 2>/dev/null; wait "$CH_PID" 2>/dev/null; }
chq() { curl -s "http://127.0.0.1:$HTTP_PORT/" --data-binary "$1"; }
URL="clickhouse://127.0.0.1:$HTTP_PORT/fleet"
start_ch

# ---- 1. node-a: a slow worker; ClickHouse killed and restarted mid-trace ----------------------
A="$WORK/a.db"
"$GPUWHY" trace --db "$A" --sink "$URL" --node node-a --quiet -- "$SIM_BIN/gw_train_loop" \
  --duration 9 --shape pytorch --workers 2 --batch-cpu-ms 5 --slow-worker-ms 40 \
  > "$WORK/a.out" 2>&1 &
TRACE=$!; PIDS="$PIDS $TRACE"
sleep 3
stop_ch
sleep 3
down_rows=$(q "$A" "SELECT COALESCE(SUM(rows),0) FROM outbox")
start_ch
wait "$TRACE"; rc=$?
cat "$WORK/a.out"
[ $rc -eq 0 ] && pass "node-a trace exits 0 across a ClickHouse restart" || fail "node-a trace exit $rc"
local_a=$(q "$A" "SELECT COUNT(*) FROM events")
remote_a=$(chq "SELECT count() FROM fleet.gw_events WHERE node = 'node-a'")
[ -n "$local_a" ] && [ "$local_a" -gt 1000 ] && [ "$remote_a" = "$local_a" ] \
  && pass "node-a: ClickHouse holds every event row once ($remote_a = local $local_a; $down_rows rows waited while it was down)" \
  || fail "node-a: ClickHouse $remote_a rows, local $local_a"
grep -q "note: sink: [0-9,]* rows sent to clickhouse://127.0.0.1:$HTTP_PORT/fleet as node node-a" "$WORK/a.out" \
  && pass "summary says what was sent" || fail "no sink line in the summary"
left=$(q "$A" "SELECT COUNT(*) FROM outbox")
[ "$left" = "0" ] && pass "node-a: the spool is empty after the trace" || fail "node-a: $left outbox entries left"
for t in processes snapshots; do
  l=$(q "$A" "SELECT COUNT(*) FROM $( [ $t = snapshots ] && echo system_snapshots || echo processes)")
  r=$(chq "SELECT uniqExact(pid) FROM fleet.gw_processes WHERE node = 'node-a'")
  [ $t = snapshots ] && r=$(chq "SELECT count() FROM fleet.gw_snapshots WHERE node = 'node-a'")
  [ "$l" = "$r" ] && pass "node-a: $t agree ($r)" || fail "node-a: $t local $l, ClickHouse $r"
done

# ---- 2. node-b: synchronous copies from pageable memory --------------------------------------
B="$WORK/b.db"
"$GPUWHY" trace --db "$B" --sink "$URL" --node node-b --quiet -- "$SIM_BIN/gw_train_loop" \
  --duration 7 --shape pytorch --workers 2 --batch-cpu-ms 0 --pageable --batch-bytes 64M \
  --kernels-per-step 2 > "$WORK/b.out" 2>&1; rc=$?
[ $rc -eq 0 ] && pass "node-b trace exits 0" || fail "node-b trace exit $rc: $(cat "$WORK/b.out")"
local_b=$(q "$B" "SELECT COUNT(*) FROM events")
remote_b=$(chq "SELECT count() FROM fleet.gw_events WHERE node = 'node-b'")
[ "$remote_b" = "$local_b" ] && pass "node-b: $remote_b rows in ClickHouse = local" \
  || fail "node-b: ClickHouse $remote_b, local $local_b"

# ---- 3. fleet ---------------------------------------------------------------------------------
"$GPUWHY" fleet --clickhouse "$URL" --since 10m --json > "$WORK/fleet.json" 2> "$WORK/fleet.err"
rc=$?
[ $rc -eq 0 ] && pass "fleet exits 0" || fail "fleet exit $rc: $(cat "$WORK/fleet.err")"
verdict=$(python3 - "$WORK/fleet.json" <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))
by = {r["node"]: r for r in rows}
want = {"node-a": "dataloader-starvation", "node-b": "memcpy-bottleneck"}
bad = [f"{n}: top {(by.get(n) or {}).get('top')}" for n, rule in want.items()
       if not by.get(n) or not by[n]["top"] or by[n]["top"]["rule"] != rule
       or by[n]["top"]["severity"] not in ("MEDIUM", "HIGH")]
lost = [r["top"]["lost_s"] if r["top"] else -1 for r in rows]
if lost != sorted(lost, reverse=True): bad.append(f"not ranked by lost_s: {lost}")
print("ok" if not bad else "; ".join(bad))
EOF
)
[ "$verdict" = "ok" ] && pass "fleet names each node's injected fault, ranked by lost seconds" \
  || fail "fleet: $verdict — $(cat "$WORK/fleet.json")"
"$GPUWHY" fleet --clickhouse "$URL" > "$WORK/fleet.txt" 2>/dev/null
grep -q "node-a" "$WORK/fleet.txt" && grep -q "DataLoader starvation" "$WORK/fleet.txt" \
  && pass "fleet text lists the nodes" || fail "fleet text: $(cat "$WORK/fleet.txt")"

# ---- 4. explain and query against ClickHouse agree with the node's own file --------------------
for n in a b; do
  db="$WORK/$n.db"
  "$GPUWHY" explain --db "$db" --json > "$WORK/local_$n.json"
  "$GPUWHY" explain --clickhouse "$URL" --node "node-$n" --json > "$WORK/remote_$n.json" 2> "$WORK/remote_$n.err"
  cmp -s "$WORK/local_$n.json" "$WORK/remote_$n.json" \
    && pass "node-$n: explain --clickhouse = explain on its file ($(grep -c '"rule"' "$WORK/local_$n.json") findings)" \
    || fail "node-$n: explain differs: $(diff "$WORK/local_$n.json" "$WORK/remote_$n.json" | head -8)"
done
BRIEF="SELECT pn.name as process, COUNT(*) as context_switches, SUM(duration_ns)/1e9 as total_off_cpu_sec, MAX(duration_ns)/1e6 as worst_stall_ms FROM events e JOIN process_names pn ON e.pid = pn.pid WHERE op = 'sched_switch' AND timestamp > (SELECT MAX(timestamp) - 120000000000 FROM events) GROUP BY pn.name ORDER BY total_off_cpu_sec DESC LIMIT 10;"
"$GPUWHY" query --db "$A" --csv "$BRIEF" | sort > "$WORK/brief_local.csv"
"$GPUWHY" query --clickhouse "$URL" --node node-a --csv "$BRIEF" | sort > "$WORK/brief_remote.csv"
[ -s "$WORK/brief_local.csv" ] && cmp -s "$WORK/brief_local.csv" "$WORK/brief_remote.csv" \
  && pass "the brief's SQL runs unchanged against node-a's views, same rows ($(($(wc -l < "$WORK/brief_local.csv") - 1)))" \
  || fail "brief SQL differs: $(diff "$WORK/brief_local.csv" "$WORK/brief_remote.csv" | head -6)"
out=$("$GPUWHY" query --clickhouse "$URL" "INSERT INTO fleet.gw_events (node) VALUES ('x')" 2>&1); rc=$?
[ $rc -ne 0 ] && [ "$(chq "SELECT count() FROM fleet.gw_events WHERE node = 'x'")" = "0" ] \
  && pass "query --clickhouse is read-only" || fail "query --clickhouse wrote: rc=$rc $out"
out=$("$GPUWHY" explain --clickhouse "$URL" --node nobody 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "no recording of node 'nobody'" \
  && pass "explain of an unknown node says so" || fail "unknown node: rc=$rc $out"
out=$("$GPUWHY" trace --sink "http://x" --duration 1s 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "clickhouse://" && pass "a bad --sink URL is refused" \
  || fail "bad --sink: rc=$rc $out"

# A database an older gpuwhy made lacks the newest columns (gw_events.since_work_ns, schema 13;
# gw_sessions.profile_hz): explain reads them as NULL instead of failing, and the next sink that
# connects adds them (§5).
chq "ALTER TABLE fleet.gw_events DROP COLUMN since_work_ns" > /dev/null
chq "ALTER TABLE fleet.gw_sessions DROP COLUMN profile_hz" > /dev/null
"$GPUWHY" explain --clickhouse "$URL" --node node-b --json > "$WORK/old_b.json" 2> "$WORK/old_b.err"; rc=$?
top() { python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["findings"]; print(f[0]["rule"] if f else "-")' "$1"; }
[ $rc -eq 0 ] && [ "$(top "$WORK/old_b.json")" = "$(top "$WORK/local_b.json")" ] \
  && pass "explain --clickhouse on a database without since_work_ns, profile_hz: same top finding" \
  || fail "explain on an older database: rc=$rc $(head -3 "$WORK/old_b.err")"

# ---- 5. ClickHouse down for a whole trace: the rows wait, the next trace sends them -----------
stop_ch
C="$WORK/c.db"
"$GPUWHY" trace --db "$C" --sink "$URL" --node node-c --quiet -- "$SIM_BIN/gw_train_loop" \
  --duration 3 --workers 1 > "$WORK/c1.out" 2>&1
waiting=$(q "$C" "SELECT COALESCE(SUM(rows),0) FROM outbox WHERE tbl = 'events'")
local_c1=$(q "$C" "SELECT COUNT(*) FROM events")
[ "$waiting" = "$local_c1" ] && grep -q "rows wait in" "$WORK/c1.out" \
  && pass "server down: all $waiting event rows wait in the file, and the summary says so" \
  || fail "server down: $waiting waiting vs $local_c1 recorded; $(grep sink "$WORK/c1.out")"
start_ch
"$GPUWHY" trace --db "$C" --sink "$URL" --node node-c --quiet -- "$SIM_BIN/gw_train_loop" \
  --duration 2 --workers 1 > "$WORK/c2.out" 2>&1
local_c=$(q "$C" "SELECT COUNT(*) FROM events_all")
remote_c=$(chq "SELECT count() FROM fleet.gw_events WHERE node = 'node-c'")
sessions_c=$(chq "SELECT uniqExact(id) FROM fleet.gw_sessions WHERE node = 'node-c'")
[ "$remote_c" = "$local_c" ] && [ "$sessions_c" = "2" ] \
  && pass "backfill: both sessions' $remote_c rows arrived once" \
  || fail "backfill: ClickHouse $remote_c rows / $sessions_c sessions, local $local_c"
[ "$(chq "SELECT count() FROM system.columns WHERE database = 'fleet' AND (table, name) IN (('gw_events', 'since_work_ns'), ('gw_sessions', 'profile_hz'))")" = "2" ] \
  && pass "a newer sink adds the missing columns back" || fail "since_work_ns or profile_hz not re-added"

# ---- 6. a password is never stored, sent or printed; it can stay out of argv (issue 32) ------
D="$WORK/d.db"
"$GPUWHY" trace --db "$D" --sink "clickhouse://admin:$PW@127.0.0.1:$HTTP_PORT/fleet" --node node-d \
  --quiet -- "$SIM_BIN/gw_train_loop" --duration 2 --workers 1 > "$WORK/d.out" 2>&1; rc=$?
remote_d=$(chq "SELECT count() FROM fleet.gw_events WHERE node = 'node-d'")
local_d=$(q "$D" "SELECT COUNT(*) FROM events")
[ $rc -eq 0 ] && [ "$remote_d" = "$local_d" ] && [ "$local_d" -gt 0 ] \
  && pass "the sink logs in as admin with the URL's password ($remote_d rows)" \
  || fail "sink as admin: rc=$rc, ClickHouse $remote_d rows, local $local_d: $(tail -3 "$WORK/d.out")"
leaks=""
grep -q "$PW" "$WORK/d.out" && leaks="$leaks trace-summary"
"$GPUWHY" sessions --db "$D" --json 2>&1 | grep -q "$PW" && leaks="$leaks sessions--json"
q "$D" "SELECT command_line FROM sessions" | grep -q "$PW" && leaks="$leaks sessions.command_line"
chq "SELECT command_line FROM fleet.gw_sessions WHERE node = 'node-d'" | grep -q "$PW" \
  && leaks="$leaks ClickHouse-gw_sessions"
"$GPUWHY" fleet --clickhouse "clickhouse://admin:$PW@127.0.0.1:99999/fleet" 2>&1 | grep -q "$PW" \
  && leaks="$leaks fleet-error"
"$GPUWHY" query --clickhouse "clickhouse://admin:$PW@127.0.0.1:$HTTP_PORT/fleet" "SELEC 1" 2>&1 \
  | grep -q "$PW" && leaks="$leaks query-error"
[ -z "$leaks" ] && q "$D" "SELECT command_line FROM sessions" | grep -q "admin:\*\*\*@" \
  && pass "the password is in no stored, sent or printed command line (admin:*** instead)" \
  || fail "the password leaked into:$leaks"
printf '%s\n' "$PW" > "$WORK/pw"; chmod 600 "$WORK/pw"
GPUWHY_CLICKHOUSE_PASSWORD_FILE="$WORK/pw" "$GPUWHY" fleet --since 10m --json \
  --clickhouse "clickhouse://admin@127.0.0.1:$HTTP_PORT/fleet" > "$WORK/fleet_pw.json" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q node-d "$WORK/fleet_pw.json" \
  && pass "GPUWHY_CLICKHOUSE_PASSWORD_FILE: fleet logs in with no password in argv" \
  || fail "password file: rc=$rc $(head -c 300 "$WORK/fleet_pw.json")"
out=$("$GPUWHY" fleet --since 10m --clickhouse "clickhouse://admin@127.0.0.1:$HTTP_PORT/fleet" 2>&1); rc=$?
[ $rc -ne 0 ] && pass "without the password admin is refused: ${out:0:120}" \
  || fail "admin without a password was let in: $out"

stop_ch
e2e_finish clickhouse_e2e
