# Helpers for the RDMA system tests (0600-0620): the "rdma" group of
# stagein.conf, the client's environment, and stageind's RDMA metrics.
# Source after s3-lib.sh.

# rdma_conf PROVIDER DOMAIN [EXTRA]: the rdma group; short timeouts, so that
# a vanished client costs the tests seconds (doc/rdma.md)
rdma_conf() {
    echo "rdma: { enabled = true; provider = \"$1\"; domain = \"$2\"; timeout_seconds = 2; idle_seconds = 1; ${3:-} };"
}

# rdma_client_env: libstagein's S3 endpoint and credentials for this server
rdma_client_env() {
    export STAGEIN_S3_ENDPOINT=$S3_URL STAGEIN_S3_ACCESS_KEY=$S3_KEY STAGEIN_S3_SECRET=$S3_SECRET
    unset STAGEIN_TRANSPORT STAGEIN_RDMA_PROVIDER STAGEIN_RDMA_DOMAIN
}

# metric NAME: its value in stageind's GET /metrics ("" when absent)
metric() {
    curl -s --max-time 10 "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'
}

# rdma_settled: waits (bounded) until no RDMA transfer runs and no retired
# endpoint is left; prints the registrations, free buffers, buffers
rdma_settled() {
    local _
    for _ in $(seq 100); do
        [ "$(metric stagein_rdma_transfers)" = 0 ] && [ "$(metric stagein_rdma_endpoints_retired)" = 0 ] &&
            [ "$(metric stagein_rdma_buffers_free)" = "$(metric stagein_rdma_buffers)" ] && break
        sleep 0.2
    done
    echo "$(metric stagein_rdma_registrations) $(metric stagein_rdma_buffers_free)/$(metric stagein_rdma_buffers) transfers=$(metric stagein_rdma_transfers) retired=$(metric stagein_rdma_endpoints_retired)"
}

# rdma_stop: stop, and when stageind does not exit (a thread of it stuck
# inside libfabric 1.17's shm: doc/rdma.md) kill it, saying so
rdma_stop() {
    local pid
    pid=$(daemon_pid)
    stop
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        diag "stageind $pid did not stop within 10 s (a thread stuck in the provider?): killed"
        kill -KILL "$pid" 2>/dev/null
        shm_forget "$pid"
    fi
}

# shm_forget PID: removes the shared-memory regions libfabric's shm left
# for a process this test killed with SIGKILL (it cleans up only on
# catchable signals)
shm_forget() {
    rm -f /dev/shm/"$1":* 2>/dev/null
}

# skip_one REASON: a TAP skip, counted
skip_one() {
    tap_n=$((tap_n + 1))
    echo "ok $tap_n # SKIP $1"
}

# shm_client_crashed OUTPUT: status 0 when the client died of SIGSEGV inside
# libfabric (1.17's shm provider now and then does: doc/rdma.md)
SHM_CRASH="a client died of SIGSEGV inside libfabric 1.17's shm provider (doc/rdma.md)"
shm_client_crashed() {
    grep -q "terminated with signal 11" <<<"$1" && grep -q "libfabric\.so" <<<"$1"
}
