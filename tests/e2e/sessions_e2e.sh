#!/usr/bin/env bash
# End-to-end: `gpuwhy sessions` and `gpuwhy prune` on a file with several demo sessions (no root
# needed): the listing (text and --json), --dry-run changes nothing, --keep and --older-than
# really remove the rows and give the space back, bad input is a usage error (exit 2), a missing
# file is an error (exit 1), and a session whose tracer is still alive blocks prune.
# Usage: sessions_e2e.sh GPUWHY
set -uo pipefail
GPUWHY=$1
. "$(dirname "$0")/lib.sh"
e2e_workdir sessions_e2e
DB=$WORK/s.db

# Four sessions (demo recordings are 30 s on a fixed date); the third is the big one.
for scenario in healthy healthy cpu-contention healthy; do
  "$GPUWHY" demo "$scenario" --duration 30s --keep "$DB" > /dev/null 2>&1 \
    || { echo "FAIL - demo $scenario"; exit 1; }
done
rows() { q "$DB" "SELECT COUNT(*) FROM event_rows${1:+ WHERE session = $1}"; }

out=$("$GPUWHY" sessions --db "$DB" 2>&1); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -q "4 sessions" && [ "$(echo "$out" | grep -c ' | demo ')" -eq 4 ] \
  && echo "$out" | grep -q "30.0s" && echo "$out" | grep -q "ended" \
  && pass "sessions lists four demo sessions" || fail "sessions: rc=$rc $out"
json=$("$GPUWHY" sessions --db "$DB" --json); rc=$?
echo "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
s = d["sessions"]
assert [x["id"] for x in s] == [1, 2, 3, 4], s
assert all(x["state"] == "ended" and x["ended_cleanly"] for x in s), s
assert all(x["span_ns"] == 30 * 10**9 for x in s), s
assert all(x["stored_events"] > 0 for x in s), s
assert s[2]["estimated_bytes"] > s[0]["estimated_bytes"], s
assert d["file_bytes"] > 0
' && [ $rc -eq 0 ] && pass "sessions --json" || fail "sessions --json: $json"

# Issue 34: the command line of each session, its secrets shown as *** (an older gpuwhy
# stored them as given: the reader redacts what it shows).
out=$("$GPUWHY" sessions --db "$DB" 2>&1)
echo "$out" | head -3 | grep -q "| command" && echo "$out" | grep -q "| gpuwhy demo cpu-contention" \
  && pass "sessions shows each session's command" || fail "sessions command column: $out"
cp "$DB" "$WORK/secret.db"
python3 -c '
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("UPDATE sessions SET command_line = ? WHERE id = 4", ("/usr/bin/gpuwhy trace --sink "
           "clickhouse://admin:pw1@ch:8123/gpuwhy -- env HF_TOKEN=tk2 python3 train.py "
           "--password pw3 --api-key=pw4 --max-tokens 512",))
db.commit()' "$WORK/secret.db"
out=$("$GPUWHY" sessions --db "$WORK/secret.db" 2>&1)
json=$("$GPUWHY" sessions --db "$WORK/secret.db" --json 2>&1)
echo "$out$json" | grep -q "pw1\|tk2\|pw3\|pw4" && fail "sessions shows a secret: $out $json" \
  || { echo "$out" | grep -q "| gpuwhy trace --sink clickhouse://admin:\*\*\*@ch:8123/gpuwhy -- env HF_TOKEN=\*\*\*" \
       && echo "$json" | grep -q -- "--password \*\*\* --api-key=\*\*\* --max-tokens 512" \
       && pass "sessions and sessions --json redact the command line's secrets" \
       || fail "sessions redaction: $out $json"; }

# --dry-run: the file does not change at all.
sum=$(sha256sum "$DB" | cut -d' ' -f1)
out=$("$GPUWHY" prune --db "$DB" --keep 1 --dry-run 2>&1); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -q "would remove 3 of 4 sessions" \
  && echo "$out" | grep -q "nothing was changed" && [ "$sum" = "$(sha256sum "$DB" | cut -d' ' -f1)" ] \
  && [ "$(q "$DB" "SELECT COUNT(*) FROM sessions")" = 4 ] \
  && pass "prune --dry-run removes nothing" || fail "prune --dry-run: rc=$rc $out"

# --older-than that matches nothing (demo sessions are from this year) keeps everything.
out=$("$GPUWHY" prune --db "$DB" --older-than 3650d 2>&1); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -q "nothing to remove" \
  && [ "$(q "$DB" "SELECT COUNT(*) FROM sessions")" = 4 ] \
  && pass "prune --older-than 3650d removes nothing" || fail "prune --older-than 3650d: rc=$rc $out"

# --keep 3: session 1 goes, with every row of it.
before3=$(rows 3)
out=$("$GPUWHY" prune --db "$DB" --keep 3 2>&1); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -q "removed 1 of 4 sessions" \
  && [ "$(q "$DB" "SELECT group_concat(id) FROM (SELECT id FROM sessions ORDER BY id)")" = '"2,3,4"' ] \
  && [ "$(rows 1)" = 0 ] && [ "$(q "$DB" "SELECT COUNT(*) FROM processes WHERE session = 1")" = 0 ] \
  && [ "$(q "$DB" "SELECT COUNT(*) FROM op_seconds WHERE session = 1")" = 0 ] \
  && [ "$(q "$DB" "SELECT COUNT(*) FROM system_snapshots WHERE session = 1")" = 0 ] \
  && [ "$(rows 3)" = "$before3" ] \
  && pass "prune --keep 3 removes session 1 and only it" || fail "prune --keep 3: rc=$rc $out"

