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
#   5. The job of a root shell with SUDO_UID set (as after sudo -i), on a terminal: it cannot
#      push input into root's terminal (TIOCSTI: the attack ran `id` as root after gpuwhy
#      exited), holds none of root's open files, and gets no LD_*, SUDO_*, MAIL or other
#      variables off the allow-list (--keep-env adds names); Ctrl-C still reaches it.
#   6. Signals gpuwhy does not act on (SIGUSR1, SIGUSR2) reach the job; the trace goes on
#      (before: SIGUSR1 killed the tracer and left the job running).
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

# ---- 5. a root terminal with SUDO_UID set: the job cannot reach it ---------------------------
PY=/usr/bin/python3
JOB='import fcntl, json, os, termios
r = {}
try:
    for c in b"id # INJECTED\n":
        fcntl.ioctl(0, termios.TIOCSTI, bytes([c]))
    r["tiocsti"] = "pushed"
except OSError as e:
    r["tiocsti"] = os.strerror(e.errno)
links = []
for n in os.listdir("/proc/self/fd"):
    try:
        links.append(os.readlink("/proc/self/fd/" + n))
    except OSError:
        pass
r["root_file_open"] = any("root_secret" in l for l in links)
r["env"] = {k: v for k, v in os.environ.items()}
print("JOB " + json.dumps(r), flush=True)'
echo "root only" > "$WORK/root_secret"; chmod 600 "$WORK/root_secret"
cat > "$WORK/tty.sh" <<SH
exec 7<"$WORK/root_secret"
export SUDO_UID=65534 SUDO_GID=65534 SUDO_COMMAND=/bin/bash MAIL=/var/mail/root
# (The sanitizer build's gpuwhy inherits LD_PRELOAD too: ASan must be told not to mind.)
export ASAN_OPTIONS="\${ASAN_OPTIONS:+\$ASAN_OPTIONS:}verify_asan_link_order=0"
export LD_PRELOAD=/lib/x86_64-linux-gnu/libm.so.6 GW_ROOT_TOKEN=s3cret CUDA_VISIBLE_DEVICES=0
export MY_SETTING=kept
"$GPUWHY" trace --quiet --keep-env MY_SETTING --db "$WORK/tty.db" -- $PY -c '$JOB'
echo "GPUWHY EXIT \$?"
unset LD_PRELOAD
if read -t 1 line; then echo "ROOT SHELL READ: [\$line]"; else echo "ROOT SHELL READ NOTHING"; fi
SH
"$PY" "$(dirname "$0")/pty_run.py" --timeout 60 "$WORK/tty.sh" > "$WORK/tty.out" 2>&1
"$PY" - "$WORK/tty.out" <<'PY' > "$WORK/tty.check"
import json, sys
text = open(sys.argv[1]).read()
line = next((l for l in text.splitlines() if l.startswith("JOB ")), None)
if line is None:
    print("FAIL no job output"); sys.exit()
r = json.loads(line[4:])
env = r["env"]
print("tiocsti", "ok" if r["tiocsti"] != "pushed" else "FAIL pushed into root's terminal")
print("shell", "ok" if "ROOT SHELL READ NOTHING" in text else "FAIL root's shell read injected input")
print("fd", "ok" if not r["root_file_open"] else "FAIL root's open file reached the job")
leaked = [k for k in ("LD_PRELOAD", "SUDO_UID", "SUDO_COMMAND", "MAIL", "GW_ROOT_TOKEN") if k in env]
print("env", "ok" if not leaked else "FAIL leaked " + ",".join(leaked))
kept = env.get("CUDA_VISIBLE_DEVICES") == "0" and env.get("MY_SETTING") == "kept" and "PATH" in env
print("kept", "ok" if kept else "FAIL lost CUDA_VISIBLE_DEVICES/MY_SETTING/PATH: " + ",".join(env))
print("home", "ok" if env.get("USER") == "nobody" and env.get("HOME") != "/root" else
      "FAIL USER/HOME " + str(env.get("USER")) + " " + str(env.get("HOME")))
