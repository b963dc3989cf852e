#!/bin/bash
# stageind on a PostgreSQL catalog whose server restarts under load: a
# private server (tests/pg-lib.sh), a dataset staged, pushes running, then
# `pg_ctl restart` and a stop of some seconds mid-run. During the stop the
# control API answers 503 naming since when the catalog is unreachable (a
# stage request, a status), /metrics shows stagein_catalog_up 0; afterwards
# every connection is back, everything accepted completes, every
# acknowledged push reads back identical, the outage is logged once, and
# stageind never exited. Skipped without a server or libpq.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/pg-lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
s3_need_clients aws curl
trap 'stop; pg_lib_stop "$TEST_DIR"; cleanup' EXIT

pg_lib_setup "$TEST_DIR" skip_all
CATALOG_CONF=$(pg_lib_catalog_conf "$TEST_DIR" t0019)
sql() { "$STAGEIN" catalog sql "$1" | tail -n +2 | sed 's/ *$//'; }
metric() { curl -s "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

s3_setup A
s3_start_ok "stageind starts on catalog.url"
PID=$(daemon_pid)
is "$(metric stagein_catalog_up)" 1 "metrics: stagein_catalog_up 1"
is "$(metric stagein_catalog_reconnects_total)" 0 "no reconnects yet"

REQ=$(stage '{"datasets":["pub"]}')
ok $([ -n "$REQ" ]; echo $?) "stage request accepted"
is "$(wait_done "$REQ" 60)" COMPLETED "the request completes"

# ---- pushes running across a restart and a stop ----------------------------------------
PUSHES=40
for i in $(seq "$PUSHES"); do head -c $((20000 + i * 3001)) /dev/urandom >"$TEST_DIR/p$i"; done
pusher() {
    local i code
    for i in $(seq "$PUSHES"); do
        code=$(push ckpt "step-$i" "$TEST_DIR/p$i")
        echo "$i $code $(json "$BODY" 'j.get("pushId", "")') $(tr -d '\n' <"$BODY")"
        sleep 0.15
    done >"$TEST_DIR/pushes"
}
BODY=$TEST_DIR/push-body pusher &
pusher_pid=$!
track_pid "$pusher_pid"

sleep 1
pg_lib_restart "$TEST_DIR" 0
ok $? "pg_ctl restart under load"
sleep 1
pg_lib_stop "$TEST_DIR"
ok $? "the server stopped"
# during the stop: clear refusals, at once
start_s=$(date +%s)
code=$(api POST /api/v1/stage '{"datasets":["pub"]}')
is "$code" 503 "a stage request during the outage is refused with 503: $(cat "$BODY")"
grep -q "catalog is unreachable since .*retry" "$BODY"
ok $? "its message says the catalog is unreachable since when, and to retry"
code=$(api GET "/api/v1/stage/$REQ")
is "$code" 503 "the request's status during the outage: 503"
grep -q "unreachable since" "$BODY"
ok $? "naming since when: $(cat "$BODY")"
out=$(STAGEIN_ENDPOINT="unix:$SOCK" "$STAGEIN" status "$REQ" 2>&1)
rc=$?
ok $([ "$rc" != 0 ] && grep -q "unreachable since" <<<"$out"; echo $?) \
    "stagein status says the catalog is unreachable since when: $out"
head -c 100000 /dev/urandom >"$TEST_DIR/up.bin"
s3_put() {  # s3_put KEY: one PutObject (no client retries), the status code
    curl -s -o "$TEST_DIR/put.out" -w '%{http_code}' -T "$TEST_DIR/up.bin" \
        --aws-sigv4 "aws:amz:$S3_REGION:s3" --user "$S3_KEY:$S3_SECRET" \
        -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$S3_URL/upl/$1"
}
code=$(s3_put during-outage.bin)
ok $(case $code in 500 | 503) echo 0 ;; *) echo 1 ;; esac) \
    "an S3 upload during the outage is refused ($code): $(head -c 400 "$TEST_DIR/put.out")"
