/* libstagein's insides, shared by its files (and by the agent command,
 * which links the convenience library they form). */
#ifndef STAGEIN_LIB_INTERNAL_H
#define STAGEIN_LIB_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/sigv4.h"
#include "stagein/stagein.h"

#define LIB_DEFAULT_PARALLEL 8
#define LIB_MAX_PARALLEL 64
#define LIB_DEFAULT_CHUNK (8u << 20)
#define LIB_MIN_CHUNK (64u << 10)
#define LIB_DEFAULT_REGION "us-east-1"

typedef enum {
    LIB_TRANSPORT_HTTP,
    LIB_TRANSPORT_RDMA,
} lib_transport_t;

struct stagein {
    char *endpoint;          /* control API */
    char *munge_socket;
    char *s3_endpoint;       /* "http://host:port", no trailing '/' */
    char *access_key;
    char *secret;
    char *region;
    lib_transport_t transport;
    int parallel;
    uint64_t chunk;
    si_sigv4_signer_t *signer;   /* made on first S3 use */
    int64_t session_expires;     /* credentials from the control API: when they
                                  * expire (0: configured ones, never renewed) */
    void *control;               /* client_t, made on first control call */
    _Atomic uint64_t landed;     /* bytes of the running read */
    char error[512];
};

/* Records what failed on h and returns code. */
stagein_err_t lib_fail(stagein_t *h, stagein_err_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
stagein_err_t lib_fail_err(stagein_t *h, stagein_err_t code, const si_error_t *err);

/* S3 credentials (and the S3 endpoint when none is set) asked from the
 * control API for the caller's MUNGE identity: used when no credentials are
 * configured, renewed shortly before they expire. */
stagein_err_t lib_session_credentials(stagein_t *h);

/* The HTTP status of an S3 or control answer as a library code. */
stagein_err_t lib_code_of_http(long status);

/* "bucket/key" checked and split: bucket (<= 63) and key (the rest). */
int lib_split_path(const char *path, char *bucket, size_t bucket_size, const char **key,
                   si_error_t *err);

/* The transport hook for RDMA (see doc of stagein_read): reads [offset,
 * offset+len) of bucket/key into host memory dst. Returns 1 when done, 0
 * when RDMA is not available (the caller falls back to HTTP: the server's
 * x-amz-rdma-reply 501, no provider, or no RDMA client built), -1 on error. */
int lib_rdma_read(stagein_t *h, const char *bucket, const char *key, uint64_t offset,
                  void *dst, uint64_t len, si_error_t *err);
bool lib_rdma_available(void);

#endif
