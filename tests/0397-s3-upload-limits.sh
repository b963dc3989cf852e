#!/bin/bash
# A slow upload cannot hold the cache (issue 16, finding 4), with two users
# on a 200 MB cache: a body that arrives under s3.min_upload_rate is cut
# and its reservation given back, so the other user's upload then fits;
# one user may not reserve more than s3.max_user_upload_bytes (default half
# the cache) nor have more than s3.max_user_uploads arriving at once, and
# the other user's uploads go on meanwhile; stage requests are bounded per
# user too (stageind.max_user_pinned_bytes). Raw slow bodies (tests/s3raw.py
# slowput), the other user's uploads with boto3.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
s3_need_clients boto3

KEY_ALICE=STAGEINS3ALICE000001
SECRET_ALICE=$(head -c 30 /dev/urandom | base64 | tr -d '/+=' | head -c 40)
KEY_BOB=STAGEINS3BOB00000001
SECRET_BOB=$(head -c 30 /dev/urandom | base64 | tr -d '/+=' | head -c 40)
CACHE_CONF='cache: { capacity = 200000000; };'
s3_setup A "$CACHE_CONF"
printf '%s %s 1001 1001\n%s %s 1002 1002\n' "$KEY_ALICE" "$SECRET_ALICE" \
    "$KEY_BOB" "$SECRET_BOB" >> "$S3_SECRETS"
head -c 50000000 /dev/urandom > "$TEST_DIR/50m"
bob() { "$PY" "$S3RAW" --endpoint "$S3_ENDPOINT" --key "$KEY_BOB" --secret "$SECRET_BOB" "$@"; }
# alice_put KEY FILE: boto3 put_object as alice; prints "200" or "CODE STATUS"
alice_put() {
    S3_KEY=$KEY_ALICE S3_SECRET=$SECRET_ALICE PUT_KEY=$1 PUT_FILE=$2 boto3_run '
try:
    s3.put_object(Bucket="upl", Key=os.environ["PUT_KEY"], Body=open(os.environ["PUT_FILE"], "rb"))
    print(200)
except ClientError as e:
    print(code_of(e))
' 2>&1 | tail -1
}
# slow_bob KEY LENGTH OUTFILE: bob's slow PUT in the background; waits until
# its headers are sent
slow_bob() {
    : > "$3"
    bob slowput "/upl/$1" --length "$2" --interval 0.5 --limit 40 > "$3" 2>&1 &
    track_pid $!
    local _
    for _ in $(seq 50); do grep -q started "$3" && break; sleep 0.1; done
    sleep 0.5  # its headers are in and its reservation made
}
# wait_slow OUTFILE: the slow PUT's verdict
wait_slow() {
    local _
    for _ in $(seq 450); do grep -qv started "$1" && break; sleep 0.1; done
    grep -v started "$1"
}

# objects KEY: how many catalog objects the key names, once the daemon's
# side of a cut upload settled (the client sees the connection close before
# stageind has dropped the upload's provisional row; up to 10 s)
objects() {
    local n _
    for _ in $(seq 100); do
        n=$(sql "SELECT count(*) FROM objects WHERE key = '$1'")
        [ "$n" = 0 ] && break
        sleep 0.1
    done
    echo "$n"
}

# ---- the defaults: a body at 2 bytes/s is cut
s3_start_ok "stageind starts (200 MB cache)"
slow_bob slow 90000000 "$TEST_DIR/slow0"
got=$(wait_slow "$TEST_DIR/slow0")
case $got in cut*) ok 0 "bob's 90 MB upload at 2 bytes/s is cut ($got s)" ;;
    *) ok 1 "bob's 90 MB upload at 2 bytes/s is cut"; diag "got: $got" ;; esac
grep -q "under s3.min_upload_rate" "$LOG" && ok 0 "the log says why (s3.min_upload_rate)" ||
    ok 1 "the log says why (s3.min_upload_rate)"
is "$(objects upl/slow)" 0 "bob's cut upload left no object"
stop

