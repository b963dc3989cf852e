#!/bin/bash
# The stagein client commands against a real stageind and munged: request
# (by dataset, file, manifest), status (table and --json), wait (to
# COMPLETED with a simulated volume, and a timeout on a request that cannot
# complete), cancel, release, queue, drives, push; the daemon's error texts
# (unknown dataset, another user's request and dataset) and a clear
# connection error; the endpoint from --endpoint, $STAGEIN_ENDPOINT,
# client.endpoint and client.endpoints; several endpoints, the first dead:
# the next one serves, one message names every endpoint when all fail.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"

STAGEIND="$top_builddir/daemon/stageind"
need_tools munged mungekey munge python3 setpriv

start_munged   # (mode 755: nobody reaches the daemon's socket, not munged's)

# --- configuration, catalog, datasets, one simulated volume ---------------------
STATE=$TEST_DIR/state
SOCK=$TEST_DIR/ctl.sock
LOG=$TEST_DIR/stageind.log
PORT=$(free_port)
export STAGEIN_CONF=$TEST_DIR/stagein.conf
unset STAGEIN_CATALOG STAGEIN_ENDPOINT SLURM_JOB_ID
cat > "$STAGEIN_CONF" <<CONF
state_dir = "$STATE";
stageind: {
    munge_socket = "$M/sock";
    pin_lifetime = 3600;
};
CONF
mkdir -p "$STATE"
chmod 755 "$STATE"
cd "$TEST_DIR" || exit 1
# pub and priv name objects on volumes the simulated library does not have:
# their requests stay queued. real lies on a volume written here.
cat > positions.csv <<CSV
bucket,key,size,volume,position,copy,checksum
data,pub/a.bin,1000,L00001,0,1,
data,pub/b.bin,2000,L00001,1000,1,
data,priv/c.bin,3000,L00002,0,1,
CSV
printf 'data/pub/a.bin\ndata/pub/b.bin\n' > pub.manifest
printf 'data/priv/c.bin\n' > priv.manifest
head -c 300000 /dev/urandom > r1.bin
head -c 200000 /dev/urandom > r2.bin
printf 'real/r1.bin\nreal/r2.bin\n' > real.manifest
run_ok "catalog imported" -- "$STAGEIN" catalog import positions.csv
run_ok "public dataset" -- "$STAGEIN" catalog define pub pub.manifest --owner root:root --mode 0644
run_ok "private dataset" -- "$STAGEIN" catalog define priv priv.manifest --owner root:root --mode 0600
run_ok "simulated volume" -- "$STAGEIN" tape create L00010
run_ok "files written to it" -- "$STAGEIN" tape write L00010 --bucket real r1.bin r2.bin
run_ok "dataset of those files" -- "$STAGEIN" catalog define real real.manifest --owner root:root --mode 0644

run_ok "stageind starts" -- "$STAGEIND" -d "$STATE" -p "$PORT" -S "$SOCK" -l "$LOG"
track_pid "$(cat "$STATE/stageind.pid")"

TCP=http://127.0.0.1:$PORT
si() { "$STAGEIN" "$@" --endpoint "$TCP"; }           # over TCP with MUNGE
si_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$STAGEIN" "$@" --endpoint "unix:$SOCK"; }
json() {  # json TEXT EXPR: python expression on the parsed text 'j'
    python3 -c 'import json, sys; j = json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$1" "$2" 2>/dev/null
}

# --- request -----------------------------------------------------------------------
out=$(si request pub --job 4242 --priority 3 2>&1)
REQ=$(sed -n 's/^request \([0-9a-f-]*\): 2 files, 3.0 kB$/\1/p' <<<"$out")
ok "$([ -n "$REQ" ]; echo $?)" "request by dataset: '$out'"
out=$(si request --file data/pub/a.bin --json)
is "$(json "$out" 'j["files"], j["bytes"], len(j["requestId"])')" "(1, 1000, 36)" \
    "request by file, --json is the daemon's answer"
BYFILE=$(json "$out" 'j["requestId"]')
out=$(si request --manifest pub.manifest --deadline +2h --pin-lifetime 30m --json)
MAN=$(json "$out" 'j["requestId"]')
is "$(json "$out" 'j["files"]')" 2 "request by manifest"
out=$(si status "$MAN" --json)
now=$(date +%s)
is "$(json "$out" 'j["pinLifetime"], abs(j["deadline"] - '"$now"' - 7200) < 60')" "(1800, True)" \
    "--pin-lifetime and --deadline reach the daemon"
