#!/usr/bin/env bash
# End-to-end for `gpuwhy export` (issue 17) on synthetic recordings (no root, ~30 s):
#   - --format perfetto: the trace decodes with an independent reader (protoc --decode_raw, and
#     tests/export/perfetto_decode.py, written from Perfetto's published schema), is well formed
#     (ordered timestamps, every slice ends, tracks described before use), and its tracks, slice
#     counts, durations and timestamps match `gpuwhy query` on the same file;
#   - --since/--from/--to/--pid narrow it like explain;
#   - --format folded on a recording without stacks writes nothing, says why and exits 1;
#   - usage errors exit 2, an unwritable file exits 1 without leaving a partial file.
# Usage: export_e2e.sh GPUWHY SOURCE_DIR
set -uo pipefail
GPUWHY=$1
SRC=$2
DECODE="$SRC/tests/export/perfetto_decode.py"
. "$(dirname "$0")/lib.sh"
e2e_workdir export_e2e
command -v protoc > /dev/null || { echo "FAIL - protoc missing (scripts/setup.sh installs protobuf-compiler)"; exit 1; }

DB="$WORK/demo.db"
"$GPUWHY" demo cpu-contention --keep "$DB" > "$WORK/demo.out" 2>&1 || { cat "$WORK/demo.out"; exit 1; }

T="$WORK/trace.pftrace"
"$GPUWHY" export --format perfetto -o "$T" --db "$DB" 2> "$WORK/export.err"
rc=$?
[ $rc -eq 0 ] && [ -s "$T" ] && pass "export perfetto: $(tail -1 "$WORK/export.err")" \
  || fail "export perfetto exit $rc: $(cat "$WORK/export.err")"
protoc --decode_raw < "$T" > "$WORK/raw.txt" 2> "$WORK/raw.err" \
  && pass "protoc --decode_raw reads it ($(grep -c '^1 {' "$WORK/raw.txt") packets)" \
  || fail "protoc --decode_raw: $(head -3 "$WORK/raw.err")"
python3 "$DECODE" "$T" > "$WORK/summary.json" || fail "decoder failed"

# The numbers the trace must carry, from SQL on the same file (the whole newest session).
q "$DB" "SELECT tid, COUNT(*) FROM events e JOIN op_names o ON o.id = e.op_id WHERE o.layer != 'host' GROUP BY tid ORDER BY tid" > "$WORK/cuda_by_tid.csv"
q "$DB" "SELECT tid, SUM(MAX(duration_ns, 1)) FROM events WHERE op = 'sched_switch' GROUP BY tid ORDER BY tid" > "$WORK/offcpu_by_tid.csv"
q "$DB" "SELECT pid, SUM(count) FROM op_seconds WHERE session = (SELECT id FROM current_session) AND op IN (1, 2, 23, 100, 101) GROUP BY pid ORDER BY pid" > "$WORK/launches_by_pid.csv"
q "$DB" "SELECT s.wall_start_ns + MIN(e.timestamp) FROM events e JOIN op_names o ON o.id = e.op_id, sessions s WHERE s.id = e.session AND o.layer != 'host'" > "$WORK/first_cuda.csv"
q "$DB" "SELECT drops FROM sessions WHERE id = (SELECT id FROM current_session)" > "$WORK/drops.csv"
q "$DB" "SELECT pid FROM processes WHERE session = (SELECT id FROM current_session) AND tracked = 1" > "$WORK/tracked.csv"
"$GPUWHY" explain --db "$DB" --from 0s --json > "$WORK/explain.json" 2>/dev/null

python3 - "$WORK" <<'PY'
import csv, json, sys
w = sys.argv[1]
s = json.load(open(w + "/summary.json"))
rows = lambda f: [r for r in csv.reader(open(w + "/" + f)) if r]
fails = 0
def check(ok, what):
    global fails
    print(("ok - " if ok else "FAIL - ") + what)
    fails += 0 if ok else 1

check(not s["problems"], "trace is well formed: %s" % (s["problems"][:5] or "no problems"))
tracks, per = s["tracks"], s["per_track"]
kind = lambda k: {u: t for u, t in tracks.items() if t["kind"] == k}
threads, procs, counters = kind("thread"), kind("process"), kind("counter")
stat = lambda u: per.get(u, {"slices": 0, "slice_ns": 0, "counter_sum": 0, "names": {},
                             "first_ts": None, "instants": 0})

