#!/usr/bin/env bash
# End-to-end for `gpuwhy report` (issue 17) on synthetic recordings (no root, ~40 s):
#   - the file is self-contained (a CSP that forbids every load, no scripts, no URLs to fetch)
#     and holds the findings, the timeline charts, feed-time bars and the tables;
#   - recorded text is escaped: a process named like an HTML tag stays text;
#   - headless Chromium opens it without console errors, its DOM has the charts' marks, and a
#     screenshot shows every chart's series (pixels of each series' colour) and the shading;
#   - a healthy recording says there is nothing to report; usage errors exit 2.
# Usage: report_e2e.sh GPUWHY SOURCE_DIR
set -uo pipefail
GPUWHY=$1
SRC=$2
. "$(dirname "$0")/lib.sh"
e2e_workdir report_e2e
CHROMIUM=$(command -v chromium || command -v chromium-browser) \
  || { echo "FAIL - chromium missing (scripts/setup.sh installs it)"; exit 1; }

DB="$WORK/cc.db"
"$GPUWHY" demo cpu-contention --keep "$DB" > "$WORK/demo.out" 2>&1 || { cat "$WORK/demo.out"; exit 1; }
# A competitor whose name is markup: the report must show it, not run it.
python3 - "$DB" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("UPDATE processes SET name = '<img src=x onerror=alert(1)>ffmpeg' WHERE name = 'ffmpeg'")
db.commit()
PY

H="$WORK/report.html"
"$GPUWHY" report --db "$DB" -o "$H" 2> "$WORK/report.err"; rc=$?
[ $rc -eq 0 ] && [ -s "$H" ] && pass "report: $(tail -1 "$WORK/report.err")" || fail "report exit $rc: $(cat "$WORK/report.err")"
grep -q "Content-Security-Policy\" content=\"default-src 'none'" "$H" && pass "CSP forbids every load" || fail "no CSP"
! grep -qiE '<(script|link|iframe|img|object|embed)|<[a-z]+[^>]* (src|href|srcset)=' "$H" \
  && pass "no scripts, images, embeds or links" \
  || fail "fetchable content: $(grep -oiE '<(script|link|iframe|img|object|embed)[^>]*>|<[a-z]+[^>]* (src|href|srcset)=[^ ]*' "$H" | head -3)"
grep -q '&lt;img src=x onerror=alert(1)&gt;ffmpeg' "$H" && pass "a markup process name is escaped" \
  || fail "hostile name not escaped"
n_find=$(grep -c 'class="finding sev-HIGH"' "$H")
[ "$n_find" -ge 1 ] && grep -q 'CPU scheduling contention' "$H" && pass "the HIGH cpu-contention finding" \
  || fail "findings: $n_find"
for id in chart-switches chart-sync chart-cuda feed-time processes kernels; do
  grep -q "id=\"$id\"" "$H" && pass "element #$id" || fail "no #$id"
done
bars=$(grep -o 'class="bar"' "$H" | wc -l)
shades=$(grep -o 'class="shade"' "$H" | wc -l)
[ "$bars" -ge 30 ] && pass "$bars switch bars" || fail "$bars switch bars"
[ "$shades" -ge 3 ] && pass "$shades shaded finding intervals" || fail "$shades shaded intervals"
# The shaded stretch is where the noisy neighbours ran (from ~22 s in the scenario).
python3 -c '
import json, subprocess, sys
d = json.loads(subprocess.run([sys.argv[1], "explain", "--db", sys.argv[2], "--json"], capture_output=True, text=True, check=True).stdout)
iv = d["findings"][0]["intervals"]
assert iv and 15 <= iv[0]["from_s"] <= 30 and sum(i["to_s"] - i["from_s"] for i in iv) >= 40, iv
' "$GPUWHY" "$DB" && pass "finding intervals cover the contention" || fail "finding intervals"

# Chromium: no console errors, the DOM as written, a screenshot with every series drawn.
run_chromium() {
  timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
    --user-data-dir="$WORK/chromium" --enable-logging=stderr --v=0 "$@"
}
run_chromium --dump-dom "file://$H" > "$WORK/dom.html" 2> "$WORK/dom.err"
grep -q 'id="chart-sync"' "$WORK/dom.html" && grep -q '<polyline' "$WORK/dom.html" \
  && pass "Chromium's DOM has the charts" || fail "DOM: $(head -c 300 "$WORK/dom.html") $(tail -3 "$WORK/dom.err")"
! grep -q '<img' "$WORK/dom.html" && pass "no <img> element in the DOM" || fail "an <img> element was parsed"
if grep -E 'CONSOLE|Uncaught|Refused to' "$WORK/dom.err" > "$WORK/console.txt"; then
  fail "console messages: $(head -3 "$WORK/console.txt")"
else
  pass "no console errors"
fi
run_chromium --window-size=1000,2200 --screenshot="$WORK/shot.png" "file://$H" > /dev/null 2> "$WORK/shot.err"
if [ -s "$WORK/shot.png" ]; then
  python3 "$SRC/tests/report/png_colors.py" "$WORK/shot.png" 3366cc cc3311 118844 > "$WORK/colors.txt"
  python3 - "$WORK/colors.txt" <<'PY' && pass "screenshot: every chart drew its series ($(tr '\n' ' ' < "$WORK/colors.txt"))" || fail "screenshot: $(cat "$WORK/colors.txt")"
import sys
counts = {l.split()[0]: int(l.split()[1]) for l in open(sys.argv[1]) if not l.startswith("size")}
# bars fill thousands of pixels; a 3 px polyline over 60 buckets, hundreds
assert counts["3366cc"] > 2000 and counts["cc3311"] > 300 and counts["118844"] > 300, counts
PY
else
  fail "no screenshot: $(tail -3 "$WORK/shot.err")"
fi

# A healthy recording: nothing to report, still the charts.
"$GPUWHY" demo healthy --keep "$WORK/h.db" > /dev/null 2>&1
"$GPUWHY" report --db "$WORK/h.db" -o "$WORK/h.html" 2> /dev/null \
  && grep -q "No causal chains" "$WORK/h.html" && grep -q 'id="chart-cuda"' "$WORK/h.html" \
  && pass "healthy: no causal chains, charts still drawn" || fail "healthy report"

# Usage errors.
"$GPUWHY" report --db "$DB" > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ] && pass "no -o: exit 2" || fail "no -o: exit $rc"
"$GPUWHY" report --db "$DB" -o "$WORK/x.html" extra > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ] && [ ! -e "$WORK/x.html" ] && pass "positional: exit 2, no file" || fail "positional: exit $rc"
"$GPUWHY" report --db "$WORK/missing.db" -o "$WORK/y.html" > /dev/null 2>&1; rc=$?
[ $rc -eq 1 ] && [ ! -e "$WORK/y.html" ] && pass "missing database: exit 1, no file" || fail "missing db: exit $rc"
"$GPUWHY" report --db "$DB" -o /proc/no-such-dir/r.html > /dev/null 2>&1; rc=$?
[ $rc -eq 1 ] && pass "unwritable output: exit 1" || fail "unwritable: exit $rc"
e2e_finish report_e2e