run_fails_with "a request naming nothing" "nothing to stage" -- si request --job 1
run_fails_with "a bad deadline is refused before sending" "deadline 'someday'" -- \
    si request pub --deadline someday
run_fails_with "priority out of range" "priority 5000 is out of range" -- si request pub --priority 5000

# --- status --------------------------------------------------------------------------
out=$(si status "$REQ")
ok "$(grep -q "^state     SUBMITTED$" <<<"$out" && grep -q "^job       4242$" <<<"$out" &&
      grep -q "^priority  3$" <<<"$out" && grep -qE "^/data/pub/b.bin +SUBMITTED +2.0 kB +0 B" <<<"$out"; echo $?)" \
    "status ID: the request and a table of its files"
out=$(si status "$REQ" --json)
is "$(json "$out" '[ (f["path"], f["state"]) for f in j["files"] ]')" \
    "[('/data/pub/a.bin', 'SUBMITTED'), ('/data/pub/b.bin', 'SUBMITTED')]" "status --json: the daemon's per-file states"
out=$(si status --json)
is "$(json "$out" 'sorted(r["request"] for r in j["queue"]) == sorted(["'"$REQ"'", "'"$BYFILE"'", "'"$MAN"'"])')" \
    True "status without an ID: my active requests"
out=$(si_nobody status --json)
is "$(json "$out" 'len(j["queue"])')" 0 "another user sees none of them"
out=$(si status)
ok "$(grep -q "$REQ" <<<"$out" && head -1 <<<"$out" | grep -q "^position  request"; echo $?)" "status table"

# --- the daemon's errors, as it phrased them -------------------------------------------
run_fails_with "unknown dataset" "^stagein: unknown dataset 'nope'$" -- si request nope
run_fails_with "another user's request" \
    "^stagein: request $REQ belongs to uid 0, not to uid 65534$" -- si_nobody status "$REQ"
run_fails_with "cancelling another user's request" "belongs to uid 0" -- si_nobody cancel "$REQ"
run_fails_with "another user's private dataset" \
    "^stagein: dataset 'priv' \\(owner uid 0, gid 0, mode 0600\\) is not readable by other users" -- \
    si_nobody request priv
run_fails_with "unknown request" "^stagein: no request" -- si status 00000000-0000-4000-8000-000000000000
run_fails_with "a request id is checked before it goes into a URL" "bad id '../metrics'" -- \
    si status ../metrics

# --- wait ------------------------------------------------------------------------------
start=$(date +%s)
out=$(si wait "$REQ" --timeout 2 2>&1)
rc=$?
is "$rc" 3 "wait on a request that cannot complete: exit 3 at the timeout"
ok "$(grep -q "^stagein: timed out after 2.0s waiting for request $REQ (SUBMITTED, 0 of 2 files completed)$" <<<"$out" &&
      grep -q "^request $REQ: SUBMITTED #1 in queue, 0/2 files, 0 B of 3.0 kB$" <<<"$out"; echo $?)" \
    "timeout message, after a plain progress line"
ok "$([ $(( $(date +%s) - start )) -le 5 ]; echo $?)" "the timeout is kept"
out=$(si request real --wait --timeout 120 2>&1)
rc=$?
is "$rc" 0 "request --wait: exit 0 once COMPLETED"
ok "$(grep -qE "^request [0-9a-f-]+: COMPLETED, 2/2 files, 500.0 kB of 500.0 kB" <<<"$out"; echo $?)" \
    "the last plain line says COMPLETED"
[ "$rc" = 0 ] || diag "$out"
REAL=$(sed -n 's/^request \([0-9a-f-]*\): 2 files.*/\1/p' <<<"$out")
out=$(si wait "$REAL" --json --timeout 30)
is "$(json "$out" 'j["state"], j["filesCompleted"], j["bytesDone"]')" "('COMPLETED', 2, 500000)" \
    "wait --json on a finished request: the daemon's final status"
if command -v script >/dev/null 2>&1; then
    out=$(STAGEIN_ENDPOINT="$TCP" script -qec "$STAGEIN wait $REAL --timeout 30" /dev/null | tr -d '\r')
    ok "$(grep -qF "[==" <<<"$out" && grep -qF "] 100%  2/2 files  500.0 kB/500.0 kB" <<<"$out"; echo $?)" \
        "on a terminal: a progress bar"
else
    ok 0 "# SKIP script(1) is not installed: no terminal"
