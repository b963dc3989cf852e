#!/bin/bash
# PUT over RDMA (doc/rdma.md): `stagein put FILE BUCKET/KEY --transport rdma`
# (one PUT, or with STAGEIN_CHUNK_SIZE a multipart upload whose parts are
# read by RDMA in parallel)
# (libstagein's stagein_write: a signed PUT with an empty body, the
# x-amz-rdma-token of the file's registered mapping, signed with the
# bytes' SHA-256) into an archive bucket; stageind reads the bytes with
# RMA read through the checks of an HTTP body (payload hash, MD5 ETag) and
# pushes them like any PUT. Over shm and tcp;ofi_rxm on lo: every object
# read back byte-identical, its ETag the file's MD5, x-amz-rdma-reply 200.
# The 501 answers (cuObject, another provider, presigned, aws-chunked)
# store nothing; a token beside a body: the body used, 501 on the answer;
# a client asking another provider, and a server without RDMA, send the
# body over HTTP and say why. Pool buffers all free afterwards.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
. "$top_srcdir/tests/rdma-lib.sh"
s3_need_clients boto3

S3_FIXTURE="small1:70000"
s3_setup A "$(rdma_conf shm "")"
s3_start_ok "stageind starts with the RDMA data path on shm"
rdma_client_env
SIZES="1 4097 3145735 20971537"
for n in $SIZES; do head -c "$n" /dev/urandom > "$OUT/f$n"; done

# put_all LABEL [ENV...]: every file by RDMA into upl/LABEL/, read back
# over HTTP identical, ETag = MD5; prints the sizes that went wrong
put_all() {
    local label=$1 n out want bad=""; shift
    for n in $SIZES; do
        out=$(env "$@" "$STAGEIN" put "$OUT/f$n" "upl/$label/f$n" --transport rdma 2>&1)
        if shm_client_crashed "$out"; then
            echo CRASH
            return
        fi
        want="upl/$label/f$n $n etag=$(md5sum < "$OUT/f$n" | cut -d' ' -f1) rdma=$n http=0"
        "$STAGEIN" get "upl/$label/f$n" --transport http --dest "$OUT/back" >/dev/null 2>&1
        if [ "$out" != "$want" ] || ! same_bytes "$OUT/back/upl/$label/f$n" "$OUT/f$n"; then
            bad+="$n "
            diag "$n: $out"
        fi
    done
    echo "$bad"
}
shm_puts=$(put_all shm)
if [ "$shm_puts" = CRASH ]; then
    skip_one "shm: the four sizes by RDMA: $SHM_CRASH"
else
    is "$shm_puts" "" "shm: 1 B, 4097 B, 3 MiB + 7, 20 MiB + 17 put by RDMA; read back identical, ETag = MD5"
fi
recv=$(metric stagein_rdma_received_bytes_total)
if [ "$shm_puts" = CRASH ]; then
    skip_one "the received-bytes metric: $SHM_CRASH"
else
    is "${recv:-0}" $((1 + 4097 + 3145735 + 20971537)) "metrics: stagein_rdma_received_bytes_total counts them"
fi
# a client that crashed inside libfabric leaves its transfer to time out
# and its endpoint to be replaced (doc/rdma.md): nothing to check then
if [ "$shm_puts" = CRASH ]; then
    skip_one "no transfer running, every pool buffer free: $SHM_CRASH"
else
    is "$(rdma_settled)" "$(metric stagein_rdma_registrations) $(metric stagein_rdma_buffers)/$(metric stagein_rdma_buffers) transfers=0 retired=0" \
        "no transfer running, every pool buffer free"
fi
out=$("$STAGEIN" put "$OUT/f4097" upl/shm/f4097 --transport rdma 2>&1)
if [ "$shm_puts" = CRASH ] || shm_client_crashed "$out"; then
    skip_one "a second PUT of the same key: $SHM_CRASH"
else
    ok "$(grep -q " rdma=4097 http=0$" <<<"$out"; echo $?)" "a second PUT of the same key replaces it, by RDMA"
    grep -q " rdma=4097 http=0$" <<<"$out" || diag "$out"
