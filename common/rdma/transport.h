/* The libfabric layer shared by the RDMA server and client: one FI_EP_RDM
 * endpoint with its CQ and AV, opened for a configured provider and domain,
 * and memory registration that honours the provider's FI_MR_* mode bits.
 * Internal to the RDMA code (daemon/rdma/server.c, common/rdma/client.c). */
#ifndef SI_RDMA_TRANSPORT_H
#define SI_RDMA_TRANSPORT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "common/error.h"
#include "common/rdma/loader.h"
#include "common/rdma_token.h"

/* libfabric's exported functions come from the loaded library's table
 * (loader.h), never from the link: a direct call would bring the link back
 * and is refused here. */
#pragma GCC poison fi_getinfo fi_freeinfo fi_dupinfo fi_fabric fi_strerror fi_allocinfo

typedef struct {
    const rdma_fi_t *fi; /* libfabric's functions (loader.h) */
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_ep *ep;
    struct fid_cq *cq;
    struct fid_av *av;
    uint64_t mr_mode;
    uint64_t next_key; /* requested keys when the provider does not choose them */
    size_t max_msg_size;
    /* FI_DELIVERY_COMPLETE where a write's completion would otherwise come
     * before the target placed the data (tcp); 0: plain fi_write. */
    uint64_t write_flags;
    long mrs_live;     /* registrations open now, for leak checks */
    /* the CQ's wait object (FI_WAIT_FD: tcp;ofi_rxm), -1 when the provider
     * has none (shm): then waiting means polling the CQ */
    int wait_fd;
    /* The endpoint is opened FI_THREAD_DOMAIN: every libfabric call on it
     * is made under this lock. */
    pthread_mutex_t lock;
} rdma_fabric_t;

/* One registration, and the remote address of its first byte as the
 * provider wants it: the virtual address (FI_MR_VIRT_ADDR) or 0. */
typedef struct {
    struct fid_mr *mr;
    void *desc;     /* for local use; NULL when the provider needs none */
    uint64_t key;
    uint64_t raddr; /* remote address of byte 0 */
} rdma_mr_t;

/* provider: libfabric name ("tcp;ofi_rxm", "shm", "verbs;ofi_rxm", "cxi",
 * "efa"); domain: NULL/"" for the first, else the domain or interface name
 * ("lo", "mlx5_0"); device_memory: ask for FI_HMEM where the build has CUDA
 * (optional: without it the endpoint registers host memory only). Fails
 * with errno ENODEV when libfabric is not installed (loader.h) or
 * fi_getinfo finds nothing. */
rdma_fabric_t *rdma_fabric_open(const char *provider, const char *domain, bool device_memory,
                                si_error_t *err);
void rdma_fabric_close(rdma_fabric_t *fab);
const char *rdma_fabric_provider(const rdma_fabric_t *fab);

/* This endpoint's address (fi_getname). */
int rdma_fabric_name(rdma_fabric_t *fab, unsigned char *addr, size_t *len, si_error_t *err);

/* Registers [buf, buf+len) for access (FI_READ, FI_WRITE, FI_REMOTE_READ,
 * FI_REMOTE_WRITE). Caller holds fab->lock. */
int rdma_fabric_mr_reg(rdma_fabric_t *fab, const void *buf, size_t len, uint64_t access,
                       rdma_mr_t *out, si_error_t *err);
void rdma_fabric_mr_close(rdma_fabric_t *fab, rdma_mr_t *mr);

/* Whether local buffers must be registered (FI_MR_LOCAL). */
bool rdma_fabric_local_mr(const rdma_fabric_t *fab);

/* Whether the caller may now block on wait_fd until the provider has work
 * (fi_trywait); false when there is no wait fd or events are pending.
 * Caller holds fab->lock. */
bool rdma_fabric_can_block(rdma_fabric_t *fab);

/* Text for the error completion of fi_cq_readerr. Caller holds fab->lock. */
int rdma_fabric_cq_error(rdma_fabric_t *fab, void **context, si_error_t *err);

#endif
