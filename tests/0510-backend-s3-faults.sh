#!/bin/bash
# The `s3` backend through a fault-injecting proxy (tests/faultproxy.py, on
# loopback) between stageind B and its upstream, stageind A in archive mode:
# 503 SlowDown, 500, dropped connections, cut and corrupted bodies and a
# delay past the stall timeout, on HEAD, RestoreObject, GET (whole and
# ranged), PUT and multipart requests. Every accepted item completes or
# fails with a clear error, and nothing corrupt reaches B's cache: staged
# objects match their sources, a persistent 503 fails its item after the
# retries, a restore the upstream never finishes fails at restore_timeout,
# a RestoreObject answered 200 is read at once, pushes become DURABLE only
# once the upstream took them, and a push failing upstream says why and
# completes once the fault is gone.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
s3_need_clients boto3

RULES=$TEST_DIR/faults.rules
PLOG=$TEST_DIR/faults.log
mkdir -p "$OUT"
: > "$RULES"
: > "$PLOG"

# ---- A: the upstream; the proxy in front of it -------------------------------------------
s3_setup A "library: { drives = 2; time_scale = 0.002; };"
A_DB=$DB A_STATE=$STATE A_CONF=$STAGEIN_CONF
s3_start_ok "A (archive mode) starts"
PROXY_PORT=$(free_port)
"$PY" "$top_srcdir/tests/faultproxy.py" --listen "$PROXY_PORT" --upstream "$S3_ENDPOINT" \
    --rules "$RULES" --log "$PLOG" &
track_pid $!
for _ in $(seq 50); do
    "$PY" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' \
        "$PROXY_PORT" 2>/dev/null && break
    sleep 0.1
done
faults() { printf '%s\n' "$@" > "$RULES"; }
injected() { grep -c " $1\$" "$PLOG"; }   # injected ACTION: how many requests got it

# ---- B: the s3 backend, through the proxy --------------------------------------------------
B_CREDS=$TEST_DIR/b.creds
printf '%s %s\n' "$S3_KEY" "$S3_SECRET" > "$B_CREDS"
chmod 600 "$B_CREDS"
use_state B
write_conf "archive: { backend = \"s3\"; checksum_retries = 2; s3: {
    endpoint = \"http://127.0.0.1:$PROXY_PORT\"; credentials_file = \"$B_CREDS\";
    buckets = ( { bucket = \"stageout\"; upstream = \"arch\"; } );
    part_size = 5242880; parts = 3; gets = 3; timeout = 2; retries = 6;
    retry_base = 0.05; retry_max = 0.3; poll_min = 0.05; poll_max = 0.3; restore_timeout = 3; }; };
push: { copies = 1; aggregate_window = 0.2; max_attempts = 20; };"
"$STAGEIN" catalog init >/dev/null
{
    echo "bucket,key,size,volume,position,copy,checksum"
    sqlite3 -separator , "$A_DB" "SELECT o.bucket, o.key, o.size, v.label, t.position, t.copy, o.checksum FROM objects o JOIN tape_copies t ON t.object_id = o.id JOIN volumes v ON v.id = t.volume_id WHERE o.bucket = 'data'"
} > "$TEST_DIR/positions.csv"
run_ok "A's objects imported into B" -- "$STAGEIN" catalog import "$TEST_DIR/positions.csv"
run_ok "B starts, its upstream behind the proxy" -- start
track_pid "$(daemon_pid)"
item() { sql "SELECT i.state || ' ' || coalesce(i.error, '') FROM request_items i JOIN requests r ON r.id = i.request_id JOIN objects o ON o.id = i.object_id WHERE r.uuid = '$1' AND o.key = '$2'"; }
in_cache() { sql "SELECT count(*) FROM cache c JOIN objects o ON o.id = c.object_id WHERE o.key = '$1'"; }

# ---- transient faults on every step of a recall: all complete, byte for byte --------------------
faults "HEAD - - 2 status 503 SlowDown" \
       "HEAD - - 1 drop" \
       "POST - restore 1 status 500 InternalError" \
       "POST - restore 1 drop" \
       "GET /data/small1 - 1 status 503 SlowDown" \
       "GET /data/small2 - 1 drop" \
       "GET /data/cold/c1 - 1 truncate 1000" \
       "GET /data/cold/c2 - 2 corrupt" \
       "GET /data/hot/h2 - 1 delay 4" \
       "GET /data/hot/h2 - 1 status 400 RequestTimeout"
