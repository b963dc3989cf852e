#!/bin/bash
# The WLCG Tape REST API with bearer tokens: Debian's gfal2 (python3-gfal2,
# gfal2-plugin-http) as the real client against a real stageind with a
# simulated volume (discovery, bring_online of several files, poll, release,
# abort on a second request, locality through archiveinfo); then raw
# requests for every route in the spec's shapes, problem+json errors, token
# refusals (expired, unknown issuer, wrong audience, bad signature, alg
# none, a scope outside the path, malformed, huge, unmapped), and user A's
# token against user B's private dataset.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"

STAGEIND="$top_builddir/daemon/stageind"
need_tools curl openssl python3 sqlite3
# Debian's gfal2 binding is built for the system python
GFAL_PY=/usr/bin/python3
HAVE_GFAL=0
if "$GFAL_PY" -c 'import gfal2' 2>/dev/null &&
    ls /usr/lib/*/gfal2-plugins/libgfal_plugin_http.so >/dev/null 2>&1; then
    HAVE_GFAL=1
fi
MINT="$top_srcdir/tests/jwt-mint.py"

# --- keys of two issuers, the token files, configuration ---------------------------
STATE=$TEST_DIR/state
LOG=$TEST_DIR/stageind.log
PORT=$(free_port)
S3_PORT=$(free_port)
export STAGEIN_CONF=$TEST_DIR/stagein.conf
unset STAGEIN_CATALOG STAGEIN_ENDPOINT SLURM_JOB_ID
cd "$TEST_DIR" || exit 1
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out idp.key 2>/dev/null
openssl pkey -in idp.key -pubout -out idp.pem
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ec.key 2>/dev/null
openssl pkey -in ec.key -pubout -out ec.pem
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out rogue.key 2>/dev/null
printf 'https://idp.test %s\nhttps://ec.test %s\n' "$TEST_DIR/idp.pem" "$TEST_DIR/ec.pem" > issuers
printf 'https://idp.test alice 1000 1000\nhttps://idp.test bob 1001 1001\nhttps://ec.test alice 1000 1000\n' > token-map
cat > "$STAGEIN_CONF" <<CONF
state_dir = "$STATE";
stageind: {
    pin_lifetime = 3600;
    sitename = "TESTSITE";
    token_issuers = "$TEST_DIR/issuers";
    token_map = "$TEST_DIR/token-map";
    token_audience = "https://stagein.test";
};
s3: { enabled = true; port = $S3_PORT; bind = "127.0.0.1"; secrets_file = "$TEST_DIR/s3.secrets"; };
CONF
: > s3.secrets
chmod 600 s3.secrets
mkdir -p "$STATE"
head -c 300000 /dev/urandom > r1.bin
head -c 200000 /dev/urandom > r2.bin
head -c 100000 /dev/urandom > r3.bin
printf 'real/r1.bin\nreal/r2.bin\nreal/r3.bin\n' > real.manifest
# slow.bin lies on a volume the library does not have: its requests stay queued
printf 'bucket,key,size,volume,position,copy,checksum\npriv,b/secret.bin,1000,L00099,0,1,\nreal,slow.bin,1000,L00098,0,1,\nreal,lost.bin,1000,L00097,0,1,\n' > priv.csv
printf 'priv/b/secret.bin\n' > priv.manifest
run_ok "bob's private object" -- "$STAGEIN" catalog import priv.csv
run_ok "bob's private dataset" -- "$STAGEIN" catalog define bobpriv priv.manifest --owner 1001:1001 --mode 0600
run_ok "simulated volume" -- "$STAGEIN" tape create L00010
run_ok "files written to it" -- "$STAGEIN" tape write L00010 --bucket real r1.bin r2.bin r3.bin
run_ok "public dataset of those files" -- "$STAGEIN" catalog define real real.manifest --owner 1000:1000 --mode 0644
SOCK=$TEST_DIR/ctl.sock
"$STAGEIND" -d "$STATE" -p "$PORT" -S "$SOCK" -l "$LOG"
track_pid "$(cat "$STATE/stageind.pid" 2>/dev/null)"
ok "$(kill -0 "$(cat "$STATE/stageind.pid" 2>/dev/null)" 2>/dev/null; echo $?)" "stageind starts"

mint() {  # mint KEY ALG CLAIMS
    python3 "$MINT" "$1" "$2" "$3"
}
claims() {  # claims SUB SCOPE [EXTRA-JSON-MEMBERS]
    printf '{"iss": "https://idp.test", "sub": "%s", "aud": "https://stagein.test", "exp": "now+600", "nbf": "now-5", "scope": "%s"%s}' "$1" "$2" "${3:-}"
}
ALICE=$(mint idp.key RS256 "$(claims alice 'storage.stage:/real storage.read:/real')")
BOB=$(mint idp.key RS256 "$(claims bob 'storage.stage:/ storage.read:/')")
BASE=http://127.0.0.1:$PORT
BODY=$TEST_DIR/body
HDRS=$TEST_DIR/headers
# api METHOD PATH [DATA] [TOKEN]: prints the status code; body in $BODY, headers in $HDRS
api() {
    local args=(-s -o "$BODY" -D "$HDRS" -w '%{http_code}' -X "$1")
    [ -n "${4-$ALICE}" ] && args+=(-H "Authorization: Bearer ${4-$ALICE}")
    [ -n "${3:-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$3")
    curl "${args[@]}" "$BASE$2"
}
json() { python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$BODY" "$@" 2>/dev/null; }
requests() { sqlite3 "$STATE/catalog.db" 'SELECT count(*) FROM requests' 2>/dev/null || echo "?"; }

# --- gfal2: the real Tape REST client ------------------------------------------------
if [ "$HAVE_GFAL" = 1 ]; then
    cat > gfal.py <<'PY'
import json, sys, time
import gfal2
base, token = sys.argv[1], sys.argv[2]
ctx = gfal2.creat_context()
ctx.cred_set(base, ctx.cred_new("BEARER", token))
ctx.cred_set(sys.argv[3], ctx.cred_new("BEARER", token))
# slow.bin never comes in (its volume is missing): the abort cannot race the recall
urls = [f"{base}/real/r1.bin", f"{base}/real/r2.bin", f"{base}/real/slow.bin"]
out = {}
status, req = ctx.bring_online(urls[:2], 3600, 60, True)
out["submitted"] = [status, bool(req)]
deadline = time.time() + 60
states = [0, 0]
while time.time() < deadline and states != [1, 1]:
    states = [ctx.bring_online_poll(u, req) for u in urls[:2]]
    time.sleep(0.2)
out["polled"] = states
out["locality"] = ctx.getxattr(urls[0], "user.status")
out["released"] = list(ctx.release(urls[:2], req))
status2, req2 = ctx.bring_online([urls[2]], 600, 60, True)
out["aborted"] = list(ctx.abort_bring_online([urls[2]], req2))
out["requests"] = [req, req2]
# a file URL on the S3 endpoint's port: discovery there leads to the control API
out["s3_locality"] = ctx.getxattr(sys.argv[3] + "/real/r1.bin", "user.status")
print(json.dumps(out))
PY
    out=$("$GFAL_PY" gfal.py "$BASE" "$ALICE" "http://127.0.0.1:$S3_PORT" 2>"$TEST_DIR/gfal.err")
    diag "gfal2: $out $(tail -3 "$TEST_DIR/gfal.err")"
    G=$TEST_DIR/gfal.json
    printf '%s' "$out" > "$G"
    gj() { python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$G" "$1" 2>/dev/null; }
    is "$(gj 'j["submitted"]')" "[[None, None], True]" "gfal2 bring_online of two files (async): a request id"
    is "$(gj 'j["polled"]')" "[1, 1]" "gfal2 bring_online_poll until both are on disk"
    is "$(gj 'j["locality"]')" "ONLINE_AND_NEARLINE" "gfal2 locality through archiveinfo"
    is "$(gj 'j["released"]')" "[None, None]" "gfal2 release"
    is "$(gj 'j["s3_locality"]')" "ONLINE_AND_NEARLINE" "gfal2 with a file URL on the S3 port"
    is "$(gj 'j["aborted"]')" "[None]" "gfal2 abort_bring_online of a second request"
    R1=$(gj 'j["requests"][0]')
    R2=$(gj 'j["requests"][1]')
    code=$(api GET "/api/v1/stage/$R1")
    is "$code $(json 'j["state"], [(f["path"], f["state"], f["onDisk"]) for f in j["files"]]')" \
        "200 ('RELEASED', [('/real/r1.bin', 'COMPLETED', False), ('/real/r2.bin', 'COMPLETED', False)])" \
        "the first request: recalled, then released by gfal2"
    code=$(api GET "/api/v1/stage/$R2")
    is "$code $(json 'j["state"]')" "200 CANCELLED" "the second request: cancelled by gfal2"
    # gfal2 2.21 sends no diskLifetime: the site's default pin lifetime applies
    is "$(sqlite3 "$STATE/catalog.db" "SELECT uid || ' ' || pin_lifetime FROM requests WHERE uuid = '$R1'")" \
        "1000 3600" "gfal2's request: the token's uid, the default pin lifetime"
else
    echo "# SKIP gfal2 part: install python3-gfal2 and gfal2-plugin-http"
fi

# --- discovery: on the control API and on the S3 endpoint's port (file URLs) ---------------
code=$(api GET /.well-known/wlcg-tape-rest-api "" "")
is "$code $(json '(j["sitename"], [(e["uri"], e["version"], e["metadata"]) for e in j["endpoints"]], "description" in j)')" \
    "200 ('TESTSITE', [('$BASE/api/v1', 'v1', {})], True)" "discovery document, no credential needed"
code=$(curl -s -o "$BODY" -w '%{http_code}' "http://127.0.0.1:$S3_PORT/.well-known/wlcg-tape-rest-api")
is "$code $(json '(j["sitename"], [e["uri"] for e in j["endpoints"]])')" \
    "200 ('TESTSITE', ['$BASE/api/v1'])" "on the S3 port: it names the control API"
code=$(curl -s -o "$BODY" -w '%{http_code}' -H "Host: localhost:$S3_PORT" "http://127.0.0.1:$S3_PORT/.well-known/wlcg-tape-rest-api")
is "$code $(json '[e["uri"] for e in j["endpoints"]]')" "200 ['http://localhost:$PORT/api/v1']" \
    "... on the host the client used"

# --- stage, status, cancel, release, delete in the spec's shapes --------------------------
code=$(api POST /api/v1/stage '{"files": [{"path": "/real/slow.bin", "diskLifetime": "PT2H", "targetedMetadata": {"TESTSITE": {"priority": 9, "job": "77"}, "OTHERSITE": {"x": 1}}}, {"path": "/real/r2.bin", "diskLifetime": "PT1H"}]}')
REQ=$(json 'j["requestId"]')
is "$code $(grep -i '^location:' "$HDRS" | tr -d '\r' | cut -d' ' -f2)" "201 /api/v1/stage/$REQ" \
    "POST /api/v1/stage: 201 with Location and requestId"
is "$(sqlite3 "$STATE/catalog.db" "SELECT priority || ' ' || job_id || ' ' || pin_lifetime || ' ' || uid FROM requests WHERE uuid = '$REQ'")" \
    "9 77 7200 1000" "targetedMetadata for our site, the longest diskLifetime, the token's uid"
code=$(api GET "/api/v1/stage/$REQ")
is "$code $(json 'sorted(k for k in ("id", "createdAt", "files") if k in j), type(j["createdAt"]).__name__, j["id"] == sys.argv[3], sorted(j["files"][0])' "$REQ" | tr -d "'")" \
    "200 ([createdAt, files, id], int, True, [bytesDone, onDisk, path, size, state])" \
    "GET /api/v1/stage/{id}: the spec's fields (with ours)"
code=$(api POST "/api/v1/stage/$REQ/cancel" '{"paths": ["/real/slow.bin"]}')
is "$code $(json 'j["status"], "detail" in j, "title" in j, "type" in j')" "400 (400, True, True, True)" \
    "cancel of part of a request: 400 problem+json"
is "$(grep -i '^content-type:' "$HDRS" | tr -d '\r' | cut -d' ' -f2)" "application/problem+json" \
    "errors as application/problem+json"
code=$(api POST "/api/v1/stage/$REQ/cancel" '{"paths": ["/real/nope.bin"]}')
is "$code $(json 'j["detail"]')" "400 paths[0] '/real/nope.bin' is not a file of request $REQ" \
    "cancel naming a file not in the request"
code=$(api POST "/api/v1/stage/$REQ/cancel" '{"paths": ["/real/r2.bin", "/real/slow.bin"]}')
is "$code $(json 'j["state"]')" "200 CANCELLED" "cancel with every path of the request"
code=$(api POST /api/v1/stage '{"files": [{"path": "/real/r3.bin"}]}')
REQ2=$(json 'j["requestId"]')
code=$(api POST "/api/v1/release/$REQ2" '{"paths": ["/real/r3.bin"]}')
is "$code $(json 'j["state"]')" "200 RELEASED" "release with the spec's paths"
code=$(api POST /api/v1/stage '{"files": [{"path": "/real/r3.bin"}]}')
REQ3=$(json 'j["requestId"]')
code=$(api DELETE "/api/v1/stage/$REQ3")
is "$code $(json 'j["state"]')" "200 RELEASED" "DELETE /api/v1/stage/{id}"
code=$(api GET "/api/v1/stage/$REQ3" "" "$BOB")
is "$code $(json 'j["detail"]')" "403 request $REQ3 belongs to uid 1000, not to uid 1001" \
    "another user's token cannot read the request"

# --- archiveinfo ---------------------------------------------------------------------------
code=$(api POST /api/v1/archiveinfo/ '{"paths": ["/real/r1.bin", "/real/none", "/priv/b/secret.bin"]}')
is "$code $(json '[sorted(e) for e in j]')" \
    "200 [['locality', 'path', 'size'], ['error', 'path'], ['error', 'path']]" \
    "archiveinfo: locality per path, errors for unknown and out-of-scope paths"
is "$(json 'j[2]["error"]')" "the token's scope (storage.read or storage.stage) does not cover this path" \
    "archiveinfo outside the token's scope"
sqlite3 "$STATE/catalog.db" "UPDATE volumes SET state = 'disabled' WHERE label = 'L00098'; UPDATE volumes SET state = 'failed' WHERE label = 'L00097'"
code=$(api POST /api/v1/archiveinfo '{"paths": ["/real/slow.bin", "/real/lost.bin"]}')
is "$code $(json '[e.get("locality") for e in j]')" "200 ['UNAVAILABLE', 'LOST']" \
    "archiveinfo: a disabled volume's file UNAVAILABLE, a failed volume's LOST"

# --- refusals: nothing staged ----------------------------------------------------------------
ONE_FILE='{"files": [{"path": "/real/r1.bin"}]}'
refused() {  # refused DESCRIPTION STATUS PATTERN TOKEN [BODY]
    local before code
    before=$(requests)
    code=$(api POST /api/v1/stage "${5:-$ONE_FILE}" "$4")
    local detail
    detail=$(json 'j["detail"]')
    if [ "$code" = "$2" ] && grep -qE -- "$3" <<<"$detail" && [ "$before" = "$(requests)" ]; then
        ok 0 "$1: $code, $detail"
    else
        ok 1 "$1"
        diag "status $code (want $2), detail '$detail' (want /$3/), requests $before -> $(requests)"
    fi
}
refused "expired token" 401 "expired" "$(mint idp.key RS256 '{"iss": "https://idp.test", "sub": "alice", "aud": "https://stagein.test", "exp": "now-300", "scope": "storage.stage:/"}')"
refused "unknown issuer" 401 "not trusted" "$(mint idp.key RS256 '{"iss": "https://evil.test", "sub": "alice", "aud": "https://stagein.test", "exp": "now+600", "scope": "storage.stage:/"}')"
refused "wrong audience" 401 "not meant for this service" "$(mint idp.key RS256 '{"iss": "https://idp.test", "sub": "alice", "aud": "https://elsewhere", "exp": "now+600", "scope": "storage.stage:/"}')"
refused "signed by another key" 401 "does not verify" "$(mint rogue.key RS256 "$(claims alice 'storage.stage:/')")"
refused "a flipped signature byte" 401 "does not verify" "$(mint idp.key RS256-badsig "$(claims alice 'storage.stage:/')")"
refused "alg none" 401 "algorithm 'none' refused" "$(mint idp.key none "$(claims alice 'storage.stage:/')")"
refused "a scope outside the path" 403 "does not allow staging /real/r1.bin" "$(mint idp.key RS256 "$(claims alice 'storage.stage:/other storage.read:/')")"
refused "a read scope does not stage" 403 "does not allow staging" "$(mint idp.key RS256 "$(claims alice 'storage.read:/')")"
refused "malformed token" 401 "not a JWT" "not-a-token"
refused "huge token" 401 "longer than 8192" "$(head -c 9000 /dev/zero | tr '\0' A)"
refused "unmapped subject" 403 "maps to no local user" "$(mint idp.key RS256 "$(claims mallory 'storage.stage:/')")"
refused "a dataset by name needs storage.stage:/" 403 "needs a token with the scope storage.stage:/" "$ALICE" '{"datasets": ["real"]}'
refused "alice's token on bob's private dataset" 403 "is not readable by other users" "$(mint idp.key RS256 "$(claims alice 'storage.stage:/')")" '{"datasets": ["bobpriv"]}'
refused "unknown field in a file entry" 400 "files\\[0\\]: unknown field 'colour'" "$ALICE" '{"files": [{"path": "/real/r1.bin", "colour": "red"}]}'
refused "diskLifetime not ISO 8601" 400 "diskLifetime: 'P1M'" "$ALICE" '{"files": [{"path": "/real/r1.bin", "diskLifetime": "P1M"}]}'
refused "a path with .." 400 "" "$ALICE" '{"files": [{"path": "/real/../etc/passwd"}]}'
refused "no credential over TCP" 401 "no MUNGE credential" ""
grep -qi '^www-authenticate: Bearer' "$HDRS" ||
    code=$(api POST /api/v1/stage '{"files": [{"path": "/real/r1.bin"}]}' "x.y.z")
ok "$(grep -qi '^www-authenticate: Bearer error="invalid_token"' "$HDRS"; echo $?)" \
    "a bad token's 401 says WWW-Authenticate: Bearer"
ES=$(mint ec.key ES256 '{"iss": "https://ec.test", "sub": "alice", "aud": "https://wlcg.cern.ch/jwt/v1/any", "exp": "now+600", "scope": "storage.stage:/real"}')
code=$(api POST /api/v1/stage '{"files": [{"path": "/real/r2.bin"}]}' "$ES")
is "$code" 201 "an ES256 token of the second issuer, with the WLCG any audience"

# --- stagein token: tokens stageind signs itself (peer credentials on the socket: root) ------
own=$("$STAGEIN" token --endpoint "unix:$SOCK" --scope "storage.stage:/real" --lifetime 10m 2>&1)
claims_of() { python3 -c 'import base64, json, sys; p = sys.argv[1].split(".")[1]; print(json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4))))' "$1" 2>/dev/null; }
is "$(claims_of "$own" | python3 -c 'import ast, sys; c = ast.literal_eval(sys.stdin.read()); print(c["iss"], c["sub"], c["scope"], c["exp"] - c["iat"])')" \
    "stageind 0:0 storage.stage:/real 600" "stagein token: signed by stageind for the caller, with the scope and lifetime asked"
code=$(api POST /api/v1/stage '{"files": [{"path": "/real/r1.bin"}]}' "$own")
is "$code" 201 "stageind's own token stages within its scope"
code=$(api POST /api/v1/stage '{"files": [{"path": "/priv/b/secret.bin"}]}' "$own")
is "$code $(json 'j["detail"]' | cut -c1-59)" "403 the token's scope does not allow staging /priv/b/secret.bin" \
    "... and not outside it"
code=$(api POST /api/v1/token '{}' "$ALICE")
is "$code $(json 'j["detail"]')" "403 a bearer token cannot ask for another token: use MUNGE or the Unix socket" \
    "a token does not beget tokens"
run_fails_with "a scope with '..' refused" "the path has|component" -- \
    "$STAGEIN" token --endpoint "unix:$SOCK" --scope "storage.stage:/real/../priv"
run_fails_with "a scope of another kind refused" "is not storage.stage:/PATH" -- \
    "$STAGEIN" token --endpoint "unix:$SOCK" --scope "storage.modify:/"
curl -s "$BASE/api/v1/token/key" > served.pem
openssl pkey -in "$STATE/token.key" -pubout > expected.pem 2>/dev/null
ok "$(cmp -s served.pem expected.pem && [ "$(stat -c %a "$STATE/token.key")" = 600 ]; echo $?)" \
    "GET /api/v1/token/key serves the public half of the 0600 signing key"

kill "$(cat "$STATE/stageind.pid")" 2>/dev/null
finish