# CUDA calls: one slice per row on the thread's own track.
want = {int(t): int(n) for t, n in rows("cuda_by_tid.csv")}
got = {}
for u, t in threads.items():
    n = sum(c for name, c in stat(u)["names"].items()
            if name.startswith("cuda") or name.startswith("cu"))
    if n:
        got[t["tid"]] = n
check(got == want, "CUDA slices per thread match the rows: %d threads, %d slices"
      % (len(want), sum(want.values())) + ("" if got == want else " got %s want %s" % (got, want)))

# Thread states: the off-CPU pieces of each thread add up to its sched_switch time.
want = {int(t): int(n) for t, n in rows("offcpu_by_tid.csv")}
state_of = {t["parent"]: u for u, t in tracks.items() if t["name"] == "state"}
got = {}
for u, t in threads.items():
    st = state_of.get(u)
    if st:
        got[t["tid"]] = sum(ns for name, ns in stat(st).get("ns_by_name", {}).items()
                            if name != "running")
check(got == want, "off-CPU state slices add up to each thread's sched_switch time (%d threads)"
      % len(want) + ("" if got == want else " diff %s" % {k: (got.get(k), want.get(k))
                     for k in set(got) | set(want) if got.get(k) != want.get(k)}))
running = sum(stat(u)["names"].get("running", 0) for u in state_of.values())
check(running > 0, "running intervals between off-CPU intervals (%d)" % running)

# Launch counters: each process's "CUDA launches/s" values sum to its op_seconds launches.
want = {int(p): int(n) for p, n in rows("launches_by_pid.csv")}
got = {}
for u, t in counters.items():
    parent = tracks.get(t["parent"], {})
    got[parent.get("pid")] = stat(u)["counter_sum"]
check(got == want and all(t["name"] == "CUDA launches/s" for t in counters.values()),
      "launch counters match op_seconds: %s" % want + ("" if got == want else " got %s" % got))

# Wall-clock timestamps: the first CUDA slice is at wall_start_ns + its session ts.
first = min(stat(u)["first_ts"] for u in threads if stat(u)["first_ts"] is not None
            and any(n.startswith("cu") for n in stat(u)["names"]))
want_first = int(rows("first_cuda.csv")[0][0])
check(first == want_first, "first CUDA slice at wall clock %d (want %d)" % (first, want_first))

# Processes: the training process is described first and named as such.
order = sorted(procs.values(), key=lambda t: t["order"])
check(order and order[0]["name"].endswith("[training]"), "training process first: %s"
      % [t["name"] for t in order[:3]])
tracked = {int(r[0]) for r in rows("tracked.csv")}
check(tracked <= {t["pid"] for t in procs.values()}, "every tracked process has a track")

# CPU preemption tracks.
cpus = [u for u, t in tracks.items() if (t["name"] or "").startswith("CPU ")]
check(cpus and sum(stat(u)["slices"] for u in cpus) > 0,
      "preemptions on %d CPU tracks (%d slices)" % (len(cpus), sum(stat(u)["slices"] for u in cpus)))

# Findings: explain's findings over the same window, in its order.
rep = json.load(open(w + "/explain.json"))
fparent = [u for u, t in tracks.items() if t["name"] == "gpuwhy findings"]
frules, fslices = [], []
for u, t in sorted(tracks.items(), key=lambda x: x[1]["order"]):
    if fparent and t["parent"] == fparent[0]:
        frules += sorted(set(stat(u).get("arg_values", {}).get("rule", [])))
        fslices.append(stat(u)["slices"])
want = [f["rule"] for f in rep["findings"]]
check(frules == want and want, "findings track: %s" % frules + ("" if frules == want else " want %s" % want))
# One slice per interval the finding's cause held the job, else one over the window.
want_slices = [max(1, len(f["intervals"])) for f in rep["findings"]]
check(fslices == want_slices, "finding slices %s (intervals: %s)" % (fslices, want_slices))

# The drops note.
notes = [u for u, t in tracks.items() if t["name"] == "gpuwhy notes"]
dropped = stat(notes[0]).get("arg_values", {}).get("events_dropped", []) if notes else []
check(dropped == [int(rows("drops.csv")[0][0])], "notes state the drops: %s" % dropped)
sys.exit(1 if fails else 0)
PY
[ $? -eq 0 ] || failures=$((failures + 1))

