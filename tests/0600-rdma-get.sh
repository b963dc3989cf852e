#!/bin/bash
# The RDMA data path end to end (doc/rdma.md): a stageind with the simulated
# library, objects staged into its cache, and `stagein get --transport rdma`
# (libstagein: a signed GET carrying x-amz-rdma-token, the bytes written
# into its memory with RMA) over shm and over tcp;ofi_rxm on lo. Every
# object compared byte for byte with its source (stagein get also checks
# it against its ETag); range GETs of 64 KiB that start and end anywhere;
# a whole dataset; the 501 answers (cuObject, malformed, another provider,
# a presigned request) with the body still served over HTTP; a client
# asking for another provider, and a server without RDMA, read over HTTP
# and say why; --gpu without a GPU fails naming the reason.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
. "$top_srcdir/tests/rdma-lib.sh"
s3_need_clients boto3

S3_FIXTURE="one:1 page:4097 mid:3145735 big:20971537 dir/x:70000 empty:0"
KEYS="one page mid big dir/x"
s3_setup A "$(rdma_conf shm "")"
# an object on tape only, in no dataset: never staged here
head -c 5000 /dev/urandom > "$SRC/cold"
tape create C00001 --capacity 4000000000 >/dev/null
(cd "$SRC" && "$STAGEIN" tape write C00001 --bucket data cold >/dev/null)
s3_start_ok "stageind starts with the RDMA data path on shm"
ok "$(s3_make_hot $KEYS empty; echo $?)" "the objects are staged into the cache"
rdma_client_env
ok "$(grep -q 'RDMA data path on (provider shm)' "$LOG"; echo $?)" "stageind logs the provider"
is "$(s3raw request HEAD /data/big --show-header x-amz-rdma-provider 2>&1 >/dev/null)" \
    "x-amz-rdma-provider: shm" "HEAD names the server's provider"

# body_bytes LABEL SIZE [ENV...]: the bytes a GET gets in the HTTP body. On
# shm without CMA, stageind declines RDMA for transfers of at most 4096
# bytes (libfabric 1.17 passes those inline and has lost them): a small
# object, or with STAGEIN_CHUNK_SIZE the small last range of a larger one.
body_bytes() {
    local label=$1 size=$2 chunk=0 a tail; shift 2
    for a in "$@"; do case $a in STAGEIN_CHUNK_SIZE=*) chunk=${a#*=} ;; esac; done
    case $label in shm*) ;; *) echo 0; return ;; esac
    if [ "$size" -le 4096 ]; then echo "$size"; return; fi
    tail=0
    [ "$chunk" -gt 0 ] && [ "$size" -gt "$chunk" ] && tail=$((size % chunk))
    if [ "$tail" -gt 0 ] && [ "$tail" -le 4096 ]; then echo "$tail"; else echo 0; fi
}

# get_all LABEL [ENV...]: every key by RDMA (but what body_bytes says goes in
# the body, with the reason), identical
get_all() {
    local label=$1 key out want bad="" size http last; shift
    for key in $KEYS; do
        out=$(env "$@" "$STAGEIN" get "data/$key" --transport rdma --dest "$TEST_DIR/$label" 2>&1)
        if shm_client_crashed "$out"; then
            echo CRASH
            return
        fi
        size=$(stat -c %s "$SRC/$key")
        http=$(body_bytes "$label" "$size" "$@")
        want="$TEST_DIR/$label/data/$key $size sha256:$(sha256sum < "$SRC/$key" | cut -d' ' -f1) rdma=$((size - http)) http=$http"
        last=$(tail -n 1 <<<"$out")
        if [ "$http" -gt 0 ] && ! grep -q "go in the body" <<<"$out"; then
            bad+="$key(no-reason) "
            diag "$key: $out"
        elif [ "$http" -eq 0 ] && [ "$out" != "$last" ]; then
            bad+="$key(notice) "
            diag "$key: $out"
        fi
        if [ "$last" != "$want" ] || ! same_bytes "$TEST_DIR/$label/data/$key" "$SRC/$key"; then
            bad+="$key "
            diag "$key: $out"
        fi
    done
    echo "$bad"
}
# is_got_all GOT DESCRIPTION: get_all's answer checked, or skipped after a
# client crash inside libfabric's shm
is_got_all() {
    if [ "$1" = CRASH ]; then skip_one "$2: $SHM_CRASH"; else is "$1" "" "$2"; fi
}
shm_gets=$(get_all shm)
is_got_all "$shm_gets" "shm: 1 B, 4097 B, 3 MiB + 7, 20 MiB + 17: every byte by RDMA, identical"
# concurrent transfers through shm's bounce buffers: libfabric 1.17 loses
# operations or crashes the client (doc/rdma.md), as t_rdma and 0610 skip;
# tcp runs this case below
skip_one "shm: the same as range GETs of 64 KiB, 4 at a time: concurrent transfers through\
 shm's bounce buffers (SAR) lose operations in libfabric 1.17 (doc/rdma.md); tcp runs it"