fi
if [ "$shm_puts" = CRASH ]; then
    skip_one "the request log of those PUTs: $SHM_CRASH"
else
    ok "$(grep -q 'PUT /upl/shm/f3145735 .*200.* rdma=3145735' "$LOG"; echo $?)" \
        "the request log says the bytes came by RDMA"
fi

# ---- declined (501): nothing stored ---------------------------------------------------
# put_declined KEY TOKEN [s3raw options]: "STATUS CODE|reply|reason" of a PUT without a body
put_declined() {
    local key=$1 token=$2; shift 2
    s3raw request PUT "/upl/$key" -H "x-amz-rdma-token: $token" \
        --show-header x-amz-rdma-reply --show-header x-amz-rdma-reason "$@" 2>"$TEST_DIR/hdr" |
        tr '\n' '|'
    tr '\n' '|' < "$TEST_DIR/hdr"
}
gone() { [ "$(s3raw request HEAD "/upl/$1")" = "404 -" ]; }
out=$(put_declined d1 "00007f7c2a000000:0000000000100000:0000000012345678:00abcdef")
ok "$(grep -q '^501 NotImplemented|x-amz-rdma-reply: 501|x-amz-rdma-reason: .*cuObject' <<<"$out"; echo $?)" \
    "a cuObject token on a PUT: 501 NotImplemented, x-amz-rdma-reply 501 naming cuObject"
ok "$(gone d1; echo $?)" "... and no object d1"
out=$(put_declined d2 "si1 prov=tcp;ofi_rxm addr=0a0b key=1 raddr=0 len=100 flags=r")
ok "$(grep -q "^501 NotImplemented|x-amz-rdma-reply: 501|x-amz-rdma-reason: .*provider 'tcp;ofi_rxm'" <<<"$out"; echo $?)" \
    "a token for another provider: 501 naming it"
out=$(put_declined d3 "si1 prov=shm addr=0a0b key=1 raddr=0 len=100 flags=w")
ok "$(grep -q "^501 NotImplemented|x-amz-rdma-reply: 501|x-amz-rdma-reason: .*read" <<<"$out"; echo $?)" \
    "a token that grants no read: 501"
out=$(put_declined d4 "si1 prov=shm addr=0a0b key=1 raddr=0 len=100 flags=r" --sign presign)
ok "$(grep -q "^501 NotImplemented|x-amz-rdma-reply: 501|x-amz-rdma-reason: RDMA needs a request signed" <<<"$out"; echo $?)" \
    "a presigned PUT with a token: 501"
ok "$(gone d2 && gone d3 && gone d4; echo $?)" "... none of them stored anything"
out=$(s3raw request PUT /upl/b1 --data "in the body" -H "x-amz-rdma-token: si1 prov=shm addr=0a0b key=1 raddr=0 len=11 flags=r" \
    --show-header x-amz-rdma-reply --show-header x-amz-rdma-reason 2>&1 | tr '\n' '|')
ok "$(grep -q "x-amz-rdma-reply: 501|x-amz-rdma-reason: the request has a body" <<<"$out" && grep -q "200 -|" <<<"$out"; echo $?)" \
    "a token beside a body: 200, the body used, x-amz-rdma-reply 501 saying so"
s3raw request GET /upl/b1 --out "$OUT/b1" >/dev/null
is "$(cat "$OUT/b1")" "in the body" "... the object holds the body"

# a client that asks for another provider than the server's
out=$(STAGEIN_RDMA_PROVIDER="tcp;ofi_rxm" STAGEIN_RDMA_DOMAIN=lo "$STAGEIN" put "$OUT/f3145735" \
    upl/other/f --transport rdma 2>&1)
ok "$(grep -q " rdma=0 http=3145735$" <<<"$out" && grep -q "over HTTP: .*provider 'tcp;ofi_rxm'" <<<"$out"; echo $?)" \
    "a client on tcp;ofi_rxm against shm: the body over HTTP, saying why"
