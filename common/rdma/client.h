/* The client side of the RDMA data path, for libstagein and the node agent:
 * open the provider, register a buffer, produce the x-amz-rdma-token for a
 * range of it, and drive the provider's progress while the server moves the
 * bytes (the S3 response then says how many: x-amz-rdma-bytes-transferred).
 * doc/rdma.md. */
#ifndef SI_RDMA_CLIENT_H
#define SI_RDMA_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/rdma_token.h"

typedef struct rdma_client rdma_client_t;
typedef struct rdma_region rdma_region_t;

/* errno ENODEV: the provider is not available here. */
rdma_client_t *rdma_client_open(const char *provider, const char *domain, si_error_t *err);
void rdma_client_close(rdma_client_t *client);

/* Registers host memory the server may write (SI_RDMA_ACCESS_WRITE: GET) or
 * read (SI_RDMA_ACCESS_READ: PUT). The buffer must stay valid until
 * rdma_region_close(). */
rdma_region_t *rdma_client_register(rdma_client_t *client, void *buf, size_t len,
                                    unsigned access, si_error_t *err);
#ifdef HAVE_CUDA
/* The same for CUDA device memory (FI_HMEM_CUDA); errno ENOTSUP when the
 * provider has no FI_HMEM (the caller then uses a pinned host bounce buffer). */
rdma_region_t *rdma_client_register_cuda(rdma_client_t *client, void *dev_ptr, size_t len,
                                         int device, unsigned access, si_error_t *err);
#endif
void rdma_region_close(rdma_client_t *client, rdma_region_t *region);

/* The header value granting [offset, offset+len) of the region. */
int rdma_client_token(rdma_client_t *client, const rdma_region_t *region, uint64_t offset,
                      uint64_t len, char *out, size_t out_size, si_error_t *err);

/* Drives the provider (manual progress) once; call while waiting for the
 * server's answer. *may_block (may be NULL) receives whether the caller
 * may now sleep in poll() on rdma_client_wait_handle() until the provider
 * has work again; when false, call again soon (a provider without a wait
 * fd, such as shm, makes progress only when called). Returns 0, or -1
 * when the provider reports an error. */
int rdma_client_progress(rdma_client_t *client, bool *may_block, si_error_t *err);

/* The provider's wait fd (readable when it has work), -1 when it has none. */
int rdma_client_wait_handle(const rdma_client_t *client);

/* Progresses until fd is readable (the S3 response, or a test's control
 * channel) or timeout_ms passes: 1 readable, 0 timeout, -1 error. */
int rdma_client_wait_fd(rdma_client_t *client, int fd, int timeout_ms, si_error_t *err);

/* Open registrations, for leak checks. */
long rdma_client_registrations(const rdma_client_t *client);

#endif
