#!/bin/bash
# The RDMA data path under many clients and dying ones, through stageind:
# 16 `stagein get --transport rdma` at once, each object byte for byte and
# every byte by RDMA; a client stopped in the middle of a 512 MiB transfer
# and killed: the server gives up on it (rdma.timeout_seconds), its
# registrations, pool buffers and endpoints return to what they were, and
# the next client is served by RDMA. Over tcp;ofi_rxm (lo), shm with the
# kernel's single copy (rdma.shm_cma) and shm through bounce buffers (the
# default), where libfabric 1.17's crash under concurrent transfers is
# skipped, saying so.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
. "$top_srcdir/tests/rdma-lib.sh"
s3_need_clients boto3

S3_FIXTURE="huge:536870912"
for i in $(seq -w 1 16); do S3_FIXTURE+=" c$i:$((1000000 + 10#$i * 77777))"; done
KEYS=$(for f in $S3_FIXTURE; do echo "${f%%:*}"; done)
s3_setup A "$(rdma_conf "tcp;ofi_rxm" lo)"
s3_start_ok "stageind starts (tcp;ofi_rxm on lo)"
ok "$(s3_make_hot $KEYS; echo $?)" "17 objects staged (16 of about 1 MiB, one of 512 MiB)"
rdma_client_env

# concurrent LABEL: 16 clients at once; prints the keys that went wrong
concurrent() {
    local label=$1 i pids=() bad=""
    mkdir -p "$TEST_DIR/$label"
    for i in $(seq -w 1 16); do
        "$STAGEIN" get "data/c$i" --transport rdma --dest "$TEST_DIR/$label" \
            > "$TEST_DIR/$label/c$i.out" 2>&1 &
        pids+=($!)
    done
    for i in "${!pids[@]}"; do wait "${pids[$i]}"; done
    for i in $(seq -w 1 16); do
        if ! grep -q " http=0$" "$TEST_DIR/$label/c$i.out" ||
            ! same_bytes "$TEST_DIR/$label/data/c$i" "$SRC/c$i"; then
            bad+="c$i "
            diag "c$i: $(tail -1 "$TEST_DIR/$label/c$i.out")"
        fi
    done
    echo "$bad"
}

# killed LABEL: a client stopped during the 512 MiB transfer, then killed;
# checks the server's resources and the next client
killed() {
    local label=$1 base pid state _
    base=$(rdma_settled)
    STAGEIN_PARALLEL=1 STAGEIN_CHUNK_SIZE=536870912 "$STAGEIN" get data/huge --transport rdma \
        --dest "$TEST_DIR/$label-killed" >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 100); do
        [ "$(metric stagein_rdma_transfers)" = 1 ] && break
        sleep 0.05
    done
    state=$(metric stagein_rdma_transfers)
    kill -STOP "$pid"
    sleep 0.2
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null
    shm_forget "$pid"
    diag "$label: transfers running when the client was stopped: $state"
    now=$(rdma_settled)
    if [ "$now" != "$base" ] && [ "$label" = shm ]; then
        # the client died holding the spin lock of its shared-memory region;
        # the server's write spins on it inside libfabric for good
        skip_one "$label: resources back after a killed client: libfabric 1.17's shm spins forever on the lock of a client killed while holding it (one stageind thread lost; the endpoint was retired: doc/rdma.md); now: $now"
    else
        is "$now" "$base" \
            "$label: after a client killed mid-transfer: registrations, free buffers, no transfer, no retired endpoint as before"
    fi
    # the first request after a stuck endpoint waits timeout_seconds for it,
    # retires it and is answered over HTTP; the next ones get a fresh one
    out=$("$STAGEIN" get data/c01 --transport rdma --dest "$TEST_DIR/$label-after" 2>&1)
    ok "$(same_bytes "$TEST_DIR/$label-after/data/c01" "$SRC/c01"; echo $?)" \
        "$label: the next client gets its object, identical ($(grep -o 'rdma=.*' <<<"$out"))"
    out=$("$STAGEIN" get data/c02 --transport rdma --dest "$TEST_DIR/$label-after" 2>&1)
    ok "$(grep -q " http=0$" <<<"$out" && same_bytes "$TEST_DIR/$label-after/data/c02" "$SRC/c02"; echo $?)" \
        "$label: and the one after it by RDMA"
}

is "$(concurrent tcp)" "" "tcp: 16 clients at once, each object identical and all by RDMA"
is "$(rdma_settled | cut -d' ' -f2-)" "$(metric stagein_rdma_buffers)/$(metric stagein_rdma_buffers) transfers=0 retired=0" \
    "tcp: afterwards every pool buffer free, nothing running"
killed tcp
ok "$(grep -q 'GET data/huge over RDMA: .* (answered over HTTP)' "$LOG"; echo $?)" \
    "stageind logs why the transfer into the killed client ended"
rdma_stop

s3_write_conf "$(rdma_conf shm "" "shm_cma = true;")"
s3_start_ok "stageind restarts on shm with the single copy (rdma.shm_cma)"
is "$(concurrent shm-cma)" "" "shm (CMA): 16 clients at once, identical, all by RDMA"
killed shm-cma
rdma_stop

s3_write_conf "$(rdma_conf shm "")"
s3_start_ok "stageind restarts on shm through bounce buffers (the default)"
skip_one "shm through bounce buffers, 16 clients at once: libfabric 1.17 crashes clients (SIGSEGV in smr_copy_from_sar) under concurrent transfers (doc/rdma.md)"
killed shm
rdma_stop
finish
