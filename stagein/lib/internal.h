/* libstagein's insides, shared by its files (and by the agent command,
 * which links the convenience library they form). */
#ifndef STAGEIN_LIB_INTERNAL_H
#define STAGEIN_LIB_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/aws/s3client.h"
#include "stagein/stagein.h"

#define LIB_DEFAULT_PARALLEL 8
#define LIB_MAX_PARALLEL 64
#define LIB_DEFAULT_CHUNK (8u << 20)
/* RDMA into host memory: larger ranges, fewer requests (the server moves
 * each without buffering it; BENCHMARKS.md) */
#define LIB_RDMA_CHUNK (64u << 20)
/* and fewer at once: the server's writes need no help from more
 * connections, and every waiting reader costs CPU (8 readers: a third of
 * the throughput of 1 over tcp on two CPUs; BENCHMARKS.md) */
#define LIB_RDMA_PARALLEL 2
#define LIB_MIN_CHUNK (64u << 10)
#define LIB_DEFAULT_REGION "us-east-1"

typedef enum {
    LIB_TRANSPORT_HTTP,
    LIB_TRANSPORT_RDMA,
} lib_transport_t;

struct stagein {
    char *endpoint;          /* control API */
    char *munge_socket;
    char *s3_endpoint;       /* "http[s]://host:port", no trailing '/' */
    char *s3_ca_file;        /* CAs for https (NULL: the system's) */
    char *access_key;
    char *secret;
    char *region;
    lib_transport_t transport;
    int parallel;                /* 0: the default of the transport */
    uint64_t chunk;              /* 0: the default of the transport */
    si_s3_t *s3;                 /* the S3 client, made on first S3 use and
                                  * dropped when what it was made with changes */
    int64_t session_expires;     /* credentials from the control API: when they
                                  * expire (0: configured ones, never renewed) */
    void *control;               /* client_t, made on first control call */
    _Atomic uint64_t landed;     /* bytes of the running read */
    char *rdma_provider;         /* NULL: the server's */
    char *rdma_domain;
    struct lib_rdma *rdma;       /* the fabric client, opened on first use (rdma.c) */
    _Atomic uint64_t bytes_rdma, bytes_http; /* of the running read */
    char rdma_used[40];          /* its provider */
    char server_provider[40];    /* the S3 server's RDMA provider ("" none), */
    bool server_provider_known;  /* learnt from the first HEAD of this endpoint */
    char rdma_note[256];         /* why some bytes did not come by RDMA */
    _Atomic int rdma_noted;      /* rdma_note written (the first reason wins) */
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

/* The RDMA transport of stagein_read (rdma.c, doc/rdma.md). One fabric
 * client per handle, opened for the provider asked for (or the server's)
 * and kept across reads; its calls are safe from the reader threads. */
typedef struct lib_rdma_region lib_rdma_region_t;

/* Makes the handle's client ready for provider (reopened when another one
 * is asked for). -1 with err when the provider cannot be opened here. */
int lib_rdma_open(stagein_t *h, const char *provider, si_error_t *err);
/* Registers host memory the server may write. */
/* server_writes: GET lands in it; else PUT reads from it. */
lib_rdma_region_t *lib_rdma_register(stagein_t *h, void *buf, uint64_t len, bool server_writes,
                                     si_error_t *err);
void lib_rdma_unregister(stagein_t *h, lib_rdma_region_t *region);
/* The x-amz-rdma-token granting [offset, offset+len) of region. */
int lib_rdma_token(stagein_t *h, const lib_rdma_region_t *region, uint64_t offset,
                   uint64_t len, char *out, size_t size, si_error_t *err);
/* Drives the provider while a GET is answered (tcp;ofi_rxm places data
 * only when progressed), one caller at a time, and says how the caller
 * should wait for its answer: *wait_fd (or -1) to poll as well, for at
 * most *wait_ms. */
void lib_rdma_progress(stagein_t *h, int *wait_fd, int *wait_ms);
void lib_rdma_close(stagein_t *h);
/* Records (once per read) why bytes came over HTTP instead. */
void lib_rdma_note(stagein_t *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