log_mark=$(wc -l < "$LOG")
out=$("$STAGEIN" get pub --transport rdma --dest "$TEST_DIR/ds" --endpoint "unix:$SOCK" 2>&1)
printf "%s\n" "$out" >&2   # in the log: which object came over HTTP, and why
ds_crashed=no
shm_client_crashed "$out" && ds_crashed=yes
differ=""
for key in $KEYS; do same_bytes "$TEST_DIR/ds/data/$key" "$SRC/$key" || differ+="$key "; done
if [ $ds_crashed = yes ]; then
    skip_one "shm: the dataset 'pub' into a directory: $SHM_CRASH"
else
    is "$differ" "" "shm: the dataset 'pub' into a directory, identical"
fi
transports="$(grep -c ' http=0$' <<<"$out")/$(grep -c ' rdma=0 http=1$' <<<"$out")"
# a transfer shm lost (libfabric 1.17's SAR, doc/rdma.md; seen in CI after a
# client crash above left the server replacing its endpoint) is answered over
# HTTP and logged by stageind: a skip naming the server's reason, not a pass
shm_lost=$(tail -n +"$((log_mark + 1))" "$LOG" | grep -m1 'over RDMA: .*(answered over HTTP)')
if [ $ds_crashed = yes ]; then
    skip_one "... its six objects by RDMA: $SHM_CRASH"
elif [ "$transports" != 5/1 ] && [ -n "$shm_lost" ]; then
    skip_one "... its six objects by RDMA: shm failed a transfer, answered over HTTP\
 (libfabric 1.17's shm, doc/rdma.md): ${shm_lost#*warning: }"
else
    is "$transports" 5/1 "... its six objects (one empty) by RDMA, but the one-byte object in the body"
fi
out=$("$STAGEIN" get data/big --transport http --dest "$TEST_DIR/http" 2>&1)
is "$out" "$TEST_DIR/http/data/big 20971537 sha256:$(sha256sum < "$SRC/big" | cut -d' ' -f1)" \
    "--transport http: over HTTP (no rdma= on the line)"
ok "$(same_bytes "$TEST_DIR/http/data/big" "$SRC/big"; echo $?)" "... identical"
sent=$(metric stagein_rdma_sent_bytes_total)
# the objects went by RDMA twice (get_all, the dataset), once when get_all's
# client crashed inside libfabric (skipped above)
passes=2
[ "$shm_gets" = CRASH ] && passes=$((passes - 1))
[ $ds_crashed = yes ] && passes=$((passes - 1))
ok "$([ "${sent:-0}" -ge $((passes * (4097 + 3145735 + 20971537 + 70000))) ]; echo $?)" \
    "metrics: stagein_rdma_sent_bytes_total counts them ($sent, $passes passes)"
