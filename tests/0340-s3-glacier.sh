#!/bin/bash
# Glacier semantics and archive mode of stageind's S3 server, with raw
# SigV4 requests (tests/s3raw.py): an archived object not in the cache is
# GLACIER on HEAD and 403 InvalidObjectState on GET (changing nothing);
# RestoreObject answers 202, HEAD shows ongoing-request="true" then "false"
# with an expiry date, GET then serves it byte for byte, a second restore
# answers 200. A transparent-recall bucket streams the object on GET. PUTs
# into an archive bucket reach the volumes (tape copies in the catalog) and
# read back after their cached copies are evicted.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
s3_need_clients boto3

# head KEY HEADER: the value of HEADER in the answer to HEAD /KEY ("" if none)
head_header() { s3raw request HEAD "/$1" --show-header "$2" 2>&1 >/dev/null | sed "s/^$2: //I"; }
restore_xml='<RestoreRequest><Days>1</Days><GlacierJobParameters><Tier>Standard</Tier></GlacierJobParameters></RestoreRequest>'
# wait_restored KEY: polls HEAD until x-amz-restore says ongoing-request="false";
# prints every distinct x-amz-restore value seen, one per line
wait_restored() {
    local value last="-"
    for _ in $(seq 300); do
        value=$(head_header "$1" x-amz-restore)
        [ "$value" != "$last" ] && echo "$value" && last=$value
        grep -q 'ongoing-request="false"' <<<"$value" && return 0
        sleep 0.2
    done
    return 1
}

s3_setup A
s3_start_ok "stageind starts with its S3 port"
ok "$(s3_make_hot hot/h1; echo $?)" "hot/h1 staged into the cache"

# ---- Glacier: HEAD, GET refused, restore, HEAD, GET ---------------------------------
is "$(s3raw request HEAD /data/hot/h1)" "200 -" "HEAD of a cached object: 200"
is "$(head_header data/hot/h1 x-amz-storage-class)" "" "a cached object has no x-amz-storage-class (STANDARD)"
is "$(s3raw request HEAD /data/cold/c1)" "200 -" "HEAD of an archived object not in the cache: 200"
is "$(head_header data/cold/c1 x-amz-storage-class)" GLACIER "its x-amz-storage-class is GLACIER"
is "$(head_header data/cold/c1 x-amz-restore)" "" "no x-amz-restore before a restore"
before=$(s3_state_rows)
is "$(s3raw request GET /data/cold/c1)" "403 InvalidObjectState" "GET of it: 403 InvalidObjectState"
is "$(s3_state_rows)" "$before" "the refused GET changed nothing (no recall queued)"
is "$(s3raw request POST /data/cold/c1 --query restore --data "$restore_xml" -H 'Content-Type: application/xml')" \
    "202 -" "POST ?restore (Days 1, Standard): 202 Accepted"
is "$(sql "SELECT count(*) FROM request_items i JOIN objects o ON o.id = i.object_id WHERE o.key = 'cold/c1'")" 1 \
    "the restore queued a recall of the object in the catalog"
seen=$(wait_restored data/cold/c1)
ok "$?" "HEAD: x-amz-restore reaches ongoing-request=\"false\""
last=$(tail -1 <<<"$seen")
ok "$(grep -qE '^ongoing-request="false", expiry-date="[A-Z][a-z]{2}, [0-9]{2} [A-Z][a-z]{2} [0-9]{4} [0-9:]{8} GMT"$' <<<"$last"; echo $?)" \
    "once restored: ongoing-request=\"false\", expiry-date=\"<HTTP date>\""
ok "$(head -n -1 <<<"$seen" | grep -vqx 'ongoing-request="true"'; [ $? -ne 0 ]; echo $?)" \
    "before that only ongoing-request=\"true\" was seen"
diag "x-amz-restore values seen: $(tr '\n' '|' <<<"$seen")"
is "$(s3raw request GET /data/cold/c1 --out "$OUT/c1")" "200 -" "GET after the restore: 200"
ok "$(same_bytes "$OUT/c1" "$SRC/cold/c1"; echo $?)" "byte-identical"
is "$(s3raw request POST /data/cold/c1 --query restore --data "$restore_xml")" "200 -" \
    "a second restore of a restored object: 200 (no Content-Type either)"
is "$(s3raw request POST /data/cold/c2 --query restore)" "202 -" "a restore with no body: 202 (the defaults)"
is "$(s3raw request POST /data/cold/c2 --query restore --data '<RestoreRequest><Days>x</Days>')" \
    "400 MalformedXML" "a restore with malformed XML: 400 MalformedXML"
