/* stageind's RDMA transfers (rdma.h): a pool of registered buffers, an
 * endpoint shared by all transfers, an AV entry per client address.
 *
 * Threads: each S3 handler thread runs its own transfer loop. libfabric is
 * used FI_THREAD_DOMAIN, every call on an endpoint under its generation's
 * lock (gen->lock); whichever thread reads the CQ marks the completed
 * operation in its owner's table (the context pointer), so no progress
 * thread is needed. srv->lock guards the server's own state and is never
 * held while waiting for gen->lock (lock order: gen->lock, then srv->lock):
 * a thread stuck inside the provider (1.17's shm spins forever on the lock
 * of a client that died holding it) then blocks only its generation, which
 * the next thread to wait timeout_seconds for it retires.
 *
 * Endpoint generations: a transfer that sees no completion for
 * timeout_seconds retires the endpoint it runs on, and the next transfers
 * get a fresh one (with the pool registered anew). libfabric 1.17's shm
 * wedges an endpoint for good after an RMA it never completes (a wrong key,
 * a client killed mid-transfer); tcp does not, but a fresh endpoint costs
 * its clients only a reconnection. A retired generation is closed once no
 * running transfer uses it; transfers whose operations the provider never
 * completed ("abandoned") keep their memory until then, since closing the
 * endpoint is what ends those operations. */
#include "config.h"
#include "daemon/rdma/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"

rdma_server_t *rdma_server_open(const rdma_config_t *cfg, si_error_t *err)
{
    rdma_server_t *srv;
    rdma_fabric_t *fab;

    if (cfg->depth == 0 || cfg->depth > RDMA_MAX_DEPTH || cfg->depth > cfg->buffer_count ||
        cfg->buffer_size == 0 || cfg->buffer_count == 0 || cfg->max_concurrent == 0) {
        si_errnoprintf(err, EINVAL, "rdma: depth must be 1..%d and at most buffer_count; "
                       "buffer_size, buffer_count and max_concurrent non-zero", RDMA_MAX_DEPTH);
        return NULL;
    }
    srv = calloc(1, sizeof *srv);
    if (!srv) {
        si_errnoprintf(err, ENOMEM, "rdma: out of memory");
        return NULL;
    }
    srv->cfg = *cfg;
    pthread_mutex_init(&srv->lock, NULL);
    /* libfabric 1.17's shm writes a large RMA into a peer itself with the
     * kernel's single copy (CMA) whenever it may ptrace the peer, and then
     * nobody checks the token's key: the bytes go to whatever address, of
     * whatever process, the token names. Unless configured otherwise,
     * stageind has shm take the path where the client's side checks the
     * key and copies from shared bounce buffers (doc/rdma.md). The
     * provider reads this once, at its first use in the process; an
     * explicit setting in the environment wins. */
    if (!cfg->shm_cma && strcmp(cfg->provider, "shm") == 0)
        setenv("FI_SHM_DISABLE_CMA", "1", 0);
    if (!(fab = rdma_fabric_open(cfg->provider, cfg->domain, false, err)))
        goto error;
    if (srv->cfg.buffer_size > fab->max_msg_size)
        srv->cfg.buffer_size = fab->max_msg_size;
    /* Operations from a mapped file: shm copies each with one system call,
     * so large ones cost least (64 MiB: 5.0 against 4.5 GB/s with 4 MiB);
     * over tcp 4 MiB ones keep the pipe fuller (3.6 against 2.4 GB/s);
     * BENCHMARKS.md. */
    if (srv->cfg.op_size == 0)
        srv->cfg.op_size = strcmp(cfg->provider, "shm") == 0 ? 64u << 20 : srv->cfg.buffer_size;
    if (srv->cfg.op_size > fab->max_msg_size)
        srv->cfg.op_size = fab->max_msg_size;
    srv->pool_bytes = (size_t)srv->cfg.buffer_size * cfg->buffer_count;
    /* Page-aligned and touched, so the pages exist (FI_MR_ALLOCATED). */
    if (posix_memalign((void **)&srv->pool, (size_t)sysconf(_SC_PAGESIZE), srv->pool_bytes) != 0) {
        srv->pool = NULL;
        si_errnoprintf(err, ENOMEM, "rdma: cannot allocate a %zu-byte buffer pool",
                       srv->pool_bytes);
        rdma_fabric_close(fab);
        goto error;
    }
    memset(srv->pool, 0, srv->pool_bytes);
    srv->free_buffers = calloc(cfg->buffer_count, sizeof *srv->free_buffers);
    if (!srv->free_buffers) {
        si_errnoprintf(err, ENOMEM, "rdma: out of memory");
        rdma_fabric_close(fab);
        goto error;
    }
    for (unsigned i = 0; i < cfg->buffer_count; i++)
        srv->free_buffers[srv->free_count++] = cfg->buffer_count - 1 - i;
    if (!(srv->current = rdma_gen_open(srv, fab, err)))
        goto error;
    return srv;
error:
    rdma_server_close(srv);
    return NULL;
}

