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

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/rdma/transport.h"
#include "daemon/rdma/rdma.h"
#include "common/clock.h"

#define RDMA_MAX_DEPTH 256
#define STUCK_TEXT "rdma: the endpoint did not answer for %u s (a thread is stuck in the " \
                   "provider); it is retired"

typedef struct transfer transfer_t;
typedef struct generation generation_t;
typedef struct mapping mapping_t;

typedef struct peer {
    struct peer *next;
    unsigned char addr[SI_RDMA_ADDR_MAX];
    size_t addr_len;
    fi_addr_t fi_addr;
    unsigned refs;
    bool failed;      /* a transfer to it failed: drop it when unused */
    double last_used;
} peer_t;

/* One endpoint with its AV and the pool's registration in its domain. */
struct generation {
    pthread_mutex_t lock;   /* every libfabric call on fab */
    rdma_fabric_t *fab;
    rdma_mr_t pool_mr;
    peer_t *peers;
    unsigned peer_count;
    unsigned running;       /* transfers running on it (srv->lock) */
    transfer_t *abandoned;  /* transfers whose operations never completed (srv->lock) */
    unsigned abandoned_count;
    generation_t *next;     /* on srv->retired */
};

struct rdma_server {
    rdma_config_t cfg;
    pthread_mutex_t lock;   /* everything below, and the generations' lists */
    generation_t *current;  /* NULL when re-opening failed: opened on next use */
    generation_t *retired;  /* still used by transfers */
    unsigned char *pool;
    size_t pool_bytes;
    unsigned *free_buffers; /* stack of pool indices */
    unsigned free_count;
    unsigned transfers;
    unsigned generations;   /* endpoints opened so far */
    mapping_t *mappings;    /* of cache files, most recently used first */
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

/* A cache file mapped whole, kept for the GETs that follow (the pages of
 * a mapping populated once instead of for every range: mapping, populating
 * and unmapping cost a quarter of the server's time per GiB; BENCHMARKS.md).
 * Cache files are not modified once committed; a replaced one has another
 * inode or mtime, so an entry matches only the file it was made from. */
struct mapping {
    struct mapping *next;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    int fd;                /* kept to see the file leave the cache (st_nlink 0) */
    unsigned char *addr;
    unsigned refs;         /* transfers using it */
    double last_used;
};

#define MAPPINGS_KEPT 64   /* unused mappings kept at most (oldest dropped first) */

/* The data source or sink of one transfer. */
typedef struct {
    bool get;              /* RMA write into the client (else read from it) */
    mapping_t *mapping;    /* zero-copy GET: the file, mapped */
    unsigned char *mapped; /* its first byte */
    size_t map_delta;      /* the transfer's offset in the file */
    rdma_mr_t map_mr;      /* the transfer's range registered, under FI_MR_LOCAL */
    unsigned buffers[RDMA_MAX_DEPTH];
    unsigned buffer_count;
} source_t;

/* Heap-allocated, so that an abandoned transfer can outlive its call. */
struct transfer {
    op_t ops[RDMA_MAX_DEPTH];
    source_t src;
    generation_t *gen;
    unsigned left; /* operations still posted once abandoned */
    peer_t *peer;  /* kept in the AV while operations to it may run */
    transfer_t *next;
};

static void source_release(rdma_server_t *srv, source_t *src);
static void peer_put(generation_t *gen, peer_t *p, bool failed);
static void mappings_trim(rdma_server_t *srv, bool all);

/* ---- generations (caller holds srv->lock) -------------------------------- */

/* A generation on fab (opened here when NULL; taken over either way). */
static generation_t *gen_open(rdma_server_t *srv, rdma_fabric_t *fab, si_error_t *err)
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

static void gen_close(rdma_server_t *srv, generation_t *gen)
{
    peer_t *next;

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
        source_release(srv, &tr->src);
        free(tr);
    }
    for (peer_t *p = gen->peers; p; p = next) {
        next = p->next;
        free(p);
    }
    rdma_fabric_mr_close(gen->fab, &gen->pool_mr);
    rdma_fabric_close(gen->fab);
    pthread_mutex_destroy(&gen->lock);
    free(gen);
}

