#!/bin/bash
# The `hsm` archive backend in a real stageind, over a directory standing in
# for an HSM file system: a stage command that logs its batches (each batch
# one volume's files in position order, of at most batch_size paths), one
# path it fails (only that item fails, with the command's message), one it
# hangs on (killed at stage_timeout, the item fails saying so), a symlink
# out of the archive root refused; every staged file byte-identical in the
# cache. Push writes into the archive root (DURABLE only then, on the HSM
# pseudo-volume), the archive command sees the paths, and the pushed file
# comes back through read-through mode after its cached copy is gone.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/recall-lib.sh"

ARCH=$TEST_DIR/archive
SRC=$ARCH/data          # the archive's bucket "data": cache_mismatches compares with it
STAGE_LOG=$TEST_DIR/stage.log
mkdir -p "$ARCH"
for f in d1:150000 d2:20000 d3:700000 d4:1000 d5:33333 d6:250000 bad1:1000 hang1:2000 e1:90000; do
    make_file "${f%%:*}" "${f##*:}"
done
printf 'secret' > "$TEST_DIR/secret"
ln -s "$TEST_DIR/secret" "$SRC/esc"

cat > "$TEST_DIR/stage.sh" <<EOF
#!/bin/sh
# logs the batch (basenames, in the order given), fails bad*, hangs on hang*
for p in "\$@"; do printf '%s ' "\$(basename "\$p")"; done >> "$STAGE_LOG"
echo >> "$STAGE_LOG"
for p in "\$@"; do
    case \$p in *hang*) sleep 60 ;; *bad*) echo "stage: cannot stage \$p: media error" >&2; exit 4 ;; esac
done
EOF
chmod 755 "$TEST_DIR/stage.sh"

use_state A
hsm_conf() {  # hsm_conf EXTRA_HSM_KEYS
    write_conf "archive: { backend = \"hsm\"; hsm: { root = \"$ARCH\"; batch_size = 3;
    concurrency = 1; $1 }; };
push: { copies = 1; aggregate_window = 0.3; };"
}
hsm_conf "stage_command = \"$TEST_DIR/stage.sh\"; stage_timeout = 2;
    archive_command = \"printf 'archived %s\\\\n' >> $TEST_DIR/archive.log\";"
"$STAGEIN" catalog init >/dev/null
# positions known on T00001 and T00002 (as imported from the HSM's tape
# catalogue); d6 only on the backend's pseudo-volume HSM (position unknown)
sum() { echo "sha256:$(sha256sum < "$SRC/$1" | cut -d' ' -f1)"; }
size() { stat -c %s "$SRC/$1"; }
{
    echo "bucket,key,size,volume,position,copy,checksum"
    for r in d1:T00001:200 d3:T00001:100 d5:T00001:300 d2:T00002:60 d4:T00002:50 d6:HSM:0 \
        bad1:T00003:10 e1:T00003:20 hang1:T00004:10; do
        IFS=: read -r k v p <<<"$r"
        echo "data,$k,$(size "$k"),$v,$p,1,$(sum "$k")"
    done
    echo "data,esc,6,T00005,0,1,"
} > "$TEST_DIR/positions.csv"
run_ok "positions imported" -- "$STAGEIN" catalog import "$TEST_DIR/positions.csv"
define good d1 d2 d3 d4 d5 d6
define mixed bad1 e1 hang1
run_ok "stageind starts with the hsm backend" -- start
track_pid "$(daemon_pid)"
ok "$(grep -q 'hsm backend over' "$LOG"; echo $?)" "the log names the backend"

# ---- batches in position order ------------------------------------------------------
REQ=$(stage '{"datasets":["good"]}')
is "$(wait_done "$REQ" 60)" COMPLETED "dataset good: COMPLETED"
is "$(cache_mismatches d1 d2 d3 d4 d5 d6)" "" "every cache file byte-identical, checksum verified"
is "$(sort "$STAGE_LOG")" "$(printf 'd3 d1 d5 \nd4 d2 \nd6 ')" \
    "three batches: T00001 in position order, T00002 in position order, the unknown one alone"
diag "stage batches: $(tr '\n' '|' < "$STAGE_LOG")"