REQ=$(stage '{"files":["data/small1","data/small2","data/cold/c1","data/cold/c2","data/hot/h2"]}')
is "$(wait_done "$REQ" 120)" COMPLETED "five objects through 503, 500, drops, a cut body, corruption and a stall: COMPLETED"
is "$(cache_mismatches small1 small2 cold/c1 cold/c2 hot/h2)" "" "every one byte-identical, checksum verified"
for a in status drop truncate corrupt delay; do
    ok "$([ "$(injected "$a")" -ge 1 ]; echo $?)" "the proxy injected '$a' ($(injected "$a") requests)"
done
ok "$(grep -q 'GET /data/cold/c2 -> 200 corrupt' "$PLOG" && [ "$(grep -c 'GET /data/cold/c2' "$PLOG")" -ge 3 ]; echo $?)" \
    "a corrupted body was refused by the checksum and read again"
retries=$(curl -s "http://127.0.0.1:$PORT/metrics" | awk '$1 == "stagein_s3_retries_total" { print $2 }')
ok "$([ "${retries:-0}" -ge 6 ]; echo $?)" "B retried ($retries retries counted)"
diag "proxy log: $(awk '{print $1, $2, $4, $5}' "$PLOG" | grep -v ' pass$' | tr '\n' '|')"

# ---- a persistent fault: the item fails after the retries, saying why ----------------------------
faults "GET /data/deep/a/b/d1 - * status 503 SlowDown"
REQ=$(stage '{"files":["data/deep/a/b/d1"]}')
is "$(wait_done "$REQ" 120)" FAILED "an object the upstream keeps answering 503: FAILED"
why=$(item "$REQ" deep/a/b/d1)
ok "$(grep -q 'HTTP 503 SlowDown: injected by faultproxy (gave up after 7 attempts)' <<<"$why"; echo $?)" \
    "with the upstream's message and the attempts: $why"
is "$(in_cache deep/a/b/d1)" 0 "nothing of it in the cache"

# ---- a restore that never completes: bounded by restore_timeout ------------------------------------
faults "HEAD /data/hot/h1 - * header x-amz-restore ongoing-request=\"true\""
t0=$(date +%s)
REQ=$(stage '{"files":["data/hot/h1"]}')
is "$(wait_done "$REQ" 60)" FAILED "a restore that stays ongoing: FAILED"
why=$(item "$REQ" hot/h1)
ok "$(grep -q 'did not complete within 3 s' <<<"$why"; echo $?)" "at the deadline: $why"
ok "$([ $(( $(date +%s) - t0 )) -lt 20 ]; echo $?)" "soon after restore_timeout"
ok "$([ "$(grep -c 'HEAD /data/hot/h1 ' "$PLOG")" -ge 4 ]; echo $?)" "polled meanwhile ($(grep -c 'HEAD /data/hot/h1 ' "$PLOG") HEADs)"

# ---- RestoreObject answered 200 (a restored copy exists): read at once ---------------------------
stop
uncache "o.key = 'small1'"
run_ok "B restarts with small1 gone from its cache" -- start
track_pid "$(daemon_pid)"
faults "HEAD /data/small1 - 1 header x-amz-restore \"\""
REQ=$(stage '{"files":["data/small1"]}')
is "$(wait_done "$REQ" 60)" COMPLETED "small1 staged again"
ok "$(grep -q 'POST /data/small1?restore -> 200' "$PLOG"; echo $?)" "after A answered its RestoreObject 200"
is "$(cache_mismatches small1)" "" "byte-identical"