# --keep 1 with --older-than 1h (both select 2 and 3): the big session goes, the file shrinks.
size_before=$(stat -c %s "$DB")
out=$("$GPUWHY" prune --db "$DB" --keep 1 --older-than 1h 2>&1); rc=$?
size_after=$(stat -c %s "$DB")
[ $rc -eq 0 ] && echo "$out" | grep -q "removed 2 of 3 sessions from .*: 2, 3" \
  && echo "$out" | grep -q "the file went from" \
  && [ "$(q "$DB" "SELECT group_concat(id) FROM sessions")" = 4 ] && [ "$(rows)" = "$(rows 4)" ] \
  && [ "$size_after" -lt "$size_before" ] \
  && pass "prune --keep 1 --older-than 1h removes 2 and 3, file $size_before -> $size_after bytes" \
  || fail "prune --keep 1 --older-than 1h: rc=$rc size $size_before -> $size_after $out" \
          "sessions left: [$(q "$DB" "SELECT group_concat(id) FROM sessions")]" \
          "rows: [$(rows)] session 4: [$(rows 4)]"
out=$("$GPUWHY" explain --db "$DB" 2>&1); rc=$?
[ $rc -eq 0 ] && pass "explain reads the pruned file" || fail "explain after prune: rc=$rc $out"

# Usage errors: exit 2 with a clear message; nothing removed.
check_usage() {  # expected-text, args...
  local want=$1; shift
  out=$("$GPUWHY" "$@" 2>&1); rc=$?
  [ $rc -eq 2 ] && echo "$out" | grep -q -- "$want" && pass "usage error: $*" \
    || fail "usage error $*: rc=$rc $out"
}
# A mistyped command or flag gets the one it was probably meant to be (issue 34).
check_usage "did you mean \`gpuwhy check\`" chekc
check_usage "did you mean \`gpuwhy explain\`" help explian
check_usage "did you mean --since" explain --db "$DB" --sinse 5s
check_usage "did you mean --keep" prune --db "$DB" --kep 1
out=$("$GPUWHY" frobnicate 2>&1); rc=$?
[ $rc -eq 2 ] && ! echo "$out" | grep -q "did you mean" && pass "no guess for a word close to no command" \
  || fail "frobnicate: rc=$rc $out"
check_usage "say what to remove" prune --db "$DB"
check_usage "must be 0 or more" prune --db "$DB" --keep -1
check_usage "keep" prune --db "$DB" --keep many
check_usage "older-than" prune --db "$DB" --older-than soon
check_usage "must be more than 0" prune --db "$DB" --older-than 0s
check_usage "unexpected argument" prune --db "$DB" --keep 1 extra
check_usage "unknown flag\|unknown" prune --db "$DB" --keep 1 --bogus
check_usage "unexpected argument" sessions --db "$DB" extra
check_usage "empty value" sessions --db ""
[ "$(q "$DB" "SELECT COUNT(*) FROM sessions")" = 1 ] && pass "usage errors removed nothing" \
  || fail "usage errors changed the file"

# A missing file: an error (exit 1) that names it, and no file is created.
out=$("$GPUWHY" prune --db "$WORK/missing.db" --keep 1 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "does not exist" && [ ! -e "$WORK/missing.db" ] \
  && pass "prune of a missing file" || fail "prune missing: rc=$rc $out"
out=$("$GPUWHY" sessions --db "$WORK/missing.db" 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "does not exist" && pass "sessions of a missing file" \
  || fail "sessions missing: rc=$rc $out"

# An open session whose tracer is alive (this shell stands in for it: the state check is the
# stop time and a live pid on this host) is "recording", and prune refuses the file; once that
# pid is gone the session is "interrupted" and prune may remove it.
"$GPUWHY" demo healthy --duration 30s --keep "$DB" > /dev/null 2>&1
sleep 300 & holder=$!; PIDS="$PIDS $holder"
sqlite_edit() {  # the test edits the file the way a tracer that is still running leaves it
  python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute(sys.argv[2]); c.commit()' "$DB" "$1"
}
sqlite_edit "UPDATE sessions SET wall_stop_ns = NULL, tracer_pid = $holder, host = NULL WHERE id = 5"
out=$("$GPUWHY" sessions --db "$DB" 2>&1)
echo "$out" | grep -q "recording (pid $holder)" && pass "a live tracer's session shows as recording" \
  || fail "recording state: $out"
out=$("$GPUWHY" prune --db "$DB" --keep 0 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "is being written" && echo "$out" | grep -q "hint: stop that tracer" \
  && [ "$(q "$DB" "SELECT COUNT(*) FROM sessions")" = 2 ] \
  && pass "prune refuses a file a live tracer writes" || fail "prune while recording: rc=$rc $out"
out=$("$GPUWHY" prune --db "$DB" --keep 0 --dry-run 2>&1); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -q "would remove 1 of 2 sessions" && echo "$out" | grep -q "is being recorded" \
  && pass "prune --dry-run names the recording session" || fail "dry-run while recording: rc=$rc $out"
kill "$holder"; wait "$holder" 2>/dev/null
out=$("$GPUWHY" sessions --db "$DB" 2>&1)
echo "$out" | grep -q "interrupted" && pass "a dead tracer's session shows as interrupted" \
  || fail "interrupted state: $out"
out=$("$GPUWHY" prune --db "$DB" --keep 0 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(q "$DB" "SELECT COUNT(*) FROM sessions")" = 0 ] && [ "$(rows)" = 0 ] \
  && pass "prune --keep 0 empties the file" || fail "prune --keep 0: rc=$rc $out"
out=$("$GPUWHY" sessions --db "$DB" 2>&1); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -q "0 sessions" && pass "sessions of an empty file" \
  || fail "sessions empty: rc=$rc $out"

e2e_finish sessions_e2e