/* Closes a retired generation once no transfer runs on it. */
static void gen_release_if_idle(rdma_server_t *srv, generation_t *gen)
{
    if (gen == srv->current || gen->running > 0)
        return;
    for (generation_t **pp = &srv->retired; *pp; pp = &(*pp)->next) {
        if (*pp == gen) {
            *pp = gen->next;
            gen_close(srv, gen);
            return;
        }
    }
}

/* Its endpoint stopped answering: new transfers go to a fresh one. */
static void gen_retire(rdma_server_t *srv, generation_t *gen)
{
    si_error_t ignored;

    if (gen != srv->current)
        return;
    gen->next = srv->retired;
    srv->retired = gen;
    srv->current = gen_open(srv, NULL, &ignored); /* NULL: tried again on next use */
}

/* Takes gen->lock, waiting at most timeout_seconds; else retires gen (a
 * thread holds it inside the provider and may never return) and fails
 * with ETIMEDOUT. Called without srv->lock. */
static int gen_lock(rdma_server_t *srv, generation_t *gen)
{
    struct timespec until;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += srv->cfg.timeout_seconds;
    if (pthread_mutex_timedlock(&gen->lock, &until) == 0)
        return 0;
    pthread_mutex_lock(&srv->lock);
    gen_retire(srv, gen);
    pthread_mutex_unlock(&srv->lock);
    errno = ETIMEDOUT;
    return -1;
}

/* ---- life cycle ------------------------------------------------------------ */

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
    if (!(srv->current = gen_open(srv, fab, err)))
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
        gen_close(srv, gen);
    }
    if (srv->current)
        gen_close(srv, srv->current);
    mappings_trim(srv, true);
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

/* ---- client addresses (caller holds gen->lock) ------------------------------ */

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

static peer_t *peer_get(generation_t *gen, const si_rdma_token_t *t, si_error_t *err)
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

static void peer_put(generation_t *gen, peer_t *p, bool failed)
{
    p->refs--;
    p->last_used = si_mono_now();
    if (failed)
        p->failed = true;
    if (p->refs == 0 && p->failed)
        peer_drop(gen, p);
}

void rdma_server_sweep(rdma_server_t *srv)
{
    double cutoff = si_mono_now() - srv->cfg.idle_seconds;
    generation_t *gen;
    peer_t *next;

    /* the current generation, kept from closing while it is swept */
    pthread_mutex_lock(&srv->lock);
    gen = srv->current;
    if (gen)
        gen->running++;
    pthread_mutex_unlock(&srv->lock);
    if (!gen)
        return;
    if (pthread_mutex_trylock(&gen->lock) == 0) { /* busy: sweep another time */
        for (peer_t *p = gen->peers; p; p = next) {
            next = p->next;
            if (p->refs == 0 && p->last_used < cutoff)
                peer_drop(gen, p);
        }
        pthread_mutex_unlock(&gen->lock);
    }
    pthread_mutex_lock(&srv->lock);
    gen->running--;
    gen_release_if_idle(srv, gen);
    mappings_trim(srv, false);
    pthread_mutex_unlock(&srv->lock);
}

/* ---- completions (caller holds gen->lock) ------------------------------------ */

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
    peer_put(gen, tr->peer, true);
    rdma_fabric_mr_close(gen->fab, &tr->src.map_mr);
    pthread_mutex_lock(&srv->lock);
    for (transfer_t **pp = &gen->abandoned; *pp; pp = &(*pp)->next) {
        if (*pp == tr) {
            *pp = tr->next;
            break;
        }
    }
    gen->abandoned_count--;
    source_release(srv, &tr->src);
    pthread_mutex_unlock(&srv->lock);
    free(tr);
}

static void poll_completions(rdma_server_t *srv, generation_t *gen)
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
static void wait_for_provider(rdma_server_t *srv, generation_t *gen)
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

/* ---- sources -------------------------------------------------------------------- */

/* Drops unused mappings beyond MAPPINGS_KEPT, those unused for
 * idle_seconds and those of files the cache has removed (a mapping would
 * keep their space), or every unused one when all is set. Caller holds
 * srv->lock. */
