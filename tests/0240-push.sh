#!/bin/bash
# Push (stage-out) through a real stageind (private munged): files small and
# of a few MB streamed to POST /api/v1/push, acknowledged (202) once in the
# cache and the catalog, archived with two copies on distinct volumes and
# DURABLE; each volume's archive file extracted with dd + tar gives the same
# bytes; the dataset staged back after its cached copies are gone; bad input
# (a key with '..', a body shorter than its size, over the size limit,
# another user's dataset) answered 4xx with nothing changed.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/recall-lib.sh"
need_tools setpriv tar dd

counts() { sql "SELECT (SELECT count(*) FROM objects) || '/' || (SELECT count(*) FROM pushes) || '/' || (SELECT count(*) FROM push_items) || '/' || (SELECT count(*) FROM datasets) || '/' || (SELECT count(*) FROM cache)"; }

for f in s1:1000 s2:20000 s3:70000 m1:3000000 m2:4500000; do make_file "${f%%:*}" "${f##*:}"; done

use_state A
write_conf 'push: { copies = 2; aggregate_window = 0.5; max_file_size = 6000000; };'
"$STAGEIN" catalog init >/dev/null
for v in P00001 P00002 P00003; do tape create "$v" --capacity 2000000000 >/dev/null; done
run_ok "stageind starts" -- start
track_pid "$(daemon_pid)"

# ---- five files into one push -------------------------------------------------------
code=$(push ckpt s1 "$SRC/s1")
ID=$(json "$BODY" 'j["pushId"]')
is "$code:$(json "$BODY" 'j["state"], j["path"], j["size"]')" \
    "202:('RECEIVED', 'stageout/ckpt/s1', 1000)" "first file: 202 RECEIVED, object stageout/ckpt/s1"
all=202
for k in s2 dir/s3 m1 dir/m2; do
    code=$(push ckpt "$k" "$SRC/$(basename "$k")" "$ID")
    [ "$code" = 202 ] && [ "$(json "$BODY" 'j["pushId"]')" = "$ID" ] || all="$code $(cat "$BODY")"
done
is "$all" 202 "four more files into the same push: 202 each"
before=$(counts)
code=$(push ckpt s2 "$SRC/s2" "$ID")
is "$code:$(grep -c 'stageout/ckpt/s2 exists already' "$BODY")" "409:1" \
    "a small file joining its push under a key pushed already: 409, exists already"
is "$(counts)" "$before" "... and nothing changed"
is "$(sql "SELECT owner_uid || ' ' || mode FROM datasets WHERE name = 'ckpt'")" "0 384" \
    "the dataset was created, owned by the pusher, mode 0600"
is "$(wait_push "$ID")" DURABLE "the push becomes DURABLE"
is "$(json "$BODY" 'j["filesTotal"], j["filesDurable"], [len(f["copies"]) for f in j["files"]]')" \
    "(5, 5, [2, 2, 2, 2, 2])" "status: 5 files durable, 2 copies each"