# A window and a process: fewer rows, every slice inside the process tree.
main_pid=$(q "$DB" "SELECT pid FROM op_seconds WHERE session = (SELECT id FROM current_session) AND op < 200 GROUP BY pid ORDER BY SUM(count) DESC LIMIT 1")
"$GPUWHY" export --format perfetto -o "$WORK/narrow.pftrace" --db "$DB" --from 30s --to 60s \
  --pid "$main_pid" --no-findings 2> "$WORK/narrow.err" || fail "narrow export: $(cat "$WORK/narrow.err")"
python3 "$DECODE" "$WORK/narrow.pftrace" > "$WORK/narrow.json"
tree=$(q "$DB" "SELECT group_concat(pid) FROM processes WHERE session = (SELECT id FROM current_session) AND (pid = $main_pid OR ppid = $main_pid)" | tr -d '"')
want=$(q "$DB" "SELECT COUNT(*) FROM events e JOIN op_names o ON o.id = e.op_id WHERE o.layer != 'host' AND e.pid IN ($tree) AND e.timestamp >= 30000000000 AND e.timestamp < 60000000000")
python3 - "$WORK/narrow.json" "$tree" "$want" <<'PY' && pass "--from 30s --to 60s --pid $main_pid: $want CUDA slices, only its process tree ($tree)" || fail "narrow export content"
import json, sys
s = json.load(open(sys.argv[1]))
tree, want = {int(p) for p in sys.argv[2].split(",")}, int(sys.argv[3])
assert not s["problems"], s["problems"][:5]
threads = {u: t for u, t in s["tracks"].items() if t["kind"] == "thread"}
pids = {t["pid"] for t in threads.values()}
assert pids <= tree and min(tree) in pids, (pids, tree)
n = sum(c for u in threads for name, c in s["per_track"].get(u, {"names": {}})["names"].items()
        if name.startswith("cu"))
assert n == want, (n, want)
ts = [st["first_ts"] for st in s["per_track"].values() if st["first_ts"] is not None]
assert not any(t["name"] == "gpuwhy findings" for t in s["tracks"].values())
PY

# Folded stacks from a recording without stacks: an empty file and a hint.
"$GPUWHY" export --format folded -o "$WORK/none.folded" --db "$DB" 2> "$WORK/folded.err"
[ $? -eq 1 ] && [ ! -e "$WORK/none.folded" ] && grep -q "nothing written" "$WORK/folded.err" \
  && grep -q "trace --stack" "$WORK/folded.err" \
  && pass "folded without stacks: exit 1, no file, the reason and a hint" \
  || fail "folded without stacks: $(cat "$WORK/folded.err")"

# Errors.
expect_exit() {  # expect_exit CODE WHAT PATTERN ARGS...
  local want=$1 what=$2 pattern=$3; shift 3
  "$GPUWHY" export "$@" > "$WORK/err.out" 2> "$WORK/err.txt"
  local rc=$?
  [ $rc -eq "$want" ] && grep -q -- "$pattern" "$WORK/err.txt" && pass "$what: exit $rc" \
    || fail "$what: exit $rc (want $want): $(head -2 "$WORK/err.txt")"
}
expect_exit 2 "unknown format" "unknown --format 'svg'" --format svg -o "$WORK/x" --db "$DB"
expect_exit 2 "missing -o" "-o FILE is required" --format perfetto --db "$DB"
expect_exit 2 "missing --format" "--format is required" -o "$WORK/x" --db "$DB"
expect_exit 2 "--op with perfetto" "apply to --format folded" --format perfetto --op cudaMalloc -o "$WORK/x" --db "$DB"
expect_exit 2 "unknown --op" "unknown --op 'nope'" --format folded --op nope -o "$WORK/x" --db "$DB"
expect_exit 2 "since with from" "since" --format perfetto --since 10s --from 5s -o "$WORK/x" --db "$DB"
expect_exit 1 "unwritable file" "create $WORK/missing/dir/t.pftrace" --format perfetto -o "$WORK/missing/dir/t.pftrace" --db "$DB"
expect_exit 1 "missing session" "session 9" --format perfetto --session 9 -o "$WORK/x" --db "$DB"
[ ! -e "$WORK/x" ] && ! ls "$WORK"/x.tmp-* > /dev/null 2>&1 && pass "failed exports leave no file" \
  || fail "a failed export left $(ls "$WORK" | grep '^x')"
"$GPUWHY" export --help > "$WORK/help.txt" 2>&1 && grep -q "^Usage: gpuwhy export" "$WORK/help.txt" \
  && pass "export --help" || fail "export --help: $(head -2 "$WORK/help.txt")"

e2e_finish export_e2e
