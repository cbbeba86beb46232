#!/usr/bin/env bash
# End-to-end: the Debian package as a user gets it (issue 16, "Packages and an always-on
# recorder"). Builds the .deb (or takes GW_DEB=path), checks its control data, unpacks it into a
# scratch root with dpkg -x and then, from that root only:
#   - runs the installed `gpuwhy check` (exit 1 is fine where this machine lacks a GPU; it must
#     run and give its verdict);
#   - renders every man page with man -l and groff -ww, without a warning, one per command the
#     binary lists;
#   - loads the bash completion and completes `gpuwhy tr<TAB>`, `gpuwhy trace --du<TAB>` and a
#     --db path;
#   - runs the recorder unit's ExecStart line (with /etc/default/gpuwhy's values, the database
#     moved into the scratch directory) for ~3 s next to the simulated training loop, stops it
#     with SIGTERM as systemd does, and runs `explain` and `sessions` on its database;
# and checks `make install DESTDIR=… PREFIX=…` and `make uninstall` (root; ~40 s).
# Usage: packaging_e2e.sh SOURCE_DIR BUILD_DIR SIM_BIN_DIR
set -uo pipefail
SRC=$1
BUILD=$2
SIM_BIN=$3
. "$(dirname "$0")/lib.sh"
e2e_require_root packaging_e2e
e2e_workdir packaging_e2e

# ---- the package ------------------------------------------------------------------------------
DEB=${GW_DEB:-}
if [ -z "$DEB" ]; then
  DEB=$("$SRC/packaging/build_deb.sh" "$BUILD" "$WORK" 2>"$WORK/deb.err") \
    || { echo "FAIL - build_deb.sh: $(cat "$WORK/deb.err")"; exit 1; }
fi
[ -f "$DEB" ] && pass "package built: $(basename "$DEB")" || { fail "no package at $DEB"; exit 1; }
info=$(dpkg-deb -f "$DEB" Package Version Architecture Depends)
version=$("$BUILD/gpuwhy" version | awk '{print $2}')
echo "$info" | grep -qx "Version: $version" && echo "$info" | grep -qx "Architecture: amd64" \
  && echo "$info" | grep -Eqx 'Depends: libc6 \(>= [0-9.]+\)' \
  && pass "control: version $version, amd64, depends on libc6 only" || fail "control: $info"
dpkg-deb --ctrl-tarfile "$DEB" | tar -xO ./conffiles 2>/dev/null | grep -qx /etc/default/gpuwhy \
  && pass "/etc/default/gpuwhy is a conffile" || fail "conffiles"

ROOT=$WORK/root
dpkg -x "$DEB" "$ROOT" || { fail "dpkg -x"; exit 1; }
BIN=$ROOT/usr/bin/gpuwhy
for f in usr/bin/gpuwhy usr/share/man/man1/gpuwhy.1.gz usr/share/man/man1/gpuwhy-trace.1.gz \
         usr/share/bash-completion/completions/gpuwhy usr/share/zsh/vendor-completions/_gpuwhy \
         lib/systemd/system/gpuwhy-recorder.service etc/default/gpuwhy; do
  [ -e "$ROOT/$f" ] || fail "package lacks /$f"
done
pass "package layout"
libs=$(ldd "$BIN" | awk '{print $1}' | grep -Ev '^(linux-vdso|/lib64/ld-linux|libc\.so|libm\.so)' || true)
[ -z "$libs" ] && pass "installed binary needs only glibc" || fail "installed binary needs: $libs"

# ---- check ------------------------------------------------------------------------------------
out=$("$BIN" check 2>&1); rc=$?
if { [ $rc -eq 0 ] || [ $rc -eq 1 ]; } && echo "$out" | grep -q "gpuwhy trace can"; then
  pass "installed gpuwhy check runs (exit $rc)"
else
  fail "installed gpuwhy check: rc=$rc $out"
fi

# ---- man pages --------------------------------------------------------------------------------
commands=$("$BIN" --help | awk '/^Commands:/ {on=1; next} on && NF == 0 {exit} on {print $1}' |
           grep -vx help)
for c in $commands; do
  [ -f "$ROOT/usr/share/man/man1/gpuwhy-$c.1.gz" ] || fail "no man page for gpuwhy $c"
