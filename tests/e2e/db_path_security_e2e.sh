#!/usr/bin/env bash
# Attacks on the database path (issue 12, critical): as root, with an unprivileged user made
# here, every way the user could make `gpuwhy trace` (run under sudo for them, or by root with
# their HOME) create, overwrite or hand them a file they could not touch before:
#   1. ~/.gpuwhy/gpuwhy.db a symlink to a root-only path that does not exist yet;
#   2. the same symlink to an existing root-only file;
#   3. ~/.gpuwhy itself a symlink to a root-only directory;
#   4. a hard link to a root-owned file in ~/.gpuwhy;
#   5. a race: the user swaps -wal/-shm for symlinks to a root-only file while recordings run;
#   6. a race: the user swaps ~/.gpuwhy itself for a symlink to a root-only directory;
#   7. root (no sudo) with the user's HOME, the symlink of 1 planted;
#   8. (reading) root's recording in a root-owned directory, shared with chmod;
#   9. `trace --prometheus`: while it records, the user swaps ~/.gpuwhy/gpuwhy.db for a link to a
#      root-only recording; the periodic analysis must not read it (nor make -wal/-shm there);
#  10. --db naming an existing file that is not a gpuwhy database (text, a 1-byte file, another
#      program's SQLite file): refused, the file untouched;
#  11. under sudo, --nvml-lib naming a library the user can change (trace and check): refused
#      before it is loaded; a root-owned one still loads;
#  12. `sudo gpuwhy report/export -o`: the output of the user's 0600 recording is theirs and
#      0600, and a race swapping the output directory for a link to a root-only directory
#      leaves nothing there;
# and that the honest case still works: the user's database is theirs, 0600 in a 0700 dir,
# readable by them without root.
# Usage: db_path_security_e2e.sh GPUWHY
set -uo pipefail
GPUWHY=$(realpath "$1")
. "$(dirname "$0")/lib.sh"

e2e_require_root db_path_security_e2e
for tool in useradd userdel runuser; do
  command -v $tool >/dev/null || { echo "FAIL - $tool missing (package passwd / util-linux)"; exit 1; }
done

