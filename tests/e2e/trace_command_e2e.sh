#!/usr/bin/env bash
# gpuwhy trace -- CMD: the job runs under the tracer.
#   1. A stripped job in a venv-like folder (its libcudart under lib/python3.x/site-packages/
#      nvidia/cu13/lib, no --cuda-lib given) is traced from its first instruction: every kernel
#      is named (registrations seen), the trace ends with the job; gpuwhy exits with the job's
#      status.
#   2. Under sudo (SUDO_UID) the job runs as that user, not as root.
#   3. A program that cannot be run: exit 127 and a message. Positional words without --,
#      -- with nothing after it, "--record false": usage errors (exit 2).
#   4. SIGTERM to gpuwhy: the session is closed, the job gets the signal, gpuwhy exits with the
#      job's status (143) and leaves nothing running.
# Usage: trace_command_e2e.sh GPUWHY SIM_BIN SIM_LIB
set -uo pipefail
GPUWHY=$1 SIM_BIN=$2 SIM_LIB=$3
. "$(dirname "$0")/lib.sh"
e2e_require_root trace_command_e2e
e2e_workdir trace_command_e2e

# ---- 1. a stripped job in a venv, traced from its first instruction -------------------------
VENV="$WORK/venv"
mkdir -p "$VENV/bin" "$VENV/lib/python3.12/site-packages/nvidia/cu13/lib"
NV="$VENV/lib/python3.12/site-packages/nvidia/cu13/lib"
cp "$SIM_LIB/libcudart.so.13" "$NV/"
cp "$SIM_BIN/gw_train_loop" "$VENV/bin/train"
strip "$VENV/bin/train"
# The job loads the venv's runtime (first in the search path), like torch does from its wheel.
DB="$WORK/job.db"
LD_LIBRARY_PATH="$NV" "$GPUWHY" trace --quiet --db "$DB" -- "$VENV/bin/train" --duration 3 \
  > "$WORK/job.out" 2>&1
rc=$?
cat "$WORK/job.out"
[ $rc -eq 0 ] && pass "the job ran and the trace ended with it" || fail "trace exit $rc"
"$GPUWHY" trace --quiet --db "$WORK/exit.db" -- sh -c 'exit 7' > /dev/null 2>&1; rc=$?
[ $rc -eq 7 ] && pass "trace exits with the job's status (7)" || fail "trace exit $rc, job's was 7"
launches=$(q "$DB" "SELECT COUNT(*) FROM events WHERE op = 'cudaLaunchKernel'")
unnamed=$(q "$DB" "SELECT COUNT(*) FROM events WHERE op = 'cudaLaunchKernel' AND (name IS NULL OR name LIKE 'fn@%')")
[ "${launches:-0}" -gt 0 ] && [ "${unnamed:-1}" -eq 0 ] \
  && pass "all $launches launch rows of a stripped job named (venv runtime attached before it ran)" \
  || fail "launch rows $launches, unnamed $unnamed"
ended=$(q "$DB" "SELECT COUNT(*) FROM sessions WHERE wall_stop_ns IS NOT NULL")
[ "${ended:-0}" -eq 1 ] && pass "the session ended with the job" || fail "session not closed"
grep -q "next: gpuwhy explain --db $DB" "$WORK/job.out" && pass "summary points at explain" \
  || fail "no next: line"

# ---- 2. under sudo the job runs as the invoking user ------------------------------------------
SUDO_UID=65534 SUDO_GID=65534 "$GPUWHY" trace --quiet --db "$WORK/sudo.db" -- id -u \
  > "$WORK/sudo.out" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(head -1 "$WORK/sudo.out")" = "65534" ] && pass "under sudo the job runs as SUDO_UID" \
  || fail "job ran as $(head -1 "$WORK/sudo.out") (rc $rc)"
grep -q "no CUDA process was seen" "$WORK/sudo.out" && ! grep -q "next:" "$WORK/sudo.out" \
  && pass "no CUDA process: says so, no next: line" || fail "summary without CUDA: $(cat "$WORK/sudo.out")"

# ---- 3. errors --------------------------------------------------------------------------------
"$GPUWHY" trace --db "$WORK/x.db" -- /nonexistent/prog > "$WORK/err.out" 2>&1; rc=$?
[ $rc -eq 127 ] && grep -q "cannot run '/nonexistent/prog'" "$WORK/err.out" \
  && pass "a program that cannot run: exit 127 and why" || fail "rc $rc: $(cat "$WORK/err.out")"
"$GPUWHY" trace --duration 1s --db "$WORK/x.db" python3 train.py > "$WORK/err.out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q -- "-- python3" "$WORK/err.out" \
  && pass "positional without --: refused with a hint" || fail "rc $rc: $(cat "$WORK/err.out")"
"$GPUWHY" trace --db "$WORK/x.db" -- > "$WORK/err.out" 2>&1; rc=$?
[ $rc -eq 2 ] && pass "nothing after --: usage error" || fail "rc $rc: $(cat "$WORK/err.out")"
"$GPUWHY" trace --record false --duration 1s > "$WORK/err.out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q -- "--record=false" "$WORK/err.out" \
  && pass "--record false: refused, --record=false suggested" || fail "rc $rc: $(cat "$WORK/err.out")"
"$GPUWHY" trace --pid 1 --db "$WORK/x.db" -- true > "$WORK/err.out" 2>&1; rc=$?
[ $rc -eq 2 ] && pass "--pid with -- CMD: usage error" || fail "rc $rc: $(cat "$WORK/err.out")"

# ---- 4. SIGTERM while the job runs ------------------------------------------------------------
"$GPUWHY" trace --db "$WORK/term.db" -- sleep 60 > "$WORK/term.out" 2>&1 &
TRACE=$!; PIDS="$PIDS $TRACE"
wait_for_line "$WORK/term.out" "tracing sleep" 30 || fail "trace -- sleep did not start"
JOB=$(pgrep -P "$TRACE" sleep)
kill -TERM "$TRACE"; wait "$TRACE"; rc=$?
[ $rc -eq 143 ] && pass "SIGTERM: the job got it, trace exits 143" || fail "SIGTERM exit $rc"
[ -n "$JOB" ] && [ ! -d "/proc/$JOB" ] && pass "the job is gone" || fail "job $JOB still running"
ended=$(q "$WORK/term.db" "SELECT COUNT(*) FROM sessions WHERE wall_stop_ns IS NOT NULL")
[ "${ended:-0}" -eq 1 ] && pass "SIGTERM: session closed" || fail "SIGTERM: session not closed"

e2e_finish trace_command_e2e