static void mappings_trim(rdma_server_t *srv, bool all)
{
    double cutoff = si_mono_now() - srv->cfg.idle_seconds;
    unsigned unused = 0;
    struct stat st;

    for (mapping_t **pp = &srv->mappings; *pp;) {
        mapping_t *m = *pp;
        if (m->refs == 0 && (all || ++unused > MAPPINGS_KEPT || m->last_used < cutoff ||
                             fstat(m->fd, &st) < 0 || st.st_nlink == 0)) {
            *pp = m->next;
            munmap(m->addr, (size_t)m->size);
            close(m->fd);
            free(m);
            continue;
        }
        pp = &m->next;
    }
}

/* The mapping of fd's file for a zero-copy GET, made on first use. */
static void source_map(rdma_server_t *srv, source_t *src, int fd, uint64_t offset, uint64_t len)
{
    struct stat st;
    mapping_t *m;
    void *addr;

    if (!srv->cfg.zero_copy || fstat(fd, &st) < 0 || st.st_size <= 0 ||
        (uint64_t)st.st_size < offset + len || (uint64_t)st.st_size > SIZE_MAX)
        return;
    pthread_mutex_lock(&srv->lock);
    for (mapping_t **pp = &srv->mappings; *pp; pp = &(*pp)->next) {
        m = *pp;
        if (m->dev == st.st_dev && m->ino == st.st_ino && m->size == st.st_size &&
            m->mtime.tv_sec == st.st_mtim.tv_sec && m->mtime.tv_nsec == st.st_mtim.tv_nsec) {
            *pp = m->next; /* to the front */
            m->next = srv->mappings;
            srv->mappings = m;
            goto found;
        }
    }
    pthread_mutex_unlock(&srv->lock);
    m = NULL;
    addr = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (addr == MAP_FAILED || !(m = calloc(1, sizeof *m)) ||
        (m->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
        if (addr != MAP_FAILED)
            munmap(addr, (size_t)st.st_size);
        free(m);
        return;
    }
    m->dev = st.st_dev;
    m->ino = st.st_ino;
    m->size = st.st_size;
    m->mtime = st.st_mtim;
    m->addr = addr;
    pthread_mutex_lock(&srv->lock);
    m->next = srv->mappings;
    srv->mappings = m;
found:
    m->refs++;
    src->mapping = m;
    src->mapped = m->addr;
    src->map_delta = (size_t)offset;
    mappings_trim(srv, false);
    pthread_mutex_unlock(&srv->lock);
}

/* Registers the transfer's range of the mapping where the provider wants
 * local registrations; the pool is used if that fails. Caller holds
 * gen->lock (and the mapping stays referenced). */
static void source_register(generation_t *gen, source_t *src, uint64_t len)
{
    si_error_t ignored;

    if (src->mapped && rdma_fabric_local_mr(gen->fab) &&
        rdma_fabric_mr_reg(gen->fab, src->mapped + src->map_delta, (size_t)len, FI_WRITE,
                           &src->map_mr, &ignored) < 0)
        src->mapped = NULL; /* released with the source */
}

/* Returns the pool buffers and the mapping; the range's registration is
 * closed before (rdma_fabric_mr_close under gen->lock, or by gen_close).
 * Caller holds srv->lock. */
static void source_release(rdma_server_t *srv, source_t *src)
{
    for (unsigned i = 0; i < src->buffer_count; i++)
        srv->free_buffers[srv->free_count++] = src->buffers[i];
    src->buffer_count = 0;
    if (src->mapping) {
        src->mapping->refs--;
        src->mapping->last_used = si_mono_now();
    }
    src->mapping = NULL;
    src->mapped = NULL;
}

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

/* ---- one transfer --------------------------------------------------------------- */

/* Takes the current generation, the file mapping or pool buffers, and the
 * client's AV entry for a new transfer. */
static int transfer_begin(rdma_server_t *srv, transfer_t *tr, const si_rdma_token_t *t, int fd,
                          uint64_t offset, uint64_t len, si_error_t *err)
{
    generation_t *gen = NULL;
    int rc = 0;

    if (tr->src.get)
        source_map(srv, &tr->src, fd, offset, len);
    pthread_mutex_lock(&srv->lock);
    if (srv->transfers >= srv->cfg.max_concurrent) {
        rc = si_errnoprintf(err, EBUSY, "rdma: %u transfers running (rdma.max_concurrent)",
                            srv->transfers);
    } else if (!srv->current && !(srv->current = gen_open(srv, NULL, err))) {
        rc = -1;
    } else {
        gen = tr->gen = srv->current;
        gen->running++;
        srv->transfers++;
    }
    pthread_mutex_unlock(&srv->lock);
    if (rc < 0) {
        pthread_mutex_lock(&srv->lock);
        source_release(srv, &tr->src);
        pthread_mutex_unlock(&srv->lock);
        return -1;
    }
    if (gen_lock(srv, gen) < 0) {
        si_errnoprintf(err, ETIMEDOUT, STUCK_TEXT, srv->cfg.timeout_seconds);
        goto error;
    }
    source_register(gen, &tr->src, len);
    tr->peer = peer_get(gen, t, err);
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
            if (gen_lock(srv, gen) == 0) {
                peer_put(gen, tr->peer, false);
                pthread_mutex_unlock(&gen->lock);
            }
            goto error;
        }
    }
    return 0;
