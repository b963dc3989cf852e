/* stageind's embedded S3 endpoint: path-style S3 over the catalog and the
 * cache, on its own port (libmicrohttpd, a thread pool, keep-alive, bodies
 * sent from the cache files with sendfile). SigV4 (header and presigned,
 * common/sigv4.h) with credentials from the secrets file mapped to uid/gid;
 * each object is readable by a credential that may read a dataset holding
 * it (the rule of stage requests); root sees everything; anonymous requests
 * only reach buckets configured public.
 *
 * Objects archived but not cached answer like S3 Glacier (403
 * InvalidObjectState on GET, x-amz-restore on HEAD, RestoreObject queues a
 * stage request); buckets in transparent-recall mode recall on GET and
 * stream once staged. Archive buckets take PUTs, multipart uploads, copies
 * and deletes through the push path.
 * doc/s3.md lists the operations and what answers 501. */
#ifndef STAGEIN_S3_H
#define STAGEIN_S3_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "catalog/catalog.h"
#include "common/conf.h"
#include "common/error.h"
#include "common/log.h"
#include "common/aws/s3secrets.h"
#include "common/text.h"
#include "daemon/rdma/rdma.h"

typedef struct cache cache_t;
typedef struct push push_t;
typedef struct s3_server s3_server_t;

/* ---- configuration: the "s3" group of stagein.conf ---------------------- */

extern const si_conf_key_t s3_conf_keys[];

#define S3_REGION_MAX 63
#define S3_BUCKET_LIST_MAX 64

typedef struct {
    size_t count;
    char name[S3_BUCKET_LIST_MAX][SI_BUCKET_MAX + 1];
} s3_bucket_list_t;

#define S3_HALF_CACHE UINT64_MAX

typedef struct {
    bool enabled;
    char bind[64];                   /* numeric address */
    int port;                        /* 0: any free port (written to <state_dir>/s3.port) */
    char secrets_file[PATH_MAX];
    char region[S3_REGION_MAX + 1];
    int clock_skew;                  /* seconds */
    s3_bucket_list_t public_buckets; /* anonymous reads allowed */
    s3_bucket_list_t transparent_recall_buckets;
    int transparent_recall_max_wait; /* seconds a GET waits for a recall */
    s3_bucket_list_t archive_buckets; /* PUT goes to tape through the push path */
    size_t max_header_size;          /* bytes of the request line and headers */
    unsigned timeout;                /* idle connection timeout, seconds */
    unsigned threads;                /* worker threads: requests that may wait */
    unsigned io_threads;             /* event threads serving the connections; 0: a CPU each */
    unsigned max_connections;        /* at once; 0: libmicrohttpd's limit */
    char vhost_domain[254];          /* "": path style only */
    char tls_cert_file[PATH_MAX];    /* "": plain HTTP */
    char tls_key_file[PATH_MAX];
    unsigned archive_bucket_mode;    /* configured archive buckets: their dataset's mode */
    gid_t archive_bucket_group;      /* ... and group (root owns them) */
    uint64_t min_upload_rate;        /* bytes/s an upload body must keep; 0: none */
    unsigned max_user_uploads;       /* uploads one user may have arriving; 0: no bound */
    uint64_t max_user_upload_bytes;  /* bytes one user's arriving uploads may reserve; 0: no
                                      * bound; S3_HALF_CACHE (the default): half the cache */
} s3_conf_t;

/* Defaults: disabled, 127.0.0.1:9000, SYSCONFDIR/stagein/s3-secrets,
 * us-east-1, 900 s skew, no public/transparent/archive buckets, 60 s
 * recall wait, 16 KiB of headers, 60 s timeout, 16 worker threads, an event thread per CPU. */
void s3_conf_defaults(s3_conf_t *conf);
/* Defaults overridden by the "s3" group; bucket names are checked. */
int s3_conf_from(const si_conf_t *conf, s3_conf_t *out, si_error_t *err);
bool s3_bucket_list_has(const s3_bucket_list_t *l, const char *bucket);

/* ---- the server ---------------------------------------------------------- */

typedef struct {
    s3_conf_t conf;
    const catalog_open_opts_t *catalog; /* the server opens connections of its own */
    const char *state_dir;       /* s3.port is written there */
    const char *shared_dir;      /* several instances (stageind.instance): their shared
                                  * cache.dir, where multipart uploads in progress live,
                                  * so that any instance takes any part; NULL: state_dir */
    cache_t *cache;              /* shared with the recall and push services */
    push_t *push;                /* archive buckets; NULL: none */
    const char *push_bucket;     /* push.bucket: where archive buckets' objects live */
    si_session_keys_t *sessions; /* session credentials accepted beside the secrets file;
                                  * borrowed, may be NULL */
    si_log_t *log;               /* may be NULL */
    rdma_config_t rdma;          /* the "rdma" group; zeroed: no RDMA data path */
    int64_t pin_lifetime_max;    /* stageind.pin_lifetime_max: the longest RestoreObject
                                    Days, in seconds; 0: no bound */
    void (*staged)(void *arg);   /* a stage request was made (recall_service_kick); may be NULL */
    void *staged_arg;
    const char *sitename;        /* the WLCG Tape REST API's discovery document, served */
    int control_port;            /* here for file URLs on this port, names the control
                                    API on this port (0: no discovery document) */
    struct token_gate *tokens;   /* "Authorization: Bearer" reads (WLCG storage.read
                                    scopes; daemon/control/token.h); NULL: none */
} s3_opts_t;

/* Loads the secrets (mode 0600 or refused), opens the catalog connections
 * and starts listening. */
s3_server_t *s3_server_start(const s3_opts_t *opts, si_error_t *err);
uint16_t s3_server_port(const s3_server_t *s);
/* "http://HOST:PORT" that clients reach the server at: its bind address, or
 * this host's name when it listens on every address. */
void s3_server_url(const s3_server_t *s, char *buf, size_t size);
const char *s3_server_region(const s3_server_t *s);
/* Stops accepting, waits for running requests, frees everything. NULL ok. */
void s3_server_stop(s3_server_t *s);
/* Prometheus text of the server's RDMA data path (none when off); NULL ok. */
void s3_server_metrics(s3_server_t *s, FILE *out);

/* stageind's ladder step: the "s3" group of conf; NULL with err empty when
 * s3.enabled is false. */
s3_server_t *s3_service_start(const si_conf_t *conf, const s3_opts_t *opts, si_error_t *err);

#endif