void rdma_server_close(rdma_server_t *srv)
{
    if (!srv)
        return;
    while (srv->retired) {
        generation_t *gen = srv->retired;
        srv->retired = gen->next;
        rdma_gen_close(srv, gen);
    }
    if (srv->current)
        rdma_gen_close(srv, srv->current);
    rdma_mappings_trim(srv, true);
    pthread_mutex_destroy(&srv->lock);
    free(srv->pool);
    free(srv->free_buffers);
    free(srv);
}

const char *rdma_server_provider(const rdma_server_t *srv)
{
    return srv->cfg.provider;
}

int rdma_server_accept(rdma_server_t *srv, const char *header, unsigned access, uint64_t len,
                       si_rdma_token_t *token, si_error_t *err)
{
    si_rdma_token_t t;

    if (si_rdma_token_decode(header, &t, err) < 0)
        return -1;
    if (strcmp(t.provider, srv->cfg.provider) != 0)
        return si_errnoprintf(err, EPROTONOSUPPORT,
                              "rdma: token names provider '%s'; this server uses '%s'", t.provider,
                              srv->cfg.provider);
    if (len > srv->cfg.max_transfer)
        return si_errnoprintf(err, E2BIG,
                              "rdma: %" PRIu64 " bytes exceed rdma.max_transfer %" PRIu64, len,
                              srv->cfg.max_transfer);
    if (si_rdma_token_check_range(&t, 0, len, access, err) < 0)
        return -1;
    /* libfabric 1.17's shm passes writes of up to 4 KiB inline in its
     * command queue; through bounce buffers (no CMA) such a write with
     * delivery complete has been seen never to complete, and the client to
     * crash placing it, leaving a provider thread stuck (doc/rdma.md). A few
     * bytes gain nothing from RDMA: they go in the HTTP body. */
    if (access == SI_RDMA_ACCESS_WRITE && len <= RDMA_SHM_INLINE_MAX && !srv->cfg.shm_cma &&
        strcmp(srv->cfg.provider, "shm") == 0)
        return si_errnoprintf(err, EMSGSIZE,
                              "rdma: %" PRIu64 " bytes go in the body (shm without CMA moves "
                              "transfers of over %d bytes)", len, RDMA_SHM_INLINE_MAX);
    rdma_server_sweep(srv);
    *token = t;
    return 0;
}


void rdma_server_sweep(rdma_server_t *srv)
{
    double cutoff = si_mono_now() - srv->cfg.idle_seconds;
    generation_t *gen;

    /* the current generation, kept from closing while it is swept */
    pthread_mutex_lock(&srv->lock);
    gen = srv->current;
    if (gen)
        gen->running++;
    pthread_mutex_unlock(&srv->lock);
    if (!gen)
        return;
    if (pthread_mutex_trylock(&gen->lock) == 0) { /* busy: sweep another time */
        rdma_peers_drop_idle(gen, cutoff);
        pthread_mutex_unlock(&gen->lock);
    }
    pthread_mutex_lock(&srv->lock);
    gen->running--;
    rdma_gen_release_if_idle(srv, gen);
    rdma_mappings_trim(srv, false);
    pthread_mutex_unlock(&srv->lock);
}

