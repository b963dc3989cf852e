# Helpers for the numbered system tests: TAP output, temporary dirs, cleanup.
# Usage: . "$top_srcdir/tests/lib.sh"; then ok/is/... and finish.
set -u
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
STAGEIN="$top_builddir/stagein/stagein"
TEST_NAME=$(basename "$0" .sh)
TEST_DIR=$(mktemp -d "${TMPDIR:-/tmp}/$TEST_NAME.XXXXXX")
tap_n=0
tap_failed=0
_cleanup_pids=()

cleanup() {
    local pid
    for pid in "${_cleanup_pids[@]:-}"; do
        [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    done
    # STAGEIN_TEST_KEEP=1 keeps the directory (logs, state) for a post-mortem
    if [ -n "${STAGEIN_TEST_KEEP:-}" ]; then echo "# kept $TEST_DIR"; else rm -rf "$TEST_DIR"; fi
}
trap cleanup EXIT

# Register a PID that this test started, to be stopped at exit.
track_pid() { _cleanup_pids+=("$1"); }

ok() {  # ok CONDITION_STATUS DESCRIPTION
    local status=$1; shift
    tap_n=$((tap_n + 1))
    if [ "$status" -eq 0 ]; then
        echo "ok $tap_n - $*"
    else
        echo "not ok $tap_n - $*"
        tap_failed=$((tap_failed + 1))
    fi
}

# run_ok DESCRIPTION -- CMD...: the command must succeed
run_ok() {
    local desc=$1; shift; [ "$1" = -- ] && shift
    local out
    if out=$("$@" 2>&1); then ok 0 "$desc"; else ok 1 "$desc"; printf '# %s\n' "$out" | head -20; fi
}

# run_fails_with DESCRIPTION PATTERN -- CMD...: must fail and print PATTERN
run_fails_with() {
    local desc=$1 pattern=$2; shift 2; [ "$1" = -- ] && shift
    local out rc=0
    out=$("$@" 2>&1) || rc=$?
    if [ "$rc" -ne 0 ] && grep -qE -- "$pattern" <<<"$out"; then
        ok 0 "$desc"
    else
        ok 1 "$desc"
        echo "# exit $rc, expected failure matching: $pattern"
        printf '# %s\n' "$out" | head -20
    fi
}

is() {  # is GOT WANT DESCRIPTION
    if [ "$1" = "$2" ]; then ok 0 "$3"; else ok 1 "$3"; echo "#   got: '$1'"; echo "#  want: '$2'"; fi
}

diag() { echo "# $*"; }

finish() {
    echo "1..$tap_n"
    [ "$tap_failed" -eq 0 ]
}
