#!/bin/bash
# Session credentials: POST /api/v1/credentials hands a MUNGE-authenticated
# user short-lived S3 credentials for their own uid (root: for anyone), and
# the S3 endpoint to use them at. Real S3 clients (awscli, s3raw) then act
# as that user: nobody reads public data but not root's private dataset; an
# altered key is refused; the credentials outlive a restart of stageind.
# `stagein get` with no S3 settings at all asks the control API for them.
# Bad requests (unknown field, lifetime over the limit, another user's
# credentials asked by a non-root user, no MUNGE credential) change nothing.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
s3_need_clients aws boto3

STAGEIND_CONF_EXTRA="credentials_lifetime = 5400; credentials_lifetime_max = 7200;"
s3_setup A "client: { munge_socket = \"$M/sock\"; };"
# a private object: only root's dataset holds it
mkdir -p "$SRC/priv"
head -c 90000 /dev/urandom > "$SRC/priv/p1"
tape create P00001 --capacity 4000000000 >/dev/null
(cd "$SRC" && "$STAGEIN" tape write P00001 --bucket data priv/p1 >/dev/null)
printf 'data/priv/p1\n' > "$TEST_DIR/private.manifest"
"$STAGEIN" catalog define private "$TEST_DIR/private.manifest" --owner root:root --mode 0600 >/dev/null
s3_start_ok "stageind starts with its S3 port"
ok "$(s3_make_hot hot/h1 hot/h2 priv/p1; echo $?)" "hot/h1, hot/h2 and priv/p1 staged into the cache"

as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
# creds WHO [BODY]: POST /api/v1/credentials with WHO's MUNGE credential
# (root or nobody); prints the status, the answer lands in $BODY
creds() {
    local c
    if [ "$1" = nobody ]; then c=$(as_nobody munge -S "$M/sock" -n); else c=$(cred); fi
    curl -s -o "$BODY" -w '%{http_code}' -X POST -H "X-Stagein-Munge: $c" \
        -H 'Content-Type: application/json' --data-binary "${2:-}" \
        "http://127.0.0.1:$PORT/api/v1/credentials"
}
# aws_as KEY SECRET ARGS...: awscli with the given credentials
aws_as() {
    local key=$1 secret=$2; shift 2
    env -u AWS_PROFILE -u AWS_CA_BUNDLE AWS_ACCESS_KEY_ID="$key" AWS_SECRET_ACCESS_KEY="$secret" \
        AWS_DEFAULT_REGION="$S3_REGION" AWS_EC2_METADATA_DISABLED=true \
        AWS_CONFIG_FILE="$AWS_CONFIG" AWS_SHARED_CREDENTIALS_FILE=/dev/null \
        "$AWS" --endpoint-url "$S3_URL" "$@"
}
raw_as() { local key=$1 secret=$2; shift 2; "$PY" "$S3RAW" --endpoint "$S3_ENDPOINT" --key "$key" --secret "$secret" "$@"; }

# ---- root ------------------------------------------------------------------------------
is "$(creds root '{}')" 201 "root asks for S3 credentials: 201"
RK=$(json "$BODY" 'j["accessKeyId"]')
RS=$(json "$BODY" 'j["secretAccessKey"]')
is "$(json "$BODY" 'j["s3Endpoint"] + " " + j["region"] + " " + str(j["uid"])')" "$S3_URL $S3_REGION 0" \
    "the answer names the S3 endpoint, its region and uid 0"
now=$(date +%s)
exp=$(json "$BODY" 'j["expires"]')
ok "$([ "$exp" -ge $((now + 5390)) ] && [ "$exp" -le $((now + 5410)) ]; echo $?)" \
    "they expire after credentials_lifetime, 90 min ($(json "$BODY" 'j["expiration"]'))"
ok "$(grep -qE '^STAGEIN[A-Z2-7]{64}$' <<<"$RK"; echo $?)" "the access key is STAGEIN + 64 base32 characters"
run_ok "awscli lists bucket data with them" -- aws_as "$RK" "$RS" s3 ls s3://data/hot/
aws_as "$RK" "$RS" s3 cp --no-progress s3://data/priv/p1 "$OUT/p1" >/dev/null 2>&1
ok "$(same_bytes "$OUT/p1" "$SRC/priv/p1"; echo $?)" "root's credentials read the private object, byte-identical"

# ---- nobody ----------------------------------------------------------------------------
is "$(creds nobody '{"lifetime": 3600}')" 201 "nobody asks for credentials for an hour: 201"
NK=$(json "$BODY" 'j["accessKeyId"]')
NS=$(json "$BODY" 'j["secretAccessKey"]')
is "$(json "$BODY" 'str(j["uid"]) + ":" + str(j["gid"])')" 65534:65534 "they are nobody's (uid:gid from MUNGE)"
exp=$(json "$BODY" 'j["expires"]')
ok "$([ "$exp" -le $(($(date +%s) + 3600)) ]; echo $?)" "and expire within the hour asked for"
aws_as "$NK" "$NS" s3 cp --no-progress s3://data/hot/h2 "$OUT/h2" >/dev/null 2>&1
ok "$(same_bytes "$OUT/h2" "$SRC/hot/h2"; echo $?)" "nobody reads the public hot/h2 with them, byte-identical"
is "$(raw_as "$NK" "$NS" request GET /data/priv/p1)" "403 AccessDenied" \
    "nobody's credentials cannot read root's private object"
