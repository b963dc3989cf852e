/* stageind's RDMA transfers (rdma.h): a pool of registered buffers, one
 * endpoint shared by all transfers, an AV entry per client address.
 *
 * Threads: each S3 handler thread runs its own transfer loop. libfabric is
 * used FI_THREAD_DOMAIN under fab->lock; whichever thread reads the CQ marks
 * the completed operation in its owner's table (the context pointer), so no
 * progress thread is needed. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "daemon/rdma/transport.h"
#include "daemon/rdma/rdma.h"

#define RDMA_MAX_DEPTH 256

typedef struct transfer transfer_t;

typedef struct peer {
    struct peer *next;
    unsigned char addr[SI_RDMA_ADDR_MAX];
    size_t addr_len;
    fi_addr_t fi_addr;
    unsigned refs;
    bool failed;      /* a transfer to it failed: drop it when unused */
    bool removed;     /* already taken out of the AV */
    double last_used;
} peer_t;

struct rdma_server {
    rdma_config_t cfg;
    rdma_fabric_t *fab; /* fab->lock guards everything below too */
    unsigned char *pool;
    rdma_mr_t pool_mr;
    unsigned *free_buffers; /* stack of pool indices */
    unsigned free_count;
    peer_t *peers;
    unsigned peer_count;
    unsigned transfers;
    transfer_t *abandoned; /* operations the provider never completed */
    unsigned abandoned_count;
    uint64_t bytes_sent, bytes_received, transfers_failed;
};

enum { OP_IDLE, OP_POSTED, OP_DONE, OP_FAILED };

/* One RMA operation; the provider's context space comes first (FI_CONTEXT2). */
typedef struct {
    struct fi_context2 ctx;
    transfer_t *owner;
    int state;
    int errnum;
    unsigned buffer; /* pool index (pool path) */
    uint64_t off;    /* offset inside the transfer */
    size_t len;
    char error[160];
} op_t;

/* The data source or sink of one transfer. */
typedef struct {
    bool get;              /* RMA write into the client (else read from it) */
    unsigned char *mapped; /* zero-copy GET: the file region, mapped */
    size_t map_len;
    size_t map_delta;      /* offset of the first byte inside the mapping */
    rdma_mr_t map_mr;      /* its registration under FI_MR_LOCAL */
    unsigned buffers[RDMA_MAX_DEPTH];
    unsigned buffer_count;
} source_t;

/* Heap-allocated: a transfer whose operations never complete (a provider
 * that drops an RMA with a bad key, a peer that hangs) is abandoned to the
 * server, which releases it when the last completion arrives or at close. */
struct transfer {
    op_t ops[RDMA_MAX_DEPTH];
    source_t src;
    unsigned left; /* operations still posted once abandoned */
    peer_t *peer;  /* kept in the AV while operations to it may run */
    transfer_t *next;
};

static void source_unlocked_release(rdma_server_t *srv, source_t *src);
static void peer_put(rdma_server_t *srv, peer_t *p, bool failed);

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

rdma_server_t *rdma_server_open(const rdma_config_t *cfg, si_error_t *err)
{
    rdma_server_t *srv;
    size_t pool_bytes;

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
    srv->fab = rdma_fabric_open(cfg->provider, cfg->domain, err);
    if (!srv->fab)
        goto error;
    if (srv->cfg.buffer_size > srv->fab->max_msg_size)
        srv->cfg.buffer_size = srv->fab->max_msg_size;
    pool_bytes = (size_t)srv->cfg.buffer_size * cfg->buffer_count;
    /* Page-aligned and touched, so the pages exist (FI_MR_ALLOCATED). */
    if (posix_memalign((void **)&srv->pool, (size_t)sysconf(_SC_PAGESIZE), pool_bytes) != 0) {
        srv->pool = NULL;
        si_errnoprintf(err, ENOMEM, "rdma: cannot allocate a %zu-byte buffer pool", pool_bytes);
        goto error;
    }
    memset(srv->pool, 0, pool_bytes);
    srv->free_buffers = calloc(cfg->buffer_count, sizeof *srv->free_buffers);
    if (!srv->free_buffers) {
        si_errnoprintf(err, ENOMEM, "rdma: out of memory");
        goto error;
    }
    for (unsigned i = 0; i < cfg->buffer_count; i++)
        srv->free_buffers[srv->free_count++] = cfg->buffer_count - 1 - i;
    /* Local source of writes and target of reads. */
    if (rdma_fabric_mr_reg(srv->fab, srv->pool, pool_bytes, FI_WRITE | FI_READ, &srv->pool_mr,
                           err) < 0)
        goto error;
    return srv;
error:
    rdma_server_close(srv);
    return NULL;
}

