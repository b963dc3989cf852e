# Helpers for the recall and push system tests (0220, 0230, 0240, 065x): a
# private munged, a state directory with simulated volumes written by
# `stagein tape`, datasets, pushes, and a stageind started on a per-test port
# and socket. Source after lib.sh.

STAGEIND="$top_builddir/daemon/stageind"
need_tools munged mungekey munge curl sqlite3 python3 sha256sum
unset STAGEIN_CATALOG

start_munged

# use_state NAME: the state directory, configuration and port the helpers use
use_state() {
    STATE=$TEST_DIR/$1
    DB=$STATE/catalog.db
    SOCK=$TEST_DIR/$1.sock
    LOG=$TEST_DIR/$1.log
    PORT=$(free_port)
    export STAGEIN_CONF=$TEST_DIR/$1.conf
    mkdir -p "$STATE"
}

# write_conf EXTRA: stagein.conf for the current state (EXTRA: more groups;
# STAGEIND_CONF_EXTRA: more settings of the stageind group; CATALOG_CONF:
# a catalog group, e.g. a PostgreSQL catalog.url)
write_conf() {
    cat > "$STAGEIN_CONF" <<CONF
state_dir = "$STATE"; ${CATALOG_CONF:-}
stageind: { munge_socket = "$M/sock"; log_level = "info"; ${STAGEIND_CONF_EXTRA:-} };
$1
CONF
}

SRC=$TEST_DIR/src
# make_file NAME BYTES: deterministic content (every state holds the same)
make_file() {
    mkdir -p "$SRC"
    [ -e "$SRC/$1" ] || yes "$1 $2 stagein recall test data" | head -c "$2" > "$SRC/$1"
}

tape() { "$STAGEIN" tape "$@"; }
# write_volume LABEL COPY FILE...: one archive file of FILEs (bucket "data")
write_volume() {
    local label=$1 copy=$2; shift 2
    (cd "$SRC" && "$STAGEIN" tape write "$label" --bucket data --copy "$copy" "$@" >/dev/null 2>&1)
}
# define DATASET FILE...: a public dataset of data/FILE...
define() {
    local name=$1; shift
    printf 'data/%s\n' "$@" > "$TEST_DIR/$name.manifest"
    "$STAGEIN" catalog define "$name" "$TEST_DIR/$name.manifest" --owner root:root --mode 0644 \
        >/dev/null
}

start() { "$STAGEIND" -d "$STATE" -p "$PORT" -S "$SOCK" -l "$LOG"; }
daemon_pid() { cat "$STATE/stageind.pid" 2>/dev/null; }
stop() { stop_daemon "$STATE/stageind.pid"; }  # graceful stop of the current state's daemon

BODY=$TEST_DIR/body
# api METHOD PATH [DATA]: prints the status code, the body lands in $BODY
api() {
    local args=(-s -o "$BODY" -w '%{http_code}' -X "$1" -H "X-Stagein-Munge: $(cred)")
    [ -n "${3:-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$3")
    curl "${args[@]}" "http://127.0.0.1:$PORT$2"
}
json() { python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null; }
# a bounded wait for a lock a stopping stageind may still hold
sql() { sqlite3 -cmd ".timeout 10000" "$DB" "$1"; }

# stage JSON: prints the new request's id ("" on failure)
stage() {
    local code
    code=$(api POST /api/v1/stage "$1")
    [ "$code" = 201 ] && json "$BODY" 'j["requestId"]'
}
# wait_done ID [SECONDS]: waits until the request is no longer active; prints its state
wait_done() {
    local id=$1 limit=${2:-30} state=""
    for _ in $(seq $((limit * 10))); do
        state=$(sql "SELECT state FROM requests WHERE uuid = '$id'")
        case $state in SUBMITTED | STARTED | "") sleep 0.1 ;; *) break ;; esac
    done
    echo "$state"
}
# is_all_completed SECONDS ID...: waits (wait_done, up to SECONDS each) for
# the requests, then checks that each ended COMPLETED, every item with it
is_all_completed() {
    local limit=$1 id states=""
    shift
    for id in "$@"; do states+="$(wait_done "$id" "$limit") "; done
    is "$(tr ' ' '\n' <<<"$states" | sort | uniq -c | awk '{print $2 "=" $1}' | tr '\n' ' ')" \
        "=1 COMPLETED=$# " "every accepted request COMPLETED"
    is "$(sql "SELECT count(*) FROM request_items WHERE state <> 'COMPLETED'")" 0 \
        "every item of every request COMPLETED"
}
# cache_matches OBJECT_KEY...: every key's cache file equals its source and
# its catalog checksum; prints the keys that do not
cache_mismatches() {
    local key sum
    for key in "$@"; do
        sum=$(sql "SELECT checksum FROM objects WHERE key = '$key'")
        if ! same_as_cached "o.key = '$key'" "$SRC/$key" ||
            [ "sha256:$(cached "o.key = '$key'" | sha256sum | cut -d' ' -f1)" != "$sum" ]; then
            printf '%s ' "$key"
        fi
    done
}
recalled_count() { sql "SELECT count(*) FROM events e JOIN objects o ON e.subject = o.id WHERE e.kind = 'object.recalled' AND o.key = '$1'"; }

# submit DATASET: a stage request of a random priority, its id into accepted[]
accepted=()
submit() {
    local id
    id=$(stage "{\"datasets\":[\"$1\"],\"priority\":$((RANDOM % 3))}")
    [ -n "$id" ] && accepted+=("$id")
}
# kill_loop ROUNDS ROUND_FN: ROUNDS times ROUND_FN ROUND, a pause of 0.2 to
# 0.8 s, kill -9 of stageind and a restart on a new port (the old one may
# linger in TIME_WAIT); counts into kills and restarts
kill_loop() {
    local round pid
    kills=0
    restarts=0
    for round in $(seq "$1"); do
        "$2" "$round"
        sleep "0.$((2 + RANDOM % 7))"
        pid=$(daemon_pid)
        if [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; then
            kills=$((kills + 1))
            wait_gone "$pid"
        fi
        PORT=$(free_port)
        start && restarts=$((restarts + 1))
        track_pid "$(daemon_pid)"
    done
}

# push DATASET KEY FILE [PUSH_ID] [CREDENTIAL]: prints the status code, body in $BODY
push() {
    local query="dataset=$1&key=$2" credential=${5-$(cred)}
    [ -n "${4:-}" ] && query+="&push=$4"
    curl -s -o "$BODY" -w '%{http_code}' -X POST -H "X-Stagein-Munge: $credential" \
        -H "X-Stagein-Checksum: sha256:$(sha256sum < "$3" | cut -d' ' -f1)" \
        -H 'Content-Type: application/octet-stream' --data-binary "@$3" \
        "http://127.0.0.1:$PORT/api/v1/push?$query"
}
# wait_push ID [SECONDS]: waits until the push is DURABLE or FAILED; prints its state
wait_push() {
    local state=""
    for _ in $(seq $((${2:-60} * 10))); do
        [ "$(api GET "/api/v1/push/$1")" = 200 ] && state=$(json "$BODY" 'j["state"]')
        case $state in DURABLE | FAILED) break ;; *) sleep 0.1 ;; esac
    done
    echo "$state"
}