# ---- push through faults: single PUT and multipart --------------------------------------------------
head -c 400000 /dev/urandom > "$OUT/small.bin"
head -c 13000000 /dev/urandom > "$OUT/large.bin"
push_file() {
    curl -s -o "$BODY" -X POST -H "X-Stagein-Munge: $(cred)" \
        -H "X-Stagein-Checksum: sha256:$(sha256sum < "$1" | cut -d' ' -f1)" \
        --data-binary "@$1" "http://127.0.0.1:$PORT/api/v1/push?dataset=ckpt&key=$2"
    json "$BODY" 'j["pushId"]'
}
push_state() {
    [ "$(api GET "/api/v1/push/$1")" = 200 ] && json "$BODY" 'j["state"]'
}
wait_push() {
    local state=""
    for _ in $(seq 900); do
        state=$(push_state "$1")
        case $state in DURABLE | FAILED) break ;; *) sleep 0.1 ;; esac
    done
    echo "$state"
}
faults "PUT - partNumber=2 1 drop" \
       "PUT - partNumber=3 1 delay 3" \
       "PUT - - 2 status 503 SlowDown" \
       "POST - uploads 1 status 500 InternalError" \
       "POST - uploadId 1 status 503 SlowDown"
P1=$(push_file "$OUT/small.bin" f/small.bin)
P2=$(push_file "$OUT/large.bin" f/large.bin)
is "$(wait_push "$P1"):$(wait_push "$P2")" "DURABLE:DURABLE" "both pushes DURABLE despite the faults"
s3raw request GET /arch/ckpt/f/small.bin --out "$OUT/small.back" >/dev/null
s3raw request GET /arch/ckpt/f/large.bin --out "$OUT/large.back" >/dev/null
ok "$(same_bytes "$OUT/small.back" "$OUT/small.bin" && same_bytes "$OUT/large.back" "$OUT/large.bin"; echo $?)" \
    "A holds both byte-identical"
ok "$(grep -q 'POST /arch/ckpt/f/large.bin?uploadId=.* -> 503 status' "$PLOG" && grep -q 'partNumber=2.* closed drop' "$PLOG"; echo $?)" \
    "the multipart upload met its faults (a part dropped, Complete answered 503)"

# ---- ranged GETs through faults ------------------------------------------------------------------------
stop
uncache "o.key = 'ckpt/f/large.bin'"
run_ok "B restarts with large.bin gone from its cache" -- start
track_pid "$(daemon_pid)"
faults "GET /arch/ckpt/f/large.bin - 1 truncate 100000" \
       "GET /arch/ckpt/f/large.bin - 1 status 503 SlowDown" \
       "GET /arch/ckpt/f/large.bin - 1 drop" \
       "GET /arch/ckpt/f/large.bin - 1 corrupt"
REQ=$(stage '{"files":["stageout/ckpt/f/large.bin"]}')
is "$(wait_done "$REQ" 120)" COMPLETED "the 13 MB object staged in 5 MiB ranges through the faults"
ok "$(same_as_cached "o.key = 'ckpt/f/large.bin'" "$OUT/large.bin"; echo $?)" "byte-identical"
is "$(grep -cE 'GET /arch/ckpt/f/large.bin -> .* (truncate|status|drop|corrupt)$' "$PLOG")" 4 \
    "the ranges met a cut body, a 503, a dropped connection and a corrupted body"

# ---- a push the upstream keeps refusing: not DURABLE, says why, completes once it is fixed ------------
faults "PUT - - * status 500 InternalError"
head -c 1000 /dev/urandom > "$OUT/late.bin"
P3=$(push_file "$OUT/late.bin" f/late.bin)
why=""
for _ in $(seq 300); do
    why=$(sql "SELECT coalesce(error, '') FROM push_items i JOIN objects o ON o.id = i.object_id WHERE o.key = 'ckpt/f/late.bin'")
    [ -n "$why" ] && break
    sleep 0.1
done
ok "$(grep -q 'archive write failed (attempt 1 of 20): PUT s3://arch/ckpt/f/late.bin: HTTP 500 InternalError' <<<"$why"; echo $?)" \
    "the failed write is recorded with the upstream's answer: $why"
isnt_durable=$(push_state "$P3")
ok "$([ "$isnt_durable" != DURABLE ]; echo $?)" "and the push is not DURABLE ($isnt_durable)"
faults ""
is "$(wait_push "$P3")" DURABLE "once the upstream accepts again, the push becomes DURABLE"
s3raw request GET /arch/ckpt/f/late.bin --out "$OUT/late.back" >/dev/null
ok "$(same_bytes "$OUT/late.back" "$OUT/late.bin"; echo $?)" "byte-identical upstream"
is "$(ls "$STATE/cache/tmp" | wc -l)" 0 "no temporary file left in B's cache"
stop
STATE=$A_STATE stop
finish
