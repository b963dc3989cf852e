/* One RDMA transfer of stageind's server: a GET writes a range of a cache
 * file into the client's memory, a PUT reads the client's bytes into a
 * sink, with up to rdma.depth operations in flight. */
#include "config.h"
#include "daemon/rdma/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"

#define STUCK_TEXT "rdma: the endpoint did not answer for %u s (a thread is stuck in the " \
                   "provider); it is retired"

/* Caller holds gen->lock. */
static int post_op(rdma_server_t *srv, generation_t *gen, const source_t *src,
                   const si_rdma_token_t *t, peer_t *peer, op_t *op)
{
    rdma_fabric_t *fab = gen->fab;
    void *local, *desc;
    ssize_t rc;

    if (src->mapped) {
        local = src->mapped + src->map_delta + op->off;
        desc = src->map_mr.mr ? src->map_mr.desc : NULL;
    } else {
        local = srv->pool + (size_t)op->buffer * srv->cfg.buffer_size;
        desc = gen->pool_mr.desc;
    }
    if (src->get && fab->write_flags) {
        /* FI_DELIVERY_COMPLETE where the provider's default completion
         * comes before the client holds the bytes (tcp;ofi_rxm; see
         * rdma_fabric_open and doc/rdma.md). */
        struct iovec iov = {.iov_base = local, .iov_len = op->len};
        struct fi_rma_iov rma = {.addr = t->raddr + op->off, .len = op->len, .key = t->key};
        struct fi_msg_rma msg = {.msg_iov = &iov, .desc = &desc, .iov_count = 1,
                                 .addr = peer->fi_addr, .rma_iov = &rma, .rma_iov_count = 1,
                                 .context = &op->ctx};
        rc = fi_writemsg(fab->ep, &msg, FI_COMPLETION | fab->write_flags);
    } else if (src->get) {
        rc = fi_write(fab->ep, local, op->len, desc, peer->fi_addr, t->raddr + op->off, t->key,
                      &op->ctx);
    } else {
        rc = fi_read(fab->ep, local, op->len, desc, peer->fi_addr, t->raddr + op->off, t->key,
                     &op->ctx);
    }
    return (int)rc;
}

/* Takes the current generation, the file mapping or pool buffers, and the
 * client's AV entry for a new transfer. */
static int transfer_begin(rdma_server_t *srv, transfer_t *tr, const si_rdma_token_t *t, int fd,
                          const rdma_window_t *window, uint64_t offset, uint64_t len,
                          si_error_t *err)
{
    generation_t *gen = NULL;
    int rc = 0;

    if (tr->src.get)
        rdma_source_map(srv, &tr->src, fd, window, offset, len);
    pthread_mutex_lock(&srv->lock);
    if (srv->transfers >= srv->cfg.max_concurrent) {
        rc = si_errnoprintf(err, EBUSY, "rdma: %u transfers running (rdma.max_concurrent)",
                            srv->transfers);
    } else if (!srv->current && !(srv->current = rdma_gen_open(srv, NULL, err))) {
        rc = -1;
    } else {
        gen = tr->gen = srv->current;
        gen->running++;
        srv->transfers++;
    }
    pthread_mutex_unlock(&srv->lock);
    if (rc < 0) {
        pthread_mutex_lock(&srv->lock);
        rdma_source_release(srv, &tr->src);
        pthread_mutex_unlock(&srv->lock);
        return -1;
    }
    if (rdma_gen_lock(srv, gen) < 0) {
        si_errnoprintf(err, ETIMEDOUT, STUCK_TEXT, srv->cfg.timeout_seconds);
        goto error;
    }
    rdma_source_register(gen, &tr->src, len);
    tr->peer = rdma_peer_get(gen, t, err);
    pthread_mutex_unlock(&gen->lock);
    if (!tr->peer)
        goto error;
    if (!tr->src.mapped) {
        pthread_mutex_lock(&srv->lock);
        for (unsigned i = 0; i < srv->cfg.depth && srv->free_count > 0; i++)
            tr->src.buffers[tr->src.buffer_count++] = srv->free_buffers[--srv->free_count];
        pthread_mutex_unlock(&srv->lock);
        if (tr->src.buffer_count == 0) {
            si_errnoprintf(err, EBUSY, "rdma: every pool buffer is in use");
            if (rdma_gen_lock(srv, gen) == 0) {
                rdma_peer_put(gen, tr->peer, false);
                pthread_mutex_unlock(&gen->lock);
            }
            goto error;
        }
    }
    return 0;
error:
    if (tr->src.map_mr.mr && rdma_gen_lock(srv, gen) == 0) {
        rdma_fabric_mr_close(gen->fab, &tr->src.map_mr);
        pthread_mutex_unlock(&gen->lock);
    }
    pthread_mutex_lock(&srv->lock);
    rdma_source_release(srv, &tr->src);
    gen->running--;
    srv->transfers--;
    rdma_gen_release_if_idle(srv, gen);
    pthread_mutex_unlock(&srv->lock);
    return -1;
}

