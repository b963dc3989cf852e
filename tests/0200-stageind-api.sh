#!/bin/bash
# stageind's control API against a real munged: stage, status, cancel,
# release, archiveinfo, metrics; every 4xx answered with a JSON reason and
# no change in the catalog; lock file, HUP reload, TERM stop, kill -9 and
# restart keeping the requests.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"

STAGEIND="$top_builddir/daemon/stageind"
need_tools munged mungekey munge curl sqlite3 python3 setpriv

start_munged   # (mode 755: nobody must reach the munge socket)

# --- configuration, catalog, datasets -------------------------------------------
STATE=$TEST_DIR/state
SOCK=$TEST_DIR/ctl.sock
LOG=$TEST_DIR/stageind.log
DB=$STATE/catalog.db
PORT=$(free_port)
export STAGEIN_CONF=$TEST_DIR/stagein.conf
unset STAGEIN_CATALOG
write_conf() {  # write_conf LOG_LEVEL
    cat > "$STAGEIN_CONF" <<CONF
state_dir = "$STATE";
stageind: {
    munge_socket = "$M/sock";
    body_limit = 2048;
    log_level = "$1";
    pin_lifetime = 3600;
};
CONF
}
write_conf notice
mkdir -p "$STATE"
cat > "$TEST_DIR/positions.csv" <<CSV
bucket,key,size,volume,position,copy,checksum
data,pub/a.bin,1000,L00001,0,1,
data,pub/b.bin,2000,L00001,1000,1,
data,priv/c.bin,3000,L00002,0,1,
CSV
printf 'data/pub/a.bin\ndata/pub/b.bin\n' > "$TEST_DIR/pub.manifest"
printf 'data/priv/c.bin\n' > "$TEST_DIR/priv.manifest"
run_ok "catalog imported" -- "$STAGEIN" catalog import "$TEST_DIR/positions.csv"
run_ok "public dataset defined" -- "$STAGEIN" catalog define pub "$TEST_DIR/pub.manifest" --owner root:root --mode 0644
run_ok "private dataset defined" -- "$STAGEIN" catalog define priv "$TEST_DIR/priv.manifest" --owner root:root --mode 0600

start() { "$STAGEIND" -d "$STATE" -p "$PORT" -S "$SOCK" -l "$LOG"; }
daemon_pid() { cat "$STATE/stageind.pid" 2>/dev/null; }
counts() { sqlite3 "$DB" "SELECT (SELECT count(*) FROM requests) || '/' || (SELECT count(*) FROM request_items) || '/' || coalesce((SELECT group_concat(state) FROM (SELECT state FROM requests ORDER BY id)), '')"; }
json() {  # json FILE EXPR: python expression on the parsed body 'j'
    python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null
}
BODY=$TEST_DIR/body
# api METHOD PATH [DATA] [CREDENTIAL]: prints the status code, body in $BODY
api() {
    local method=$1 path=$2 data=${3:-} credential=${4-$(cred)}
    local args=(-s -o "$BODY" -w '%{http_code}' -X "$method")
    [ -n "$credential" ] && args+=(-H "X-Stagein-Munge: $credential")
    [ -n "$data" ] && args+=(-H 'Content-Type: application/json' --data-binary "$data")
    curl "${args[@]}" "http://127.0.0.1:$PORT$path"
}
api_unix() { curl -s -o "$BODY" -w '%{http_code}' --unix-socket "$SOCK" -X "$1" "http://localhost$2" ${3:+--data-binary "$3"}; }

# --- start-up, lock file -----------------------------------------------------------------
run_ok "stageind starts in the background" -- start
PID=$(daemon_pid)
track_pid "$PID"
ok "$([ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; echo $?)" "pid file names a live daemon"
ok "$([ -S "$SOCK" ]; echo $?)" "Unix socket created"
run_fails_with "a second stageind on the same state directory is refused, naming the pid" \
    "another stageind \\(pid $PID\\) owns this state directory" -- start

# --- stage, status -----------------------------------------------------------------------
code=$(api POST /api/v1/stage '{"datasets":["pub"],"job":"4242","priority":3}')
is "$code" 201 "POST /api/v1/stage: 201"
REQ=$(json "$BODY" 'j["requestId"]')
is "$(json "$BODY" 'j["files"], j["bytes"]')" "(2, 3000)" "two files, 3000 bytes"
is "$(sqlite3 "$DB" "SELECT state || ' ' || job_id || ' ' || priority FROM requests WHERE uuid = '$REQ'")" \
    "SUBMITTED 4242 3" "request persisted before the answer"
code=$(api GET "/api/v1/stage/$REQ")
is "$code" 200 "GET /api/v1/stage/{id}: 200"
is "$(json "$BODY" 'j["state"], j["filesTotal"], j["bytesTotal"], j["queuePosition"], j["job"]')" \
    "('SUBMITTED', 2, 3000, 1, '4242')" "status: state, totals, queue position, job"
is "$(json "$BODY" '[ (f["path"], f["state"]) for f in j["files"] ]')" \
    "[('/data/pub/a.bin', 'SUBMITTED'), ('/data/pub/b.bin', 'SUBMITTED')]" "per-file state"