"$STAGEIN" get upl/other/f --dest "$OUT/back" >/dev/null 2>&1
ok "$(same_bytes "$OUT/back/upl/other/f" "$OUT/f3145735"; echo $?)" "... stored identical"
run_fails_with "a put into a read-only bucket is refused" "AccessDenied|403" -- \
    "$STAGEIN" put "$OUT/f4097" data/nope --transport rdma
run_fails_with "a put of a missing file is refused naming it" "nosuch: No such file" -- \
    "$STAGEIN" put "$OUT/nosuch" upl/x
rdma_stop

# ---- tcp;ofi_rxm on lo ---------------------------------------------------------------
s3_write_conf "$(rdma_conf "tcp;ofi_rxm" lo)"
s3_start_ok "stageind restarts on tcp;ofi_rxm (domain lo)"
is "$(put_all tcp STAGEIN_RDMA_DOMAIN=lo)" "" "tcp: every file put by RDMA, read back identical"
# ---- multipart: parts of STAGEIN_CHUNK_SIZE, each read by RDMA, 3 at a time --------------
# (over tcp: concurrent transfers through shm's bounce buffers crash
# libfabric 1.17's clients, doc/rdma.md)
# put_parts LABEL TRANSPORT [ENV...]: the 20 MiB + 17 file in 5 MiB parts
put_parts() {
    local label=$1 transport=$2; shift 2
    env STAGEIN_CHUNK_SIZE=5242880 STAGEIN_PARALLEL=3 STAGEIN_RDMA_DOMAIN=lo "$@" "$STAGEIN" put "$OUT/f20971537" \
        "upl/$label/parts" --transport "$transport" 2>&1
}
md5s=$(for i in 0 1 2 3 4; do dd if="$OUT/f20971537" bs=5242880 skip=$i count=1 2>/dev/null | md5sum | cut -c1-32; done | xxd -r -p | md5sum | cut -c1-32)
out=$(put_parts mp rdma)
is "$out" "upl/mp/parts 20971537 etag=$md5s-5 rdma=20971537 http=0" \
    "in 5 MiB parts: five UploadParts, every byte by RDMA, the multipart ETag (MD5 of the parts' MD5s, -5)"
"$STAGEIN" get upl/mp/parts --dest "$OUT/back" >/dev/null 2>&1
ok "$(same_bytes "$OUT/back/upl/mp/parts" "$OUT/f20971537"; echo $?)" "... read back identical"
ok "$(grep -c 'PUT /upl/mp/parts?partNumber=.* 200 .*rdma=' "$LOG" | grep -qx 5; echo $?)" \
    "... the request log shows the five parts read by RDMA"
is "$(put_parts mph http)" "upl/mph/parts 20971537 etag=$md5s-5" "the same parts over HTTP: the same ETag"
is "$(env STAGEIN_CHUNK_SIZE=5242880 STAGEIN_RDMA_DOMAIN=lo "$STAGEIN" put "$OUT/f3145735" upl/mp/small --transport rdma 2>&1)" \
    "upl/mp/small 3145735 etag=$(md5sum < "$OUT/f3145735" | cut -c1-32) rdma=3145735 http=0" \
    "an object smaller than a part: one PUT"

rdma_stop

# ---- a server without RDMA --------------------------------------------------------------
s3_write_conf ""
s3_start_ok "stageind restarts without RDMA"
out=$("$STAGEIN" put "$OUT/f20971537" upl/none/f --transport rdma 2>&1)
ok "$(grep -q " rdma=0 http=20971537$" <<<"$out" && grep -q "over HTTP: the server offers no RDMA" <<<"$out"; echo $?)" \
    "rdma asked of a server without it: the body over HTTP, saying so"
"$STAGEIN" get upl/none/f --dest "$OUT/back" >/dev/null 2>&1
ok "$(same_bytes "$OUT/back/upl/none/f" "$OUT/f20971537"; echo $?)" "... stored identical"
stop
finish
