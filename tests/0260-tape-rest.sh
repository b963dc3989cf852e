#!/bin/bash
# The WLCG Tape REST API with bearer tokens: Debian's gfal2 (python3-gfal2,
# gfal2-plugin-http, gfal2-plugin-file) as the real client against a real stageind with a
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
    ls /usr/lib/*/gfal2-plugins/libgfal_plugin_http.so >/dev/null 2>&1 &&
    ls /usr/lib/*/gfal2-plugins/libgfal_plugin_file.so >/dev/null 2>&1; then
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
# a third issuer publishes a JWKS (two keys, told apart by kid); its users map by wlcg.groups
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out jwks1.key 2>/dev/null
openssl pkey -in jwks1.key -pubout -out jwks1.pem
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out jwks2.key 2>/dev/null
openssl pkey -in jwks2.key -pubout -out jwks2.pem
python3 "$MINT" --jwks j1 jwks1.pem jwks2.pem > jwks.json
printf 'https://idp.test %s\nhttps://ec.test %s\nhttps://jwks.test %s\n' "$TEST_DIR/idp.pem" "$TEST_DIR/ec.pem" "$TEST_DIR/jwks.json" > issuers
printf 'https://idp.test alice 1000 1000\nhttps://idp.test bob 1001 1001\nhttps://ec.test alice 1000 1000\nhttps://jwks.test group:/stagein/bob 1001 1001\nhttps://jwks.test group:/stagein 1000 1000\n' > token-map
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
head -c 50000 /dev/urandom > b.bin
printf 'real/r1.bin\nreal/r2.bin\nreal/r3.bin\n' > real.manifest
printf 'real/b.bin\n' > bobreal.manifest
# slow.bin lies on a volume the library does not have: its requests stay queued
printf 'bucket,key,size,volume,position,copy,checksum\npriv,b/secret.bin,1000,L00099,0,1,\nreal,slow.bin,1000,L00098,0,1,\nreal,lost.bin,1000,L00097,0,1,\n' > priv.csv
printf 'priv/b/secret.bin\n' > priv.manifest
run_ok "bob's private object" -- "$STAGEIN" catalog import priv.csv
run_ok "bob's private dataset" -- "$STAGEIN" catalog define bobpriv priv.manifest --owner 1001:1001 --mode 0600
run_ok "simulated volume" -- "$STAGEIN" tape create L00010
run_ok "files written to it" -- "$STAGEIN" tape write L00010 --bucket real r1.bin r2.bin r3.bin b.bin
run_ok "public dataset of those files" -- "$STAGEIN" catalog define real real.manifest --owner 1000:1000 --mode 0644
run_ok "bob's private dataset on the same volume" -- "$STAGEIN" catalog define bobreal bobreal.manifest --owner 1001:1001 --mode 0600
SOCK=$TEST_DIR/ctl.sock
"$STAGEIND" -d "$STATE" -p "$PORT" -S "$SOCK" -l "$LOG"
track_pid "$(cat "$STATE/stageind.pid" 2>/dev/null)"
ok "$(kill -0 "$(cat "$STATE/stageind.pid" 2>/dev/null)" 2>/dev/null; echo $?)" "stageind starts"