ok $([ $(($(date +%s) - start_s)) -lt 20 ]; echo $?) "the refusals came at once, not after a hang"
is "$(metric stagein_catalog_up)" 0 "metrics during the outage: stagein_catalog_up 0"
since=$(metric stagein_catalog_down_since_seconds)
ok $([ "${since:-0}" -gt 0 ]; echo $?) "and stagein_catalog_down_since_seconds $since"
sleep 2
pg_lib_resume "$TEST_DIR"
ok $? "the server started again"

wait "$pusher_pid"
up=""
for _ in $(seq 100); do up=$(metric stagein_catalog_up); [ "$up" = 1 ] && break; sleep 0.1; done
is "$up" 1 "metrics after the outage: stagein_catalog_up 1"
reconnects=$(metric stagein_catalog_reconnects_total)
ok $([ "${reconnects:-0}" -ge 2 ]; echo $?) "stagein_catalog_reconnects_total $reconnects"
outages=$(metric stagein_catalog_outages_total)
ok $([ "${outages:-0}" -ge 1 ]; echo $?) "stagein_catalog_outages_total $outages"
is "$(grep -c "catalog .* unreachable:" "$LOG")" "$outages" "each outage logged once, not per statement"
is "$(grep -c "catalog .* reachable again" "$LOG")" "$outages" "and its end once"

# ---- everything acknowledged is there --------------------------------------------------
acked=$(awk '$2 == 202' "$TEST_DIR/pushes" | wc -l)
refused=$(awk '$2 != 202' "$TEST_DIR/pushes" | wc -l)
diag "pushes: $acked acknowledged, $refused refused"
awk '$2 != 202 { print "# refused: " substr($0, 1, 300) }' "$TEST_DIR/pushes" | head -5
ok $([ "$acked" -ge 1 ] && [ $((acked + refused)) = "$PUSHES" ]; echo $?) \
    "every push answered ($acked acknowledged, $refused refused)"
# (a push refused because the catalog was unreachable answers 503 with
# Retry-After; one whose later step failed on the lost connection, 500)
bad=$(awk '$2 != 202 && !(($2 == 503 || $2 == 500) && /catalog .*unreachable.*retry later/) {
    print $1 ":" $2 }' "$TEST_DIR/pushes" | tr '\n' ' ')
is "$bad" "" "a refused push says the catalog is unreachable since when, and to retry"
notdurable=""
mismatch=""
while read -r i code id _; do
    [ "$code" = 202 ] || continue
    [ "$(wait_push "$id" 60)" = DURABLE ] || notdurable+="$i "
    aws_s3 s3 cp --no-progress "s3://stageout/ckpt/step-$i" "$TEST_DIR/back" >/dev/null 2>&1 &&
        cmp -s "$TEST_DIR/back" "$TEST_DIR/p$i" || mismatch+="$i "
done <"$TEST_DIR/pushes"
is "$notdurable" "" "every acknowledged push becomes DURABLE"
is "$mismatch" "" "every acknowledged push reads back identical over S3"

aws_s3 s3 ls s3://upl/during-outage.bin >/dev/null 2>&1
ok $([ $? != 0 ]; echo $?) "the refused upload left no object"
is "$(s3_put after-outage.bin)" 200 "an S3 upload after the outage is accepted"
aws_s3 s3 cp --no-progress s3://upl/after-outage.bin "$TEST_DIR/back" >/dev/null 2>&1
ok $(cmp -s "$TEST_DIR/back" "$TEST_DIR/up.bin"; echo $?) "and reads back identical"

REQ2=$(stage '{"datasets":["pub"]}')
ok $([ -n "$REQ2" ]; echo $?) "a stage request after the outage is accepted"
is "$(wait_done "$REQ2" 60)" COMPLETED "and completes"
is "$(api GET "/api/v1/stage/$REQ" >/dev/null; json "$BODY" 'j["state"]')" COMPLETED \
    "the first request is still COMPLETED"
ok $(kill -0 "$PID" 2>/dev/null; echo $?) "stageind never exited (pid $PID)"
is "$(daemon_pid)" "$PID" "the same stageind"
finish
