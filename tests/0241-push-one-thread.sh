#!/bin/bash
# Uploads waiting on their group commit hold no control-API thread: with
# stageind.threads = 1, an upload whose batch waits for another upload's body
# does not stop that body from being read (both acknowledged); 32 concurrent
# uploads are all acknowledged, RECEIVED and byte-identical in the cache; a
# client that goes away while its answer waits leaves the daemon serving and
# stopping cleanly.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/recall-lib.sh"

for i in $(seq 32); do make_file "f$i" $((20000 + i * 997)); done
make_file held 200000

use_state A
# a batch waits (up to a minute) for every open upload: the held body decides it
STAGEIND_CONF_EXTRA='threads = 1;' write_conf \
    'cache: { commit_delay = 60.0; }; push: { aggregate_window = 60.0; };'
"$STAGEIN" catalog init >/dev/null
tape create P00001 --capacity 2000000000 >/dev/null
run_ok "stageind starts (one control thread)" -- start
track_pid "$(daemon_pid)"

# held_upload KEY: a chunked upload of $SRC/held whose body is sent in two
# halves, the second when fd 7 is closed; its status code in $TEST_DIR/KEY.code
held_upload() {
    mkfifo "$TEST_DIR/$1.fifo"
    curl -s -o "$TEST_DIR/$1.body" -w '%{http_code}' -X POST -T - --max-time 30 \
        -H "X-Stagein-Munge: $(cred)" -H 'X-Stagein-Size: 200000' -H 'Transfer-Encoding: chunked' -H 'Expect:' \
        "http://127.0.0.1:$PORT/api/v1/push?dataset=one&key=$1" \
        < "$TEST_DIR/$1.fifo" > "$TEST_DIR/$1.code" &
    HELD_PID=$!
    exec 7> "$TEST_DIR/$1.fifo"
    head -c 100000 "$SRC/held" >&7
}
finish_held() { tail -c +100001 "$SRC/held" >&7; exec 7>&-; wait "$HELD_PID"; }

# ---- an upload waiting on its batch frees the one thread -------------------------------
held_upload h1
sleep 0.5
code_file=$TEST_DIR/a.code
push one a "$SRC/f1" > "$code_file" 7>&- &
apid=$!
sleep 1 # a's body is in and waits on the batch, which waits on h1
finish_held
wait "$apid"
AID=$(json "$BODY" 'j["pushId"]')
is "$(cat "$TEST_DIR/h1.code"):$(cat "$code_file")" "202:202" \
    "one thread: the held upload's body is read while another waits on the batch; both 202"

# ---- many at once ------------------------------------------------------------------
pids=()
for i in $(seq 2 32); do
    ( BODY=$TEST_DIR/r$i.body; push one "k$i" "$SRC/f$i" > "$TEST_DIR/r$i.code" ) &
    pids+=($!)
done
wait "${pids[@]}"
bad=""
for i in $(seq 2 32); do [ "$(cat "$TEST_DIR/r$i.code")" = 202 ] || bad+="k$i:$(cat "$TEST_DIR/r$i.code") "; done
is "$bad" "" "31 concurrent uploads on one thread: 202 each"
is "$(sql "SELECT count(*) FROM push_items WHERE state = 'RECEIVED' OR state = 'DURABLE'")" 33 \
    "every acknowledged upload is RECEIVED in the catalog"
bad=""
for i in $(seq 2 32); do
    same_as_cached "o.key = 'one/k$i'" "$SRC/f$i" || bad+="k$i "
done
is "$bad" "" "every acknowledged file's cache copy is identical"

# ---- a client gone while its answer waits ------------------------------------------
held_upload h2
sleep 0.5
curl -s -o /dev/null -X POST -H "X-Stagein-Munge: $(cred)" --data-binary "@$SRC/f1" \
    "http://127.0.0.1:$PORT/api/v1/push?dataset=one&key=gone" 7>&- &
gpid=$!
sleep 1
kill "$gpid" 2>/dev/null; wait "$gpid" 2>/dev/null
finish_held
is "$(cat "$TEST_DIR/h2.code")" 202 "a client gone while its answer waits: the others are answered"
is "$(api GET "/api/v1/push/$AID")" 200 "... and stageind still serves"
pid=$(daemon_pid)
stop
is "$(kill -0 "$pid" 2>/dev/null && echo running || echo stopped)" stopped "stageind stops cleanly"
finish