void rdma_server_close(rdma_server_t *srv)
{
    peer_t *next;

    if (!srv)
        return;
    for (peer_t *p = srv->peers; p; p = next) {
        next = p->next;
        if (!p->removed)
            fi_av_remove(srv->fab->av, &p->fi_addr, 1, 0);
        free(p);
    }
    if (srv->fab) {
        /* Closing the endpoint ends abandoned operations; then their memory goes. */
        if (srv->fab->ep)
            fi_close(&srv->fab->ep->fid);
        srv->fab->ep = NULL;
        while (srv->abandoned) {
            transfer_t *tr = srv->abandoned;
            srv->abandoned = tr->next;
            source_unlocked_release(srv, &tr->src);
            free(tr);
        }
        rdma_fabric_mr_close(srv->fab, &srv->pool_mr);
    }
    rdma_fabric_close(srv->fab);
    free(srv->pool);
    free(srv->free_buffers);
    free(srv);
}

const char *rdma_server_provider(const rdma_server_t *srv)
{
    return rdma_fabric_provider(srv->fab);
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
    rdma_server_sweep(srv);
    *token = t;
    return 0;
}

/* Caller holds the lock. */
static void peer_drop(rdma_server_t *srv, peer_t *peer)
{
    for (peer_t **pp = &srv->peers; *pp; pp = &(*pp)->next) {
        if (*pp == peer) {
            *pp = peer->next;
            if (!peer->removed)
                fi_av_remove(srv->fab->av, &peer->fi_addr, 1, 0);
            free(peer);
            srv->peer_count--;
            return;
        }
    }
}

static peer_t *peer_get(rdma_server_t *srv, const si_rdma_token_t *t, si_error_t *err)
{
    peer_t *p;
    int rc;

    for (p = srv->peers; p; p = p->next)
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
        rc = fi_av_insert(srv->fab->av, p->addr, 1, &p->fi_addr, 0, NULL);
        if (rc != 1) {
            free(p);
            si_errnoprintf(err, EINVAL, "rdma: the token's client address is not a valid %s "
                           "address", srv->cfg.provider);
            return NULL;
        }
        p->next = srv->peers;
        srv->peers = p;
        srv->peer_count++;
    }
    p->refs++;
    return p;
}

static void peer_put(rdma_server_t *srv, peer_t *p, bool failed)
{
    p->refs--;
    p->last_used = now_seconds();
    if (failed)
        p->failed = true;
    if (p->refs == 0 && p->failed)
        peer_drop(srv, p);
}

void rdma_server_sweep(rdma_server_t *srv)
{
    double cutoff = now_seconds() - srv->cfg.idle_seconds;
    peer_t *next;

    pthread_mutex_lock(&srv->fab->lock);
    for (peer_t *p = srv->peers; p; p = next) {
        next = p->next;
        if (p->refs == 0 && p->last_used < cutoff)
            peer_drop(srv, p);
    }
    pthread_mutex_unlock(&srv->fab->lock);
}

/* Marks an operation finished; frees an abandoned transfer with its last
 * completion. Caller holds the lock. */
static void complete_op(rdma_server_t *srv, op_t *op, int state)
{
    transfer_t *tr = op->owner;

    if (!tr->left) {
        op->state = state;
        return;
    }
    op->state = OP_IDLE;
    if (--tr->left > 0)
        return;
    for (transfer_t **pp = &srv->abandoned; *pp; pp = &(*pp)->next) {
        if (*pp == tr) {
            *pp = tr->next;
            break;
        }
    }
    srv->abandoned_count--;
    peer_put(srv, tr->peer, true);
    source_unlocked_release(srv, &tr->src);
    free(tr);
}

