#!/usr/bin/env bash
# End-to-end: `gpuwhy query` as a user runs it, against a fixture written through the store's
# own writer. The brief's Step-2 and Step-3 SQL run as written (`1 e9` read as `1e9`).
# GW_UPDATE_GOLDEN=1 rewrites the golden files instead of comparing.
set -uo pipefail
GPUWHY=$1
MAKE_FIXTURE=$2
GOLDEN=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
pass() { echo "ok - $1"; }
fail() { echo "FAIL - $1"; failures=$((failures + 1)); }

"$MAKE_FIXTURE" "$tmp/f.db" || { echo "fixture failed"; exit 1; }

golden() {  # name, command...
  local name=$1; shift
  "$@" > "$tmp/$name.out" 2>&1
  if [ "${GW_UPDATE_GOLDEN:-0}" = 1 ]; then
    cp "$tmp/$name.out" "$GOLDEN/$name.txt"; pass "$name (golden updated)"; return
  fi
  if diff -u "$GOLDEN/$name.txt" "$tmp/$name.out"; then pass "$name"; else fail "$name"; fi
}

STEP2="SELECT pn . name as process , COUNT ( * ) as context_switches , SUM ( duration_ns ) / 1e9 as total_off_cpu_sec , MAX ( duration_ns ) / 1e6 as worst_stall_ms FROM events e JOIN process_names pn ON e . pid = pn . pid WHERE op = 'sched_switch' AND timestamp > ( SELECT MAX ( timestamp ) - 120000000000 FROM events ) GROUP BY pn . name ORDER BY total_off_cpu_sec DESC LIMIT 10 ;"
STEP3="SELECT ( timestamp / 10000000000 ) * 10 as window_sec , COUNT ( CASE WHEN op = 'sched_switch' THEN 1 END ) as ctx_switches , COUNT ( CASE WHEN op = 'cudaStreamSync' THEN 1 END ) as sync_calls , AVG ( CASE WHEN op = 'cudaStreamSync' THEN duration_ns END ) / 1000 as sync_avg_us FROM events WHERE timestamp > ( SELECT MAX ( timestamp ) - 120000000000 FROM events ) GROUP BY window_sec ORDER BY window_sec ;"

golden query_step2 "$GPUWHY" query --db "$tmp/f.db" "$STEP2"
golden query_step3 "$GPUWHY" query --db "$tmp/f.db" "$STEP3"
golden query_step3_csv "$GPUWHY" query --db "$tmp/f.db" --csv "$STEP3"
golden query_step2_json "$GPUWHY" query --db "$tmp/f.db" --json "$STEP2"

# Row limit: an explicit --limit N says what was shown, never that the output was "cut"; the
# default limit does say so.
out=$("$GPUWHY" query --db "$tmp/f.db" --limit 2 "SELECT * FROM events" 2>&1)
if [ "$(echo "$out" | grep -c '^ *[0-9]')" -ge 2 ] && echo "$out" | grep -q "(first 2 rows: --limit 2)" \
   && ! echo "$out" | grep -q "cut"; then
  pass "limit note"; else fail "limit note: $out"; fi
# Ids and times without thousands separators, counts with them; no scientific notation.
out=$("$GPUWHY" query --db "$tmp/f.db" "SELECT id, wall_start_ns, 1234567 AS n, 1e-7 AS small FROM sessions LIMIT 1" 2>&1)
echo "$out" | grep -Eq "^ *[0-9]+ \| [0-9]{19} \| 1,234,567 \| 0\.000000100" \
  && pass "separators on counts only, no 1e-07" || fail "number formats: $out"

# Refusals: writes, ATTACH, pragma changes, extension loading — exit 1, clear message, file unchanged.
sum_before=$(sha256sum "$tmp/f.db" | cut -d' ' -f1)
for sql in "DELETE FROM event_rows" "DELETE FROM event_chunks" "UPDATE sessions SET host='x'" "DROP VIEW events" \
           "ATTACH DATABASE '$tmp/other.db' AS o" "PRAGMA journal_mode=DELETE" \
           "SELECT load_extension('/tmp/x.so')"; do
  out=$("$GPUWHY" query --db "$tmp/f.db" "$sql" 2>&1); rc=$?
  if [ $rc -ne 0 ] && echo "$out" | grep -q "refused"; then pass "refuse: $sql"; else fail "refuse: $sql (rc=$rc: $out)"; fi
done
[ "$sum_before" = "$(sha256sum "$tmp/f.db" | cut -d' ' -f1)" ] && pass "file unchanged" || fail "file changed"
[ ! -e "$tmp/other.db" ] && pass "attach created nothing" || fail "attach created a file"

# Bad input: syntax error shows SQLite's message; missing/empty/foreign files are clear errors.
out=$("$GPUWHY" query --db "$tmp/f.db" "SELEC 1" 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q 'syntax error' && pass "syntax error" || fail "syntax error: $out"
out=$("$GPUWHY" query --db "$tmp/missing.db" "SELECT 1" 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q 'does not exist' && pass "missing db" || fail "missing db: $out"
: > "$tmp/empty.db"
out=$("$GPUWHY" query --db "$tmp/empty.db" "SELECT 1" 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q 'empty' && pass "empty db" || fail "empty db: $out"
head -c 10000 /dev/urandom > "$tmp/junk.db"
out=$("$GPUWHY" query --db "$tmp/junk.db" "SELECT 1" 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q 'not a SQLite database' && pass "junk db" || fail "junk db: $out"
[ -e "$tmp/missing.db" ] && fail "query created a missing db" || pass "missing db not created"

# GPUWHY_DB and usage errors.
out=$(GPUWHY_DB="$tmp/f.db" "$GPUWHY" query "SELECT COUNT(*) AS n FROM sessions" 2>/dev/null)
echo "$out" | grep -q '^1$' && pass "GPUWHY_DB" || fail "GPUWHY_DB: $out"
"$GPUWHY" query --nope "SELECT 1" >/dev/null 2>&1; [ $? -eq 2 ] && pass "unknown flag exit 2" || fail "unknown flag"
"$GPUWHY" frobnicate >/dev/null 2>&1; [ $? -eq 2 ] && pass "unknown command exit 2" || fail "unknown command"
"$GPUWHY" query --help | grep -q -- '--csv' && pass "help lists flags" || fail "help"

# explain --pid of a process the recording never saw is an error naming the traced ones, not
# a report about a thread that "ran all the time".
out=$("$GPUWHY" explain --db "$tmp/f.db" --pid 999999 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q 'process 999999 is not in session 1' \
  && echo "$out" | grep -q 'traced processes: ' && ! echo "$out" | grep -q 'Causal Chains' \
  && pass "explain --pid of an unknown process" || fail "explain --pid unknown: rc=$rc $out"
# ... and of a process that made no CUDA calls (a DataLoader worker) is refused too, instead of
# being reported as "training threads (CUDA callers)".
worker=$("$GPUWHY" query --db "$tmp/f.db" --csv "SELECT pid FROM process_names WHERE name LIKE 'pt_data_worker%' LIMIT 1" | tail -1)
out=$("$GPUWHY" explain --db "$tmp/f.db" --pid "$worker" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "process $worker (and its tracked children) made no CUDA calls" \
  && ! echo "$out" | grep -q 'training threads' \
  && pass "explain --pid of a process without CUDA calls" || fail "explain --pid non-CUDA: rc=$rc $out"

if [ $failures -eq 0 ]; then echo "query e2e: all passed"; exit 0; fi
echo "query e2e: $failures failed"; exit 1