static void add_generation(const generation_t *gen, rdma_stats_t *out)
{
    out->registrations += gen->fab->mrs_live;
    out->peers += gen->peer_count;
    out->abandoned += gen->abandoned_count;
}

void rdma_server_stats(rdma_server_t *srv, rdma_stats_t *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&srv->lock);
    if (srv->current)
        add_generation(srv->current, out);
    for (const generation_t *g = srv->retired; g; g = g->next) {
        add_generation(g, out);
        out->retired++;
    }
    out->endpoints_opened = srv->generations;
    out->buffers_free = srv->free_count;
    out->buffers_total = srv->cfg.buffer_count;
    out->transfers = srv->transfers;
    out->bytes_sent = srv->bytes_sent;
    out->bytes_received = srv->bytes_received;
    out->transfers_failed = srv->transfers_failed;
    pthread_mutex_unlock(&srv->lock);
}

void rdma_server_metrics(rdma_server_t *srv, FILE *out)
{
    rdma_stats_t st;

    rdma_server_stats(srv, &st);
    fprintf(out,
            "# HELP stagein_rdma_transfers RDMA transfers running.\n"
            "# TYPE stagein_rdma_transfers gauge\nstagein_rdma_transfers %u\n"
            "# HELP stagein_rdma_registrations Memory registrations open (one pool per endpoint).\n"
            "# TYPE stagein_rdma_registrations gauge\nstagein_rdma_registrations %ld\n"
            "# HELP stagein_rdma_buffers_free Pool buffers not lent to a transfer.\n"
            "# TYPE stagein_rdma_buffers_free gauge\nstagein_rdma_buffers_free %u\n"
            "# HELP stagein_rdma_buffers Pool buffers.\n"
            "# TYPE stagein_rdma_buffers gauge\nstagein_rdma_buffers %u\n"
            "# HELP stagein_rdma_peers Client addresses in the address vectors.\n"
            "# TYPE stagein_rdma_peers gauge\nstagein_rdma_peers %u\n"
            "# HELP stagein_rdma_abandoned Transfers whose operations never completed.\n"
            "# TYPE stagein_rdma_abandoned gauge\nstagein_rdma_abandoned %u\n"
            "# HELP stagein_rdma_endpoints_retired Endpoints out of service, still in use.\n"
            "# TYPE stagein_rdma_endpoints_retired gauge\nstagein_rdma_endpoints_retired %u\n"
            "# HELP stagein_rdma_endpoints_opened_total Endpoints opened (1 + replacements).\n"
            "# TYPE stagein_rdma_endpoints_opened_total counter\n"
            "stagein_rdma_endpoints_opened_total %u\n"
            "# HELP stagein_rdma_sent_bytes_total Bytes written into clients (GET).\n"
            "# TYPE stagein_rdma_sent_bytes_total counter\n"
            "stagein_rdma_sent_bytes_total %" PRIu64 "\n"
            "# HELP stagein_rdma_received_bytes_total Bytes read from clients (PUT).\n"
            "# TYPE stagein_rdma_received_bytes_total counter\n"
            "stagein_rdma_received_bytes_total %" PRIu64 "\n"
            "# HELP stagein_rdma_transfers_failed_total RDMA transfers that failed.\n"
            "# TYPE stagein_rdma_transfers_failed_total counter\n"
            "stagein_rdma_transfers_failed_total %" PRIu64 "\n",
            st.transfers, st.registrations, st.buffers_free, st.buffers_total, st.peers,
            st.abandoned, st.retired, st.endpoints_opened, st.bytes_sent, st.bytes_received,
            st.transfers_failed);
}
