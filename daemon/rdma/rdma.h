/* stageind's side of the RDMA data path: moves bytes between a cache file and
 * the memory a client described in its x-amz-rdma-token, with libfabric RMA
 * write (GET) and read (PUT, UploadPart). The S3 handlers call
 * rdma_server_accept() to decide between RDMA and a 501, then
 * rdma_server_send_file() or rdma_server_recv_file(). doc/rdma.md. */
#ifndef SI_RDMA_H
#define SI_RDMA_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "common/conf.h"
#include "common/error.h"
#include "common/rdma_token.h"

/* The "rdma" group of stagein.conf. */
extern const si_conf_key_t rdma_conf_keys[];

typedef struct {
    bool enabled;
    char provider[SI_RDMA_PROVIDER_MAX + 1]; /* "tcp;ofi_rxm", "shm", "verbs;ofi_rxm", ... */
    char domain[64];                         /* domain or interface, "" = provider's first */
    uint64_t buffer_size;     /* bytes per pool buffer, and per RMA operation from it */
    uint64_t op_size;         /* bytes per RMA operation from a mapped file (zero copy) */
    unsigned buffer_count;    /* registered buffers in the pool */
    uint64_t max_transfer;    /* most bytes one token may move */
    unsigned max_concurrent;  /* transfers at once; more are declined (501) */
    unsigned depth;           /* RMA operations in flight per transfer */
    bool zero_copy;           /* GET sends from a mapping of the file when allowed */
    unsigned idle_seconds;    /* a client address unused this long leaves the AV */
    unsigned timeout_seconds; /* a transfer with no completion this long fails */
    /* shm: write into clients with the kernel's single copy (CMA). Off by
     * default: libfabric 1.17 then skips the client's key check (doc/rdma.md) */
    bool shm_cma;
} rdma_config_t;

void rdma_config_defaults(rdma_config_t *cfg);
/* Reads the "rdma" group (validated by rdma_conf_keys at load time). */
int rdma_config_load(const si_conf_t *conf, rdma_config_t *cfg, si_error_t *err);

typedef struct rdma_server rdma_server_t;

/* Opens the provider, the endpoint and the registered buffer pool.
 * errno ENODEV: the provider is not available on this host. */
rdma_server_t *rdma_server_open(const rdma_config_t *cfg, si_error_t *err);
void rdma_server_close(rdma_server_t *srv);
const char *rdma_server_provider(const rdma_server_t *srv);

/* The largest write shm (without CMA) would pass inline in its command
 * queue: rdma_server_accept answers such small GETs EMSGSIZE (the body
 * carries them). */
#define RDMA_SHM_INLINE_MAX 4096

/* Decodes the header and checks it against this server: provider, access
 * (SI_RDMA_ACCESS_WRITE for GET, _READ for PUT), the byte count the request
 * moves (the token must grant at least len; len <= max_transfer). On -1 the
 * request is answered 501 (errno EPROTONOSUPPORT: foreign token or other
 * provider; E2BIG: over max_transfer; ERANGE: buffer too small; EINVAL:
 * malformed; EMSGSIZE: a GET of at most RDMA_SHM_INLINE_MAX bytes on shm
 * without CMA). */
int rdma_server_accept(rdma_server_t *srv, const char *header, unsigned access, uint64_t len,
                       si_rdma_token_t *token, si_error_t *err);

/* GET: writes bytes [offset, offset+len) of fd into the client's region from
 * its first byte. Blocks until done or failed; *moved counts the bytes
 * confirmed written. errno EBUSY: max_concurrent transfers running. */
int rdma_server_send_file(rdma_server_t *srv, const si_rdma_token_t *token, int fd,
                          uint64_t offset, uint64_t len, uint64_t *moved, si_error_t *err);

/* GET of an object that is the range [from, from+size) of fd's file (a
 * cache segment, shared with other objects): bytes [offset, offset+len) of
 * the object. Only the object's range is mapped (and kept for the GETs of
 * it that follow), not the whole file. EINVAL: not inside the object. */
int rdma_server_send_range(rdma_server_t *srv, const si_rdma_token_t *token, int fd,
                           uint64_t from, uint64_t size, uint64_t offset, uint64_t len,
                           uint64_t *moved, si_error_t *err);

/* PUT: reads len bytes from the client's region and hands them to sink in
 * order, from the first; a sink's -1 (with err) fails the transfer. */
typedef int (*rdma_sink_fn)(void *arg, const void *data, size_t len, si_error_t *err);
int rdma_server_recv(rdma_server_t *srv, const si_rdma_token_t *token, uint64_t len,
                     rdma_sink_fn sink, void *arg, uint64_t *moved, si_error_t *err);

/* The same into fd at offset. */
int rdma_server_recv_file(rdma_server_t *srv, const si_rdma_token_t *token, int fd,
                          uint64_t offset, uint64_t len, uint64_t *moved, si_error_t *err);

/* Resources held now, for metrics and leak checks. */
typedef struct {
    long registrations;    /* open memory registrations (the pool's is one) */
    unsigned buffers_free; /* pool buffers not lent to a transfer */
    unsigned buffers_total;
    unsigned peers;        /* client addresses in the AV */
    unsigned transfers;    /* running now */
    uint64_t bytes_sent, bytes_received;
    uint64_t transfers_failed;
    unsigned abandoned; /* transfers whose operations the provider never
                           completed; their memory is held until their
                           endpoint closes */
    unsigned retired;   /* endpoints taken out of service, still in use */
    unsigned endpoints_opened; /* so far: 1 + the times one was replaced */
} rdma_stats_t;

void rdma_server_stats(rdma_server_t *srv, rdma_stats_t *out);
/* The same as Prometheus text (stagein_rdma_*), for GET /metrics. */
void rdma_server_metrics(rdma_server_t *srv, FILE *out);
/* Removes client addresses idle for idle_seconds (also done on each accept). */
void rdma_server_sweep(rdma_server_t *srv);

#endif