code=$(api_unix GET "/api/v1/stage/$REQ")
is "$code" 200 "Unix socket without a credential: SO_PEERCRED identity (root)"
code=$(api POST /api/v1/stage '{"files":["data/pub/a.bin"],"manifest":"data/pub/b.bin\n"}')
is "$code" 201 "stage by files and manifest"
code=$(api POST /api/v1/stage '{"datasets":["pub"],"uid":65534,"gid":65534}')
is "$code" 201 "root stages on behalf of a user"
ONBEHALF=$(json "$BODY" 'j["requestId"]')
is "$(sqlite3 "$DB" "SELECT uid FROM requests WHERE uuid = '$ONBEHALF'")" 65534 "owned by that user"

# --- bad input: a JSON reason and no change ------------------------------------------------
expect_refusal() {  # expect_refusal DESCRIPTION STATUS PATTERN -- api args...
    local desc=$1 want=$2 pattern=$3; shift 4
    local before after code
    before=$(counts)
    code=$("$@")
    after=$(counts)
    local reason
    reason=$(json "$BODY" 'j["error"]')
    if [ "$code" = "$want" ] && grep -qE -- "$pattern" <<<"$reason" && [ "$before" = "$after" ]; then
        ok 0 "$desc: $code, $reason"
    else
        ok 1 "$desc"
        diag "status $code (want $want), reason '$reason' (want /$pattern/), rows $before -> $after"
    fi
}
expect_refusal "unknown dataset" 404 "unknown dataset 'nope'" -- api POST /api/v1/stage '{"datasets":["nope"]}'
expect_refusal "malformed JSON" 400 "malformed JSON" -- api POST /api/v1/stage '{"datasets":["pub"'
expect_refusal "unknown field" 400 "unknown field 'dataset'" -- api POST /api/v1/stage '{"dataset":["pub"]}'
big=$(python3 -c 'import json; print(json.dumps({"files": ["data/x%05d" % i for i in range(400)]}))')
expect_refusal "body over the configured limit" 413 "limit of 2048 bytes" -- api POST /api/v1/stage "$big"
expect_refusal "missing MUNGE credential over TCP" 401 "no MUNGE credential" -- api POST /api/v1/stage '{"datasets":["pub"]}' ""
expect_refusal "bad MUNGE credential" 401 "invalid MUNGE credential" -- api POST /api/v1/stage '{"datasets":["pub"]}' "MUNGE:bogus:"
used=$(cred)
api GET "/api/v1/stage/$REQ" "" "$used" >/dev/null
expect_refusal "replayed MUNGE credential" 401 "replayed" -- api POST /api/v1/stage '{"datasets":["pub"]}' "$used"
expect_refusal "another user's private dataset" 403 "dataset 'priv' .*mode 0600.* not readable by other users" -- \
    api POST /api/v1/stage '{"datasets":["priv"]}' "$(cred_nobody)"
expect_refusal "a user may not stage on behalf of another" 403 "only root" -- \
    api POST /api/v1/stage '{"datasets":["pub"],"uid":0,"gid":0}' "$(cred_nobody)"
expect_refusal "cancelling someone else's request" 403 "belongs to uid 0" -- \
    api POST "/api/v1/stage/$REQ/cancel" "" "$(cred_nobody)"
expect_refusal "reading someone else's request" 403 "belongs to uid 0" -- \
    api GET "/api/v1/stage/$REQ" "" "$(cred_nobody)"
expect_refusal "unknown request" 404 "no request" -- api GET /api/v1/stage/00000000-0000-4000-8000-000000000000
expect_refusal "unknown endpoint" 404 "no such endpoint" -- api GET /api/v1/nothing
expect_refusal "wrong method" 405 "not allowed" -- api PUT "/api/v1/stage/$REQ"

# --- binding a request made at submission to its job --------------------------------------
code=$(api POST "/api/v1/stage/$ONBEHALF/job" '{"job": 77}' "$(cred_nobody)")
is "$code:$(sqlite3 "$DB" "SELECT job_id FROM requests WHERE uuid = '$ONBEHALF'")" "200:77" \
    "the owner binds a request to its job"
is "$(api POST "/api/v1/stage/$ONBEHALF/job" '{"job": "77"}')" 200 "binding it again to the same job (root)"
expect_refusal "binding it to another job" 409 "is job 77's, not job 78's" -- \
    api POST "/api/v1/stage/$ONBEHALF/job" '{"job": 78}'
expect_refusal "binding someone else's request" 403 "belongs to uid 0" -- \
    api POST "/api/v1/stage/$REQ/job" '{"job": 5}' "$(cred_nobody)"
expect_refusal "a job binding without a job" 400 "must be \{\"job\": ID\}" -- \
    api POST "/api/v1/stage/$ONBEHALF/job" '{"jobs": 5}'

# --- cancel, release -----------------------------------------------------------------------
code=$(api POST "/api/v1/stage/$ONBEHALF/cancel" "" "$(cred_nobody)")
is "$code" 200 "the owner cancels a request"
is "$(sqlite3 "$DB" "SELECT r.state || ' ' || group_concat(i.state) FROM requests r JOIN request_items i ON i.request_id = r.id WHERE r.uuid = '$ONBEHALF'")" \
    "CANCELLED CANCELLED,CANCELLED" "request and items CANCELLED"
