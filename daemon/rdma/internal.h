/* The parts of stageind's RDMA server (rdma.h) that its files share: the
 * server, its endpoint generations, client addresses, sources and
 * operations. Threads and locks: server.c. */
#ifndef SI_RDMA_INTERNAL_H
#define SI_RDMA_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "common/rdma/transport.h"
#include "daemon/rdma/rdma.h"


#define RDMA_MAX_DEPTH 256

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

/* A cache file mapped whole, or the range of one object in a segment file,
 * kept for the GETs that follow (the pages of a mapping populated once
 * instead of for every range: mapping, populating and unmapping cost a
 * quarter of the server's time per GiB; BENCHMARKS.md). Cache files are not
 * modified once committed (a segment is only appended to); a replaced one
 * has another inode or mtime, and the inode of a mapping's file is not
 * reused while the mapping holds it open, so an entry matches only the file
 * it was made from. */
struct mapping {
    struct mapping *next;
    dev_t dev;
    ino_t ino;
    bool whole;            /* the file from its start (else an object's range) */
    uint64_t off;          /* the mapping's first byte in the file (page aligned) */
    off_t size;            /* bytes mapped */
    struct timespec mtime; /* whole: the file's when it was mapped */
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

/* generation.c: endpoint generations (caller holds srv->lock; rdma_gen_lock
 * is called without it) */
generation_t *rdma_gen_open(rdma_server_t *srv, rdma_fabric_t *fab, si_error_t *err);
void rdma_gen_close(rdma_server_t *srv, generation_t *gen);
void rdma_gen_release_if_idle(rdma_server_t *srv, generation_t *gen);
void rdma_gen_retire(rdma_server_t *srv, generation_t *gen);
int rdma_gen_lock(rdma_server_t *srv, generation_t *gen);

/* peer.c: client addresses in a generation's AV (caller holds gen->lock) */
peer_t *rdma_peer_get(generation_t *gen, const si_rdma_token_t *t, si_error_t *err);
void rdma_peer_put(generation_t *gen, peer_t *p, bool failed);
void rdma_peers_drop_idle(generation_t *gen, double cutoff);
void rdma_peers_free(generation_t *gen);

/* completion.c: the completion queue (caller holds gen->lock, except for
 * rdma_wait_for_provider) */
void rdma_poll_completions(rdma_server_t *srv, generation_t *gen);
void rdma_wait_for_provider(rdma_server_t *srv, generation_t *gen);

/* source.c: a transfer's memory, the cache file mapped or pool buffers */
void rdma_mappings_trim(rdma_server_t *srv, bool all);
/* The range of a file that holds one object (rdma_server_send_range). */
typedef struct {
    uint64_t from, size;
} rdma_window_t;
/* Maps fd's file (window NULL: whole) for a zero-copy GET of [offset,
 * offset+len), or finds the mapping kept; src->mapped stays NULL when it
 * cannot (the pool is used). */
void rdma_source_map(rdma_server_t *srv, source_t *src, int fd, const rdma_window_t *window,
                     uint64_t offset, uint64_t len);
void rdma_source_register(generation_t *gen, source_t *src, uint64_t len);
void rdma_source_release(rdma_server_t *srv, source_t *src);

#endif
