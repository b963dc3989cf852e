#!/bin/bash
# Per-connection work of a push (private munged): a MUNGE credential decoded
# once on a keep-alive connection is taken again on that connection alone
# (re-sent on another connection it is a replay: 401); the checksum sent
# after a chunked body (the X-Stagein-Checksum trailer) is verified before
# the 202, a mismatch refused with nothing kept (the key then free for a
# retry); `stagein push` (which hashes while it sends) records each file's
# own sha256 and decodes one credential per connection.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/recall-lib.sh"

for f in a:1000 b:70000 c:300000; do make_file "${f%%:*}" "${f##*:}"; done
mkdir -p "$SRC/ckpt"
for i in 1 2 3 4 5 6; do make_file "ckpt/r$i" $((40000 + i * 1001)); done

use_state A
write_conf 'push: { aggregate_window = 3600.0; };'
"$STAGEIN" catalog init >/dev/null
run_ok "stageind starts" -- start
track_pid "$(daemon_pid)"

# ---- one credential, one connection --------------------------------------------------
code=$(push ds a "$SRC/a")
ID=$(json "$BODY" 'j["pushId"]')
is "$code" 202 "a first file: 202"
C=$(cred)
URL="http://127.0.0.1:$PORT/api/v1/push/$ID"
got=$(curl -s -o /dev/null -o /dev/null -o /dev/null -w '%{http_code}:%{num_connects} ' \
    -H "X-Stagein-Munge: $C" "$URL" "$URL" "$URL")
is "$got" "200:1 200:0 200:0 " "one credential, three requests on one keep-alive connection: 200 each"
code=$(curl -s -o "$BODY" -w '%{http_code}' -H "X-Stagein-Munge: $C" "$URL")
is "$code:$(grep -c 'replayed' "$BODY")" "401:1" "the same credential on a new connection: 401, a replay"
C2=$(cred_nobody)
got=$(curl -s -w '%{http_code} ' -o /dev/null -H "X-Stagein-Munge: $(cred)" "$URL" --next \
    -s -w '%{http_code} ' -o /dev/null -H "X-Stagein-Munge: $C2" "$URL")
is "$got" "200 403 " "another credential on the connection is decoded: its own uid (nobody: 403)"

# ---- the checksum after the body -----------------------------------------------------
# chunked FILE KEY TRAILER: a chunked upload over one connection with the
# trailer given; prints the status code, the body into $BODY
chunked() {
    python3 - "$PORT" "$1" "$2" "$3" "$(cred)" "$BODY" <<'EOF'
import socket, sys
port, path, key, trailer, cred, out = sys.argv[1:]
data = open(path, 'rb').read()
s = socket.create_connection(('127.0.0.1', int(port)))
head = ('POST /api/v1/push?dataset=ds&key=%s HTTP/1.1\r\nHost: x\r\nX-Stagein-Munge: %s\r\n'
        'X-Stagein-Size: %d\r\nTransfer-Encoding: chunked\r\n\r\n' % (key, cred, len(data)))
body = b''.join(b'%x\r\n%s\r\n' % (len(data[i:i + 65536]), data[i:i + 65536])
                for i in range(0, len(data), 65536))
s.sendall(head.encode() + body + b'0\r\n' + (('X-Stagein-Checksum: %s\r\n' % trailer).encode()
                                            if trailer else b'') + b'\r\n')
answer = b''
while b'\r\n\r\n' not in answer or len(answer.split(b'\r\n\r\n', 1)[1]) < int(
        [l.split(b':')[1] for l in answer.split(b'\r\n') if l.lower().startswith(b'content-length')][0]):
    more = s.recv(65536)
    if not more:
        break
    answer += more
open(out, 'wb').write(answer.split(b'\r\n\r\n', 1)[1])
print(answer.split(b' ')[1].decode())
EOF
}
sum() { echo "sha256:$(sha256sum < "$1" | cut -d' ' -f1)"; }
before=$(sql "SELECT count(*) FROM objects")
code=$(chunked "$SRC/b" b "$(sum "$SRC/a")")
is "$code:$(grep -c 'checksum mismatch' "$BODY")" "400:1" "a trailer checksum that does not match: 400 naming it"
code=$(chunked "$SRC/b" b "sha256:XYZ")
is "$code:$(grep -c 'is not sha256' "$BODY")" "400:1" "a trailer that is no checksum: 400 naming it"
is "$(sql "SELECT count(*) FROM objects")" "$before" "... nothing of either kept"
code=$(chunked "$SRC/b" b "$(sum "$SRC/b")")
is "$code:$(json "$BODY" 'j["checksum"]')" "202:$(sum "$SRC/b")" \
    "the same key, the right trailer: 202 with the file's checksum"
is "$(sql "SELECT o.checksum || ' ' || c.verified FROM objects o JOIN cache c ON c.object_id = o.id WHERE o.key = 'ds/b'")" \
    "$(sum "$SRC/b") 1" "the catalog keeps it, its cache copy verified"
code=$(chunked "$SRC/c" c "")
is "$code:$(json "$BODY" 'j["checksum"]')" "202:$(sum "$SRC/c")" "no trailer: stageind's own checksum"

# ---- uploads beginning together: one refused leaves the others recorded ---------------
for k in g1 g2 b g3 c g4 g5 g6; do
    f=$SRC/a; [ "$k" = b ] || [ "$k" = c ] || f=$SRC/ckpt/r1
    BODY=$TEST_DIR/g-$k.body push ds "$k" "$f" > "$TEST_DIR/g-$k.code" &
done
wait
got=""
for k in g1 g2 b g3 c g4 g5 g6; do got+="$(cat "$TEST_DIR/g-$k.code") "; done
is "$got" "202 202 409 202 409 202 202 202 " "eight uploads at once, two of existing keys: those 409, the others 202"
is "$(sql "SELECT count(*) FROM objects WHERE key LIKE 'ds/g%'"):$(sql "SELECT count(*) FROM push_items i JOIN objects o ON o.id = i.object_id WHERE o.key LIKE 'ds/g%' AND i.state = 'RECEIVED'")" \
    "6:6" "... the six recorded and RECEIVED"

# ---- stagein push: one pass over each file, one decode per connection -----------------
export STAGEIN_ENDPOINT="http://127.0.0.1:$PORT"
trace=()
# (LeakSanitizer cannot run under ptrace: 0210 checks this CLI's leaks)
command -v strace >/dev/null && trace=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
                                       strace -f -qq -e trace=connect -o "$TEST_DIR/cli.strace")
"${trace[@]}" "$STAGEIN" push "$SRC/ckpt" --dataset cli --parallel 2 >/dev/null
ok $? "stagein push of six files, two at a time"
bad=""
for i in 1 2 3 4 5 6; do
    [ "$(sql "SELECT checksum FROM objects WHERE key = 'cli/ckpt/r$i'")" = "$(sum "$SRC/ckpt/r$i")" ] || bad+=" r$i"
done
is "$bad" "" "every pushed file's catalog checksum is its own sha256"
if [ ${#trace[@]} -gt 0 ]; then
    is "$(grep -c "$M/sock" "$TEST_DIR/cli.strace")" 2 \
        "the CLI asked munged for one credential per connection (2)"
else
    ok 0 "one credential per connection # SKIP strace is not installed (Debian package strace)"
fi
finish
