#!/bin/bash
# Bad input to stageind's S3 server, sent raw (tests/s3raw.py signs with
# botocore, then breaks the request on purpose): each answered with S3's
# error code and HTTP status, and none changes the catalog or the cache.
# Bounded timeouts free the connections of clients that stall or trickle,
# on the S3 port and on the control API's TCP port alike (one listener,
# daemon/http/listener.c, guards both).
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
s3_need_clients boto3

# wait_archived: the refused requests compare catalog rows, so an accepted PUT
# must be on tape (the aggregator's commit) before they run
wait_archived() {
    local _
    for _ in $(seq 100); do
        [ "$(sql "SELECT count(*) FROM push_items WHERE state NOT IN ('DURABLE', 'FAILED')")" = 0 ] && return
        sleep 0.1
    done
}
# the control API's connection timeout, as short as the S3 server's
STAGEIND_CONF_EXTRA="timeout = $S3_TIMEOUT;"
s3_setup A
s3_start_ok "stageind starts with its S3 port (timeout $S3_TIMEOUT s)"
ok "$(s3_make_hot hot/h1; echo $?)" "hot/h1 staged into the cache"
is "$(s3raw request GET /data/hot/h1 --out "$OUT/h1")" "200 -" "control: a well-signed GET is served"
ok "$(same_bytes "$OUT/h1" "$SRC/hot/h1"; echo $?)" "control: byte-identical"
# keep-alive: the second GET over the first one's connection (no new connect)
url=$(s3raw presign GET /data/hot/h1)
is "$(curl -s -o /dev/null -o /dev/null -w '%{http_code} %{num_connects}\n' "$url" "$url" | xargs)" \
    "200 1 200 0" "control: two GETs on one connection: it is kept open for the second"
url=$(s3raw presign GET /data/hot/nosuchkey)
is "$(curl -s -o /dev/null -o /dev/null -w '%{http_code} %{num_connects}\n' "$url" "$url" | xargs)" \
    "404 1 404 0" "control: an error answer keeps the connection open too"
is "$(s3raw request PUT /upl/control --data control)" "200 -" "control: a well-signed PUT into an archive bucket is stored"
wait_archived

# refused_by MATCH SHOWN DESCRIPTION WANT -- s3raw ARGS...: an answer that
# MATCH WANT ANSWER accepts (SHOWN: WANT as a failure names it), and no change
refused_by() {
    local match=$1 shown=$2 desc=$3 want=$4; shift 5
    local before after got
    before=$(s3_state_rows)
    got=$("$@" 2>/dev/null)
    sleep 0.1
    after=$(s3_state_rows)
    if "$match" "$want" "$got" && [ "$before" = "$after" ]; then
        ok 0 "$desc: $got, nothing changed"
    else
        ok 1 "$desc"
        diag "answer '$got' (want $shown)"
        [ "$before" = "$after" ] || diag "rows $before -> $after"
    fi
}
same_answer() { [ "$2" = "$1" ]; }
answer_matches() { grep -qxE -- "$1" <<<"$2"; }
# refused DESCRIPTION "STATUS CODE" -- s3raw ARGS...: that answer, and no change
refused() { refused_by same_answer "'$2'" "$@"; }
# refused_any DESCRIPTION REGEX -- s3raw ARGS...: an answer matching REGEX, no change
refused_any() { refused_by answer_matches "/$2/" "$@"; }
other() { "$PY" "$S3RAW" --endpoint "$S3_ENDPOINT" "$@"; }

# ---- authentication ------------------------------------------------------------------
refused "a wrong signature (one digit changed)" "403 SignatureDoesNotMatch" -- \
    s3raw request PUT /upl/x1 --data abc --bad-signature
refused "signed with the wrong secret" "403 SignatureDoesNotMatch" -- \
    other --key "$S3_KEY" --secret "not-$S3_SECRET" request PUT /upl/x2 --data abc
refused "an unknown access key" "403 InvalidAccessKeyId" -- \
    other --key NOSUCHKEY0000000 --secret "$S3_SECRET" request PUT /upl/x3 --data abc
refused "not signed at all (the bucket is not public)" "403 AccessDenied" -- \
    s3raw request GET /data/hot/h1 --sign none
refused "an expired presigned URL (signed 120 s ago for 60 s)" "403 AccessDenied" -- \
    s3raw --date-offset -120 request GET /data/hot/h1 --sign presign --expires 60
refused "a presigned URL with a wrong signature" "403 SignatureDoesNotMatch" -- \
    s3raw request GET /data/hot/h1 --sign presign --bad-signature
refused "a presigned PUT that has expired" "403 AccessDenied" -- \
    s3raw --date-offset -120 request PUT /upl/x4 --data abc --sign presign --expires 60
refused "signed for the wrong region" "400 AuthorizationHeaderMalformed" -- \
    s3raw --region eu-west-1 request PUT /upl/x5 --data abc