error:
    if (tr->src.map_mr.mr && gen_lock(srv, gen) == 0) {
        rdma_fabric_mr_close(gen->fab, &tr->src.map_mr);
        pthread_mutex_unlock(&gen->lock);
    }
    pthread_mutex_lock(&srv->lock);
    source_release(srv, &tr->src);
    gen->running--;
    srv->transfers--;
    gen_release_if_idle(srv, gen);
    pthread_mutex_unlock(&srv->lock);
    return -1;
}

/* A GET writes [offset, offset+len) of fd into the client; otherwise the
 * client's bytes are read and handed to sink in order (reads complete in
 * any order: a finished one waits in its slot until the bytes before it
 * have gone to the sink). */
static int run_transfer(rdma_server_t *srv, const si_rdma_token_t *t, int fd, uint64_t offset,
                        uint64_t len, bool get, rdma_sink_fn sink, void *sink_arg,
                        uint64_t *moved, si_error_t *err)
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
        transfer_begin(srv, tr, t, fd, offset, len, err) < 0) {
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
            if (gen_lock(srv, gen) < 0) {
                stuck = failed = true;
                break;
            }
            op->state = OP_POSTED;
            posted = post_op(srv, gen, &tr->src, t, tr->peer, op);
            if (posted != 0)
                op->state = OP_IDLE;
            if (posted == -FI_EAGAIN)
                poll_completions(srv, gen);
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

        if (gen_lock(srv, gen) < 0) {
            stuck = failed = true;
            break;
        }
        poll_completions(srv, gen);
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
            if (gen_lock(srv, gen) < 0) {
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
            gen_retire(srv, gen);
            pthread_mutex_unlock(&srv->lock);
        } else {
            wait_for_provider(srv, gen);
        }
    }

    if (stuck) {
        /* Another thread has been inside the provider on this endpoint for
         * timeout_seconds (gen_lock retired it). Operations of this transfer
         * may still be posted there: its memory stays where they can reach it. */
        si_errnoprintf(&fail, ETIMEDOUT, STUCK_TEXT, srv->cfg.timeout_seconds);
        abandoned = true;
    } else if (!abandoned && gen_lock(srv, gen) == 0) {
        peer_put(gen, tr->peer, failed);
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
        source_release(srv, &tr->src);
        free(tr);
    }
    gen_release_if_idle(srv, gen);
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
    return run_transfer(srv, token, fd, offset, len, true, NULL, NULL, moved, err);
}

int rdma_server_recv(rdma_server_t *srv, const si_rdma_token_t *token, uint64_t len,
                     rdma_sink_fn sink, void *arg, uint64_t *moved, si_error_t *err)
{
    return run_transfer(srv, token, -1, 0, len, false, sink, arg, moved, err);
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