# The scratch dir must be reachable by the user (for its home), the root-only parts are 0700.
WORK=$(mktemp -d /var/tmp/gw_dbsec.XXXXXX)
chmod 0755 "$WORK"
U=gwsec$$
H=$WORK/home/$U
mkdir -p "$WORK/home"
PIDS=""
cleanup() {
  for p in $PIDS; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  userdel "$U" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
useradd --home-dir "$H" --create-home --shell /bin/bash --user-group "$U" \
  || { echo "FAIL - useradd $U"; exit 1; }
UID_U=$(id -u "$U")
GID_U=$(id -g "$U")

ROOTONLY=$WORK/rootonly
mkdir -m 0700 "$ROOTONLY"
SECRET=$ROOTONLY/secret
echo "root's secret" > "$SECRET"; chmod 0600 "$SECRET"
SECRET_SUM=$(sha256sum "$SECRET" | cut -d' ' -f1)

as_user() { runuser -u "$U" -- "$@"; }
# setpriv execs (runuser forks): the pid of a background attacker is the loop itself.
as_user_bg() { setpriv --reuid="$UID_U" --regid="$GID_U" --clear-groups "$@" 2>/dev/null & PIDS="$PIDS $!"; }
# sudo's view of the world, without needing sudo installed: root with SUDO_USER set.
trace_sudo() { SUDO_USER=$U HOME=/root "$GPUWHY" trace --duration 1s --quiet "$@"; }
# Each case starts from a clean home and a root-only dir holding only the secret (as root made
# it), so one case's failure does not show up in the next.
reset_home() {
  rm -rf "$H/.gpuwhy" "$H/.gpuwhy.real"
  find "$ROOTONLY" -mindepth 1 ! -name secret -delete
  echo "root's secret" > "$SECRET"; chown 0:0 "$SECRET" "$ROOTONLY"; chmod 0600 "$SECRET"
  chmod 0700 "$ROOTONLY"
}

secret_intact() {
  [ "$(stat -c %u:%g:%a "$SECRET")" = "0:0:600" ] && \
    [ "$(sha256sum "$SECRET" | cut -d' ' -f1)" = "$SECRET_SUM" ]
}
# rootonly holds nothing but the secret, and nothing there belongs to the user.
rootonly_clean() {
  [ "$(ls -A "$ROOTONLY")" = "secret" ] && [ -z "$(find "$ROOTONLY" -user "$U")" ] && \
    [ "$(stat -c %u:%a "$ROOTONLY")" = "0:700" ]
}

# ---- 0. the honest case ------------------------------------------------------------------
reset_home
out=$(trace_sudo 2>&1); rc=$?
[ $rc -eq 0 ] && pass "sudo trace into the user's default database" || fail "honest trace rc=$rc: $out"
[ "$(stat -c %U:%a "$H/.gpuwhy" 2>/dev/null)" = "$U:700" ] \
  && pass "~/.gpuwhy is the user's, 0700" || fail "~/.gpuwhy: $(stat -c %U:%a "$H/.gpuwhy" 2>&1)"
[ "$(stat -c %U:%a "$H/.gpuwhy/gpuwhy.db" 2>/dev/null)" = "$U:600" ] \
  && pass "gpuwhy.db is the user's, 0600" || fail "gpuwhy.db: $(stat -c %U:%a "$H/.gpuwhy/gpuwhy.db" 2>&1)"
[ -z "$(find "$H/.gpuwhy" ! -user "$U")" ] && pass "every file in ~/.gpuwhy is the user's" \
  || fail "not the user's: $(find "$H/.gpuwhy" ! -user "$U" -printf '%p %u\n')"
n=$(cd / && as_user env HOME="$H" "$GPUWHY" query --csv "SELECT COUNT(*) FROM sessions" 2>&1 | tail -1)
[ "$n" = "1" ] && pass "the user reads it without root" || fail "user query: $n"
# A second run appends to the same file.
out=$(trace_sudo 2>&1); rc=$?
[ $rc -eq 0 ] && pass "second sudo trace appends" || fail "second trace rc=$rc: $out"

# ---- 1. db symlink to a root-only path that does not exist -------------------------------
reset_home
as_user mkdir -m 0700 "$H/.gpuwhy"
as_user ln -s "$ROOTONLY/x.db" "$H/.gpuwhy/gpuwhy.db"
out=$(trace_sudo 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "symbolic link" \
  && pass "db symlink to a new root-only file refused: $(echo "$out" | head -1)" \
  || fail "db symlink (new) rc=$rc: $out"
rootonly_clean && pass "no file created in the root-only dir" || fail "root-only dir: $(ls -la "$ROOTONLY")"

# ---- 2. db symlink to an existing root-only file -----------------------------------------
reset_home
as_user mkdir -m 0700 "$H/.gpuwhy"
as_user ln -s "$SECRET" "$H/.gpuwhy/gpuwhy.db"
out=$(trace_sudo 2>&1); rc=$?
[ $rc -ne 0 ] && pass "db symlink to root's file refused" || fail "db symlink (existing) rc=$rc: $out"
secret_intact && rootonly_clean && pass "root's file untouched" \
  || fail "secret now $(stat -c %U:%a "$SECRET")"
# --db naming the symlink directly, for an explicit path.
out=$(SUDO_USER=$U "$GPUWHY" trace --duration 1s --quiet --db "$H/.gpuwhy/gpuwhy.db" 2>&1); rc=$?
[ $rc -ne 0 ] && secret_intact && pass "--db through the symlink refused" || fail "--db symlink rc=$rc: $out"

# ---- 3. ~/.gpuwhy a symlink to a root-only directory -------------------------------------
reset_home
as_user ln -s "$ROOTONLY" "$H/.gpuwhy"
out=$(trace_sudo 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "symbolic link" \
  && pass "~/.gpuwhy symlink refused: $(echo "$out" | head -1)" || fail "dir symlink rc=$rc: $out"
rootonly_clean && secret_intact && pass "root-only dir untouched" || fail "root-only dir: $(ls -la "$ROOTONLY")"

# ---- 4. a hard link to a root-owned file -------------------------------------------------
# fs.protected_hardlinks stops the user making it; root plants it (the state an attacker gets
# where that sysctl is off).
reset_home
as_user mkdir -m 0700 "$H/.gpuwhy"
ln "$SECRET" "$H/.gpuwhy/gpuwhy.db"
out=$(trace_sudo 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -qE "not owned by|hard link" \
  && pass "hard link to root's file refused: $(echo "$out" | head -1)" || fail "hard link rc=$rc: $out"
rm -f "$H/.gpuwhy/gpuwhy.db"
secret_intact && pass "root's file untouched after the hard link attempt" \
  || fail "secret now $(stat -c %U:%a "$SECRET")"
# A root-owned plain file in the user's dir (left by an older version) is refused too.
echo junk > "$H/.gpuwhy/gpuwhy.db"
out=$(trace_sudo 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "not owned by" && pass "root-owned db in the user's dir refused" \
  || fail "root-owned db rc=$rc: $out"

# ---- 5. race: -wal / -shm swapped for symlinks to a root-only file -----------------------
reset_home
as_user mkdir -m 0700 "$H/.gpuwhy"
as_user_bg bash -c "while :; do for s in wal shm journal; do
    ln -sfn '$SECRET' '$H/.gpuwhy/gpuwhy.db-'\$s; rm -f '$H/.gpuwhy/gpuwhy.db-'\$s
    ln -sfn '$SECRET' '$H/.gpuwhy/gpuwhy.db-'\$s
  done; done"
for i in 1 2 3 4 5 6; do
  SUDO_USER=$U "$GPUWHY" demo healthy --keep "$H/.gpuwhy/gpuwhy.db" > /dev/null 2>&1
  trace_sudo > /dev/null 2>&1
done
kill $PIDS 2>/dev/null; wait $PIDS 2>/dev/null; PIDS=""
secret_intact && rootonly_clean && pass "wal/shm symlink race: root's file untouched (12 runs)" \
  || fail "wal race: secret now $(stat -c %U:%a "$SECRET")"

# ---- 6. race: ~/.gpuwhy swapped for a symlink to a root-only directory -------------------
reset_home
as_user mkdir -m 0700 "$H/.gpuwhy"
as_user_bg bash -c "cd '$H'; while :; do
    mv -T .gpuwhy .gpuwhy.real && { ln -sfn '$ROOTONLY' .gpuwhy; rm -f .gpuwhy; mv -T .gpuwhy.real .gpuwhy; }
  done"
for i in 1 2 3 4 5 6; do
  SUDO_USER=$U "$GPUWHY" demo healthy --keep "$H/.gpuwhy/gpuwhy.db" > /dev/null 2>&1
  trace_sudo > /dev/null 2>&1
done
kill $PIDS 2>/dev/null; wait $PIDS 2>/dev/null; PIDS=""
rootonly_clean && secret_intact && pass "dir symlink race: root-only dir untouched (12 runs)" \
  || fail "dir race: $(ls -la "$ROOTONLY")"

# ---- 7. root with the user's HOME, no sudo -----------------------------------------------
reset_home
as_user mkdir -m 0700 "$H/.gpuwhy"
as_user ln -s "$ROOTONLY/y.db" "$H/.gpuwhy/gpuwhy.db"
out=$(env -u SUDO_USER -u GPUWHY_DB HOME="$H" "$GPUWHY" trace --duration 1s --quiet 2>&1); rc=$?
[ $rc -ne 0 ] && rootonly_clean && pass "root with the user's HOME refused: $(echo "$out" | head -1)" \
  || fail "root + user's HOME rc=$rc: $out"
rm -f "$H/.gpuwhy/gpuwhy.db"
out=$(env -u SUDO_USER -u GPUWHY_DB HOME="$H" "$GPUWHY" trace --duration 1s --quiet 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "owned by $U" \
  && pass "root refuses a directory the user owns: $(echo "$out" | head -1)" \
  || fail "root + user's dir rc=$rc: $out"
[ -z "$(ls -A "$H/.gpuwhy")" ] && pass "nothing created in the user's dir by root" \
  || fail "root created: $(ls -la "$H/.gpuwhy")"

# ---- 8. the user reads root's recording in a root-owned directory --------------------------
# 0600 by default (it holds command lines): refused with a hint. Shared with chmod 0644, it
# reads although the user can create no -shm there (before: "attempt to write a readonly
# database").
SHARED=$WORK/shared
mkdir -m 0755 "$SHARED"
env -u SUDO_USER "$GPUWHY" demo healthy --keep "$SHARED/r.db" > /dev/null 2>&1
out=$(cd / && as_user "$GPUWHY" query --db "$SHARED/r.db" "SELECT 1" 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "chmod 0644" && pass "root's 0600 recording: refused with a hint" \
  || fail "0600 read: rc=$rc $out"
chmod 0644 "$SHARED/r.db"; rm -f "$SHARED/r.db-shm" "$SHARED/r.db-wal"
n=$(cd / && as_user "$GPUWHY" query --db "$SHARED/r.db" --csv "SELECT COUNT(*) FROM sessions" 2>&1 | tail -1)
[ "$n" = "1" ] && pass "shared root recording in a root-owned dir reads without root" \
  || fail "shared read: $n"

# ---- 9. trace --prometheus: the recording swapped for a link to root's -----------------------
# Before: the analysis reopened the path as root, served the root-only recording's findings
# on /metrics and made its -wal/-shm in the root-only dir.
reset_home
env -u SUDO_USER -u SUDO_UID "$GPUWHY" demo cpu-contention --keep "$ROOTONLY/rec.db" > /dev/null 2>&1
chmod 0600 "$ROOTONLY/rec.db"
before=$(ls -A "$ROOTONLY" | sort | tr '\n' ' ')
PORT=$((20000 + $$ % 20000))
SUDO_USER=$U HOME=/root "$GPUWHY" trace --duration 16s --quiet --prometheus "127.0.0.1:$PORT" \
  --prometheus-analysis 10s > "$WORK/prom.out" 2>&1 &
TRACE=$!; PIDS="$PIDS $TRACE"
for _ in $(seq 100); do [ -s "$H/.gpuwhy/gpuwhy.db" ] && break; sleep 0.2; done
as_user mv "$H/.gpuwhy/gpuwhy.db" "$H/.gpuwhy/moved.db"
as_user ln -s "$ROOTONLY/rec.db" "$H/.gpuwhy/gpuwhy.db"
page=""
for _ in $(seq 30); do
  page=$(/usr/bin/python3 -c "import urllib.request,sys; print(urllib.request.urlopen('http://127.0.0.1:$PORT/metrics', timeout=3).read().decode())" 2>/dev/null)
  echo "$page" | grep -qE '^gpuwhy_analysis_(runs|errors)_total [1-9]' && break
  sleep 1
done
wait "$TRACE"
if echo "$page" | grep -qE '^gpuwhy_analysis_(runs|errors)_total [1-9]' \
   && ! echo "$page" | grep -q '^gpuwhy_finding_severity{'; then
  pass "prometheus analysis did not read the linked root-only recording ($(echo "$page" | grep -E '^gpuwhy_analysis_(runs|errors)_total' | tr '\n' ' '))"
else
  fail "prometheus analysis after the swap" "$(echo "$page" | grep -E '^gpuwhy_(analysis|finding)')"
fi
after=$(ls -A "$ROOTONLY" | sort | tr '\n' ' ')
[ "$before" = "$after" ] && [ -z "$(find "$ROOTONLY" -user "$U")" ] \
  && pass "no -wal/-shm made beside the root-only recording" || fail "root-only dir changed: $before -> $after"
rm -f "$ROOTONLY/rec.db"

# ---- 10. --db naming a file that is not a gpuwhy database -------------------------------------
printf 'root config\n' > "$ROOTONLY/conf"; printf 'x' > "$ROOTONLY/one"
/usr/bin/python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('create table t(x)'); c.commit()" "$ROOTONLY/app.db"
for f in conf one app.db; do
  sum=$(sha256sum "$ROOTONLY/$f" | cut -d' ' -f1)
  out=$(env -u SUDO_USER "$GPUWHY" trace --duration 1s --quiet --db "$ROOTONLY/$f" 2>&1); rc=$?
  [ $rc -ne 0 ] && echo "$out" | grep -q "not a gpuwhy database" \
    && [ "$(sha256sum "$ROOTONLY/$f" | cut -d' ' -f1)" = "$sum" ] && [ ! -e "$ROOTONLY/$f-wal" ] \
    && pass "--db $f (not a gpuwhy database): refused, untouched" || fail "--db $f rc=$rc: $out"
  rm -f "$ROOTONLY/$f" "$ROOTONLY/$f-wal" "$ROOTONLY/$f-shm"
done

# ---- 11. --nvml-lib a library the user can change -------------------------------------------
LIBM=$(ldconfig -p | sed -n 's/.*libm.so.6 (libc6,x86-64) => //p' | head -1)
cp "$LIBM" "$H/nvml.so"; chown "$U:$U" "$H/nvml.so"
for cmd in trace check; do
  extra=""; [ $cmd = trace ] && extra="--duration 1s --quiet --record=false"
  out=$(SUDO_USER=$U SUDO_UID=$UID_U HOME=/root "$GPUWHY" $cmd $extra --nvml-lib "$H/nvml.so" 2>&1); rc=$?
  [ $rc -ne 0 ] && echo "$out" | grep -q "another user can change" \
    && pass "sudo $cmd --nvml-lib owned by the user: refused before loading" || fail "sudo $cmd --nvml-lib rc=$rc: $out"
done
out=$(SUDO_USER=$U SUDO_UID=$UID_U HOME=/root "$GPUWHY" check --nvml-lib "$LIBM" 2>&1)
echo "$out" | grep -q "another user can change" && fail "a root-owned --nvml-lib refused: $out" \
  || pass "a root-owned --nvml-lib is loaded under sudo"

# ---- 12. report / export -o under sudo --------------------------------------------------------
# Before: the outputs were root's and 0644 (Perfetto files hold command lines), and root left
# r.html.tmp-* files (or r.html) in the root-only directory the user's link pointed to.
reset_home
SUDO_USER=$U "$GPUWHY" demo cpu-contention --keep "$H/.gpuwhy/gpuwhy.db" > /dev/null 2>&1
for what in "report -o $H/r.html" "export --format perfetto -o $H/t.pftrace"; do
  file=${what##* }
  (cd / && SUDO_USER=$U "$GPUWHY" ${what% -o*} --db "$H/.gpuwhy/gpuwhy.db" -o "$file" > /dev/null 2>&1)
  [ "$(stat -c %U:%a "$file" 2>&1)" = "$U:600" ] && pass "sudo ${what%% *} of a 0600 recording: $U's, 0600" \
    || fail "sudo ${what%% *} -o: $(stat -c %U:%a "$file" 2>&1)"
done
as_user mkdir "$H/out.real"
as_user_bg bash -c "while :; do ln -sfn '$ROOTONLY' '$H/out.new'; mv -T '$H/out.new' '$H/out'
    ln -sfn '$H/out.real' '$H/out.new'; mv -T '$H/out.new' '$H/out'; done"
RACER=${PIDS##* }
for i in $(seq 12); do
  (cd / && SUDO_USER=$U "$GPUWHY" report --db "$H/.gpuwhy/gpuwhy.db" -o "$H/out/r.html" > /dev/null 2>&1)
done
kill "$RACER" 2>/dev/null; wait "$RACER" 2>/dev/null
rootonly_clean && pass "report -o race: nothing written in the root-only dir (12 runs)" \
  || fail "report -o race: root-only dir: $(ls -la "$ROOTONLY")"

e2e_finish db_path_security_e2e
