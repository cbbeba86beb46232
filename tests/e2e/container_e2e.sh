#!/usr/bin/env bash
# A job in a container (issue 36), end to end on this machine's cgroup v1: the simulated
# training loop runs in a new PID namespace (unshare --pid --fork --mount-proc) inside cpu and
# memory cgroups named like a Kubernetes pod's container with the systemd driver
# (/kubepods.slice/…/kubepods-burstable-pod<uid>.slice/cri-containerd-<id>.scope), under a 128 MiB
# memory limit that its reads of a 192 MiB file keep reaching; a second process in the container
# allocates until the OOM killer ends it. `trace --container <short id>` attaches to what runs
# there, and explain, --json and query must show the container id, the pod UID and the pids
# inside the namespace, the limit named with its hits, and the OOM kill naming the container.
# The same trace serves /metrics (container and pod_uid labels) and sends its rows to a real
# ClickHouse server (gw_process_cgroups, gw_cgroup_memory_samples; fleet names the container).
# Also: --pod, and the errors of --container/--pod that match nothing.
# Usage: container_e2e.sh GPUWHY SIM_BIN   (root: cgroups, namespaces, BPF; ~40 s)
set -uo pipefail
GPUWHY=$1 SIM_BIN=$2
. "$(dirname "$0")/lib.sh"
e2e_require_root container_e2e
CPU_V1=/sys/fs/cgroup/cpu MEM_V1=/sys/fs/cgroup/memory
if [ ! -w "$CPU_V1/tasks" ] || [ ! -f "$MEM_V1/memory.limit_in_bytes" ]; then
  e2e_skip container_e2e "no writable cgroup v1 cpu and memory hierarchies at $CPU_V1, $MEM_V1"
fi
command -v unshare > /dev/null || e2e_skip container_e2e "no unshare (util-linux)"
e2e_workdir container_e2e

