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
    curl -s "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'
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