wait_restored data/cold/c2 >/dev/null
is "$(s3raw request GET /data/cold/c2 --out "$OUT/c2")" "200 -" "the second object restored: GET 200"
ok "$(same_bytes "$OUT/c2" "$SRC/cold/c2"; echo $?)" "byte-identical"
stop

# ---- transparent recall: GET of a GLACIER object recalls and streams it --------------
s3_setup B
S3_CONF_EXTRA='transparent_recall_buckets = [ "data" ]; transparent_recall_max_wait = 60;' s3_write_conf ""
s3_start_ok "stageind starts with 'data' in transparent-recall mode"
# it reads as STANDARD (no x-amz-storage-class), in HEAD and listings: a GET
# recalls it, and clients skip the GET of a GLACIER object not restored
is "$(head_header data/cold/c1 x-amz-storage-class)" "" "HEAD before the GET: no x-amz-storage-class (STANDARD)"
is "$(head_header data/cold/c1 x-amz-restore)" "" "HEAD before the GET: no x-amz-restore"
is "$(s3raw request GET /data --query 'list-type=2&prefix=cold%2F' --out "$OUT/list"; grep -o '<StorageClass>[A-Z]*' "$OUT/list" | sort -u)" \
    "200 -
<StorageClass>STANDARD" "ListObjectsV2 lists its objects as STANDARD"
is "$(s3raw --timeout 70 request GET /data/cold/c1 --out "$OUT/t1")" "200 -" "GET of an object not in the cache: 200 once staged"
ok "$(same_bytes "$OUT/t1" "$SRC/cold/c1"; echo $?)" "streamed byte-identical"
is "$(head_header data/cold/c1 x-amz-storage-class)" "" "HEAD after: in the cache now"
if [ -x "$AWS" ]; then
    # a plain aws s3 cp (it HEADs first, and skips GLACIER objects not restored)
    aws_s3 s3 cp --no-progress s3://data/cold/c2 "$OUT/t2" >"$OUT/cp.out" 2>&1
    rc=$?
    ok "$([ $rc = 0 ] && same_bytes "$OUT/t2" "$SRC/cold/c2"; echo $?)" \
        "awscli: aws s3 cp of an object not in the cache recalls it: rc $rc, byte-identical"
    [ $rc = 0 ] || sed 's/^/# /' "$OUT/cp.out"
else
    tap_n=$((tap_n + 1)); echo "ok $tap_n # SKIP awscli (/usr/bin/aws, package awscli) is not installed"
fi
stop

# ---- archive mode: PUT, durable on tape, evicted, restored, read back -----------------
s3_setup C
s3_start_ok "stageind starts (archive buckets upl and arch)"
bad=""
for i in 1 2 3; do
    head -c $((i * 300000 + 7)) /dev/urandom > "$OUT/arch$i"
    code=$(s3raw request PUT "/arch/archmode/obj$i" --body-file "$OUT/arch$i" \
        -H "x-amz-meta-run: $i" -H "Content-Type: application/x-run")
    [ "$code" = "200 -" ] || bad+="obj$i:$code "
done
is "$bad" "" "three PUTs into the archive bucket: 200 each"
for i in 1 2 3; do
    s3raw request GET "/arch/archmode/obj$i" --out "$OUT/back$i" >/dev/null
done
ok "$(same_bytes "$OUT/back1" "$OUT/arch1" && same_bytes "$OUT/back2" "$OUT/arch2" && same_bytes "$OUT/back3" "$OUT/arch3"; echo $?)" \
    "read back from the cache right after the PUT: byte-identical"
is "$(s3_wait_tape_copies '%archmode/obj%' 3)" 3 "the three objects reach tape (tape copies in the catalog)"
stop
uncache "o.key LIKE '%archmode/obj%'"
s3_start_ok "stageind restarts with the cached copies gone"
is "$(head_header arch/archmode/obj2 x-amz-storage-class)" GLACIER "HEAD of an evicted archive-bucket object: GLACIER"
is "$(s3raw request GET /arch/archmode/obj2)" "403 InvalidObjectState" "GET of it: 403 InvalidObjectState"
is "$(s3raw request POST /arch/archmode/obj2 --query restore --data "$restore_xml")" "202 -" "restore: 202"
wait_restored arch/archmode/obj2 >/dev/null
is "$(head_header arch/archmode/obj2 x-amz-meta-run) $(head_header arch/archmode/obj2 Content-Type)" \
    "2 application/x-run" "its stored headers survived the eviction, the restart and the recall"
is "$(s3raw request GET /arch/archmode/obj2 --out "$OUT/r2")" "200 -" "GET after the restore from tape: 200"
ok "$(same_bytes "$OUT/r2" "$OUT/arch2"; echo $?)" "the object PUT, archived, evicted and restored is byte-identical"
stop
finish
