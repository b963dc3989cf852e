/* Completions of an RDMA generation: whichever thread reads the CQ marks the
 * operation in its owner's table; an abandoned transfer ends with its last
 * operation (caller holds gen->lock). */
#include "config.h"
#include "daemon/rdma/internal.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

/* Marks an operation finished; an abandoned transfer ends with its last. */
static void complete_op(rdma_server_t *srv, op_t *op, int state)
{
    transfer_t *tr = op->owner;
    generation_t *gen = tr->gen;

    if (!tr->left) {
        op->state = state;
        return;
    }
    op->state = OP_IDLE;
    if (--tr->left > 0)
        return;
    rdma_peer_put(gen, tr->peer, true);
    rdma_fabric_mr_close(gen->fab, &tr->src.map_mr);
    pthread_mutex_lock(&srv->lock);
    for (transfer_t **pp = &gen->abandoned; *pp; pp = &(*pp)->next) {
        if (*pp == tr) {
            *pp = tr->next;
            break;
        }
    }
    gen->abandoned_count--;
    rdma_source_release(srv, &tr->src);
    pthread_mutex_unlock(&srv->lock);
    free(tr);
}

void rdma_poll_completions(rdma_server_t *srv, generation_t *gen)
{
    struct fi_cq_entry entries[32];
    ssize_t n;

    for (;;) {
        n = fi_cq_read(gen->fab->cq, entries, 32);
        if (n > 0) {
            for (ssize_t i = 0; i < n; i++)
                complete_op(srv, entries[i].op_context, OP_DONE);
            continue;
        }
        if (n == -FI_EAVAIL) {
            si_error_t e;
            void *context;
            rdma_fabric_cq_error(gen->fab, &context, &e);
            if (context) {
                op_t *op = context;
                op->errnum = errno ? errno : EIO;
                snprintf(op->error, sizeof op->error, "%s", e.text);
                complete_op(srv, op, OP_FAILED);
            }
            continue;
        }
        return;
    }
}

/* Nothing completed: sleep on the provider's wait fd when it allows it
 * (tcp: until the client's acknowledgements arrive), bounded so that a
 * completion read by another thread is seen soon; without one (shm, whose
 * writes complete as the client's side copies), let the other threads run. */
void rdma_wait_for_provider(rdma_server_t *srv, generation_t *gen)
{
    struct pollfd pfd = {.fd = gen->fab->wait_fd, .events = POLLIN};
    bool block = false;

    if (pthread_mutex_trylock(&gen->lock) == 0) {
        block = rdma_fabric_can_block(gen->fab);
        pthread_mutex_unlock(&gen->lock);
    }
    (void)srv;
    if (block)
        poll(&pfd, 1, 1);
    else
        sched_yield();
}