/* A GET writes [offset, offset+len) of fd into the client; otherwise the
 * client's bytes are read and handed to sink in order (reads complete in
 * any order: a finished one waits in its slot until the bytes before it
 * have gone to the sink). */
static int run_transfer(rdma_server_t *srv, const si_rdma_token_t *t, int fd,
                        const rdma_window_t *window, uint64_t offset, uint64_t len, bool get,
                        rdma_sink_fn sink, void *sink_arg, uint64_t *moved, si_error_t *err)
{
    transfer_t *tr = calloc(1, sizeof *tr);
    op_t *ops;
    generation_t *gen;
    uint64_t next = 0, done = 0;
    unsigned depth, outstanding = 0;
    bool failed = false, timed_out = false, abandoned = false, stuck = false;
    double last_progress;
    si_error_t fail;
    int posted;

    *moved = 0;
    if (!tr)
        return si_errnoprintf(err, ENOMEM, "rdma: out of memory");
    ops = tr->ops;
    tr->src.get = get;
    fail.text[0] = '\0';
    if (si_rdma_token_check_range(t, 0, len, get ? SI_RDMA_ACCESS_WRITE : SI_RDMA_ACCESS_READ,
                                  err) < 0 ||
        (len > srv->cfg.max_transfer &&
         si_errnoprintf(err, E2BIG, "rdma: %" PRIu64 " bytes exceed rdma.max_transfer", len) < 0) ||
        transfer_begin(srv, tr, t, fd, window, offset, len, err) < 0) {
        free(tr);
        return -1;
    }
    gen = tr->gen;

    depth = tr->src.mapped ? srv->cfg.depth : tr->src.buffer_count;
    for (unsigned i = 0; i < depth; i++) {
        ops[i].owner = tr;
        ops[i].buffer = tr->src.mapped ? 0 : tr->src.buffers[i];
    }
    last_progress = si_mono_now();

    for (;;) {
        bool progressed = false;

        /* Post into idle slots: a GET through the pool reads the file first. */
        for (unsigned i = 0; i < depth && !failed && next < len; i++) {
            op_t *op = &ops[i];
            if (op->state != OP_IDLE)
                continue;
            op->off = next;
            uint64_t op_size = tr->src.mapped ? srv->cfg.op_size : srv->cfg.buffer_size;
            op->len = (size_t)(len - next < op_size ? len - next : op_size);
            if (tr->src.mapped) {
                /* End each operation on an op_size boundary of the file, so
                 * only the first starts at an unaligned address. */
                size_t in_chunk = (size_t)((tr->src.map_delta + next) % op_size);
                if (op->len > op_size - in_chunk)
                    op->len = (size_t)(op_size - in_chunk);
            }
            if (get && !tr->src.mapped) {
                unsigned char *buf = srv->pool + (size_t)op->buffer * srv->cfg.buffer_size;
                ssize_t r = pread(fd, buf, op->len, (off_t)(offset + op->off));
                if (r != (ssize_t)op->len) {
                    si_errnoprintf(&fail, r < 0 ? errno : EIO,
                                   "rdma: reading %zu bytes at %" PRIu64 " of the file: %s",
                                   op->len, offset + op->off, r < 0 ? strerror(errno) : "short read");
                    failed = true;
                    break;
                }
            }
            if (rdma_gen_lock(srv, gen) < 0) {
                stuck = failed = true;
                break;
            }
            op->state = OP_POSTED;
            posted = post_op(srv, gen, &tr->src, t, tr->peer, op);
            if (posted != 0)
                op->state = OP_IDLE;
            if (posted == -FI_EAGAIN)
                rdma_poll_completions(srv, gen);
            pthread_mutex_unlock(&gen->lock);
            if (posted == -FI_EAGAIN)
                break;
            if (posted != 0) {
                si_errprintf(&fail, "rdma: posting an RMA %s: %s", get ? "write" : "read",
                             gen->fab->fi->strerror(-posted));
                failed = true;
                break;
            }
            next += op->len;
            outstanding++;
            progressed = true;
        }
        if (stuck)
            break;

        if (rdma_gen_lock(srv, gen) < 0) {
            stuck = failed = true;
            break;
        }
        rdma_poll_completions(srv, gen);
        int states[RDMA_MAX_DEPTH];
        for (unsigned i = 0; i < depth; i++)
            states[i] = ops[i].state;
        pthread_mutex_unlock(&gen->lock);

        for (unsigned i = 0; i < depth; i++) {
            if (states[i] == OP_FAILED) {
                if (!failed)
                    si_errnoprintf(&fail, ops[i].errnum, "%s", ops[i].error);
                failed = true;
            }
        }
        /* Finished operations are this thread's alone. A read goes to the
         * sink when it is the next in order; after a failure every finished
         * slot is released. */
        for (bool again = true; again;) {
            again = false;
            for (unsigned i = 0; i < depth; i++) {
                op_t *op = &ops[i];
                if (states[i] != OP_DONE && states[i] != OP_FAILED)
                    continue;
                if (states[i] == OP_DONE && !get && !failed && op->off != done)
                    continue;
                if (states[i] == OP_DONE && !failed) {
                    if (!get && sink(sink_arg, srv->pool + (size_t)op->buffer *
                                     srv->cfg.buffer_size, op->len, &fail) < 0)
                        failed = true;
                    else
                        done += op->len;
                }
                op->state = states[i] = OP_IDLE;
                outstanding--;
                progressed = again = true;
            }
        }
        if (outstanding == 0 && (failed || next >= len))
            break;
        if (progressed) {
            last_progress = si_mono_now();
        } else if (timed_out && si_mono_now() - last_progress > 2.0 * srv->cfg.timeout_seconds) {
            /* Still nothing: the provider will not complete these. Leave them
             * (and their buffers or mapping) to the generation, which ends
             * them when it closes. */
            if (rdma_gen_lock(srv, gen) < 0) {
                stuck = true;
                break;
            }
            for (unsigned i = 0; i < depth; i++)
                if (ops[i].state == OP_POSTED)
                    tr->left++;
            if (tr->left > 0) {
                pthread_mutex_lock(&srv->lock);
                tr->next = gen->abandoned;
                gen->abandoned = tr;
                gen->abandoned_count++;
                pthread_mutex_unlock(&srv->lock);
                abandoned = true;
            }
            pthread_mutex_unlock(&gen->lock);
            si_errnoprintf(&fail, ETIMEDOUT, "rdma: %u operations never completed (client gone?)",
                           outstanding);
            break;
        } else if (!timed_out && si_mono_now() - last_progress > srv->cfg.timeout_seconds) {
            /* The client stopped answering: post nothing more, give the
             * provider one more period to fail what is in flight, and send
             * new transfers to a fresh endpoint (this one may be wedged).
             * The address stays in the AV meanwhile. */
            si_errnoprintf(&fail, ETIMEDOUT, "rdma: no completion for %u s; client gone?",
                           srv->cfg.timeout_seconds);
            failed = timed_out = true;
            pthread_mutex_lock(&srv->lock);
            rdma_gen_retire(srv, gen);
            pthread_mutex_unlock(&srv->lock);
        } else {
            rdma_wait_for_provider(srv, gen);
        }
    }

    if (stuck) {
        /* Another thread has been inside the provider on this endpoint for
         * timeout_seconds (rdma_gen_lock retired it). Operations of this transfer
         * may still be posted there: its memory stays where they can reach it. */
        si_errnoprintf(&fail, ETIMEDOUT, STUCK_TEXT, srv->cfg.timeout_seconds);
        abandoned = true;
    } else if (!abandoned && rdma_gen_lock(srv, gen) == 0) {
        rdma_peer_put(gen, tr->peer, failed);
        rdma_fabric_mr_close(gen->fab, &tr->src.map_mr);
        pthread_mutex_unlock(&gen->lock);
    } else if (!abandoned) {
        abandoned = true; /* as above */
    }
    pthread_mutex_lock(&srv->lock);
    srv->transfers--;
    gen->running--;
    if (get)
        srv->bytes_sent += done;
    else
        srv->bytes_received += done;
    if (failed)
        srv->transfers_failed++;
    if (!abandoned) {
        rdma_source_release(srv, &tr->src);
        free(tr);
    }
    rdma_gen_release_if_idle(srv, gen);
    pthread_mutex_unlock(&srv->lock);
    *moved = done;
    if (failed) {
        if (err)
            *err = fail;
        return -1;
    }
    return 0;
}

