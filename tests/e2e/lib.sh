# Shared by the e2e scripts (source it): TAP-like results, the root requirement, and helpers.
#   . "$(dirname "$0")/lib.sh"; e2e_require_root NAME; e2e_workdir NAME; pass "…"; fail "…";
#   e2e_finish NAME
failures=0
pass() { echo "ok - $1"; }
fail() { echo "FAIL - $1"; shift; local line; for line in "$@"; do echo "  $line"; done; failures=$((failures + 1)); }

# e2e_skip NAME REASON: the test cannot run here. It exits 77, which ctest reports as "Not
# Run (skipped)" (SKIP_RETURN_CODE, tests/CMakeLists.txt), not as a pass. Where everything must
# run (CI sets GW_NO_SKIP=1: root, the machine image's CPythons), a skip is a failure.
e2e_skip() {
  if [ -n "${GW_NO_SKIP:-}" ]; then
    echo "FAIL - $1: would skip ($2), and GW_NO_SKIP is set: this machine must run it"
    exit 1
  fi
  echo "$1: SKIPPED — $2"
  exit 77
}

# BPF needs root: without it the script is skipped (CI runs as root and skips nothing).
e2e_require_root() {
  if [ "$(id -u)" -ne 0 ]; then
    e2e_skip "$1" "needs root (run: sudo ctest -R $1)"
  fi
}

# q DB SQL: the query's CSV rows without the header.
q() { "$GPUWHY" query --db "$1" --csv "$2" 2>&1 | tail -n +2; }

# wait_for_line FILE PATTERN TIMEOUT_S: until FILE has a line matching PATTERN.
wait_for_line() {
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# e2e_workdir NAME: a scratch directory in $WORK, removed at exit together with every process
# whose pid the script appended to $PIDS (only those: never by name).
e2e_workdir() {
  WORK=$(mktemp -d "/var/tmp/gw_$1.XXXXXX")
  PIDS=""
  trap 'for p in $PIDS; do kill "$p" 2>/dev/null; done; rm -rf "$WORK"' EXIT
}

e2e_finish() {
  echo "$1: $failures failure(s)"
  [ "$failures" -eq 0 ]
}

# e2e_pythons: sets `pythons` to every CPython the machine image ships (pyenv 3.10-3.13, then the
# system python3). A missing pyenv version is a failure under GW_NO_SKIP, a note otherwise.
e2e_pythons() {
  pythons=()
  local v p
  for v in 3.10.13 3.11.7 3.12.1 3.13.0; do
    p=/root/.pyenv/versions/$v/bin/python${v%.*}
    if [ -x "$p" ]; then
      pythons+=("$p")
    elif [ -n "${GW_NO_SKIP:-}" ]; then
      fail "CPython $v is not at $p (the machine image ships it; GW_NO_SKIP is set)"
    else
      echo "note - CPython $v not installed here: not tested"
    fi
  done
  [ -x /usr/bin/python3 ] && pythons+=(/usr/bin/python3)
  [ ${#pythons[@]} -gt 0 ] || { echo "FAIL - no CPython found"; exit 1; }
}