# a lookup the S3 server remembers goes stale with any commit: the CLI's included
is "$(raw_as "$NK" "$NS" request GET /data/hot/h2)" "200 -" "nobody reads hot/h2 a second time"
printf 'data/%s\n' small1 small2 hot/h1 cold/c1 cold/c2 deep/a/b/d1 > "$TEST_DIR/pub.manifest"
"$STAGEIN" catalog define pub "$TEST_DIR/pub.manifest" --owner root:root --mode 0644 --replace \
    >/dev/null
printf 'data/hot/h2\n' > "$TEST_DIR/lock.manifest"
"$STAGEIN" catalog define lockh2 "$TEST_DIR/lock.manifest" --owner root:root --mode 0600 >/dev/null
is "$(raw_as "$NK" "$NS" request GET /data/hot/h2)" "403 AccessDenied" \
    "once the CLI moves hot/h2 out of pub into root's private dataset, nobody's next GET is refused"
altered="${NK:0:20}$( [ "${NK:20:1}" = A ] && echo B || echo A )${NK:21}"
is "$(raw_as "$altered" "$NS" request GET /data/hot/h2)" "403 InvalidAccessKeyId" \
    "an altered access key is unknown"
is "$(raw_as "$NK" "${NS}x" request GET /data/hot/h2)" "403 SignatureDoesNotMatch" \
    "the right key with a wrong secret does not sign"

# ---- refused requests --------------------------------------------------------------------
before=$(s3_state_rows)
is "$(creds nobody '{"uid": 0, "gid": 0}')" 403 "nobody asking for root's credentials: 403"
ok "$(grep -q 'only root may' "$BODY"; echo $?)" "saying only root may ($(json "$BODY" 'j["error"]'))"
is "$(creds nobody '{"lifetime": 7201}')" 400 "a lifetime over credentials_lifetime_max: 400"
ok "$(grep -q "lifetime" "$BODY"; echo $?)" "naming the field ($(json "$BODY" 'j["error"]'))"
is "$(creds root '{"days": 1}')" 400 "an unknown field: 400"
ok "$(grep -q "unknown field 'days'" "$BODY"; echo $?)" "naming it"
is "$(creds root '{"uid": 5}')" 400 "uid without gid: 400"
is "$(creds root '{"lifetime": ')" 400 "malformed JSON: 400"
is "$(curl -s -o "$BODY" -w '%{http_code}' -X POST "http://127.0.0.1:$PORT/api/v1/credentials")" 401 \
    "no MUNGE credential: 401"
is "$(s3_state_rows)" "$before" "the refused requests changed nothing"
is "$(creds root '{"uid": 65534, "gid": 65534, "lifetime": 600}')" 201 "root asks on behalf of nobody: 201"
is "$(json "$BODY" 'str(j["uid"])')" 65534 "the credentials are nobody's"
is "$(stat -c %a "$STATE/s3-session.key")" 600 "the session master key is private (0600)"

# ---- a restart -------------------------------------------------------------------------
stop
s3_start_ok "stageind restarts"
aws_as "$NK" "$NS" s3 cp --no-progress s3://data/hot/h1 "$OUT/h1" >/dev/null 2>&1
ok "$(same_bytes "$OUT/h1" "$SRC/hot/h1"; echo $?)" "credentials handed out before the restart still work"

# ---- stagein get with no S3 settings -----------------------------------------------------
env -u STAGEIN_S3_ENDPOINT -u STAGEIN_S3_ACCESS_KEY -u STAGEIN_S3_SECRET -u STAGEIN_S3_CREDENTIALS \
    "$STAGEIN" get --dest "$OUT/get" --endpoint "http://127.0.0.1:$PORT" data/hot/h2 \
    > "$OUT/get.out" 2>&1
ok "$(same_bytes "$OUT/get/data/hot/h2" "$SRC/hot/h2"; echo $?)" \
    "stagein get data/hot/h2 with only the control endpoint: S3 credentials asked for, byte-identical"
sed 's/^/# /' "$OUT/get.out" | tail -3
mkdir -p "$OUT/nget" && chmod 777 "$OUT/nget" && chmod 755 "$OUT"
as_nobody env -u STAGEIN_S3_ENDPOINT -u STAGEIN_S3_ACCESS_KEY -u STAGEIN_S3_SECRET \
    "$STAGEIN" get --dest "$OUT/nget" --endpoint "http://127.0.0.1:$PORT" data/priv/p1 \
    > "$OUT/nget.out" 2>&1
ok "$([ ! -s "$OUT/nget/data/priv/p1" ] && grep -qi 'denied\|403' "$OUT/nget.out"; echo $?)" \
    "as nobody, stagein get of the private object is refused ($(head -1 "$OUT/nget.out"))"

# ---- no S3 endpoint, no credentials --------------------------------------------------------
stop
write_conf "client: { munge_socket = \"$M/sock\"; };"
run_ok "stageind starts without its S3 endpoint" -- start
track_pid "$(daemon_pid)"
is "$(creds root '{}')" 404 "credentials without an S3 endpoint: 404"
ok "$(grep -q 's3.enabled' "$BODY"; echo $?)" "saying why ($(json "$BODY" 'j["error"]'))"
stop
finish