refused "no x-amz-date header" "403 AccessDenied" -- \
    s3raw request PUT /upl/x6 --data abc --no-date
refused "a clock 1 hour ahead" "403 RequestTimeTooSkewed" -- \
    s3raw --date-offset 3600 request PUT /upl/x7 --data abc
refused "a clock 1 hour behind" "403 RequestTimeTooSkewed" -- \
    s3raw --date-offset -3600 request PUT /upl/x8 --data abc
refused "a body that is not the one signed (x-amz-content-sha256)" "400 XAmzContentSHA256Mismatch" -- \
    s3raw request PUT /upl/x9 --data signed-body --send-body-file "$OUT/h1"

# ---- keys ------------------------------------------------------------------------------
long=$(printf 'k%.0s' $(seq 1025))
refused "a key of 1025 bytes" "400 KeyTooLongError" -- s3raw request PUT "/upl/$long" --data abc
refused_any "a key with '..'" "400 (InvalidArgument|InvalidRequest)" -- s3raw request PUT /upl/a/../b --data abc
refused_any "a key with '//'" "400 (InvalidArgument|InvalidRequest)" -- s3raw request PUT /upl/a//b --data abc
refused_any "a key with NUL (%00)" "400 (InvalidArgument|InvalidRequest)" -- s3raw request PUT /upl/a%00b --data abc
refused_any "a GET of a key with '..'" "400 (InvalidArgument|InvalidRequest)" -- s3raw request GET /data/hot/../hot/h1
# an archive bucket B keeps its keys as "B/<key>" in the catalog, so its keys
# may be 1024 - len("B/") bytes: 1020 in "upl"
refused "a key of 1021 bytes in archive bucket 'upl'" "400 KeyTooLongError" -- s3raw request PUT "/upl/${long:4}" --data abc
is "$(s3raw request PUT "/upl/${long:5}" --data 1020)" "200 -" "a key of 1020 bytes (the most in archive bucket 'upl') is accepted"
wait_archived
refused "a PUT with ?tagging (a subresource not implemented)" "501 NotImplemented" -- \
    s3raw request PUT /upl/tagged --query tagging --data abc
refused "a GET with ?versions&acl" "501 NotImplemented" -- \
    s3raw request GET /data/hot/h1 --query "versions&acl"

# ---- headers and bodies ----------------------------------------------------------------
pad=$(head -c 20000 /dev/zero | tr '\0' a)
refused_any "20000 bytes of headers (limit 16 KiB)" "(400 RequestHeaderSectionTooLarge|431 -|431 RequestHeaderSectionTooLarge)" -- \
    s3raw request GET /data/hot/h1 -H "X-Pad: $pad"
head -c 2000 /dev/urandom > "$OUT/two-k"
refused "a body longer than Content-Length (2000 bytes signed, 1000 declared)" "400 XAmzContentSHA256Mismatch" -- \
    s3raw request PUT /upl/longer --body-file "$OUT/two-k" --content-length 1000
refused_any "a body shorter than Content-Length, then half-closed" "(400 IncompleteBody|closed)" -- \
    s3raw request PUT /upl/shorter --body-file "$OUT/two-k" --content-length 200000 --close-write
start_s=$(date +%s.%N)
refused_any "a body shorter than Content-Length, the client then silent" "(400 IncompleteBody|400 RequestTimeout|closed)" -- \
    s3raw --timeout $((S3_TIMEOUT * 3 + 5)) request PUT /upl/stalled --body-file "$OUT/two-k" --content-length 200000
took=$("$PY" -c "import sys; print(int(float(sys.argv[2]) - float(sys.argv[1])))" "$start_s" "$(date +%s.%N)")
# freed by stageind's timeout, not the client's own (a loaded machine adds
# seconds to the server's: no tighter bound here)
ok "$([ "$took" -lt $((S3_TIMEOUT * 3 + 5)) ]; echo $?)" \
    "the stalled upload's connection is freed by stageind (timeout ${S3_TIMEOUT} s) before the client gives up ($((S3_TIMEOUT * 3 + 5)) s): ${took} s"
is "$(ls "$STATE/cache/tmp" 2>/dev/null | wc -l)" 0 "no temporary file left in the cache"

# ---- multipart: malformed XML, parts out of order, a part too small --------------------
s3raw request POST /upl/mp --query uploads --out "$OUT/create" >/dev/null
upload=$(sed -n 's:.*<UploadId>\(.*\)</UploadId>.*:\1:p' "$OUT/create")
ok "$([ -n "$upload" ]; echo $?)" "CreateMultipartUpload gives an UploadId"
head -c 1000 /dev/urandom > "$OUT/p1"
head -c 1000 /dev/urandom > "$OUT/p2"
s3raw request PUT /upl/mp --query "partNumber=1&uploadId=$upload" --body-file "$OUT/p1" --out /dev/null >/dev/null
s3raw request PUT /upl/mp --query "partNumber=2&uploadId=$upload" --body-file "$OUT/p2" --out /dev/null >/dev/null
e1=$(md5sum < "$OUT/p1" | cut -d' ' -f1)
e2=$(md5sum < "$OUT/p2" | cut -d' ' -f1)
part() { echo "<Part><PartNumber>$1</PartNumber><ETag>\"$2\"</ETag></Part>"; }
refused "CompleteMultipartUpload with malformed XML" "400 MalformedXML" -- \
    s3raw request POST /upl/mp --query "uploadId=$upload" --data "<CompleteMultipartUpload>$(part 1 "$e1")<Part><PartNumber>2"
