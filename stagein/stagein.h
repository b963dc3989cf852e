/* libstagein: the public C library of the stagein staging service.
 *
 * - Control API: ask stageind to stage datasets or objects, follow the
 *   request, release it (stagein_request, _status, _wait, _release).
 * - Data: read a cached object into a caller buffer over stageind's S3
 *   endpoint (SigV4-signed GETs, ranges fetched in parallel), into host
 *   memory or, when built with CUDA, a device pointer (stagein_read).
 * - Node agent: map the objects a `stagein agent` holds in its memory,
 *   read-only and without a copy (stagein_attach, stagein_detach).
 *
 * Configuration comes from the environment unless set with
 * stagein_set_option():
 *   STAGEIN_ENDPOINT           control API: unix:PATH or http://HOST:PORT; several
 *                              separated by ',' are tried in order on connection errors
 *   STAGEIN_S3_ENDPOINT        S3 endpoint, http://HOST:PORT or https://HOST:PORT
 *   STAGEIN_S3_CA_FILE         PEM CAs that sign an https endpoint's certificate
 *                              (default: the system's)
 *   STAGEIN_S3_ACCESS_KEY, STAGEIN_S3_SECRET    credentials, or
 *   STAGEIN_S3_CREDENTIALS     a file "ACCESS_KEY SECRET" (first line used)
 *   STAGEIN_S3_REGION          default "us-east-1"
 *   STAGEIN_TRANSPORT          "http" (default) or "rdma"
 *   STAGEIN_RDMA_PROVIDER      libfabric provider for rdma ("shm", "tcp;ofi_rxm",
 *                              "verbs;ofi_rxm", ...); default: the one the
 *                              server names (x-amz-rdma-provider)
 *   STAGEIN_RDMA_DOMAIN        its domain or interface ("lo", "mlx5_0")
 *   STAGEIN_PARALLEL, STAGEIN_CHUNK_SIZE   see the options of the same names
 *
 * Every call returns STAGEIN_SUCCESS or an error code; stagein_last_error()
 * then says what went wrong in words. A handle is used by one thread at a
 * time (stagein_read runs its own threads inside). */
#ifndef STAGEIN_STAGEIN_H
#define STAGEIN_STAGEIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    STAGEIN_SUCCESS = 0,
    STAGEIN_ERR_ARGUMENT,      /* a NULL, empty or malformed argument */
    STAGEIN_ERR_NOMEM,
    STAGEIN_ERR_CONFIG,        /* no endpoint or credentials configured */
    STAGEIN_ERR_CONNECT,       /* the server could not be reached */
    STAGEIN_ERR_SERVER,        /* the server answered an error */
    STAGEIN_ERR_NOT_FOUND,     /* unknown request, dataset or object */
    STAGEIN_ERR_DENIED,        /* not allowed (credentials, permissions) */
    STAGEIN_ERR_NOT_CACHED,    /* the object is on tape only: stage it first */
    STAGEIN_ERR_TOO_SMALL,     /* the caller's buffer is smaller than the object */
    STAGEIN_ERR_CHECKSUM,      /* the bytes do not match the object's checksum */
    STAGEIN_ERR_TIMEOUT,
    STAGEIN_ERR_FAILED,        /* the stage request failed or was cancelled */
    STAGEIN_ERR_UNSUPPORTED,   /* e.g. GPU memory in a build without CUDA */
    STAGEIN_ERR_NO_DEVICE,     /* no CUDA driver or no such GPU */
    STAGEIN_ERR_PROTOCOL,      /* the agent or server answered nonsense */
    STAGEIN_ERR_SYSTEM,        /* a system call failed */
    STAGEIN_ERR_MAX_           /* not an error: the number of codes */
} stagein_err_t;

/* A short description of code; never NULL. */
const char *stagein_strerror(stagein_err_t code);

typedef struct stagein stagein_t;

/* On an error from a bad environment variable *out is still set, so that
 * stagein_last_error() can name the variable: close it. */
stagein_err_t stagein_open(stagein_t **out);
void stagein_close(stagein_t *h);
/* What the last failing call on h said; "" when none failed. */
const char *stagein_last_error(const stagein_t *h);

typedef enum {
    STAGEIN_OPT_ENDPOINT = 1,        /* control API endpoint(s), ',' between */
    STAGEIN_OPT_S3_ENDPOINT,
    STAGEIN_OPT_S3_ACCESS_KEY,
    STAGEIN_OPT_S3_SECRET,
    STAGEIN_OPT_S3_CREDENTIALS_FILE, /* reads the key and secret from it now */
    STAGEIN_OPT_S3_REGION,
    STAGEIN_OPT_MUNGE_SOCKET,
    STAGEIN_OPT_TRANSPORT,           /* "http" (default) or "rdma" */
    STAGEIN_OPT_PARALLEL,            /* parallel range GETs, "1".."64", default 8
                                        (2 for RDMA) */
    STAGEIN_OPT_CHUNK_SIZE,          /* bytes per range GET, default 8388608
                                        (67108864 for RDMA into host memory) */
    STAGEIN_OPT_RDMA_PROVIDER,       /* NULL or "": the server's (see above) */
    STAGEIN_OPT_RDMA_DOMAIN,         /* NULL or "": the provider's first */
    STAGEIN_OPT_S3_CA_FILE,          /* PEM CAs for an https:// S3 endpoint ($STAGEIN_S3_CA_FILE;
                                        NULL: the system's) */
} stagein_option_t;

stagein_err_t stagein_set_option(stagein_t *h, stagein_option_t option, const char *value);

/* --- control API ------------------------------------------------------ */

#define STAGEIN_ID_MAX 64