expect_refusal "cancelling twice" 409 "already CANCELLED" -- api POST "/api/v1/stage/$ONBEHALF/cancel"
code=$(api POST "/api/v1/release/$REQ")
is "$code" 200 "release"
is "$(sqlite3 "$DB" "SELECT state FROM requests WHERE uuid = '$REQ'")" RELEASED "request RELEASED"
expect_refusal "releasing twice" 409 "already RELEASED" -- api POST "/api/v1/release/$REQ"

# --- archiveinfo, queue, metrics -----------------------------------------------------------
code=$(api POST /api/v1/archiveinfo '{"files":["data/pub/a.bin","data/none"]}')
is "$code" 200 "archiveinfo"
is "$(json "$BODY" '[f.get("locality", f.get("error")) for f in j]')" \
    "['TAPE', 'no object data/none in the catalog']" "locality per file, error for an unknown one"
code=$(api POST /api/v1/archiveinfo '{"files":["data/priv/c.bin","data/pub/a.bin"]}' "$(cred_nobody)")
is "$code:$(json "$BODY" '["size" in f for f in j]')" "200:[False, True]" \
    "archiveinfo as another user: a private object's size and locality are not told"
is "$(json "$BODY" 'j[0]["error"]')" \
    "data/priv/c.bin belongs only to datasets that uid 65534 (gid 65534) may not read" \
    "... but why"
code=$(api GET /api/v1/queue)
is "$code:$(json "$BODY" 'len(j["queue"])')" "200:1" "queue lists the one active request"
code=$(curl -s -o "$BODY" -w '%{http_code}' "http://127.0.0.1:$PORT/metrics")
is "$code" 200 "metrics without a credential"
ok "$(grep -q '^stagein_requests{state="CANCELLED"} 1$' "$BODY" && grep -q '^stagein_requests{state="RELEASED"} 1$' "$BODY" && grep -q '^stagein_queued_files 2$' "$BODY" && grep -q '^stagein_http_responses_total{code="4xx"} [1-9]' "$BODY"; echo $?)" \
    "Prometheus text: requests by state, queued files, 4xx answers"

# --- HUP: reload --------------------------------------------------------------------------------
write_conf debug
kill -HUP "$PID"
for _ in $(seq 50); do grep -q "configuration reread (log level debug)" "$LOG" && break; sleep 0.1; done
ok "$(grep -q "configuration reread (log level debug)" "$LOG"; echo $?)" "HUP rereads the configuration"
echo 'stageind: { colour = 1; };' > "$STAGEIN_CONF"
kill -HUP "$PID"
for _ in $(seq 50); do grep -q "keeping the running configuration" "$LOG" && break; sleep 0.1; done
ok "$(grep -q "stageind.colour.*keeping the running configuration" "$LOG"; echo $?)" "a bad configuration on HUP is refused and logged"
is "$(api GET /api/v1/queue)" 200 "still serving after a bad reload"
write_conf notice

# --- TERM: graceful stop ------------------------------------------------------------------------
kill -TERM "$PID"
for _ in $(seq 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
ok "$(! kill -0 "$PID" 2>/dev/null; echo $?)" "TERM stops the daemon"
ok "$(grep -q "stopped" "$LOG" && [ ! -e "$STATE/stageind.pid" ] && [ ! -e "$SOCK" ]; echo $?)" \
    "logged, pid file and socket removed"

# --- kill -9, restart: nothing lost, in-flight items queued again -----------------------------
before=$(counts)
run_ok "restarted" -- start
PID=$(daemon_pid)
track_pid "$PID"
code=$(api POST /api/v1/stage '{"datasets":["pub"]}')
is "$code" 201 "a request accepted just before the crash"
LAST=$(json "$BODY" 'j["requestId"]')
# the engine will mark items STARTED; do it by hand to see the recovery
sqlite3 "$DB" "UPDATE request_items SET state = 'STARTED', bytes_done = 10 WHERE request_id = (SELECT id FROM requests WHERE uuid = '$LAST') AND object_id = (SELECT min(object_id) FROM request_items WHERE request_id = (SELECT id FROM requests WHERE uuid = '$LAST'))"
before=$(counts)
kill -9 "$PID"
for _ in $(seq 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
run_ok "restart after kill -9 (stale socket and lock taken over)" -- start
PID=$(daemon_pid)
track_pid "$PID"
is "$(counts)" "$before" "every request and item is still there"
code=$(api GET "/api/v1/stage/$LAST")
is "$code:$(json "$BODY" 'sorted(f["state"] for f in j["files"])')" "200:['SUBMITTED', 'SUBMITTED']" \
    "the request survived; its in-flight item is queued again"
ok "$(grep -q "1 interrupted items queued again" "$LOG"; echo $?)" "recovery logged"
kill -TERM "$PID"
for _ in $(seq 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done

kill "$(cat "$M/pid")" 2>/dev/null
finish