int rdma_server_send_file(rdma_server_t *srv, const si_rdma_token_t *token, int fd,
                          uint64_t offset, uint64_t len, uint64_t *moved, si_error_t *err)
{
    return run_transfer(srv, token, fd, NULL, offset, len, true, NULL, NULL, moved, err);
}

int rdma_server_send_range(rdma_server_t *srv, const si_rdma_token_t *token, int fd,
                           uint64_t from, uint64_t size, uint64_t offset, uint64_t len,
                           uint64_t *moved, si_error_t *err)
{
    if (offset > size || len > size - offset)
        return si_errnoprintf(err, EINVAL, "rdma: bytes %" PRIu64 "+%" PRIu64 " are not inside"
                              " the object's %" PRIu64, offset, len, size);
    rdma_window_t window = {from, size};
    return run_transfer(srv, token, fd, &window, from + offset, len, true, NULL, NULL, moved,
                        err);
}

int rdma_server_recv(rdma_server_t *srv, const si_rdma_token_t *token, uint64_t len,
                     rdma_sink_fn sink, void *arg, uint64_t *moved, si_error_t *err)
{
    return run_transfer(srv, token, -1, NULL, 0, len, false, sink, arg, moved, err);
}

typedef struct {
    int fd;
    uint64_t at;
} file_sink_t;

static int to_file(void *arg, const void *data, size_t len, si_error_t *err)
{
    file_sink_t *f = arg;
    ssize_t w = pwrite(f->fd, data, len, (off_t)f->at);
    if (w != (ssize_t)len)
        return si_errnoprintf(err, w < 0 ? errno : EIO,
                              "rdma: writing %zu bytes at %" PRIu64 " of the file: %s", len,
                              f->at, w < 0 ? strerror(errno) : "short write");
    f->at += len;
    return 0;
}

int rdma_server_recv_file(rdma_server_t *srv, const si_rdma_token_t *token, int fd,
                          uint64_t offset, uint64_t len, uint64_t *moved, si_error_t *err)
{
    file_sink_t f = {.fd = fd, .at = offset};
    return rdma_server_recv(srv, token, len, to_file, &f, moved, err);
}