# ---- no per-user byte bound: bob's slow 170 MB upload holds the cache until it is cut
# (a window of 8 s: alice's upload surely comes while bob's is held)
S3_CONF_EXTRA='max_user_upload_bytes = 0;'
S3_TIMEOUT=8 s3_write_conf "$CACHE_CONF"
s3_start_ok "stageind restarts (no per-user byte bound, s3.timeout 8 s)"
slow_bob hold 170000000 "$TEST_DIR/slow1"
is "$(alice_put a1 "$TEST_DIR/50m")" "SlowDown 503" \
    "while bob's slow upload holds 170 MB, alice's 50 MB upload finds no room (503 SlowDown)"
got=$(wait_slow "$TEST_DIR/slow1")
case $got in cut*) ok 0 "bob's 170 MB upload is cut ($got s)" ;;
    *) ok 1 "bob's 170 MB upload is cut"; diag "got: $got" ;; esac
is "$(alice_put a1 "$TEST_DIR/50m")" 200 "then alice's 50 MB upload is stored: the space was given back"
is "$(objects upl/hold)" 0 "bob's cut upload left no object"
stop

# ---- the defaults: at most half the cache per user (a window of 8 s: bob's
# third upload surely comes while his two slow ones arrive, however slowly
# the loaded machine starts the clients)
S3_CONF_EXTRA='max_user_uploads = 2;'
S3_TIMEOUT=8 s3_write_conf "$CACHE_CONF"
s3_start_ok "stageind restarts (s3.max_user_uploads = 2, bytes: half the cache, s3.timeout 8 s)"
is "$(bob --payload-hash UNSIGNED-PAYLOAD request PUT /upl/huge --content-length 170000000 2>&1)" \
    "503 SlowDown" "bob declaring 170 MB of the 200 MB cache: 503 SlowDown at once"
grep -q "s3.max_user_upload_bytes" "$LOG" && ok 0 "... naming s3.max_user_upload_bytes" ||
    ok 1 "... naming s3.max_user_upload_bytes"
slow_bob s1 90000000 "$TEST_DIR/slow2"
slow_bob s2 1000000 "$TEST_DIR/slow3"
is "$(bob request PUT /upl/third --data third 2>&1)" "503 SlowDown" \
    "bob's third upload while two arrive: 503 SlowDown"
grep -q "s3.max_user_uploads" "$LOG" && ok 0 "... naming s3.max_user_uploads" ||
    ok 1 "... naming s3.max_user_uploads"
is "$(alice_put a2 "$TEST_DIR/50m")" 200 "alice's 50 MB upload goes on beside bob's 91 MB"
wait_slow "$TEST_DIR/slow2" >/dev/null
wait_slow "$TEST_DIR/slow3" >/dev/null
is "$(bob request PUT /upl/third --data third 2>&1)" "200 -" "once they are cut, bob uploads again"
stop

# ---- stage requests draw on the same space: stageind.max_user_pinned_bytes
STAGEIND_CONF_EXTRA='max_user_pinned_bytes = 2500000;'
s3_write_conf "$CACHE_CONF"
s3_start_ok "stageind restarts (stageind.max_user_pinned_bytes = 2500000)"
stage_as() {  # stage_as UID FILE: the status; the body in $BODY
    api POST /api/v1/stage "{\"files\":[\"data/$2\"],\"uid\":$1,\"gid\":$1}"
}
is "$(stage_as 1002 hot/h2)" 201 "bob stages data/hot/h2 (2 MB)"
req=$(json "$BODY" 'j["requestId"]')
is "$(wait_done "$req" 60)" COMPLETED "... it is staged and pinned"
before=$(sql "SELECT count(*) FROM requests")
is "$(stage_as 1002 cold/c2)" 507 "bob's second request (1.5 MB more, 3.5 MB in all): 507"
grep -q "stageind.max_user_pinned_bytes" "$BODY" && ok 0 "... the error names stageind.max_user_pinned_bytes" ||
    { ok 1 "... the error names stageind.max_user_pinned_bytes"; diag "$(cat "$BODY")"; }
is "$(sql "SELECT count(*) FROM requests")" "$before" "... and no request was recorded"
is "$(stage_as 1001 cold/c2)" 201 "alice stages the same 1.5 MB meanwhile: her share is her own"
is "$(api POST "/api/v1/release/$req")" 200 "bob releases his first request"
is "$(stage_as 1002 cold/c2)" 201 "then bob's request fits"
finish