/* Stages the named datasets and objects ("bucket/key" or "bucket/prefix/");
 * either list may be NULL, both NULL-terminated. id receives the request id. */
stagein_err_t stagein_request(stagein_t *h, const char *const *datasets,
                              const char *const *objects, char id[STAGEIN_ID_MAX]);

typedef struct {
    char id[STAGEIN_ID_MAX];
    char state[16];              /* SUBMITTED, STARTED, COMPLETED, FAILED, CANCELLED, RELEASED */
    int64_t files_total, files_completed, files_failed;
    int64_t bytes_total, bytes_done;
    int64_t queue_position;
} stagein_status_t;

stagein_err_t stagein_status(stagein_t *h, const char *id, stagein_status_t *out);

/* Called after every poll of stagein_wait; a nonzero return stops waiting
 * (STAGEIN_ERR_TIMEOUT). */
typedef int (*stagein_progress_fn)(const stagein_status_t *status, void *arg);

/* Polls until the request is final or timeout_s passed (<= 0: no limit).
 * STAGEIN_SUCCESS when COMPLETED; STAGEIN_ERR_FAILED for FAILED/CANCELLED. */
stagein_err_t stagein_wait(stagein_t *h, const char *id, double timeout_s,
                           stagein_progress_fn progress, void *arg, stagein_status_t *out);

stagein_err_t stagein_release(stagein_t *h, const char *id);

/* The objects of a request: "bucket/key" and size. */
typedef struct {
    char *path;
    uint64_t size;
} stagein_object_t;

stagein_err_t stagein_request_objects(stagein_t *h, const char *id,
                                      stagein_object_t **objects, size_t *count);
void stagein_objects_free(stagein_object_t *objects, size_t count);

/* --- data --------------------------------------------------------------- */

#define STAGEIN_CHECKSUM_MAX 80   /* "sha256:" + 64 hex + NUL, with room */

/* The size of a cached object ("bucket/key") and its ETag (quotes removed). */
stagein_err_t stagein_stat(stagein_t *h, const char *path, uint64_t *size,
                           char etag[STAGEIN_CHECKSUM_MAX]);

/* Reads the whole object "bucket/key" into buf (capacity bytes), host
 * memory when gpu < 0, else a CUDA device pointer on that GPU (through a
 * pinned host bounce buffer). *size receives the object's size. */
stagein_err_t stagein_read(stagein_t *h, const char *path, void *buf, uint64_t capacity,
                           int gpu, uint64_t *size);

/* Writes size bytes of host memory as the object "bucket/key" (a bucket
 * that takes PUTs: an archive bucket, whose objects go to tape). With
 * transport "rdma" the server reads them from buf by RDMA when it can,
 * else they go in the request body; stagein_read_info says which. The
 * request is signed with the bytes' SHA-256, which the server checks.
 * With STAGEIN_OPT_CHUNK_SIZE set (or past S3's 5 GiB PUT limit) the write
 * is a multipart upload of parts that size (at least 5 MiB), sent
 * STAGEIN_OPT_PARALLEL at a time, each by RDMA or HTTP as above.
 * etag (may be NULL) receives the object's ETag. */
stagein_err_t stagein_write(stagein_t *h, const char *path, const void *buf, uint64_t size,
                            char etag[STAGEIN_CHECKSUM_MAX]);

/* Bytes landed so far by the stagein_read running on h (for progress bars
 * drawn from another thread). */
uint64_t stagein_read_progress(const stagein_t *h);

/* How the last stagein_read or stagein_write on h moved its bytes. With transport "rdma",
 * bytes the server declined to send by RDMA (x-amz-rdma-reply: 501, no
 * common provider, ...) came in the HTTP bodies instead; rdma_note says
 * why ("" when every byte came by RDMA or RDMA was not asked for). */
typedef struct {
    uint64_t bytes_rdma;
    uint64_t bytes_http;
    char provider[40];       /* the provider used, "" when none */
    char rdma_note[256];
} stagein_read_info_t;

stagein_err_t stagein_read_info(const stagein_t *h, stagein_read_info_t *out);

/* Whether bytes (host memory) match an object's ETag as stageind computes
 * it (MD5, or the head of the SHA-256); checksum receives "md5:hex" or
 * "sha256:hex" of the bytes. STAGEIN_ERR_CHECKSUM when they differ. */
stagein_err_t stagein_verify(const void *bytes, uint64_t size, const char *etag,
                             char checksum[STAGEIN_CHECKSUM_MAX]);

/* --- node agent --------------------------------------------------------- */

typedef struct {
    const char *path;        /* "bucket/key" */
    const void *data;        /* host pointer (read-only) or CUDA device pointer */
    uint64_t size;
    const char *checksum;    /* "md5:hex" or "sha256:hex", verified by the agent */
    int gpu;                 /* -1: host memory, else the CUDA device */
} stagein_attached_t;

typedef struct stagein_attachment stagein_attachment_t;

/* Connects to the agent's socket, receives its table and descriptors and
 * maps every object. errbuf (may be NULL) receives the reason on failure. */
stagein_err_t stagein_attach(const char *socket_path, stagein_attachment_t **out,
                             char *errbuf, size_t errlen);
size_t stagein_attachment_count(const stagein_attachment_t *a);
const stagein_attached_t *stagein_attachment_get(const stagein_attachment_t *a, size_t i);
/* The object named path, or NULL. */
const stagein_attached_t *stagein_attachment_find(const stagein_attachment_t *a,
                                                  const char *path);
/* Unmaps everything; pointers from a become invalid. */
void stagein_detach(stagein_attachment_t *a);

/* Asks the agent to free its memory and exit. */
stagein_err_t stagein_agent_stop(const char *socket_path, char *errbuf, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
