/* Endpoint generations of stageind's RDMA server: one endpoint with its AV
 * and the pool's registration, retired when it stops answering and closed
 * once no transfer uses it (server.c tells why). */
#include "config.h"
#include "daemon/rdma/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

/* A generation on fab (opened here when NULL; taken over either way). */
generation_t *rdma_gen_open(rdma_server_t *srv, rdma_fabric_t *fab, si_error_t *err)
{
    generation_t *gen = calloc(1, sizeof *gen);

    if (!fab)
        fab = rdma_fabric_open(srv->cfg.provider, srv->cfg.domain, false, err);
    if (!gen || !fab) {
        if (!gen)
            si_errnoprintf(err, ENOMEM, "rdma: out of memory");
        rdma_fabric_close(fab);
        free(gen);
        return NULL;
    }
    gen->fab = fab;
    pthread_mutex_init(&gen->lock, NULL);
    /* With CMA, 1.17's shm writes into the client while the write is posted
     * (its "fast RMA"); asking for delivery complete would make it pass the
     * copy to the client's side instead (which then needs permission to
     * read this process). */
    if (srv->cfg.shm_cma && strcmp(srv->cfg.provider, "shm") == 0)
        fab->write_flags = 0;
    /* Local source of writes and target of reads. */
    if (rdma_fabric_mr_reg(gen->fab, srv->pool, srv->pool_bytes, FI_WRITE | FI_READ,
                           &gen->pool_mr, err) < 0) {
        rdma_fabric_close(gen->fab);
        free(gen);
        return NULL;
    }
    srv->generations++;
    return gen;
}

void rdma_gen_close(rdma_server_t *srv, generation_t *gen)
{
    /* Closing the endpoint ends the operations it never completed; only
     * then may their memory go. Addresses leave the AV after that (removing
     * one under a posted operation crashes 1.17's shm). */
    if (gen->fab->ep)
        fi_close(&gen->fab->ep->fid);
    gen->fab->ep = NULL;
    while (gen->abandoned) {
        transfer_t *tr = gen->abandoned;
        gen->abandoned = tr->next;
        rdma_fabric_mr_close(gen->fab, &tr->src.map_mr);
        rdma_source_release(srv, &tr->src);
        free(tr);
    }
    rdma_peers_free(gen);
    rdma_fabric_mr_close(gen->fab, &gen->pool_mr);
    rdma_fabric_close(gen->fab);
    pthread_mutex_destroy(&gen->lock);
    free(gen);
}

/* Closes a retired generation once no transfer runs on it. */
void rdma_gen_release_if_idle(rdma_server_t *srv, generation_t *gen)
{
    if (gen == srv->current || gen->running > 0)
        return;
    for (generation_t **pp = &srv->retired; *pp; pp = &(*pp)->next) {
        if (*pp == gen) {
            *pp = gen->next;
            rdma_gen_close(srv, gen);
            return;
        }
    }
}

/* Its endpoint stopped answering: new transfers go to a fresh one. */
void rdma_gen_retire(rdma_server_t *srv, generation_t *gen)
{
    si_error_t ignored;

    if (gen != srv->current)
        return;
    gen->next = srv->retired;
    srv->retired = gen;
    srv->current = rdma_gen_open(srv, NULL, &ignored); /* NULL: tried again on next use */
}

/* Takes gen->lock, waiting at most timeout_seconds; else retires gen (a
 * thread holds it inside the provider and may never return) and fails
 * with ETIMEDOUT. Called without srv->lock. */
int rdma_gen_lock(rdma_server_t *srv, generation_t *gen)
{
    struct timespec until = si_wall_deadline(srv->cfg.timeout_seconds);

    if (pthread_mutex_timedlock(&gen->lock, &until) == 0)
        return 0;
    pthread_mutex_lock(&srv->lock);
    rdma_gen_retire(srv, gen);
    pthread_mutex_unlock(&srv->lock);
    errno = ETIMEDOUT;
    return -1;
}
