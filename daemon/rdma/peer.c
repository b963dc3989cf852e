/* Client addresses of an RDMA generation: an AV entry per client address,
 * shared by its transfers, dropped when a transfer to it failed or when
 * idle (caller holds gen->lock). */
#include "config.h"
#include "daemon/rdma/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

static void peer_drop(generation_t *gen, peer_t *peer)
{
    for (peer_t **pp = &gen->peers; *pp; pp = &(*pp)->next) {
        if (*pp == peer) {
            *pp = peer->next;
            fi_av_remove(gen->fab->av, &peer->fi_addr, 1, 0);
            free(peer);
            gen->peer_count--;
            return;
        }
    }
}

peer_t *rdma_peer_get(generation_t *gen, const si_rdma_token_t *t, si_error_t *err)
{
    peer_t *p;
    int rc;

    for (p = gen->peers; p; p = p->next)
        if (!p->failed && p->addr_len == t->addr_len && memcmp(p->addr, t->addr, t->addr_len) == 0)
            break;
    if (!p) {
        p = calloc(1, sizeof *p);
        if (!p) {
            si_errnoprintf(err, ENOMEM, "rdma: out of memory");
            return NULL;
        }
        memcpy(p->addr, t->addr, t->addr_len);
        p->addr_len = t->addr_len;
        rc = fi_av_insert(gen->fab->av, p->addr, 1, &p->fi_addr, 0, NULL);
        if (rc != 1) {
            free(p);
            si_errnoprintf(err, EINVAL, "rdma: the token's client address is not a valid %s "
                           "address", t->provider);
            return NULL;
        }
        p->next = gen->peers;
        gen->peers = p;
        gen->peer_count++;
    }
    p->refs++;
    return p;
}

void rdma_peer_put(generation_t *gen, peer_t *p, bool failed)
{
    p->refs--;
    p->last_used = si_mono_now();
    if (failed)
        p->failed = true;
    if (p->refs == 0 && p->failed)
        peer_drop(gen, p);
}

/* Drops the unused addresses last used before cutoff. */
void rdma_peers_drop_idle(generation_t *gen, double cutoff)
{
    peer_t *next;

    for (peer_t *p = gen->peers; p; p = next) {
        next = p->next;
        if (p->refs == 0 && p->last_used < cutoff)
            peer_drop(gen, p);
    }
}

/* Frees every entry; the AV goes with the fabric (rdma_gen_close). */
void rdma_peers_free(generation_t *gen)
{
    peer_t *next;

    for (peer_t *p = gen->peers; p; p = next) {
        next = p->next;
        free(p);
    }
    gen->peers = NULL;
    gen->peer_count = 0;
}