metrics=$(curl -s "http://127.0.0.1:$PORT/metrics")
# The five files may close one aggregate or more (aggregate_window on a slow
# machine); each aggregate is written once per copy, as the catalog records.
archive_files=$(sql "SELECT count(DISTINCT t.volume_id || ':' || t.file_seq) FROM tape_copies t JOIN objects o ON o.id = t.object_id WHERE o.bucket = 'stageout'")
is "$(awk '$1 == "stagein_push_files{state=\"durable\"}" || $1 == "stagein_push_files{state=\"received\"}" ||
          $1 == "stagein_push_archive_files_written_total" || $1 == "stagein_push_taken_over_total" {
          printf "%s=%s ", $1, $2 }' <<<"$metrics")" \
    "stagein_push_files{state=\"received\"}=0 stagein_push_files{state=\"durable\"}=5 stagein_push_archive_files_written_total=$archive_files stagein_push_taken_over_total=0 " \
    "/metrics: 5 push files durable, none waiting, each archive file the catalog records counted ($archive_files), nothing taken over"
is "$(sql "SELECT count(*) FROM (SELECT t.object_id FROM tape_copies t JOIN objects o ON o.id = t.object_id WHERE o.bucket = 'stageout' GROUP BY t.object_id HAVING count(DISTINCT t.volume_id) = 2)")" \
    5 "catalog: every pushed file has copies on two distinct volumes"
is "$(sql "SELECT count(*) FROM dataset_members m JOIN datasets d ON d.id = m.dataset_id WHERE d.name = 'ckpt'")" \
    5 "catalog: the five files are members of the dataset"
is "$(sql "SELECT pins FROM cache c JOIN objects o ON o.id = c.object_id WHERE o.key = 'ckpt/m1'")" \
    0 "a durable file's cached copy is no longer pinned"

# ---- every copy's archive file, extracted with dd + tar ------------------------------
bad=""
for copy in $(sql "SELECT DISTINCT v.label || ':' || t.file_seq FROM tape_copies t JOIN volumes v ON v.id = t.volume_id JOIN objects o ON o.id = t.object_id WHERE o.bucket = 'stageout'"); do
    label=${copy%%:*} seq=${copy##*:}
    range=$("$STAGEIN" tape dump "$label" --json 2>/dev/null | python3 -c '
import json, sys
rows = [r for r in json.load(sys.stdin) if r["file"] == int(sys.argv[1])]
print(rows[0]["start"], rows[0]["end"])' "$seq")
    out=$TEST_DIR/x-$label-$seq
    mkdir -p "$out"
    set -- $range
    dd if="$STATE/volumes/$label.vol" bs=512 skip=$(($1 / 512)) count=$((($2 - $1) / 512)) 2>/dev/null |
        tar -xf - -C "$out" 2>/dev/null
    for k in s1 s2 dir/s3 m1 dir/m2; do
        [ -e "$out/stageout/ckpt/$k" ] || continue
        cmp -s "$out/stageout/ckpt/$k" "$SRC/$(basename "$k")" || bad+="$label:$k "
    done
    [ "$(find "$out" -type f | wc -l)" -ge 1 ] || bad+="$label:empty "
done
is "$bad" "" "every archive file extracts with dd + tar to the pushed bytes"

# ---- bad input: 4xx and nothing changed ---------------------------------------------
before=$(counts)
code=$(push ckpt 'a/../b' "$SRC/s1")
is "$code:$(grep -c "'..'" "$BODY")" "400:1" "a key with '..': 400 naming it"
code=$(push ckpt 'big' "$SRC/m1" "" "" 2>/dev/null; :)
code=$(curl -s -o "$BODY" -w '%{http_code}' -X POST -H "X-Stagein-Munge: $(cred)" \
    -H 'Content-Length: 7000000' --data-binary "@$SRC/s1" \
    "http://127.0.0.1:$PORT/api/v1/push?dataset=ckpt&key=huge" --max-time 5)
is "$code:$(grep -c max_file_size "$BODY")" "413:1" "over push.max_file_size: 413 naming the limit"
code=$(push ckpt other "$SRC/s1" "" "$(cred_nobody)")
is "$code:$(grep -c 'only its owner' "$BODY")" "403:1" "another user's dataset: 403"
code=$(curl -s -o "$BODY" -w '%{http_code}' -X POST -H "X-Stagein-Munge: $(cred)" \
    -H 'Transfer-Encoding: chunked' -H 'X-Stagein-Size: 50000' --data-binary "@$SRC/s1" \
    "http://127.0.0.1:$PORT/api/v1/push?dataset=ckpt&key=short")
is "$code:$(grep -c 'body ended after 1000 bytes' "$BODY")" "400:1" \
    "a body shorter than its declared size: 400 with both sizes"
reply=$(python3 - "$PORT" "$(cred)" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(("POST /api/v1/push?dataset=ckpt&key=cut HTTP/1.1\r\nHost: x\r\n"
           "X-Stagein-Munge: %s\r\nContent-Length: 100000\r\n\r\n" % sys.argv[2]).encode()
          + b"x" * 5000)
s.shutdown(socket.SHUT_WR)
s.settimeout(5)
data = b""
try:
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
except OSError:
    pass
print(data.split(b"\r\n")[0].decode() or "closed")
PY
)
is "$reply" closed "a body shorter than Content-Length (client gone): no acknowledgement"
# The server removes the vanished client's partial upload when it notices
# the connection is gone, at the latest when the connection times out
# (stageind.timeout, 60 s by default): wait for that (bounded), then compare.
for _ in $(seq 700); do
    [ "$(counts)" = "$before" ] && [ "$(ls "$STATE/cache/tmp" | wc -l)" = 0 ] && break
    sleep 0.1
done
is "$(counts)" "$before" "no refused push changed the catalog or the cache"
is "$(ls "$STATE/cache/tmp" | wc -l)" 0 "no temporary file left in the cache"

# ---- the pushed dataset staged back, after its cached copies are gone ----------------
stop
uncache "o.bucket = 'stageout'"
run_ok "stageind restarts" -- start
track_pid "$(daemon_pid)"
is "$(sql "SELECT count(*) FROM cache c JOIN objects o ON o.id = c.object_id WHERE o.bucket = 'stageout'")" \
    0 "the pushed files are no longer cached"
REQ=$(stage '{"datasets":["ckpt"]}')
is "$(wait_done "$REQ" 60)" COMPLETED "the pushed dataset staged back from tape: COMPLETED"
bad=""
for k in s1 s2 dir/s3 m1 dir/m2; do
    same_as_cached "o.key = 'ckpt/$k'" "$SRC/$(basename "$k")" || bad+="$k "
done
is "$bad" "" "every recalled file is byte-identical to what was pushed"
stop
finish