fi

# --- cancel, release, queue ---------------------------------------------------------------
out=$(si queue --json)
is "$(json "$out" '[r["request"] for r in j["queue"]][0] == "'"$REQ"'"')" True \
    "queue --json: the priority 3 request first"
out=$(si queue)
ok "$(head -1 <<<"$out" | grep -qE "^position +request +uid +job +priority +state"; echo $?)" "queue table"
out=$(si cancel "$BYFILE")
is "$out" "request $BYFILE: CANCELLED" "cancel"
run_fails_with "cancelling twice: the daemon's 409 text" "^stagein: request $BYFILE is already CANCELLED: cancelled by uid 0$" -- \
    si cancel "$BYFILE"
out=$(si release "$REAL" --json)
is "$(json "$out" 'j["state"]')" RELEASED "release --json"
run_fails_with "wait on a released request fails with its state" \
    "request $BYFILE was CANCELLED: 0 of 1 files completed" -- si wait "$BYFILE" --timeout 30

# --- drives ---------------------------------------------------------------------------
out=$(si drives --json)
is "$(json "$out" 'len(j) > 0 and all("drive" in d and "state" in d for d in j)')" True \
    "drives --json: one object per drive with its state (from /metrics)"
out=$(si drives)
ok "$(head -1 <<<"$out" | grep -q "^drive  state"; echo $?)" "drives table"

# --- endpoints -------------------------------------------------------------------------
out=$(STAGEIN_ENDPOINT="unix:$SOCK" "$STAGEIN" status "$REQ" --json)
is "$(json "$out" 'j["id"]')" "$REQ" "\$STAGEIN_ENDPOINT (Unix socket)"
cp "$STAGEIN_CONF" conf2
printf 'client: { endpoint = "%s"; timeout = 10; };\n' "$TCP" >> conf2
out=$(STAGEIN_CONF=conf2 "$STAGEIN" status "$REQ" --json)
is "$(json "$out" 'j["id"]')" "$REQ" "client.endpoint"
run_fails_with "nothing listens there: a clear connection error" \
    "^stagein: cannot connect to stageind at http://127.0.0.1:1 \\(from --endpoint\\): Connection refused; is stageind running\\?$" -- \
    "$STAGEIN" status --endpoint http://127.0.0.1:1
run_fails_with "no socket: a clear connection error" \
    "cannot connect to stageind at unix:$TEST_DIR/none.sock \\(from \\\$STAGEIN_ENDPOINT\\): No such file or directory" -- \
    env STAGEIN_ENDPOINT="unix:$TEST_DIR/none.sock" "$STAGEIN" queue
run_fails_with "a bad endpoint" "^stagein: --endpoint: bad endpoint 'localhost:1': expected http://HOST:PORT or unix:PATH$" -- \
    "$STAGEIN" queue --endpoint localhost:1

# several endpoints: a missing socket and a dead port before the real stageind
DEAD=http://127.0.0.1:$(free_port)
LIST="unix:$TEST_DIR/none.sock,$DEAD,$TCP"
out=$("$STAGEIN" request pub --job 4243 --json --endpoint "$LIST" 2>&1)
FAILOVER=$(json "$out" 'j["requestId"]')
out=$("$STAGEIN" status "$FAILOVER" --json --endpoint "$LIST")
is "$(json "$out" 'j["job"], j["filesTotal"]')" "('4243', 2)" \
    "--endpoint a,b,c: the request reaches the third, live, endpoint, once"
out=$("$STAGEIN" status --all --json --endpoint "$TCP")
is "$(json "$out" 'sum(1 for r in j["requests"] if r.get("job") == "4243")')" 1 "and stageind holds it once"
cp "$STAGEIN_CONF" conf3
printf 'client: { endpoints = [ "%s", "unix:%s" ]; connect_timeout = 2; };\n' "$DEAD" "$SOCK" >> conf3
run_ok "client.endpoints: the dead one, then the Unix socket" -- \
    env STAGEIN_CONF=conf3 "$STAGEIN" release "$FAILOVER"
out=$(STAGEIN_CONF=conf3 "$STAGEIN" status "$FAILOVER" --json)
is "$(json "$out" 'j["state"]')" RELEASED "released through client.endpoints"
cp "$STAGEIN_CONF" conf4
printf 'client: {\n endpoint = "%s";\n endpoints = [ "%s", "%s" ]; };\n' "$TCP" "$DEAD" "$TCP" >> conf4
run_fails_with "client.endpoint and client.endpoints disagreeing: refused, naming both" \
    "conf4:[0-9]+: setting 'client.endpoints' = \"$DEAD,$TCP\" disagrees with client.endpoint = \"$TCP\": set only one" -- \
    env STAGEIN_CONF=conf4 "$STAGEIN" queue