done
npages=0
for page in "$ROOT"/usr/share/man/man1/*.1.gz; do
  npages=$((npages + 1))
  warn=$(MANWIDTH=80 man -l "$page" 2>&1 >/dev/null)
  warn+=$(zcat "$page" | groff -ww -man -z 2>&1)
  [ -z "$warn" ] || fail "$(basename "$page") renders with warnings: $warn"
done
[ "$npages" -eq $(($(echo "$commands" | wc -w) + 1)) ] && pass "$npages man pages render cleanly" \
  || fail "$npages man pages for commands: $commands"
MANWIDTH=80 man -l "$ROOT/usr/share/man/man1/gpuwhy-trace.1.gz" 2>/dev/null | grep -q -- "--max-db SIZE" \
  && pass "gpuwhy-trace(1) lists --max-db" || fail "gpuwhy-trace(1) lacks --max-db"

# ---- bash completion --------------------------------------------------------------------------
complete_words() {  # prints COMPREPLY for the words given (the last one is being completed)
  bash --norc --noprofile -c '
    . "$1"; shift
    complete -p gpuwhy | grep -q -- "-F _gpuwhy" || { echo "no complete -F"; exit 1; }
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
    _gpuwhy; printf "%s\n" "${COMPREPLY[@]}"' _ "$ROOT/usr/share/bash-completion/completions/gpuwhy" "$@"
}
out=$(complete_words gpuwhy tr)
[ "$out" = trace ] && pass "completion: gpuwhy tr -> trace" || fail "completion of 'tr': $out"
out=$(complete_words gpuwhy trace --du)
[ "$out" = --duration ] && pass "completion: gpuwhy trace --du -> --duration" || fail "completion of '--du': $out"
out=$(complete_words gpuwhy se)
[ "$out" = sessions ] && pass "completion: gpuwhy se -> sessions" || fail "completion of 'se': $out"
out=$(complete_words gpuwhy explain --db "$WORK/ro")
[ "$out" = "$ROOT" ] && pass "completion: --db completes file paths" || fail "completion of --db: $out"
out=$(complete_words gpuwhy prune --)
echo "$out" | grep -qx -- --dry-run && echo "$out" | grep -qx -- --keep \
  && pass "completion: prune's flags" || fail "completion of prune flags: $out"
if command -v zsh >/dev/null; then
  zsh -n "$ROOT/usr/share/zsh/vendor-completions/_gpuwhy" && pass "zsh completion parses" \
    || fail "zsh completion does not parse"
fi

# ---- the recorder unit's command line ---------------------------------------------------------
UNIT=$ROOT/lib/systemd/system/gpuwhy-recorder.service
exec_start=$(sed -n 's/^ExecStart=//p' "$UNIT")
[ -n "$exec_start" ] || fail "unit has no ExecStart"
grep -q '^Restart=on-failure' "$UNIT" && grep -q '^EnvironmentFile=-/etc/default/gpuwhy' "$UNIT" \
  && pass "unit: Restart=on-failure, settings from /etc/default/gpuwhy" || fail "unit settings"
# systemd's expansion: Environment= defaults, then the EnvironmentFile; ${VAR} is one word,
# $VAR splits at spaces.
declare -A env
for kv in $(sed -n 's/^Environment=//p' "$UNIT"); do env[${kv%%=*}]=${kv#*=}; done
while IFS= read -r line; do
  [[ "$line" =~ ^([A-Za-z_][A-Za-z0-9_]*)=(.*)$ ]] && env[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
done < "$ROOT/etc/default/gpuwhy"
[ "${env[GPUWHY_RECORDER_MAX_DB]}" = 2G ] && pass "default cap is 2G" || fail "default cap: ${env[GPUWHY_RECORDER_MAX_DB]}"
mkdir -m 0700 "$WORK/state"
env[GPUWHY_RECORDER_DB]=$WORK/state/recorder.db  # not the machine's /var/lib/gpuwhy
argv=()
read -ra words <<< "$exec_start"
for w in "${words[@]}"; do
  if [[ "$w" =~ ^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$ ]]; then argv+=("${env[${BASH_REMATCH[1]}]:-}")
  elif [[ "$w" =~ ^\$([A-Za-z_][A-Za-z0-9_]*)$ ]]; then
    read -ra split <<< "${env[${BASH_REMATCH[1]}]:-}"; argv+=("${split[@]}")
  else argv+=("$w"); fi
done
[ "${argv[0]}" = /usr/bin/gpuwhy ] && pass "ExecStart runs /usr/bin/gpuwhy: ${argv[*]}" \
  || fail "ExecStart binary: ${argv[0]}"
argv[0]=$BIN
DB=${env[GPUWHY_RECORDER_DB]}
"${argv[@]}" > "$WORK/recorder.out" 2>&1 &
REC=$!; PIDS="$PIDS $REC"
for _ in $(seq 100); do  # until the session is open (attach takes a moment)
  "$BIN" sessions --db "$DB" 2>/dev/null | grep -q "recording (pid $REC)" && break
  sleep 0.2
done
"$BIN" sessions --db "$DB" 2>&1 | grep -q "recording (pid $REC)" \
  && pass "the recorder's session shows as recording" || fail "recorder session: $(cat "$WORK/recorder.out")"
"$SIM_BIN/gw_train_loop" --duration 3 --workers 1 > "$WORK/loop.out" 2>&1 &
LOOP=$!; PIDS="$PIDS $LOOP"
out=$("$BIN" prune --db "$DB" --keep 0 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "is being written" && pass "prune refuses the recorder's file" \
  || fail "prune while the recorder runs: rc=$rc $out"
wait "$LOOP"
sleep 0.5
kill -TERM "$REC"
wait "$REC"; rc=$?
[ $rc -eq 0 ] && pass "recorder exits 0 on SIGTERM" || fail "recorder exit on SIGTERM: $rc $(cat "$WORK/recorder.out")"
[ "$(stat -c %a "$DB")" = 600 ] && pass "recorder database is 0600" || fail "db mode $(stat -c %a "$DB")"
json=$("$BIN" sessions --db "$DB" --json); rc=$?
echo "$json" | python3 -c '
import json, sys
s = json.load(sys.stdin)["sessions"]
assert len(s) == 1 and s[0]["state"] == "ended" and s[0]["ended_cleanly"], s
assert s[0]["kind"] == "trace" and s[0]["stored_events"] > 0, s
assert "--max-db 2G" in s[0]["command_line"], s
' && [ $rc -eq 0 ] && pass "SIGTERM closed the session cleanly (sessions --json)" || fail "sessions --json: $json"
out=$("$BIN" explain --since 5m --db "$DB" 2>&1); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -q "Causal Chains\|gw_train_loop" \
  && pass "explain --since 5m on the recorder's database" || fail "explain: rc=$rc $out"

# ---- make install / uninstall -----------------------------------------------------------------
INST=$WORK/inst
out=$(make -s -C "$SRC" install BUILD="$BUILD" DESTDIR="$INST" PREFIX=/opt/gw 2>&1); rc=$?
[ $rc -eq 0 ] && [ -x "$INST/opt/gw/bin/gpuwhy" ] && [ -f "$INST/opt/gw/share/man/man1/gpuwhy-explain.1" ] \
  && [ -f "$INST/opt/gw/share/bash-completion/completions/gpuwhy" ] \
  && [ -f "$INST/opt/gw/share/zsh/site-functions/_gpuwhy" ] && [ -f "$INST/etc/default/gpuwhy" ] \
  && grep -q '^ExecStart=/opt/gw/bin/gpuwhy trace' "$INST/opt/gw/lib/systemd/system/gpuwhy-recorder.service" \
  && pass "make install honours DESTDIR and PREFIX" || fail "make install: rc=$rc $out $(find "$INST")"
echo "GPUWHY_RECORDER_MAX_DB=5G" >> "$INST/etc/default/gpuwhy"
make -s -C "$SRC" install BUILD="$BUILD" DESTDIR="$INST" PREFIX=/opt/gw > /dev/null 2>&1
grep -q 5G "$INST/etc/default/gpuwhy" && pass "make install keeps an edited /etc/default/gpuwhy" \
  || fail "make install overwrote /etc/default/gpuwhy"
out=$(make -s -C "$SRC" uninstall DESTDIR="$INST" PREFIX=/opt/gw 2>&1); rc=$?
left=$(find "$INST/opt" -type f)
[ $rc -eq 0 ] && [ -z "$left" ] && pass "make uninstall removes what make install wrote" \
  || fail "make uninstall: rc=$rc left: $left $out"

e2e_finish packaging_e2e
