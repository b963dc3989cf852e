#!/bin/bash
# stageind's catalog settings, as the CLI's: catalog.site checked at start
# (on SQLite), then stageind on a PostgreSQL catalog (catalog.url): a
# private server (tests/pg-lib.sh), the fixture volumes imported into it, a
# dataset staged (recalled through the sim backend, each object once) and
# read over S3 with awscli and curl, a checkpoint pushed and read back, then
# a restart that finds every request, cached object and push as it left
# them. The PostgreSQL part is skipped without a server or libpq.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/pg-lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
s3_need_clients aws curl
trap 'stop; pg_lib_stop "$TEST_DIR"; cleanup' EXIT

# ---- SQLite: the site a catalog belongs to ---------------------------------------------
use_state S
CATALOG_CONF='catalog: { site = "site-a"; };'
write_conf ""
"$STAGEIN" catalog init >/dev/null
CATALOG_CONF='catalog: { site = "site-b"; };'
write_conf ""
run_fails_with "stageind refuses another site's catalog, naming catalog.site" \
    "belongs to site 'site-a', not 'site-b' \(catalog.site\)" -- start
CATALOG_CONF='catalog: { site = "site-a"; };'
write_conf ""
run_ok "and starts on its own site's" -- start
track_pid "$(daemon_pid)"
stop

# ---- PostgreSQL ------------------------------------------------------------------------
skip_rest() { ok 0 "stageind on PostgreSQL # SKIP $1"; finish; exit; }
pg_lib_setup "$TEST_DIR" skip_rest
CATALOG_CONF=$(pg_lib_catalog_conf "$TEST_DIR" t0016)
# the catalog through the CLI (read-only SQL): no sqlite3 file to open here
sql() { "$STAGEIN" catalog sql "$1" | tail -n +2 | sed 's/ *$//'; }

s3_setup A
is "$(sql "SELECT count(*) FROM objects WHERE bucket = 'data'")" 7 \
    "the fixture volumes are imported into the PostgreSQL catalog"
ok $([ ! -e "$STATE/catalog.db" ]; echo $?) "no SQLite catalog was made"
if ! s3_start 2>"$TEST_DIR/start.err"; then
    ok 1 "stageind starts on catalog.url"
    sed 's/^/# /' "$TEST_DIR/start.err"
    tail -20 "$LOG" 2>/dev/null | sed 's/^/# /'
    echo "Bail out! stageind did not start on PostgreSQL"
    exit 1
fi
ok 0 "stageind starts on catalog.url"
grep -q "catalog postgresql://" "$LOG"
ok $? "its log names the PostgreSQL catalog"

# ---- stage: recalled through the sim backend ------------------------------------------
REQ=$(stage '{"datasets":["pub"]}')
ok $([ -n "$REQ" ]; echo $?) "stage request for dataset pub accepted: $(cat "$BODY")"
is "$(wait_done "$REQ" 60)" COMPLETED "the request completes"
is "$(sql "SELECT count(*) FROM cache c JOIN objects o ON o.id = c.object_id WHERE o.bucket = 'data'")" \
    7 "the seven objects are cached"
is "$(sql "SELECT count(*) FROM events WHERE kind = 'object.recalled'")" 7 "each recalled once"
bad=""
for f in $S3_FIXTURE; do
    k=${f%%:*}
    aws_s3 s3 cp --no-progress "s3://data/$k" "$TEST_DIR/back" >/dev/null 2>&1 &&
        cmp -s "$TEST_DIR/back" "$SRC/$k" || bad+="$k "
done
is "$bad" "" "awscli GETs every object byte-identical"
curl -s -o "$TEST_DIR/curl.out" --aws-sigv4 "aws:amz:$S3_REGION:s3" --user "$S3_KEY:$S3_SECRET" \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
    "$S3_URL/data/hot/h2"
ok $(cmp -s "$TEST_DIR/curl.out" "$SRC/hot/h2"; echo $?) "curl --aws-sigv4 GETs hot/h2 byte-identical"

# ---- push a checkpoint and read it back ------------------------------------------------
head -c 3000000 /dev/urandom >"$TEST_DIR/ckpt.bin"
code=$(push ckpt step-1 "$TEST_DIR/ckpt.bin")
PUSH=$(json "$BODY" 'j["pushId"]')
is "$code" 202 "checkpoint push accepted: $(cat "$BODY")"
is "$(wait_push "$PUSH" 60)" DURABLE "the push becomes DURABLE"
aws_s3 s3 cp --no-progress s3://stageout/ckpt/step-1 "$TEST_DIR/ckpt.back" >/dev/null 2>&1
ok $(cmp -s "$TEST_DIR/ckpt.back" "$TEST_DIR/ckpt.bin"; echo $?) "the checkpoint reads back identical over S3"

# ---- restart: the state is where it was -----------------------------------------------
before=$(sql "SELECT (SELECT count(*) FROM requests) || '/' || (SELECT count(*) FROM cache) || '/' || (SELECT count(*) FROM push_items WHERE state = 'DURABLE')")
is "$before" "1/8/1" "before the restart: one request, eight cached objects (the checkpoint too), one durable push"
stop
ok $(s3_start 2>"$TEST_DIR/restart.err"; echo $?) "stageind restarts on the same catalog"
is "$(sql "SELECT (SELECT count(*) FROM requests) || '/' || (SELECT count(*) FROM cache) || '/' || (SELECT count(*) FROM push_items WHERE state = 'DURABLE')")" \
    "$before" "requests, cached objects and durable pushes survive the restart ($before)"
is "$(api GET "/api/v1/stage/$REQ" >/dev/null; json "$BODY" 'j["state"]')" COMPLETED \
    "the request is still COMPLETED"
aws_s3 s3 cp --no-progress s3://data/cold/c2 "$TEST_DIR/back" >/dev/null 2>&1
ok $(cmp -s "$TEST_DIR/back" "$SRC/cold/c2"; echo $?) "a cached object is served after the restart"
aws_s3 s3 cp --no-progress s3://stageout/ckpt/step-1 "$TEST_DIR/ckpt.back2" >/dev/null 2>&1
ok $(cmp -s "$TEST_DIR/ckpt.back2" "$TEST_DIR/ckpt.bin"; echo $?) "and the checkpoint"
finish