ID=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')   # 64 hex digits, as containerd's
UID_=$(python3 -c 'import uuid; print(uuid.uuid4())')
ESCAPED=${UID_//-/_}
REL="/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod$ESCAPED.slice/cri-containerd-$ID.scope"
LIMIT=$((128 * 1024 * 1024))
cleanup() {
  for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
  # Whatever still runs in the container (the namespace's processes) goes first.
  local pid
  for pid in $(cat "$CPU_V1$REL/cgroup.procs" "$MEM_V1$REL/cgroup.procs" 2>/dev/null); do
    kill -9 "$pid" 2>/dev/null
  done
  sleep 0.3
  local root dir
  for root in "$CPU_V1" "$MEM_V1"; do
    dir="$root$REL"
    while [ "$dir" != "$root" ]; do rmdir "$dir" 2>/dev/null; dir=${dir%/*}; done
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$CPU_V1$REL" "$MEM_V1$REL" || { fail "mkdir the container's cgroups"; exit 1; }
echo "$LIMIT" > "$MEM_V1$REL/memory.limit_in_bytes"

# The container: its first process joins both cgroups, then a new PID namespace runs the loop
# (after writing its dataset from inside, so the file's page cache is the container's) and,
# 6 s later, a process that allocates until the OOM killer ends it.
# The pod spec's downward API as the kubelet would set it, beside a secret that must never be read
# into the recording.
SECRET="gw-secret-$RANDOM$RANDOM$RANDOM"
cat > "$WORK/container.sh" <<EOF
export POD_NAME=train-0 POD_NAMESPACE=ml-team GW_E2E_TOKEN=$SECRET
dd if=/dev/zero of=$WORK/dataset bs=1M count=192 status=none
$SIM_BIN/gw_train_loop --duration 24 --workers 2 --batch-bytes 2M --io-file $WORK/dataset &
sleep 6
python3 -c '
import time
held = []
while True:
    held.append(bytearray(8 << 20))
    time.sleep(0.05)
' 2> /dev/null
echo "allocator exit \$?"
wait
EOF
sh -c "echo \$\$ > '$CPU_V1$REL/cgroup.procs' && echo \$\$ > '$MEM_V1$REL/cgroup.procs' && \
  exec unshare --pid --fork --mount-proc sh '$WORK/container.sh'" > "$WORK/container.out" 2>&1 &
PIDS="$PIDS $!"
sleep 2.5

# ---- errors: a container or pod nothing runs in; a malformed id --------------------------------
"$GPUWHY" trace --container 0000ffff --duration 1 --db "$WORK/none.db" > "$WORK/none.out" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "no process runs in a container whose id starts with it" "$WORK/none.out" \
   && grep -q "${ID:0:12}" "$WORK/none.out"; then
  pass "--container matching nothing: exit $rc, says so and lists the containers seen"
else
  fail "--container matching nothing (exit $rc)" "$(cat "$WORK/none.out")"
fi
"$GPUWHY" trace --pod 00000000-0000-0000-0000-000000000000 --duration 1 --db "$WORK/none.db" \
  > "$WORK/nopod.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "no process runs in a pod with this UID" "$WORK/nopod.out" \
  && pass "--pod matching nothing: exit $rc" || fail "--pod matching nothing (exit $rc)" "$(cat "$WORK/nopod.out")"
"$GPUWHY" trace --container 'zz;rm' --duration 1 > "$WORK/bad.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "not a container id" "$WORK/bad.out" \
  && pass "--container with a malformed id: exit $rc" || fail "--container malformed (exit $rc)" "$(cat "$WORK/bad.out")"
[ -e "$WORK/none.db" ] && fail "a failed --container left a database behind" || true

# ---- a ClickHouse server for the sink (Debian's, on free ports, data in $WORK) --------------------
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
CH_SERVER=$(command -v clickhouse-server || echo /usr/sbin/clickhouse-server)
SINK=()
if [ -x "$CH_SERVER" ]; then
  HTTP_PORT=$(free_port); TCP_PORT=$(free_port)
  mkdir -p "$WORK/ch"
  cat > "$WORK/ch/config.xml" <<EOF
<yandex>
  <logger><level>warning</level><log>$WORK/ch/server.log</log><errorlog>$WORK/ch/error.log</errorlog></logger>
  <http_port>$HTTP_PORT</http_port><tcp_port>$TCP_PORT</tcp_port><listen_host>127.0.0.1</listen_host>
  <path>$WORK/ch/data/</path><tmp_path>$WORK/ch/tmp/</tmp_path>
  <user_files_path>$WORK/ch/user_files/</user_files_path>
  <format_schema_path>$WORK/ch/format_schemas/</format_schema_path>
  <users_config>$WORK/ch/users.xml</users_config>
  <default_profile>default</default_profile><default_database>default</default_database>
  <mark_cache_size>67108864</mark_cache_size>
</yandex>
EOF
  cat > "$WORK/ch/users.xml" <<EOF
<yandex>
  <profiles><default/></profiles>
  <users><default><password></password><networks><ip>::/0</ip></networks><profile>default</profile><quota>default</quota></default></users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
EOF
  "$CH_SERVER" --config-file="$WORK/ch/config.xml" > "$WORK/ch/stdout" 2>&1 &
  PIDS="$PIDS $!"
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$HTTP_PORT/ping" > /dev/null 2>&1 && break
    sleep 0.1
  done
  URL="clickhouse://127.0.0.1:$HTTP_PORT/fleet"
  SINK=(--sink "$URL" --node node-c)
elif [ -n "${GW_NO_SKIP:-}" ]; then
  fail "clickhouse-server is not installed (scripts/setup.sh installs it; GW_NO_SKIP is set)"
else
  echo "note - no clickhouse-server here: the ClickHouse part is not tested"
fi
chq() { curl -s "http://127.0.0.1:$HTTP_PORT/" --data-binary "$1"; }

# ---- the trace: by the container's short id, with /metrics and the sink ----------------------
DB="$WORK/c.db"
PROM_PORT=$(free_port)
"$GPUWHY" trace --container "${ID:0:12}" --duration 9 --quiet --db "$DB" \
  --prometheus "127.0.0.1:$PROM_PORT" ${SINK[@]+"${SINK[@]}"} > "$WORK/trace.out" 2>&1 &
TRACE=$!; PIDS="$PIDS $TRACE"
sleep 5
curl -s "http://127.0.0.1:$PROM_PORT/metrics" > "$WORK/metrics.txt"
wait "$TRACE" || fail "trace --container: exit $?" "$(tail -5 "$WORK/trace.out")"
grep -q "^gpuwhy_context_switches_total{pid=\"[0-9]*\",name=\"[^\"]*\",container=\"${ID:0:12}\",pod_uid=\"$UID_\",namespace=\"ml-team\",pod=\"train-0\"} " \
  "$WORK/metrics.txt" && pass "Prometheus: container, pod_uid, namespace and pod labels on the job's series" \
  || fail "Prometheus labels" "$(grep context_switches_total "$WORK/metrics.txt" | head -5)"

# ---- --pod selects the same processes -------------------------------------------------------
if [ -n "$(cat "$CPU_V1$REL/cgroup.procs")" ]; then
  "$GPUWHY" trace --pod "$ESCAPED" --duration 2 --db "$WORK/pod.db" > "$WORK/pod.out" 2>&1 \
    || fail "trace --pod: exit $?" "$(tail -5 "$WORK/pod.out")"
  grep -q "pod $UID_: [0-9]* processes" "$WORK/pod.out" \
    && pass "--pod (systemd's escaped UID) selects the container's processes" \
    || fail "--pod" "$(cat "$WORK/pod.out")"
else
  fail "the container's job ended before the --pod case"
fi
"$GPUWHY" explain --json --db "$DB" > "$WORK/x.json" 2> "$WORK/x.err" \
  || fail "explain --json" "$(cat "$WORK/x.err")"
"$GPUWHY" explain --db "$DB" > "$WORK/x.txt" 2>&1 || fail "explain" "$(tail "$WORK/x.txt")"

python3 - "$WORK/x.json" "$ID" "$UID_" <<'EOF' && pass "--json: container, pod UID and namespace pids of the job" \
  || fail "--json identity" "$(head -30 "$WORK/x.txt")"
import json, sys
d = json.load(open(sys.argv[1]))
cid, uid = sys.argv[2], sys.argv[3]
cs = d.get("containers")
assert cs and cs[0]["container_id"] == cid and cs[0]["pod_uid"] == uid, cs
assert cs[0]["runtime"] == "containerd", cs[0]
assert cs[0]["pod_name"] == "train-0" and cs[0]["pod_namespace"] == "ml-team", cs[0]
# unshare itself is in the container's cgroup but in the host's PID namespace (ns_pid = pid);
# what it started is in the new namespace: pid 1 and up.
inside = [p for p in cs[0]["processes"] if p["ns_pid"] is not None and p["ns_pid"] < p["pid"]]
assert len(inside) >= 3 and 1 in [p["ns_pid"] for p in inside], cs[0]["processes"]
main = [p for p in d["top_processes"] if p["role"] == "training"]
assert main, d["top_processes"]
m = main[0]
assert m["container_id"] == cid and m["pod_uid"] == uid and 1 < m["ns_pid"] < 64, m
print("main pid %d is %d in the container" % (m["pid"], m["ns_pid"]))
EOF

grep -q "^Container: containerd $ID (pod ml-team/train-0, UID $UID_): pids [0-9]* is [0-9]* in the container" "$WORK/x.txt" \
  && pass "explain names the container, its pod and the pids there" \
  || fail "explain: no container line" "$(head -12 "$WORK/x.txt")"
grep -A4 "^Processes" "$WORK/x.txt" | grep -q "ns_pid | container" \
  && grep -A14 "^Processes" "$WORK/x.txt" | grep -q "${ID:0:12}" \
  && pass "the process table has ns_pid and container columns" \
  || fail "process table" "$(sed -n '/^Processes/,$p' "$WORK/x.txt" | head -8)"

# ---- the memory limit and the OOM kill ----------------------------------------------------------
python3 - "$WORK/x.json" "${ID:0:12}" <<'EOF' && pass "the memory limit is named with its hits; the OOM kill names the container" \
  || fail "memory limit / OOM" "$(sed -n '/Causal/,/GPU feed/p' "$WORK/x.txt" | head -40)"
import json, sys
d = json.load(open(sys.argv[1]))
short = sys.argv[2]
by = {f["rule"]: f for f in d["findings"]}
lim = by.get("memory-limit") or by.get("memory-pressure")
assert lim, list(by)
root = " ".join(lim["root"])
assert "is limited to 134 MB (memory.limit_in_bytes)" in root and "container " + short in root, root
assert "reached its limit" in root, root
assert any("raise the memory limit of container " + short in x for x in lim["fix"]), lim["fix"]
oom = by.get("oom-kill")
assert oom, list(by)
assert short in oom["cause"] and "in container " + short in " ".join(oom["root"]), oom
EOF
grep -q "allocator exit 137" "$WORK/container.out" && pass "the allocator was OOM-killed (exit 137)" \
  || fail "the allocator was not OOM-killed" "$(cat "$WORK/container.out")"

# ---- the rows behind it -------------------------------------------------------------------------
rows=$(q "$DB" "SELECT COUNT(*) FROM process_cgroups WHERE container_id = '$ID' AND pod_uid = '$UID_' AND ns_pid IS NOT NULL AND runtime = 'containerd'")
[ "${rows:-0}" -ge 3 ] && pass "process_cgroups: $rows processes with container, pod and ns pid" \
  || fail "process_cgroups rows: '$rows'"
hits=$(q "$DB" "SELECT MAX(events_max) - MIN(events_max), MAX(max_bytes), MAX(events_oom_kill) - MIN(events_oom_kill) FROM cgroup_memory_samples WHERE cgroup = '$REL'")
IFS=, read -r nhits maxb kills <<< "$hits"
[ "${nhits:-0}" -gt 0 ] && [ "$maxb" = "$LIMIT" ] && [ "${kills:-0}" -ge 1 ] \
  && pass "cgroup_memory_samples: limit $maxb, $nhits hits, $kills OOM kill(s)" \
  || fail "cgroup_memory_samples: '$hits'"

# ---- Perfetto process names and the HTML report -------------------------------------------
"$GPUWHY" export --format perfetto -o "$WORK/c.pftrace" --db "$DB" > /dev/null 2>&1 \
  && grep -aq "(container ${ID:0:12}, pid [0-9]* there)" "$WORK/c.pftrace" \
  && pass "Perfetto: process tracks named with the container and the pid there" \
  || fail "Perfetto process names"
"$GPUWHY" report -o "$WORK/c.html" --db "$DB" > "$WORK/report.out" 2>&1 \
  && grep -q "pid in container" "$WORK/c.html" && grep -q "container containerd $ID in pod $UID_ (ml-team/train-0)" "$WORK/c.html" \
  && pass "report: the container line and the process table's container columns" \
  || fail "report" "$(cat "$WORK/report.out")" "$(grep -o 'container[^<]*' "$WORK/c.html" | head -5)"

# ---- the environment's other variables never reach the recording ---------------------------
sync
if grep -qs "$SECRET" "$DB" "$DB-wal" "$WORK/trace.out" "$WORK/x.json" "$WORK/metrics.txt"; then
  fail "a variable of the job's environment other than POD_NAME/POD_NAMESPACE was recorded"
else
  pass "nothing but POD_NAME/POD_NAMESPACE was read from the environment (the secret is nowhere)"
fi

# ---- ClickHouse: the rows arrived; fleet names the container ------------------------------------
if [ ${#SINK[@]} -gt 0 ]; then
  remote=$(chq "SELECT count() FROM fleet.gw_process_cgroups WHERE node = 'node-c' AND container_id = '$ID' AND pod_uid = '$UID_' AND ns_pid IS NOT NULL")
  local_rows=$(q "$DB" "SELECT COUNT(*) FROM process_cgroups WHERE container_id = '$ID'")
  [ -n "$remote" ] && [ "$remote" = "$local_rows" ] \
    && pass "ClickHouse gw_process_cgroups: $remote rows with container, pod and ns pid (as local)" \
    || fail "ClickHouse gw_process_cgroups: '$remote' rows, local $local_rows"
  mem_remote=$(chq "SELECT count() FROM fleet.gw_cgroup_memory_samples WHERE node = 'node-c'")
  mem_local=$(q "$DB" "SELECT COUNT(*) FROM cgroup_memory_samples")
  [ "$mem_remote" = "$mem_local" ] && pass "ClickHouse gw_cgroup_memory_samples: $mem_remote rows" \
    || fail "ClickHouse gw_cgroup_memory_samples: '$mem_remote' rows, local $mem_local"
  "$GPUWHY" explain --clickhouse "$URL" --node node-c --json > "$WORK/remote.json" 2> "$WORK/remote.err"
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["containers"][0]["container_id"] == sys.argv[2]' \
    "$WORK/remote.json" "$ID" && pass "explain --clickhouse shows the container" \
    || fail "explain --clickhouse: no container" "$(head -c 600 "$WORK/remote.json")" "$(cat "$WORK/remote.err")"
  "$GPUWHY" fleet --clickhouse "$URL" --json > "$WORK/fleet.json" 2> "$WORK/fleet.err"
  python3 - "$WORK/fleet.json" "$ID" "$UID_" <<'EOF' && pass "fleet --json names the node's container and pod" \
    || fail "fleet containers" "$(cat "$WORK/fleet.json" "$WORK/fleet.err")"
import json, sys
nodes = json.load(open(sys.argv[1]))
n = [x for x in nodes if x["node"] == "node-c"][0]
c = n["containers"][0]
assert c["container_id"] == sys.argv[2] and c["pod_uid"] == sys.argv[3], n
assert c["pod_name"] == "train-0" and c["pod_namespace"] == "ml-team", n
EOF
fi

e2e_finish container_e2e