run_fails_with "every endpoint dead: one message naming each and why" \
    "^stagein: cannot connect to stageind at any of the 2 endpoints from \\\$STAGEIN_ENDPOINT: unix:$TEST_DIR/none.sock: No such file or directory; $DEAD: Connection refused; is stageind running on one of them\? \(check \\\$STAGEIN_ENDPOINT\)$" -- \
    env STAGEIN_ENDPOINT="unix:$TEST_DIR/none.sock,$DEAD" "$STAGEIN" queue
run_fails_with "a bad entry in a list names its place" \
    "^stagein: --endpoint: endpoint 2 of 2: bad endpoint 'stage02'" -- \
    "$STAGEIN" queue --endpoint "$TCP,stage02"

# --- push ---------------------------------------------------------------------------------
mkdir -p out/step1
printf 'checkpoint 1\n' > out/step1/rank0.pt
printf 'checkpoint 2\n' > out/step1/rank1.pt
code=$(python3 - "$SOCK" <<'PY'
import http.client, socket, sys
class C(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX); self.sock.connect(sys.argv[1])
c = C("localhost"); c.request("POST", "/api/v1/push", b""); print(c.getresponse().status)
PY
)
if [ "$code" = 404 ]; then
    run_fails_with "push before stageind serves it: the daemon's 404 as is" \
        "^stagein: out/step1/rank0.pt: no such endpoint: POST /api/v1/push$" -- si push out --dataset ckpt1
else
    out=$(si push out --dataset ckpt1 --json)
    is "$(json "$out" '[ (a["path"], a["state"]) for a in j ]')" \
        "[('stageout/ckpt1/out/step1/rank0.pt', 'RECEIVED'), ('stageout/ckpt1/out/step1/rank1.pt', 'RECEIVED')]" \
        "push of a directory: every file received, keyed by its path"
    is "$(json "$out" 'len(set(a["pushId"] for a in j))')" 1 "one push for all files"
    run_fails_with "pushing an existing key: the daemon's 409 as is" "out/step1/rank0.pt: .*" -- \
        si push out --dataset ckpt1
    for i in $(seq 2 9); do printf 'checkpoint %s\n' "$i" > "out/step1/rank$i.pt"; done
    rc=0; err=$(si push out --dataset ckpt1 --parallel 3 --json 2>&1 >"$TEST_DIR/par.json") || rc=$?
    is "$rc:$(grep -c ': .*exists already' <<<"$err"):$(grep -c '2 of 10 files were not pushed' <<<"$err")" \
        "1:2:1" "--parallel 3: the two existing keys named, the exit status says so"
    is "$(json "$(cat "$TEST_DIR/par.json")" 'sorted(a["path"].rsplit("/", 1)[1] for a in j)')" \
        "$(python3 -c 'print(sorted("rank%d.pt" % i for i in range(2, 10)))')" \
        "... every other file received, one push"
    si push out/step1/rank0.pt out/step1/rank1.pt --dataset ckpt1 >/dev/null # keys rank0.pt, rank1.pt
    rc=0; err=$(si push out/step1/rank0.pt out/step1/rank1.pt --dataset ckpt1 2>&1) || rc=$?
    is "$rc:$(tail -n 1 <<<"$err" | grep -c '^stagein: no file was pushed (2 refused; the first: .*rank0.pt: .*exists already')" \
        "1:1" "every file refused: the last line counts them and names the first cause"
    rc=0; err=$(si push out/step1/rank0.pt --dataset ckpt1 2>&1) || rc=$?
    is "$rc:$(wc -l <<<"$err"):$(grep -c 'rank0.pt: .*exists already' <<<"$err")" "1:1:1" \
        "one file refused: its own error is the only line"
    run_fails_with "--parallel 0 is refused" "--parallel '0' is not a number of files from 1 to 64" -- \
        si push out --dataset ckpt1 --parallel 0
fi
run_fails_with "push of a missing file" "^stagein: nothere: No such file or directory$" -- \
    si push nothere --dataset ckpt1

kill -TERM "$(cat "$STATE/stageind.pid")" 2>/dev/null
kill "$(cat "$M/pid")" 2>/dev/null
finish