/* Reads completions for every transfer. Caller holds the lock. */
static void poll_completions(rdma_server_t *srv)
{
    struct fi_cq_entry entries[32];
    ssize_t n;

    for (;;) {
        n = fi_cq_read(srv->fab->cq, entries, 32);
        if (n > 0) {
            for (ssize_t i = 0; i < n; i++)
                complete_op(srv, entries[i].op_context, OP_DONE);
            continue;
        }
        if (n == -FI_EAVAIL) {
            si_error_t e;
            void *context;
            rdma_fabric_cq_error(srv->fab, &context, &e);
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


/* Maps the file region for a GET when configured and allowed. */
static void source_map(rdma_server_t *srv, source_t *src, int fd, uint64_t offset, uint64_t len)
{
    long page = sysconf(_SC_PAGESIZE);
    uint64_t start = offset - offset % (uint64_t)page;
    si_error_t ignored;
    void *m;

    if (!srv->cfg.zero_copy || len + (offset - start) > SIZE_MAX)
        return;
    src->map_delta = (size_t)(offset - start);
    src->map_len = (size_t)len + src->map_delta;
    m = mmap(NULL, src->map_len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, (off_t)start);
    if (m == MAP_FAILED)
        return;
    src->mapped = m;
    if (rdma_fabric_local_mr(srv->fab)) {
        pthread_mutex_lock(&srv->fab->lock);
        int rc = rdma_fabric_mr_reg(srv->fab, src->mapped, src->map_len, FI_WRITE, &src->map_mr,
                                    &ignored);
        pthread_mutex_unlock(&srv->fab->lock);
        if (rc < 0) { /* the provider cannot register a file mapping: use the pool */
            munmap(src->mapped, src->map_len);
            src->mapped = NULL;
        }
    }
}

/* Caller holds the lock. */
static void source_unlocked_release(rdma_server_t *srv, source_t *src)
{
    rdma_fabric_mr_close(srv->fab, &src->map_mr);
    for (unsigned i = 0; i < src->buffer_count; i++)
        srv->free_buffers[srv->free_count++] = src->buffers[i];
    src->buffer_count = 0;
    if (src->mapped)
        munmap(src->mapped, src->map_len);
    src->mapped = NULL;
}

static void source_release(rdma_server_t *srv, source_t *src)
{
    pthread_mutex_lock(&srv->fab->lock);
    source_unlocked_release(srv, src);
    pthread_mutex_unlock(&srv->fab->lock);
}

/* Nothing completed: sleep on the provider's wait fd when it allows it
 * (tcp: until the client's acknowledgements arrive), bounded so that a
 * completion read by another thread is seen soon; without one (shm, whose
 * writes complete as they are posted), let the other threads run. */
static void wait_for_provider(rdma_server_t *srv)
{
    struct pollfd pfd = {.fd = srv->fab->wait_fd, .events = POLLIN};
    bool block;

    pthread_mutex_lock(&srv->fab->lock);
    block = rdma_fabric_can_block(srv->fab);
    pthread_mutex_unlock(&srv->fab->lock);
    if (block)
        poll(&pfd, 1, 1);
    else
        sched_yield();
}

static int post_op(rdma_server_t *srv, const source_t *src, const si_rdma_token_t *t, peer_t *peer,
                   op_t *op)
{
    void *local, *desc;
    ssize_t rc;

    if (src->mapped) {
        local = src->mapped + src->map_delta + op->off;
        desc = src->map_mr.mr ? fi_mr_desc(src->map_mr.mr) : NULL;
    } else {
        local = srv->pool + (size_t)op->buffer * srv->cfg.buffer_size;
        desc = srv->pool_mr.desc;
    }
    if (src->get && srv->fab->write_flags) {
        /* FI_DELIVERY_COMPLETE where the provider's default completion
         * comes before the client holds the bytes (tcp;ofi_rxm; see
         * rdma_fabric_open and doc/rdma.md). */
        struct iovec iov = {.iov_base = local, .iov_len = op->len};
        struct fi_rma_iov rma = {.addr = t->raddr + op->off, .len = op->len, .key = t->key};
        struct fi_msg_rma msg = {.msg_iov = &iov, .desc = &desc, .iov_count = 1,
                                 .addr = peer->fi_addr, .rma_iov = &rma, .rma_iov_count = 1,
                                 .context = &op->ctx};
        rc = fi_writemsg(srv->fab->ep, &msg, FI_COMPLETION | srv->fab->write_flags);
    } else if (src->get) {
        rc = fi_write(srv->fab->ep, local, op->len, desc, peer->fi_addr, t->raddr + op->off,
                      t->key, &op->ctx);
    } else {
        rc = fi_read(srv->fab->ep, local, op->len, desc, peer->fi_addr, t->raddr + op->off,
                     t->key, &op->ctx);
    }
    return (int)rc;
}

static int run_transfer(rdma_server_t *srv, const si_rdma_token_t *t, int fd, uint64_t offset,
                        uint64_t len, bool get, uint64_t *moved, si_error_t *err)
{
    transfer_t *tr = calloc(1, sizeof *tr);
    op_t *ops;
    peer_t *peer = NULL;
    uint64_t next = 0, done = 0;
    unsigned depth, outstanding = 0;
    bool failed = false, timed_out = false;
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
                                  err) < 0)
        goto error;
    if (len > srv->cfg.max_transfer) {
        si_errnoprintf(err, E2BIG, "rdma: %" PRIu64 " bytes exceed rdma.max_transfer", len);
        goto error;
    }
    if (get)
        source_map(srv, &tr->src, fd, offset, len);

    pthread_mutex_lock(&srv->fab->lock);
    if (srv->transfers >= srv->cfg.max_concurrent) {
        pthread_mutex_unlock(&srv->fab->lock);
        si_errnoprintf(err, EBUSY, "rdma: %u transfers running (rdma.max_concurrent)",
                       srv->transfers);
        goto error;
    }
    if (!tr->src.mapped) {
        for (unsigned i = 0; i < srv->cfg.depth && srv->free_count > 0; i++)
            tr->src.buffers[tr->src.buffer_count++] = srv->free_buffers[--srv->free_count];
        if (tr->src.buffer_count == 0) {
            pthread_mutex_unlock(&srv->fab->lock);
            si_errnoprintf(err, EBUSY, "rdma: every pool buffer is in use");
            goto error;
        }
    }
    peer = peer_get(srv, t, err);
    if (!peer) {
        pthread_mutex_unlock(&srv->fab->lock);
        goto error;
    }
    srv->transfers++;
    pthread_mutex_unlock(&srv->fab->lock);

    depth = tr->src.mapped ? srv->cfg.depth : tr->src.buffer_count;
    for (unsigned i = 0; i < depth; i++) {
        ops[i].owner = tr;
        ops[i].buffer = tr->src.mapped ? 0 : tr->src.buffers[i];
    }
    last_progress = now_seconds();

    for (;;) {
        bool progressed = false;

        /* Post into idle slots: a GET through the pool reads the file first. */
        for (unsigned i = 0; i < depth && !failed && next < len; i++) {
            op_t *op = &ops[i];
            if (op->state != OP_IDLE)
                continue;
            op->off = next;
            op->len = (size_t)(len - next < srv->cfg.buffer_size ? len - next : srv->cfg.buffer_size);
            if (tr->src.mapped) {
                /* End each operation on a buffer_size boundary of the mapping,
                 * so only the first starts at an unaligned address. */
                size_t in_chunk = (tr->src.map_delta + next) % srv->cfg.buffer_size;
                if (op->len > srv->cfg.buffer_size - in_chunk)
                    op->len = srv->cfg.buffer_size - in_chunk;
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
            pthread_mutex_lock(&srv->fab->lock);
            op->state = OP_POSTED;
            posted = post_op(srv, &tr->src, t, peer, op);
            if (posted != 0)
                op->state = OP_IDLE;
            if (posted == -FI_EAGAIN)
                poll_completions(srv);
            pthread_mutex_unlock(&srv->fab->lock);
            if (posted == -FI_EAGAIN)
                break;
            if (posted != 0) {
                si_errprintf(&fail, "rdma: posting an RMA %s: %s", get ? "write" : "read",
                             fi_strerror(-posted));
                failed = true;
                break;
            }
            next += op->len;
            outstanding++;
            progressed = true;
        }

        pthread_mutex_lock(&srv->fab->lock);
        poll_completions(srv);
        pthread_mutex_unlock(&srv->fab->lock);

        for (unsigned i = 0; i < depth; i++) {
            op_t *op = &ops[i];
            int state;
            pthread_mutex_lock(&srv->fab->lock);
            state = op->state;
            pthread_mutex_unlock(&srv->fab->lock);
            if (state == OP_DONE) {
                if (!get && !failed) {
                    unsigned char *buf = srv->pool + (size_t)op->buffer * srv->cfg.buffer_size;
                    ssize_t w = pwrite(fd, buf, op->len, (off_t)(offset + op->off));
                    if (w != (ssize_t)op->len) {
                        si_errnoprintf(&fail, w < 0 ? errno : EIO,
                                       "rdma: writing %zu bytes at %" PRIu64 " of the file: %s",
                                       op->len, offset + op->off,
                                       w < 0 ? strerror(errno) : "short write");
                        failed = true;
                    }
                }
                if (!failed)
                    done += op->len;
            } else if (state == OP_FAILED) {
                if (!failed)
                    si_errnoprintf(&fail, op->errnum, "%s", op->error);
                failed = true;
            } else {
                continue;
            }
            op->state = OP_IDLE;
            outstanding--;
            progressed = true;
        }
        if (outstanding == 0 && (failed || next >= len))
            break;
        if (progressed) {
            last_progress = now_seconds();
        } else if (timed_out && now_seconds() - last_progress > 2.0 * srv->cfg.timeout_seconds) {
            /* Still nothing: the provider will not complete these. Leave them
             * (and their buffers or mapping) to the server. */
            pthread_mutex_lock(&srv->fab->lock);
            for (unsigned i = 0; i < depth; i++)
                if (ops[i].state == OP_POSTED)
                    tr->left++;
            if (tr->left > 0) {
                tr->peer = peer;
                tr->next = srv->abandoned;
                srv->abandoned = tr;
                srv->abandoned_count++;
            }
            pthread_mutex_unlock(&srv->fab->lock);
            si_errnoprintf(&fail, ETIMEDOUT, "rdma: %u operations never completed (client gone?)",
                           outstanding);
            break;
        } else if (!timed_out && now_seconds() - last_progress > srv->cfg.timeout_seconds) {
            /* The client stopped answering: post nothing more and give the
             * provider one more period to fail what is in flight. The address
             * stays in the AV meanwhile (removing it under a posted operation
             * crashes the shm provider). */
            si_errnoprintf(&fail, ETIMEDOUT, "rdma: no completion for %u s; client gone?",
                           srv->cfg.timeout_seconds);
            failed = timed_out = true;
        } else {
            wait_for_provider(srv);
        }
    }

    pthread_mutex_lock(&srv->fab->lock);
    srv->transfers--;
    if (get)
        srv->bytes_sent += done;
    else
        srv->bytes_received += done;
    if (failed)
        srv->transfers_failed++;
    if (tr->left == 0) {
        peer_put(srv, peer, failed);
        source_unlocked_release(srv, &tr->src);
        free(tr);
    }
    pthread_mutex_unlock(&srv->fab->lock);
    *moved = done;
    if (failed) {
        if (err)
            *err = fail;
        return -1;
    }
    return 0;
error:
    source_release(srv, &tr->src);
    free(tr);
    return -1;
}

int rdma_server_send_file(rdma_server_t *srv, const si_rdma_token_t *token, int fd,
                          uint64_t offset, uint64_t len, uint64_t *moved, si_error_t *err)
{
    return run_transfer(srv, token, fd, offset, len, true, moved, err);
}

int rdma_server_recv_file(rdma_server_t *srv, const si_rdma_token_t *token, int fd,
                          uint64_t offset, uint64_t len, uint64_t *moved, si_error_t *err)
{
    return run_transfer(srv, token, fd, offset, len, false, moved, err);
}

void rdma_server_stats(rdma_server_t *srv, rdma_stats_t *out)
{
    pthread_mutex_lock(&srv->fab->lock);
    out->registrations = srv->fab->mrs_live;
    out->buffers_free = srv->free_count;
    out->buffers_total = srv->cfg.buffer_count;
    out->peers = srv->peer_count;
    out->transfers = srv->transfers;
    out->bytes_sent = srv->bytes_sent;
    out->bytes_received = srv->bytes_received;
    out->transfers_failed = srv->transfers_failed;
    out->abandoned = srv->abandoned_count;
    pthread_mutex_unlock(&srv->fab->lock);
}