print("exit", "ok" if "GPUWHY EXIT 0" in text else "FAIL gpuwhy did not exit 0")
PY
while read -r what verdict; do
  [ "$verdict" = ok ] && pass "tty job: $what" || fail "tty job: $what: $verdict" "$(cat "$WORK/tty.out")"
done < "$WORK/tty.check"
[ -s "$WORK/tty.check" ] || fail "tty job: no verdicts" "$(cat "$WORK/tty.out")"

cat > "$WORK/ctrlc.sh" <<SH
export SUDO_UID=65534 SUDO_GID=65534
"$GPUWHY" trace --quiet --db "$WORK/ctrlc.db" -- $PY -c 'import sys, time
print("READY", flush=True)
try:
    time.sleep(60)
except KeyboardInterrupt:
    print("JOB GOT CTRL-C", flush=True)
    sys.exit(3)'
echo "GPUWHY EXIT \$?"
SH
"$PY" "$(dirname "$0")/pty_run.py" --ctrl-c-after 1 --timeout 60 "$WORK/ctrlc.sh" > "$WORK/ctrlc.out" 2>&1
grep -q "JOB GOT CTRL-C" "$WORK/ctrlc.out" && grep -q "GPUWHY EXIT 3" "$WORK/ctrlc.out" \
  && pass "tty job: Ctrl-C on the terminal reaches the job in its own session; gpuwhy exits with its status" \
  || fail "tty job: Ctrl-C" "$(cat "$WORK/ctrlc.out")"
ended=$(q "$WORK/ctrlc.db" "SELECT COUNT(*) FROM sessions WHERE wall_stop_ns IS NOT NULL")
[ "${ended:-0}" -eq 1 ] && pass "tty job: Ctrl-C: session closed" || fail "tty job: Ctrl-C: session not closed"
"$GPUWHY" trace --quiet --keep-env 'BAD;NAME' --db "$WORK/x.db" -- true > "$WORK/err.out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "not a variable name" "$WORK/err.out" && pass "--keep-env: a bad name is refused" \
  || fail "--keep-env bad name: rc $rc $(cat "$WORK/err.out")"

# ---- 6. other signals are passed on -----------------------------------------------------------
for as_user in "" 65534; do
  who=${as_user:+"as the sudo user"}; who=${who:-"as root"}
  SUDO_UID=$as_user "$GPUWHY" trace --quiet --db "$WORK/sig$as_user.db" -- /bin/sh -c \
    'trap "echo got-usr1" USR1; trap "echo got-usr2" USR2; echo READY; i=0
     while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done' > "$WORK/sig.out" 2>&1 &
  TRACE=$!; PIDS="$PIDS $TRACE"
  wait_for_line "$WORK/sig.out" READY 30 || fail "$who: signal job did not start"
  kill -USR1 "$TRACE"; wait_for_line "$WORK/sig.out" got-usr1 10; kill -USR2 "$TRACE"
  wait_for_line "$WORK/sig.out" got-usr2 10
  if kill -0 "$TRACE" 2>/dev/null && grep -q got-usr1 "$WORK/sig.out" && grep -q got-usr2 "$WORK/sig.out"; then
    pass "$who: SIGUSR1 and SIGUSR2 reach the job; the trace goes on"
  else
    fail "$who: SIGUSR1/SIGUSR2 not passed on (tracer alive: $(kill -0 "$TRACE" 2>/dev/null && echo yes || echo no))" "$(cat "$WORK/sig.out")"
  fi
  kill -TERM "$TRACE" 2>/dev/null; wait "$TRACE"; rc=$?
  [ $rc -eq 143 ] && pass "$who: then SIGTERM ends both (143)" || fail "$who: SIGTERM after USR1: exit $rc"
done

e2e_finish trace_command_e2e