refused "CompleteMultipartUpload with a wrong root element" "400 MalformedXML" -- \
    s3raw request POST /upl/mp --query "uploadId=$upload" --data "<Complete>$(part 1 "$e1")</Complete>"
refused "CompleteMultipartUpload with parts out of order" "400 InvalidPartOrder" -- \
    s3raw request POST /upl/mp --query "uploadId=$upload" --data "<CompleteMultipartUpload>$(part 2 "$e2")$(part 1 "$e1")</CompleteMultipartUpload>"
refused "CompleteMultipartUpload with a wrong part ETag" "400 InvalidPart" -- \
    s3raw request POST /upl/mp --query "uploadId=$upload" --data "<CompleteMultipartUpload>$(part 1 "$e2")$(part 2 "$e2")</CompleteMultipartUpload>"
refused "CompleteMultipartUpload with a part under 5 MiB that is not the last" "400 EntityTooSmall" -- \
    s3raw request POST /upl/mp --query "uploadId=$upload" --data "<CompleteMultipartUpload>$(part 1 "$e1")$(part 2 "$e2")</CompleteMultipartUpload>"
refused "an unknown upload id" "404 NoSuchUpload" -- \
    s3raw request POST /upl/mp --query "uploadId=nosuchupload" --data "<CompleteMultipartUpload>$(part 1 "$e1")</CompleteMultipartUpload>"
is "$(s3raw request HEAD /upl/mp)" "404 -" "no object was made by the refused completions"
is "$(s3raw request DELETE /upl/mp --query "uploadId=$upload")" "204 -" "AbortMultipartUpload: 204"

# ---- slow clients ----------------------------------------------------------------------
idle=$("$PY" - "$S3_PORT" "$S3_TIMEOUT" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(int(sys.argv[2]) * 4 + 5)
t = time.monotonic()
try:
    s.recv(1)
except OSError:
    pass
print(int(time.monotonic() - t))
PY
)
ok "$([ "$idle" -le $((S3_TIMEOUT + 2)) ]; echo $?)" "an idle connection is closed within the timeout (+2 s): ${idle} s"
s3raw trickle /data/hot/h1 --interval 0.5 --limit $((S3_TIMEOUT * 4 + 10)) > "$OUT/trickle" &
trickle_pid=$!
track_pid "$trickle_pid"
sleep 1
is "$(s3raw request GET /data/hot/h1 --out "$OUT/during")" "200 -" "other clients are served while one trickles"
wait "$trickle_pid"
took=$(cat "$OUT/trickle")
ok "$([ "$took" != open ] && [ "$took" != complete ] && "$PY" -c "import sys; sys.exit(float(sys.argv[1]) > float(sys.argv[2]))" "$took" $((S3_TIMEOUT * 2 + 1)); echo $?)" \
    "a client trickling its headers (a byte every 0.5 s) is cut off within 2x the timeout + 1 s: $took"
is "$(s3raw request GET /data/hot/h1 --out "$OUT/after")" "200 -" "the server still serves afterwards"
ok "$(same_bytes "$OUT/after" "$SRC/hot/h1"; echo $?)" "byte-identical"
# the control API's TCP listener: the same slowloris client (its request
# headers a byte every 0.5 s; stageind.timeout is $S3_TIMEOUT s here)
"$PY" "$S3RAW" --endpoint "127.0.0.1:$PORT" --key "$S3_KEY" --secret "$S3_SECRET" \
    trickle /api/v1/queue --interval 0.5 --limit $((S3_TIMEOUT * 4 + 10)) > "$OUT/trickle-control" &
trickle_pid=$!
track_pid "$trickle_pid"
sleep 1
is "$(api GET /api/v1/queue)" 200 "control API: other clients are served while one trickles"
wait "$trickle_pid"
took=$(cat "$OUT/trickle-control")
ok "$([ "$took" != open ] && [ "$took" != complete ] && "$PY" -c "import sys; sys.exit(float(sys.argv[1]) > float(sys.argv[2]))" "$took" $((S3_TIMEOUT * 2 + 1)); echo $?)" \
    "control API: a client trickling its headers is cut off within 2x stageind.timeout + 1 s: $took"
is "$(api GET /api/v1/queue)" 200 "control API: still serving afterwards"

stop
finish
