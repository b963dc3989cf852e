#!/bin/bash
# The `s3` archive backend against a real S3 Glacier-style upstream: stageind
# A in archive mode (its S3 server over the simulated library, time_scale
# slow enough that a restore stays ongoing for a while) and stageind B with
# archive.backend = "s3" in front of it. B stages GLACIER objects (restored
# upstream, polled until ongoing-request="false", read byte for byte,
# restores submitted volume by volume in position order), an object A has
# restored already (read at once, no new restore), one A lacks (404: fails
# at once) and, with credentials A refuses, one it may not read (403). B's
# pushes land in A's archive bucket (single PUT and multipart, StorageClass
# GLACIER, DURABLE only after A's 200) and come back through ranged GETs.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
s3_need_clients boto3

# ---- A: the upstream archive ------------------------------------------------------
s3_setup A "library: { drives = 2; time_scale = 0.01; };"
A_STATE=$STATE A_DB=$DB A_LOG=$LOG A_CONF=$STAGEIN_CONF A_PORT=$PORT A_SOCK=$SOCK
s3_start_ok "A (archive mode, sim library) starts"
A_PID=$(daemon_pid)

# ---- B: stageind with the s3 backend in front of A ------------------------------------
B_CREDS=$TEST_DIR/b.creds
printf '# the key B signs with\n%s %s\n' "$S3_KEY" "$S3_SECRET" > "$B_CREDS"
chmod 600 "$B_CREDS"
b_conf() {  # b_conf CREDENTIALS_FILE
    write_conf "archive: { backend = \"s3\"; s3: {
    endpoint = \"$S3_URL\"; region = \"$S3_REGION\"; credentials_file = \"$1\";
    buckets = ( { bucket = \"stageout\"; upstream = \"arch\"; prefix = \"from-b/\"; } );
    part_size = 5242880; parts = 3; gets = 4; poll_min = 0.05; poll_max = 0.4;
    retry_base = 0.05; retry_max = 0.5; restore_timeout = 120; }; };
push: { copies = 1; aggregate_window = 0.2; };"
}
as_a() { STATE=$A_STATE DB=$A_DB LOG=$A_LOG STAGEIN_CONF=$A_CONF PORT=$A_PORT SOCK=$A_SOCK; }
use_state B
B_STATE=$STATE B_DB=$DB B_LOG=$LOG B_CONF=$STAGEIN_CONF B_PORT=$PORT B_SOCK=$SOCK
as_b() { STATE=$B_STATE DB=$B_DB LOG=$B_LOG STAGEIN_CONF=$B_CONF PORT=$B_PORT SOCK=$B_SOCK; }
b_conf "$B_CREDS"
"$STAGEIN" catalog init >/dev/null
# B knows A's objects with their checksums and A's tape positions (as a site
# would import the gateway's tape catalogue), plus one A does not have
{
    echo "bucket,key,size,volume,position,copy,checksum"
    sqlite3 -separator , "$A_DB" "SELECT o.bucket, o.key, o.size, v.label, t.position, t.copy, o.checksum FROM objects o JOIN tape_copies t ON t.object_id = o.id JOIN volumes v ON v.id = t.volume_id WHERE o.bucket = 'data'"
    echo "data,ghost,1234,V00009,0,1,"
} > "$TEST_DIR/positions.csv"
run_ok "A's objects and positions imported into B" -- "$STAGEIN" catalog import "$TEST_DIR/positions.csv"
define glacier small1 small2 cold/c1 cold/c2 deep/a/b/d1 hot/h2
run_ok "B starts with the s3 backend" -- start
track_pid "$(daemon_pid)"
ok "$(grep -q "s3 backend at $S3_URL" "$LOG"; echo $?)" "B's log names the upstream"

# ---- GLACIER objects: restore, poll, GET ------------------------------------------------
REQ=$(stage '{"datasets":["glacier"]}')
is "$(wait_done "$REQ" 120)" COMPLETED "B stages six GLACIER objects of A: COMPLETED"
is "$(cache_mismatches small1 small2 cold/c1 cold/c2 deep/a/b/d1 hot/h2)" "" \
    "every object byte-identical in B's cache, checksum verified"