mint() {  # mint KEY ALG CLAIMS [KID]
    python3 "$MINT" "$@"
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
until_state() {  # until_state UUID STATE: waits, bounded (60 s), for the request's state
    local i
    for i in $(seq 300); do
        [ "$(sqlite3 "$STATE/catalog.db" "SELECT state FROM requests WHERE uuid = '$1'" 2>/dev/null)" = "$2" ] && return 0
        sleep 0.2
    done
    diag "request $1 did not reach $2"
}

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
# read back what was staged, from the S3 endpoint, with the same bearer token
params = ctx.transfer_parameters()
params.overwrite = True
out["read"] = []
for name in ("r1.bin", "r2.bin"):
    ctx.filecopy(params, f"{sys.argv[3]}/real/{name}", f"file://{sys.argv[4]}/got-{name}")
    out["read"].append(ctx.stat(f"{sys.argv[3]}/real/{name}").st_size)
out["released"] = list(ctx.release(urls[:2], req))
status2, req2 = ctx.bring_online([urls[2]], 600, 60, True)
out["aborted"] = list(ctx.abort_bring_online([urls[2]], req2))
out["requests"] = [req, req2]
# a file URL on the S3 endpoint's port: discovery there leads to the control API
out["s3_locality"] = ctx.getxattr(sys.argv[3] + "/real/r1.bin", "user.status")
print(json.dumps(out))
PY
    out=$("$GFAL_PY" gfal.py "$BASE" "$ALICE" "http://127.0.0.1:$S3_PORT" "$TEST_DIR" 2>"$TEST_DIR/gfal.err")
    diag "gfal2: $out $(tail -3 "$TEST_DIR/gfal.err")"
    G=$TEST_DIR/gfal.json
    printf '%s' "$out" > "$G"
    gj() { python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$G" "$1" 2>/dev/null; }
    is "$(gj 'j["submitted"]')" "[[None, None], True]" "gfal2 bring_online of two files (async): a request id"
    is "$(gj 'j["polled"]')" "[1, 1]" "gfal2 bring_online_poll until both are on disk"
    is "$(gj 'j["locality"]')" "ONLINE_AND_NEARLINE" "gfal2 locality through archiveinfo"
    is "$(gj 'j["read"]')" "[300000, 200000]" "gfal2 stats both staged files on the S3 endpoint with its bearer token"
    ok "$(cmp -s got-r1.bin r1.bin && cmp -s got-r2.bin r2.bin; echo $?)" \
        "gfal2 reads both back byte-identical from the S3 endpoint (bearer-token GET)"
    is "$(gj 'j["released"]')" "[None, None]" "gfal2 release"
    is "$(gj 'j["s3_locality"]')" "ONLINE_AND_NEARLINE" "gfal2 with a file URL on the S3 port"
    is "$(gj 'j["aborted"]')" "[None]" "gfal2 abort_bring_online of a second request"
    R1=$(gj 'j["requests"][0]')
    R2=$(gj 'j["requests"][1]')
    code=$(api GET "/api/v1/stage/$R1")
    is "$code $(json 'j["state"], [(f["path"], f["state"], f["onDisk"]) for f in j["files"]]')" \
        "200 ('RELEASED', [('/real/r1.bin', 'COMPLETED', False), ('/real/r2.bin', 'COMPLETED', False)])" \
        "the first request: recalled, then released by gfal2"
    is "$(json 'all(type(f["startedAt"]) is int and f["startedAt"] <= f["finishedAt"] for f in j["files"]), j["startedAt"] == min(f["startedAt"] for f in j["files"]), j["createdAt"] <= j["startedAt"] <= j["completedAt"]')" \
        "(True, True, True)" "per-file startedAt <= finishedAt; the request's startedAt its first file's"
    code=$(api GET "/api/v1/stage/$R2")
    is "$code $(json 'j["state"]')" "200 CANCELLED" "the second request: cancelled by gfal2"
    # gfal2 2.21 sends no diskLifetime: the site's default pin lifetime applies
    is "$(sqlite3 "$STATE/catalog.db" "SELECT uid || ' ' || pin_lifetime FROM requests WHERE uuid = '$R1'")" \
        "1000 3600" "gfal2's request: the token's uid, the default pin lifetime"
else
    echo "# SKIP gfal2 part: install python3-gfal2, gfal2-plugin-http and gfal2-plugin-file (the copies go to file:// URLs)"
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
is "$code $(json 'sorted(k for k in ("id", "createdAt", "files") if k in j), type(j["createdAt"]).__name__, j["id"] == sys.argv[3], sorted(k for k in j["files"][1] if k in ("path", "state", "onDisk", "error", "startedAt", "finishedAt"))' "$REQ" | tr -d "'")" \
    "200 ([createdAt, files, id], int, True, [onDisk, path, state])" \
    "GET /api/v1/stage/{id}: the spec's fields (with ours)"
code=$(api POST "/api/v1/stage/$REQ/cancel" '{"paths": ["/real/nope.bin"]}')
is "$code $(json 'j["status"], "detail" in j, "title" in j, "type" in j')" "400 (400, True, True, True)" \
    "cancel naming a file not in the request: 400 problem+json"
is "$(grep -i '^content-type:' "$HDRS" | tr -d '\r' | cut -d' ' -f2)" "application/problem+json" \
    "errors as application/problem+json"
is "$(json 'j["detail"]')" "paths[0] '/real/nope.bin' is not a file of request $REQ" \
    "... naming the path"
code=$(api POST "/api/v1/stage/$REQ/cancel" '{"paths": ["/real/slow.bin"]}')
is "$code $(json 'j["filesCancelled"]')" "200 1" "cancel of part of a request"
code=$(api GET "/api/v1/stage/$REQ")
is "$code $(json 'j["state"] != "CANCELLED", [(f["path"], f["state"], "finishedAt" in f) for f in j["files"] if f["path"] == "/real/slow.bin"]')" \
    "200 (True, [('/real/slow.bin', 'CANCELLED', True)])" "... that file CANCELLED with its finishedAt, the request goes on"
until_state "$REQ" COMPLETED
code=$(api GET "/api/v1/stage/$REQ")
is "$code $(json 'j["state"], [(f["path"], f["state"], f["onDisk"]) for f in j["files"]]')" \
    "200 ('COMPLETED', [('/real/r2.bin', 'COMPLETED', True), ('/real/slow.bin', 'CANCELLED', False)])" \
    "... and completes with its other file"
code=$(api POST /api/v1/stage '{"files": [{"path": "/real/r1.bin"}, {"path": "/real/r3.bin"}]}')
REQP=$(json 'j["requestId"]')
until_state "$REQP" COMPLETED
pins() { sqlite3 "$STATE/catalog.db" "SELECT count(*) FROM cache_pins p JOIN requests r ON r.id = p.request_id WHERE r.uuid = '$1'"; }
is "$(pins "$REQP")" 2 "a two-file request staged: two pins"
code=$(api POST "/api/v1/release/$REQP" '{"paths": ["/real/r3.bin"]}')
is "$code $(json 'j["state"], j["filesReleased"]') $(pins "$REQP")" "200 ('COMPLETED', 1) 1" \
    "release of part of a request: that file's pin given back, the request stays"
code=$(api GET "/api/v1/stage/$REQP")
is "$(json '[(f["path"], f["onDisk"]) for f in j["files"]]')" "[('/real/r1.bin', True), ('/real/r3.bin', False)]" \
    "... onDisk false for the released file only"
code=$(api POST "/api/v1/release/$REQP" '{"paths": ["/real/r1.bin"]}')
is "$code $(json 'j["state"]') $(pins "$REQP")" "200 RELEASED 0" "releasing its last file releases the request"
code=$(api POST "/api/v1/release/$REQP" '{"paths": ["/real/r1.bin"]}')
is "$code" 409 "... and a second release is refused"
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

ONE_FILE_R3='{"files": [{"path": "/real/r3.bin"}]}'
# --- the S3 endpoint: GET/HEAD with a bearer token, under its storage.read scope -------------
S3=http://127.0.0.1:$S3_PORT
s3() {  # s3 METHOD PATH TOKEN: prints the status code; body in $BODY
    local args=(-s -o "$BODY" -w '%{http_code}')
    if [ "$1" = HEAD ]; then args+=(--head); else args+=(-X "$1"); fi
    [ -n "$3" ] && args+=(-H "Authorization: Bearer $3")
    [ "$1" = PUT ] && args+=(--data-binary x)
    curl "${args[@]}" "$S3$2"
}
code=$(s3 GET /real/r1.bin "$ALICE")
ok "$([ "$code" = 200 ] && cmp -s "$BODY" r1.bin; echo $?)" "S3 GET with alice's token (storage.read:/real): 200, byte-identical"
is "$(s3 HEAD /real/r1.bin "$ALICE")" 200 "S3 HEAD with the token"
code=$(s3 GET /priv/b/secret.bin "$ALICE")
is "$code $(grep -o 'does not allow reading /priv/b/secret.bin' "$BODY")" "403 does not allow reading /priv/b/secret.bin" \
    "S3 GET outside the token's read scope: 403 naming the path"
code=$(s3 PUT /real/new.bin "$ALICE")
is "$code $(grep -o 'may only read (GET or HEAD)' "$BODY")" "403 may only read (GET or HEAD)" "S3 PUT with a bearer token refused"
is "$(sqlite3 "$STATE/catalog.db" "SELECT count(*) FROM objects WHERE key = 'new.bin'")" 0 "... nothing written"
code=$(s3 GET /real/r1.bin "$(mint idp.key RS256 '{"iss": "https://idp.test", "sub": "alice", "aud": "https://stagein.test", "exp": "now-300", "scope": "storage.read:/"}')")
is "$code $(grep -o 'expired' "$BODY" | head -1)" "403 expired" "S3 GET with an expired token"
code=$(s3 GET /real/r1.bin "$(mint rogue.key RS256 "$(claims alice 'storage.read:/')")")
is "$code $(grep -o 'does not verify' "$BODY")" "403 does not verify" "S3 GET with a token of another key"
code=$(s3 GET /real/r1.bin "$(mint idp.key RS256 "$(claims alice 'storage.stage:/')")")
is "$code" 403 "S3 GET with a stage-only token"
code=$(api POST /api/v1/stage '{"datasets": ["bobreal"]}' "$BOB")
BREQ=$(json 'j["requestId"]')
is "$code" 201 "bob stages his private dataset with his token"
until_state "$BREQ" COMPLETED
code=$(s3 GET /real/b.bin "$BOB")
ok "$([ "$code" = 200 ] && cmp -s "$BODY" b.bin; echo $?)" "bob reads it back over S3 with his token"
code=$(s3 GET /real/b.bin "$(mint idp.key RS256 "$(claims alice 'storage.read:/')")")
is "$code $(grep -o 'uid 1000 may not read' "$BODY")" "403 uid 1000 may not read" \
    "alice's token (storage.read:/) cannot read bob's private dataset over S3"

# --- a JWKS issuer (kid) and mapping by wlcg.groups ------------------------------------------
gclaims() {  # gclaims GROUPS-JSON
    printf '{"iss": "https://jwks.test", "sub": "u-%s", "aud": "https://stagein.test", "exp": "now+600", "scope": "storage.stage:/real storage.read:/real", "wlcg.groups": %s}' "$RANDOM" "$1"
}
code=$(api POST /api/v1/stage "$ONE_FILE_R3" "$(mint jwks2.key RS256 "$(gclaims '["/other", "/stagein"]')" j1-2)")
is "$code $(sqlite3 "$STATE/catalog.db" "SELECT uid FROM requests WHERE uuid = '$(json 'j["requestId"]')'")" "201 1000" \
    "a token of the JWKS's second key (kid j1-2) maps by its wlcg.groups (/stagein: uid 1000)"
code=$(api POST /api/v1/stage "$ONE_FILE_R3" "$(mint jwks1.key RS256 "$(gclaims '["/stagein", "/stagein/bob"]')" j1)")
is "$code $(sqlite3 "$STATE/catalog.db" "SELECT uid FROM requests WHERE uuid = '$(json 'j["requestId"]')'")" "201 1001" \
    "the first group line the token's groups name wins (/stagein/bob: uid 1001)"

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
refused "a JWKS kid signed by another of its keys" 401 "does not verify with issuer https://jwks.test's keys of kid j1" "$(mint jwks2.key RS256 "$(gclaims '["/stagein"]')" j1)"
refused "wlcg.groups that no group line names" 403 "nor do its wlcg.groups" "$(mint jwks1.key RS256 "$(gclaims '["/elsewhere"]')" j1)"
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
