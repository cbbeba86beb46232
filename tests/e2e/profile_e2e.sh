#!/usr/bin/env bash
# End-to-end for the on-CPU profile and GIL hand-offs (issue 31): trigger → capture → assert.
# For every CPython here (pyenv 3.10-3.13 and the system python3), the Python training loop on
# the simulated CUDA runtime, run under the tracer (`trace -- python3 …`, the default profile):
#   - with a pure-Python sibling thread (--gil-thread): explain's top finding is gil-contention,
#     naming that thread; its on-CPU section's top line is spin_gil's loop line; the main
#     thread's sleeps the thread ended carry sched_switch kind 4;
#   - with batches built on the main thread (--main-thread-batches): the main thread's on-CPU
#     section's top site is augment_batch, in train_loop.py.
# Then `trace --stack -- CMD` names the script's lines in the CUDA caller section, also through
# `env` and `python3 -m`; and --profile-hz 0 records no samples; bad rates are refused.
# Usage: profile_e2e.sh GPUWHY SIM_LIB_DIR WORKLOADS_DIR
set -uo pipefail
GPUWHY=$1
SIM_LIB=$2
WORKLOADS=$3
. "$(dirname "$0")/lib.sh"

e2e_require_root profile_e2e
e2e_workdir profile_e2e

PY_SCRIPT="$WORKLOADS/train_loop.py"
SPIN_LINE=$(grep -n 'x = (x \* 1103515245 + 12345) & 0x7fffffff' "$PY_SCRIPT" | head -1 | cut -d: -f1)
SYNC_LINE=$(grep -n 'rt.cudaStreamSynchronize(stream), "cudaStreamSynchronize")' "$PY_SCRIPT" | cut -d: -f1)
[ -n "$SPIN_LINE" ] && [ -n "$SYNC_LINE" ] || { echo "FAIL - cannot find the lines in $PY_SCRIPT"; exit 1; }

e2e_pythons

# traced NAME TRACE_FLAGS... -- CMD...: `gpuwhy trace FLAGS -- CMD` into $WORK/NAME.db.
traced() {
  local name=$1; shift
  local flags=()
  while [ "$1" != "--" ]; do flags+=("$1"); shift; done
  shift
  "$GPUWHY" trace "${flags[@]}" --cuda-lib "$SIM_LIB" --db "$WORK/$name.db" --quiet -- "$@" \
    > "$WORK/$name.trace" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || fail "$name: trace exit $rc" "$(tail -5 "$WORK/$name.trace")"
  "$GPUWHY" explain --db "$WORK/$name.db" --json > "$WORK/$name.json" 2> "$WORK/$name.err" \
    || fail "$name: explain failed: $(cat "$WORK/$name.err")"
}

# jq-free JSON checks with the system Python: prints "ok <what>" or "bad <why>".
check_json() { /usr/bin/python3 - "$@"; }

for py in "${pythons[@]}"; do
  ver=$("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')

  name="gil-$ver"
  traced "$name" -- "$py" "$PY_SCRIPT" --lib-dir "$SIM_LIB" --duration 5 --workers 1 --gil-thread
  verdict=$(check_json "$WORK/$name.json" "$SPIN_LINE" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); spin = int(sys.argv[2])
f = r.get("findings") or []
if not f or f[0]["rule"] != "gil-contention":
    print("bad top finding:", [(x["rule"], x.get("lost_s")) for x in f]); sys.exit()
holder = int({m["name"]: m["value"] for m in f[0]["metrics"]}["holder_tid"])
prof = [p for p in r["cpu_profiles"] if p["role"] == "gil_holder"]
if not prof or prof[0]["tids"] != [holder]:
    print("bad gil_holder profile:", [(p["role"], p["tids"]) for p in r["cpu_profiles"]]); sys.exit()
top = prof[0]["sites"][0]
if top["function"] != "spin_gil" or not top["file"].endswith("train_loop.py") or \
        top["line"] not in (spin, spin - 1, spin + 1):
    print("bad top site:", top["location"], top["function"]); sys.exit()
print("ok gil-contention names thread %d, top line %s in spin_gil (%d of %d samples), %.1f s lost"
      % (holder, top["location"], top["count"], prof[0]["samples"], f[0]["lost_s"]))
PY
)
  [[ $verdict == ok* ]] && pass "$ver: ${verdict#ok }" || fail "$ver GIL: $verdict" "$(head -c 600 "$WORK/$name.err")"
  kind4=$(q "$WORK/$name.db" "SELECT COUNT(*) FROM events WHERE op = 'sched_switch' AND kind = 4 AND waker_pid = pid")
  [ "${kind4:-0}" -gt 10 ] && pass "$ver: $kind4 sleeps ended by a GIL hand-off (kind 4)" \
    || fail "$ver: only ${kind4:-0} sched_switch rows of kind 4"

  name="batches-$ver"
  traced "$name" -- "$py" "$PY_SCRIPT" --lib-dir "$SIM_LIB" --duration 5 --main-thread-batches \
    --batch-cpu-ms 20
  verdict=$(check_json "$WORK/$name.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
prof = [p for p in r["cpu_profiles"] if p["role"] == "main"]
if not prof:
    print("bad: no main-thread profile:", [p["role"] for p in r["cpu_profiles"]]); sys.exit()
top = prof[0]["sites"][0]
if top["function"] != "augment_batch" or not top["file"].endswith("train_loop.py"):
    print("bad top site:", top["location"], top["function"]); sys.exit()
share = sum(s["count"] for s in prof[0]["sites"] if s["function"] == "augment_batch") / prof[0]["samples"]
if share < 0.5:
    print("bad: augment_batch only %.0f%% of the main thread's samples" % (100 * share)); sys.exit()
print("ok main thread's CPU: %.0f%% in augment_batch (top %s, %d samples)"
      % (100 * share, top["location"], prof[0]["samples"]))
PY
)
  [[ $verdict == ok* ]] && pass "$ver: ${verdict#ok }" || fail "$ver batches: $verdict"
