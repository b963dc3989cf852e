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

# proc_start PID: the process's start time (clock ticks after boot), which
# with its pid names it: pids are reused (32768 of them wrap in minutes
# when tests run side by side), so a pid alone may name another test's
# daemon once its own process is gone
proc_start() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    # shellcheck disable=SC2086
    set -- ${stat##*) }   # the fields after "pid (comm) ": state first
    echo "${20}"
}
# ours PID:START: the process PID started at START is still running
ours() { [ -n "${1#*:}" ] && [ "$(proc_start "${1%%:*}")" = "${1#*:}" ]; }

cleanup() {
    local tracked pid
    for tracked in "${_cleanup_pids[@]:-}"; do
        pid=${tracked%%:*}
        ours "$tracked" && kill "$pid" 2>/dev/null || continue
        wait "$pid" 2>/dev/null
        # not always our child (wait returns at once): the directory goes
        # only after the process, which may still write into it as it stops
        local i
        for i in $(seq 100); do ours "$tracked" || break; sleep 0.1; done
        ours "$tracked" && kill -9 "$pid" 2>/dev/null
    done
    # STAGEIN_TEST_KEEP=1 keeps the directory (logs, state) for a post-mortem
    if [ -n "${STAGEIN_TEST_KEEP:-}" ]; then echo "# kept $TEST_DIR"; else rm -rf "$TEST_DIR"; fi
}
trap cleanup EXIT

# track_pid PID: a process this test started, stopped at exit if it still
# runs (the same process: its pid and start time)
track_pid() {
    local start
    start=$(proc_start "$1") && _cleanup_pids+=("$1:$start")
}
# stop_daemon PIDFILE: TERM to the daemon PIDFILE names if this test started
# it (its command line names $TEST_DIR: a stale pidfile may name a reused
# pid), then up to 10 s for it to go
stop_daemon() {
    local pid _
    pid=$(cat "$1" 2>/dev/null) && [ -n "$pid" ] || return 0
    grep -qF "$TEST_DIR" "/proc/$pid/cmdline" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
}
# wait_gone PID: waits (up to 10 s) until a killed process is gone; a
# process exits only once its threads' system calls in the kernel end (a
# flush on a loaded disk), and until then it holds its locks
wait_gone() { local _; for _ in $(seq 200); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.05; done; return 1; }

# skip_all WHY: the whole test is skipped (a TAP plan of none), before its
# first check.
skip_all() { echo "1..0 # SKIP $1"; exit 0; }

# need_tools [-p PACKAGES] TOOL...: the test is skipped (TAP) unless every
# tool is on PATH or in /usr/sbin; PACKAGES names what installs them.
need_tools() {
    local hint="" tool
    if [ "${1:-}" = -p ]; then hint=" ($2)"; shift 2; fi
    for tool in "$@"; do
        if ! command -v "$tool" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$tool" ]; then
            skip_all "$tool is not installed$hint"
        fi
    done
}

# start_munged: a private munged (its own key, socket, pid, log and seed in
# $TEST_DIR/munge, which M names), stopped at exit; cred prints a credential
# from it. The test is skipped when munged does not start. Nobody but this
# user reaches the test's directories through it (mode 755).
start_munged() {
    need_tools munged mungekey munge
    PATH=$PATH:/usr/sbin
    M=$TEST_DIR/munge
    mkdir -p "$M"
    mungekey --create --keyfile="$M/key" >/dev/null 2>&1
    munged --socket="$M/sock" --key-file="$M/key" --pid-file="$M/pid" --log-file="$M/log" \
        --seed-file="$M/seed" --force >/dev/null 2>&1
    for _ in $(seq 50); do [ -S "$M/sock" ] && [ -s "$M/pid" ] && break; sleep 0.1; done
    if [ ! -s "$M/pid" ]; then
        skip_all "munged did not start: $(tail -1 "$M/log" 2>/dev/null)"
    fi
    track_pid "$(cat "$M/pid")"
    chmod 755 "$TEST_DIR" "$M"
}
cred() { munge -S "$M/sock" -n; }
# the same from user nobody (needs setpriv, util-linux)
cred_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups munge -S "$M/sock" -n; }

# A TCP port on 127.0.0.1 that is free now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

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

# cached COND: the bytes the cache holds for the object (cache c, objects o)
# that the SQL condition COND names, read with the test's own sql function:
# its file, or its range of a segment file (doc/cache.md); nothing and status
# 1 when it is not cached. The cache is $CACHE_DIR, else $STATE/cache.
cached() {
    local row
    row=$(sql "SELECT c.path || ' ' || c.file_offset || ' ' || c.size FROM cache c
               JOIN objects o ON o.id = c.object_id WHERE $1")
    [ -n "$row" ] || return 1
    set -- $row
    dd if="${CACHE_DIR:-$STATE/cache}/$1" iflag=skip_bytes,count_bytes skip="$2" count="$3" \
        status=none
}
# uncache COND: with stageind stopped, the cached copies of the objects COND
# names dropped as an eviction drops them: their rows go (the test's sql must
# write), and the next start's recovery frees their files or segment ranges
uncache() {
    sql "DELETE FROM cache WHERE object_id IN (SELECT o.id FROM objects o JOIN cache c
         ON c.object_id = o.id WHERE $1)"
}
# same_as_cached COND FILE: status 0 when the object COND names is cached with
# FILE's bytes
same_as_cached() {
    [ -n "$(sql "SELECT 1 FROM cache c JOIN objects o ON o.id = c.object_id WHERE $1")" ] &&
        cached "$1" | cmp -s - "$2"
}

finish() {
    echo "1..$tap_n"
    # a failure's post-mortem: the end of the daemon's log (the test's
    # directory goes at exit)
    if [ "$tap_failed" -ne 0 ] && [ -r "${LOG:-}" ]; then
        echo "# the end of $LOG:"
        tail -30 "$LOG" | sed 's/^/#   /'
    fi
    [ "$tap_failed" -eq 0 ]
}