# a crashed client's transfer is the server's until it times out
# (rdma.timeout_seconds, 30 s; twice that for a stuck endpoint)
held_wait=0
if [ "$shm_gets" = CRASH ] || [ $ds_crashed = yes ]; then held_wait=70; fi
held=""
for _ in $(seq 0 "$held_wait"); do
    held="$(metric stagein_rdma_transfers)/$(metric stagein_rdma_buffers_free)"
    [ "$held" = "0/$(metric stagein_rdma_buffers)" ] && break
    sleep 1
done
is "$held" "0/$(metric stagein_rdma_buffers)" \
    "metrics: no transfer running, every pool buffer free (a crashed client's released)"

# ---- declined (501): the body comes over HTTP ---------------------------------------
# declined TOKEN [s3raw options]: "STATUS REPLY REASON-WORD..." and the body in $TEST_DIR/body501
declined() {
    local token=$1; shift
    s3raw request GET /data/mid -H "x-amz-rdma-token: $token" --out "$TEST_DIR/body501" \
        --show-header x-amz-rdma-reply --show-header x-amz-rdma-reason "$@" 2>"$TEST_DIR/hdr501" |
        tr '\n' ' '
    tr '\n' '|' < "$TEST_DIR/hdr501"
}
out=$(declined "00007f7c2a000000:0000000000100000:0000000012345678:00abcdef")
ok "$(grep -q '^200 - x-amz-rdma-reply: 501|x-amz-rdma-reason: .*cuObject' <<<"$out"; echo $?)" \
    "a cuObject token: 200 with x-amz-rdma-reply 501 naming cuObject"
ok "$(same_bytes "$TEST_DIR/body501" "$SRC/mid"; echo $?)" "... and the object in the body"
out=$(declined "si1 prov=shm addr=0a0b key=1")
ok "$(grep -q '^200 - x-amz-rdma-reply: 501|x-amz-rdma-reason: rdma token' <<<"$out"; echo $?)" \
    "a truncated token: 501, the body served"
ok "$(same_bytes "$TEST_DIR/body501" "$SRC/mid"; echo $?)" "... identical"
out=$(declined "si1 prov=tcp;ofi_rxm addr=0a0b key=1 raddr=0 len=3145735 flags=w")
ok "$(grep -q "x-amz-rdma-reply: 501|x-amz-rdma-reason: .*provider 'tcp;ofi_rxm'" <<<"$out"; echo $?)" \
    "a token for another provider: 501 naming both"
out=$(declined "si1 prov=shm addr=0a0b key=1 raddr=0 len=100 flags=w")
ok "$(grep -q "x-amz-rdma-reply: 501|x-amz-rdma-reason: .*grants" <<<"$out"; echo $?)" \
    "a token granting fewer bytes than the GET moves: 501"
out=$(declined "si1 prov=shm addr=0a0b key=1 raddr=0 len=3145735 flags=w" --sign presign)
ok "$(grep -q "x-amz-rdma-reply: 501|x-amz-rdma-reason: RDMA needs a request signed" <<<"$out"; echo $?)" \
    "a presigned request with a token: 501 (only a signed header may name where to write)"
ok "$(same_bytes "$TEST_DIR/body501" "$SRC/mid"; echo $?)" "... the body served"
out=$(s3raw request GET /data/mid --out "$TEST_DIR/body501" --show-header x-amz-rdma-reply 2>&1 >/dev/null)
is "$out" "x-amz-rdma-reply: " "a GET without a token has no x-amz-rdma-reply"

# a client that asks for another provider than the server's
out=$(STAGEIN_RDMA_PROVIDER="tcp;ofi_rxm" STAGEIN_RDMA_DOMAIN=lo "$STAGEIN" get data/mid \
    --transport rdma --dest "$TEST_DIR/other" 2>&1)
ok "$(grep -q " rdma=0 http=3145735$" <<<"$out" && grep -q "over HTTP: .*provider 'tcp;ofi_rxm'" <<<"$out"; echo $?)" \
    "a client on tcp;ofi_rxm against shm: all bytes over HTTP, and it says why"
ok "$(same_bytes "$TEST_DIR/other/data/mid" "$SRC/mid"; echo $?)" "... identical"