done

# ---- trace --stack -- CMD: the script's lines in the caller sections ------------------------
sync_caller() {  # NAME: the top cudaStreamSync caller names train_loop.py:SYNC_LINE
  check_json "$WORK/$1.json" "$SYNC_LINE" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); want = "train_loop.py:%s" % sys.argv[2]
sites = [s["location"] for c in r["callers"] if c["op"] == "cudaStreamSync" for s in c["sites"]]
print("ok cudaStreamSync caller %s" % want if want in sites else "bad callers: %s" % sites)
PY
}
py=/usr/bin/python3
traced stack-direct --stack -- "$py" "$PY_SCRIPT" --lib-dir "$SIM_LIB" --duration 3 --workers 1
v=$(sync_caller stack-direct); [[ $v == ok* ]] && pass "trace --stack -- python3: ${v#ok }" || fail "trace --stack -- python3: $v"
traced stack-env --stack -- env GW_E2E=1 "$py" "$PY_SCRIPT" --lib-dir "$SIM_LIB" --duration 3 --workers 1
v=$(sync_caller stack-env); [[ $v == ok* ]] && pass "trace --stack -- env python3: ${v#ok }" || fail "trace --stack -- env python3: $v"
( cd "$WORKLOADS" && traced stack-module --stack -- "$py" -m train_loop --lib-dir "$SIM_LIB" --duration 3 --workers 1
  v=$(sync_caller stack-module); [[ $v == ok* ]] && pass "trace --stack -- python3 -m: ${v#ok }" || fail "trace --stack -- python3 -m: $v"
  exit "$failures" ) || failures=$((failures + 1))

# ---- the rate -----------------------------------------------------------------------------------
traced off --profile-hz 0 -- "$py" "$PY_SCRIPT" --lib-dir "$SIM_LIB" --duration 2 --workers 1
n=$(q "$WORK/off.db" "SELECT COUNT(*) FROM events WHERE op = 'cpu_sample'")
hz=$(q "$WORK/off.db" "SELECT profile_hz FROM sessions")
[ "$n" = "0" ] && [ "$hz" = "0" ] && pass "--profile-hz 0: no cpu_sample rows, sessions.profile_hz 0" \
  || fail "--profile-hz 0: $n cpu_sample rows, profile_hz '$hz'"
n=$(q "$WORK/gil-${ver}.db" "SELECT COUNT(*) FROM events WHERE op = 'cpu_sample' AND stack_id IS NOT NULL")
hz=$(q "$WORK/gil-${ver}.db" "SELECT profile_hz FROM sessions")
[ "${n:-0}" -gt 100 ] && [ "$hz" = "49" ] && pass "default: $n cpu_sample rows with a stack at profile_hz $hz" \
  || fail "default: ${n:-0} cpu_sample rows with a stack, profile_hz '$hz'"
for bad in -1 1001 x; do
  out=$("$GPUWHY" trace --profile-hz "$bad" --duration 1s 2>&1); rc=$?
  [ $rc -ne 0 ] && echo "$out" | grep -q -- "--profile-hz" && pass "--profile-hz $bad is refused" \
    || fail "--profile-hz $bad: rc $rc: $out"
done

e2e_finish profile_e2e
