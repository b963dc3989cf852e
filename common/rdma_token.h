/* The x-amz-rdma-token header value: the client's description of a memory
 * region it registered with libfabric, which the server may write (GET) or
 * read (PUT) with RMA. Shared by stageind (decode) and the client (encode).
 *
 *   si1 prov=tcp;ofi_rxm addr=<hex> key=<hex> raddr=<hex> len=<decimal> flags=<w|r|rw>
 *
 * Fields are space-separated, in this order, each exactly once. The format is
 * documented in doc/rdma.md. */
#ifndef SI_RDMA_TOKEN_H
#define SI_RDMA_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define SI_RDMA_TOKEN_VERSION 1
/* Longest accepted header value (a 256-byte address is 512 hex digits). */
#define SI_RDMA_TOKEN_MAX 800
#define SI_RDMA_PROVIDER_MAX 32
#define SI_RDMA_ADDR_MAX 256

/* What the token lets the server do to the region. */
#define SI_RDMA_ACCESS_WRITE 0x1u /* server writes into it: GET */
#define SI_RDMA_ACCESS_READ 0x2u  /* server reads from it: PUT, UploadPart */

typedef struct {
    char provider[SI_RDMA_PROVIDER_MAX + 1]; /* libfabric name, e.g. "shm" */
    unsigned char addr[SI_RDMA_ADDR_MAX];    /* fi_getname() of the client */
    size_t addr_len;
    uint64_t key;   /* the memory region's remote key */
    uint64_t raddr; /* target address of byte 0 (virtual or MR offset) */
    uint64_t len;   /* bytes granted, from raddr */
    unsigned access;
} si_rdma_token_t;

/* Writes the header value into out (out_size >= SI_RDMA_TOKEN_MAX + 1 is
 * always enough). Refuses a token that decode would refuse. */
int si_rdma_token_encode(const si_rdma_token_t *token, char *out, size_t out_size,
                         si_error_t *err);

/* Parses and validates a header value. On failure returns -1 with errno:
 * EPROTONOSUPPORT for a token of another format (NVIDIA cuObject's
 * colon-separated hex) or an unknown version, so the server can decline
 * with 501; EINVAL for anything malformed. *out is untouched on failure. */
int si_rdma_token_decode(const char *text, si_rdma_token_t *out, si_error_t *err);

/* True when text looks like a cuObject token: hex fields separated by ':'. */
int si_rdma_token_is_cuobject(const char *text);

/* Checks that [offset, offset + len) lies inside the granted region and that
 * access is granted; len 0 is refused. */
int si_rdma_token_check_range(const si_rdma_token_t *token, uint64_t offset,
                              uint64_t len, unsigned access, si_error_t *err);

#endif