metric() { curl -s "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
restores=$(metric stagein_s3_restores_total) heads=$(metric stagein_s3_heads_total)
is "$restores" 6 "six RestoreObject requests accepted by A"
ok "$([ "${heads:-0}" -gt 12 ]; echo $?)" "HEAD polled while the restores were ongoing ($heads HEADs for 6 objects)"
as_a
order=$(sql "SELECT v.label || ':' || t.position FROM requests r JOIN request_items i ON i.request_id = r.id JOIN tape_copies t ON t.object_id = i.object_id JOIN volumes v ON v.id = t.volume_id WHERE r.job_id = 's3:restore' ORDER BY r.id" | tr '\n' ' ')
as_b
vols=$(tr ' ' '\n' <<<"$order" | grep . | cut -d: -f1 | uniq | tr '\n' ' ')
by_volume=$(for v in $vols; do tr ' ' '\n' <<<"$order" | grep "^$v:"; done | tr '\n' ' ')
is "$order" "$by_volume" "restores came volume by volume (volumes: $vols)"
in_position_order() {
    local v
    for v in $vols; do
        tr ' ' '\n' <<<"$order" | grep "^$v:" | cut -d: -f2 | sort -n -c 2>/dev/null || return 1
    done
}
in_position_order
ok $? "within each volume, in position order: $order"

# ---- already restored upstream: read at once, no new restore ------------------------------
restore_xml='<RestoreRequest><Days>1</Days><GlacierJobParameters><Tier>Standard</Tier></GlacierJobParameters></RestoreRequest>'
is "$(s3raw request POST /data/hot/h1 --query restore --data "$restore_xml")" "202 -" "hot/h1 restored on A directly"
for _ in $(seq 300); do
    s3raw request HEAD /data/hot/h1 --show-header x-amz-restore 2>&1 >/dev/null | grep -q 'ongoing-request="false"' && break
    sleep 0.2
done
before=$(metric stagein_s3_restores_total)
REQ=$(stage '{"files":["data/hot/h1"]}')
is "$(wait_done "$REQ" 60)" COMPLETED "B stages hot/h1: COMPLETED"
is "$(metric stagein_s3_restores_total)" "$before" "no RestoreObject for an object restored already"
is "$(cache_mismatches hot/h1)" "" "byte-identical"

# ---- missing upstream: 404 fails at once ---------------------------------------------------
t0=$(date +%s)
REQ=$(stage '{"files":["data/ghost"]}')
is "$(wait_done "$REQ" 60)" FAILED "an object A does not have: FAILED"
ghost=$(sql "SELECT i.error FROM request_items i JOIN requests r ON r.id = i.request_id WHERE r.uuid = '$REQ'")
ok "$(grep -q 'not found upstream (HTTP 404' <<<"$ghost"; echo $?)" "saying so: $ghost"
ok "$([ $(( $(date +%s) - t0 )) -lt 10 ]; echo $?)" "at once (no retries for a 404)"

# ---- push: single PUT and multipart into A's archive bucket ----------------------------------
head -c 300000 /dev/urandom > "$OUT/small.bin"
head -c 12000001 /dev/urandom > "$OUT/large.bin"
push_file() {  # push_file FILE KEY: prints the push id
    curl -s -o "$BODY" -w '%{http_code}' -X POST -H "X-Stagein-Munge: $(cred)" \
        -H "X-Stagein-Checksum: sha256:$(sha256sum < "$1" | cut -d' ' -f1)" \
        --data-binary "@$1" "http://127.0.0.1:$PORT/api/v1/push?dataset=ckpt&key=$2" >/dev/null
    json "$BODY" 'j["pushId"]'
}
wait_push() {
    local state=""
    for _ in $(seq 600); do
        [ "$(api GET "/api/v1/push/$1")" = 200 ] && state=$(json "$BODY" 'j["state"]')
        case $state in DURABLE | FAILED) break ;; *) sleep 0.1 ;; esac
    done
    echo "$state"
}
P1=$(push_file "$OUT/small.bin" run1/small.bin)
P2=$(push_file "$OUT/large.bin" run1/large.bin)
is "$(wait_push "$P1"):$(wait_push "$P2")" "DURABLE:DURABLE" "both pushes DURABLE on B"
s3raw request GET /arch/from-b/ckpt/run1/small.bin --out "$OUT/small.back" >/dev/null
s3raw request GET /arch/from-b/ckpt/run1/large.bin --out "$OUT/large.back" >/dev/null
ok "$(same_bytes "$OUT/small.back" "$OUT/small.bin" && same_bytes "$OUT/large.back" "$OUT/large.bin"; echo $?)" \
    "A holds both under the mapped bucket and prefix (arch/from-b/...), byte-identical"
is "$(sql "SELECT group_concat(DISTINCT v.label) FROM tape_copies t JOIN volumes v ON v.id = t.volume_id JOIN objects o ON o.id = t.object_id WHERE o.bucket = 'stageout'")" \
    S3 "B's catalog: the copies are on the S3 pseudo-volume"
as_a
is "$(ls "$STATE/s3-multipart" 2>/dev/null | wc -l)" 0 "no multipart upload left open on A"
as_b

# ---- evicted on B, staged back: ranged parallel GETs ------------------------------------------
stop
uncache "o.bucket = 'stageout'"
run_ok "B restarts with its cached copies of the pushes gone" -- start
track_pid "$(daemon_pid)"
REQ=$(stage '{"files":["stageout/ckpt/run1/small.bin","stageout/ckpt/run1/large.bin"]}')
is "$(wait_done "$REQ" 120)" COMPLETED "the pushed files staged back from A"
bad=""
for k in small large; do
    same_as_cached "o.key = 'ckpt/run1/$k.bin'" "$OUT/$k.bin" || bad+="$k "
done
is "$bad" "" "byte-identical (the 12 MB one in three 5 MiB ranges)"
stop

# ---- access denied: 403 fails at once -------------------------------------------------------
printf '%s %s\n' "$S3_KEY_NOBODY" "$S3_SECRET_NOBODY" > "$B_CREDS"
{ echo "bucket,key,size,volume,position,copy,checksum"; echo "arch,from-b/ckpt/run1/small.bin,300000,V00009,10,1,"; } > "$TEST_DIR/private.csv"
run_ok "A's private object known to B" -- "$STAGEIN" catalog import "$TEST_DIR/private.csv"
run_ok "B restarts with credentials A gives no access" -- start
track_pid "$(daemon_pid)"
REQ=$(stage '{"files":["arch/from-b/ckpt/run1/small.bin"]}')
is "$(wait_done "$REQ" 60)" FAILED "an object A refuses to that key: FAILED"
denied=$(sql "SELECT i.error FROM request_items i JOIN requests r ON r.id = i.request_id WHERE r.uuid = '$REQ'")
ok "$(grep -q 'access denied upstream (HTTP 403' <<<"$denied"; echo $?)" "saying so: $denied"
stop
as_a
stop
finish