# ---- a failing path, a hanging one ----------------------------------------------------
: > "$STAGE_LOG"
REQ=$(stage '{"datasets":["mixed"]}')
is "$(wait_done "$REQ" 60)" FAILED "dataset mixed: FAILED (not every item could be staged)"
item() { sql "SELECT i.state || ' ' || coalesce(i.error, '') FROM request_items i JOIN requests r ON r.id = i.request_id JOIN objects o ON o.id = i.object_id WHERE r.uuid = '$REQ' AND o.key = '$1'"; }
ok "$(item bad1 | grep -q '^FAILED .*exited with status 4: stage: cannot stage .*bad1: media error'; echo $?)" \
    "bad1 FAILED with the command's message"
diag "bad1: $(item bad1)"
is "$(item e1)" "COMPLETED " "e1, in the same failed batch, staged on its own: COMPLETED"
ok "$(item hang1 | grep -q '^FAILED .*timed out after 2 s'; echo $?)" "hang1 FAILED: timed out after 2 s"
is "$(cache_mismatches e1)" "" "e1 byte-identical in the cache"
is "$(sql "SELECT count(*) FROM cache c JOIN objects o ON o.id = c.object_id WHERE o.key IN ('bad1', 'hang1')")" \
    0 "nothing of the failed items in the cache"
ok "$(grep -qx 'bad1 e1 ' "$STAGE_LOG" && grep -qx 'bad1 ' "$STAGE_LOG" && grep -qx 'e1 ' "$STAGE_LOG"; echo $?)" \
    "the failed batch was retried path by path"

# ---- a symlink out of the archive root -----------------------------------------------
REQ=$(stage '{"files":["data/esc"]}')
is "$(wait_done "$REQ" 30)" FAILED "a file that is a symlink out of the root: FAILED"
ok "$(item esc | grep -q 'leads out of the archive root'; echo $?)" "saying so: $(item esc)"

# ---- push into the archive root ---------------------------------------------------------
head -c 3000000 /dev/urandom > "$TEST_DIR/ckpt1"
code=$(curl -s -o "$BODY" -w '%{http_code}' -X POST -H "X-Stagein-Munge: $(cred)" \
    -H "X-Stagein-Checksum: sha256:$(sha256sum < "$TEST_DIR/ckpt1" | cut -d' ' -f1)" \
    --data-binary "@$TEST_DIR/ckpt1" "http://127.0.0.1:$PORT/api/v1/push?dataset=ckpt&key=run1/out.bin")
is "$code" 202 "push accepted (202)"
ID=$(json "$BODY" 'j["pushId"]')
state=""
for _ in $(seq 300); do
    [ "$(api GET "/api/v1/push/$ID")" = 200 ] && state=$(json "$BODY" 'j["state"]')
    [ "$state" = DURABLE ] || [ "$state" = FAILED ] && break
    sleep 0.1
done
is "$state" DURABLE "the push is DURABLE"
ok "$(cmp -s "$ARCH/stageout/ckpt/run1/out.bin" "$TEST_DIR/ckpt1"; echo $?)" \
    "the file is in the archive root, byte-identical"
is "$(cat "$TEST_DIR/archive.log")" "archived $ARCH/stageout/ckpt/run1/out.bin" \
    "the archive command ran on its path"
is "$(sql "SELECT v.label || ' ' || t.position FROM tape_copies t JOIN volumes v ON v.id = t.volume_id JOIN objects o ON o.id = t.object_id WHERE o.key = 'ckpt/run1/out.bin'")" \
    "HSM 0" "catalog: one copy on the HSM pseudo-volume"
ls "$ARCH/stageout/ckpt/run1" | grep -q stagein-tmp
ok "$([ $? -ne 0 ]; echo $?)" "no temp file left beside it"
stop

# ---- read-through: the pushed file back after its cached copy is gone --------------------
uncache "o.bucket = 'stageout'"
hsm_conf ""
run_ok "stageind restarts in read-through mode (no stage command)" -- start
track_pid "$(daemon_pid)"
REQ=$(stage '{"files":["stageout/ckpt/run1/out.bin"]}')
is "$(wait_done "$REQ" 30)" COMPLETED "the pushed file staged again from the archive root"
ok "$(same_as_cached "o.key = 'ckpt/run1/out.bin'" "$TEST_DIR/ckpt1"; echo $?)" "byte-identical"
stop
finish
