#!/usr/bin/env bash
# NCCL ranks across nodes through ClickHouse (docs/nccl.md, "Across nodes"): one job of three
# ranks (gw_nccl_train, rank 2's DataLoader 40 ms slower per batch) traced by two recorders
# standing for two nodes, `trace --sink --node node-a --pid RANK0,RANK1` and
# `--node node-b --pid RANK2`, into a real ClickHouse server (Debian's, on free ports).
# `fleet --nccl` must line the ranks up across the nodes and:
#   1. name node-b, rank 2 and its pid as the straggler, with its cause read from node-b's
#      recording (dataloader-starvation);
#   2. measure the other ranks' wait against the sim's ground truth (±25%, as nccl_e2e);
#   3. align the second node's clock on collective completion: both recorders share this host's clock,
#      so the offset must come out within 2 ms of 0 (the estimate's error is sync wake-up
#      jitter; an offset between real clocks is checked in the unit test
#      NcclTest.NodesAreAlignedOnCollectiveCompletionBeforeRanksAreCompared).
# The ranks wait 4 s before ncclCommInitRank so both recorders attach first (the init rows
# carry the communicator id that joins the nodes).
# Usage: nccl_fleet_e2e.sh GPUWHY SIM_BIN
set -uo pipefail
GPUWHY="$1"
SIM_BIN="$2"
. "$(dirname "$0")/lib.sh"
e2e_require_root nccl_fleet_e2e
e2e_workdir nccl_fleet_e2e
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
URL="clickhouse://127.0.0.1:$HTTP_PORT/fleet"
start_ch

mkdir -p "$WORK/counts"
GWSIM_CALL_COUNTS_DIR="$WORK/counts" GWSIM_GPU_STATE_DIR="$WORK" "$SIM_BIN/gw_nccl_train" \
  --ranks 3 --steps 120 --kernels-per-step 4 --kernel-us 2000 --batch-cpu-ms 2 --buckets 2 \
  --slow-rank 2 --slow-cause loader --slow-ms 40 --init-delay-ms 4000 --report \
  > "$WORK/job.out" 2>&1 &
JOB=$!; PIDS="$PIDS $JOB"
for r in 0 1 2; do
  wait_for_line "$WORK/job.out" "rank=$r pid=[0-9]* started" 10 || { fail "rank $r did not start" "$(cat "$WORK/job.out")"; exit 1; }
done
pid_of() { sed -n "s/.*gw_nccl_train: rank=$1 pid=\([0-9]*\) started.*/\1/p" "$WORK/job.out"; }
p0=$(pid_of 0) p1=$(pid_of 1) p2=$(pid_of 2)
echo "# ranks: 0=$p0 1=$p1 2=$p2"
"$GPUWHY" trace --db "$WORK/a.db" --sink "$URL" --node node-a --quiet --pid "$p0,$p1" \
  > "$WORK/a.out" 2>&1 &
TA=$!; PIDS="$PIDS $TA"
"$GPUWHY" trace --db "$WORK/b.db" --sink "$URL" --node node-b --quiet --pid "$p2" \
  > "$WORK/b.out" 2>&1 &
TB=$!; PIDS="$PIDS $TB"
wait "$JOB"; rc=$?
[ $rc -eq 0 ] && pass "the job ran (3 ranks, exit 0)" || fail "job exit $rc" "$(tail -5 "$WORK/job.out")"
sleep 1
kill -TERM "$TA" "$TB"; wait "$TA"; wait "$TB"
for n in a b; do
  rows=$(q "$WORK/$n.db" "SELECT COUNT(*) FROM events WHERE op = 'ncclCommInitRank'")
  [ "$rows" -ge 1 ] || fail "node-$n recorded no communicator init (attached too late?)" "$(tail -5 "$WORK/$n.out")"
done

"$GPUWHY" fleet --clickhouse "$URL" --since 5m --nccl --json > "$WORK/fleet.json" 2> "$WORK/fleet.err" \
  || fail "fleet --nccl failed" "$(tail -5 "$WORK/fleet.err")"
"$GPUWHY" fleet --clickhouse "$URL" --since 5m --nccl > "$WORK/fleet.txt" 2>&1
cat "$WORK/fleet.txt"
read -r node rank spid rule waited offset error nodes aligned shared < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
for c in r["nccl"]:
    s = c.get("straggler")
    if s:
        # the node aligned to the other (the first node is the reference, offset 0)
        clk = c["clocks"][1]
        print(s["node"], s["rank"], s["pid"], s["rule"] or "-", c["others_waited_s"],
              clk["offset_ms"], clk["error_ms"], c["nodes"], clk["node"], clk["collectives"])
        break
else:
    print("none - - - 0 99 99 0 - 0")' "$WORK/fleet.json")
[ "$node" = node-b ] && [ "$rank" = 2 ] && [ "$spid" = "$p2" ] && [ "$nodes" = 2 ] \
  && pass "straggler across 2 nodes: node-b rank 2 (pid $p2)" \
  || fail "straggler: node $node rank $rank pid $spid over $nodes nodes, want node-b rank 2 pid $p2" "$(head -c 800 "$WORK/fleet.json")"
[ "$rule" = dataloader-starvation ] && pass "its cause from node-b's recording: dataloader-starvation" \
  || fail "the straggler's cause: '$rule'"
truth=$(cat "$WORK"/counts/libnccl.{$p0,$p1}.comms | awk '{s += $10} END {printf "%.3f", s / 1e9}')
echo "# others' wait: fleet $waited s, sim $truth s; $aligned clock offset $offset ms ± $error ms over $shared collectives"
python3 -c 'import sys; e, t = map(float, sys.argv[1:]); sys.exit(0 if t > 0.5 and abs(e - t) <= 0.25 * t else 1)' \
  "$waited" "$truth" && pass "the other ranks waited $waited s (sim: $truth s, ±25%)" \
  || fail "the other ranks' wait: fleet $waited s, sim $truth s"
python3 -c 'import sys; o, n = float(sys.argv[1]), int(sys.argv[2]); sys.exit(0 if abs(o) <= 2.0 and n >= 200 else 1)' "$offset" "$shared" \
  && pass "$aligned's clock aligned on $shared collectives: ${offset} ms ± ${error} ms (same host clock: ~0)" \
  || fail "$aligned's clock offset ${offset} ms over $shared collectives on one host clock (want within 2 ms of 0, from >= 200)"

e2e_finish nccl_fleet_e2e