# no GPU on this machine (or a build without CUDA): a clear error
run_fails_with "--gpu 0 without a GPU fails naming why" "no CUDA driver|built without CUDA|GPU 0" -- \
    "$STAGEIN" get data/mid --gpu 0 --transport rdma
rdma_stop

# ---- tcp;ofi_rxm on lo ---------------------------------------------------------------
s3_write_conf "$(rdma_conf "tcp;ofi_rxm" lo)"
s3_start_ok "stageind restarts on tcp;ofi_rxm (domain lo), same cache"
export STAGEIN_RDMA_DOMAIN=lo
is "$(get_all tcp)" "" "tcp: every object by RDMA, identical"
is "$(get_all tcp-range STAGEIN_CHUNK_SIZE=65536 STAGEIN_PARALLEL=4)" "" "tcp: as 64 KiB ranges"
# stagein_read into a buffer larger than the object, through the library
# itself: the first GET tells the size (no HEAD first), also for an empty
# object (no range of it: read the other way); over tcp (doc/rdma.md: a
# fresh shm client of libfabric 1.17 now and then dies in fi_cq_read)
read_lib() {
    STAGEIN_TRANSPORT=rdma STAGEIN_RDMA_DOMAIN=lo "$PY" -c "
import ctypes, sys, hashlib, mmap
lib = ctypes.CDLL('$top_builddir/stagein/.libs/libstagein.so.0')
h = ctypes.c_void_p()
assert lib.stagein_open(ctypes.byref(h)) == 0
lib.stagein_last_error.restype = ctypes.c_char_p
out = []
for path in sys.argv[1:]:
    mem = mmap.mmap(-1, 32 << 20)
    buf = ctypes.c_char.from_buffer(mem)
    size = ctypes.c_uint64(12345)
    rc = lib.stagein_read(h, path.encode(), ctypes.byref(buf), ctypes.c_uint64(32 << 20), -1, ctypes.byref(size))
    if rc:
        out.append('%s:%d:%s' % (path, rc, lib.stagein_last_error(h).decode()))
        continue
    out.append('%s:%d:%d:%s' % (path, rc, size.value, hashlib.sha256(mem[:size.value]).hexdigest()[:16]))
lib.stagein_close(h)
print(' '.join(out))" "$@" 2>"$TEST_DIR/read_lib.err"
    sed 's/^/# /' "$TEST_DIR/read_lib.err" >&2
}
want=""
for key in one mid big empty; do
    want+="data/$key:0:$(stat -c %s "$SRC/$key"):$(sha256sum < "$SRC/$key" | cut -c1-16) "
done
heads=$(grep -c 'HEAD /data/' "$LOG")
is "$(read_lib data/one data/mid data/big data/empty)" "${want% }" \
    "stagein_read into a 32 MiB buffer: 1 B, 3 MiB, 20 MiB and an empty object, sizes and bytes right"
is "$(($(grep -c 'HEAD /data/' "$LOG") - heads))" 2 \
    "... with a HEAD only for the first (the provider) and the empty object"
is "$(read_lib data/cold data/nosuch)" "data/cold:8:data/cold is on tape only: stage it first data/nosuch:6:S3 GET data/nosuch: HTTP 404 NoSuchKey" \
    "an object on tape only: STAGEIN_ERR_NOT_CACHED, saying so; a missing one: STAGEIN_ERR_NOT_FOUND"

unset STAGEIN_RDMA_DOMAIN
rdma_stop

# ---- a server without RDMA --------------------------------------------------------------
s3_write_conf ""
s3_start_ok "stageind restarts without RDMA"
out=$("$STAGEIN" get data/big --transport rdma --dest "$TEST_DIR/none" 2>&1)
ok "$(grep -q " rdma=0 http=20971537$" <<<"$out" && grep -q "over HTTP: the server offers no RDMA" <<<"$out"; echo $?)" \
    "rdma asked of a server without it: over HTTP, saying so"
ok "$(same_bytes "$TEST_DIR/none/data/big" "$SRC/big"; echo $?)" "... identical"
rdma_stop
finish
