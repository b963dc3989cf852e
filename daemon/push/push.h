/* Push (stage-out): files sent to stageind are streamed into the cache,
 * recorded in the catalog before they are acknowledged (RECEIVED), then
 * aggregated into archive files written through the archive backend with N
 * copies on distinct volumes; the tape copies, the dataset membership and
 * the DURABLE state are committed in one catalog transaction, only after
 * the archive write returned. After a crash, push_recover drops uploads
 * never acknowledged, re-verifies the cache files of acknowledged ones and
 * queues them to be archived again.
 *
 * An object is <bucket>/<dataset>/<key> (bucket: push.bucket). Items in
 * flight (RECEIVED, ARCHIVING) hold a pin on their cache row (schema 1.4
 * triggers); once DURABLE the cached copy is an ordinary, evictable object.
 *
 * Errors return -1 with the reason in err and errno saying what kind:
 * EINVAL bad input, EBADMSG the bytes did not match the size or checksum
 * said, EACCES not permitted, ENOENT unknown push, EEXIST the object exists,
 * EFBIG larger than push.max_file_size, EAGAIN no cache space now, EIO
 * catalog or file system failure. Nothing is kept on failure.
 *
 * Threads: uploads, push_get and the aggregator run concurrently; a mutex
 * guards the push's own catalog connection (never held while bytes move). */
#ifndef STAGEIN_PUSH_H
#define STAGEIN_PUSH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "catalog/catalog.h"
#include "catalog/instances.h"
#include "common/checksum.h"
#include "common/conf.h"
#include "common/error.h"
#include "common/log.h"
#include "common/text.h"

typedef struct cache cache_t;
typedef struct archive_backend archive_backend_t;
typedef struct http_server http_server_t;
typedef struct push push_t;
typedef struct push_upload push_upload_t;

#define PUSH_UUID_LEN 36

/* ---- configuration: the "push" group of stagein.conf ------------------------ */

extern const si_conf_key_t push_conf_keys[];

typedef struct {
    char bucket[SI_BUCKET_MAX + 1];   /* bucket of pushed objects */
    uint64_t max_file_size;           /* bytes one upload may send */
    uint64_t aggregate_bytes;         /* target size of one archive file */
    double aggregate_window;          /* seconds a file waits for others */
    int copies;                       /* copies on distinct volumes */
    unsigned dataset_mode;            /* mode of datasets a push creates */
    int max_attempts;                 /* archive writes tried per aggregate */
    /* files of one archive file at most, whatever their size: bounds memory
     * and the length of one catalog transaction; a full aggregate is
     * written whatever its age */
    size_t aggregate_files;
} push_conf_t;
#define PUSH_AGGREGATE_FILES_MAX 1000000

/* Defaults: "stageout", 1 TiB, 2 GB, 60 s, 1 copy, 0600, 5 attempts,
 * 20,000 files. */
void push_conf_defaults(push_conf_t *conf);
int push_conf_from(const si_conf_t *conf, push_conf_t *out, si_error_t *err);

/* ---- life cycle --------------------------------------------------------------- */

typedef struct {
    push_conf_t conf;
    const catalog_open_opts_t *catalog; /* the push opens its own connection */
    cache_t *cache;                 /* shared with the recall path */
    const char *cache_dir;          /* the cache's directory (member paths) */
    archive_backend_t *backend;     /* where aggregates are written */
    si_log_t *log;                  /* may be NULL */
    const char *munge_socket;       /* identity for the routes (NULL: default) */
    bool peercred;
    /* several instances sharing the catalog and the cache directory: this
     * one's registered name (NULL or "": alone) and the lease time. Each
     * push's files are then archived by the instance holding the push's
     * lease (kind "push", name its uuid), renewed by the instance's
     * heartbeat; a push whose holder died is taken over once its lease
     * expired, its interrupted archive write redone, and an aggregate is
     * committed only while its instance still holds every push in it. */
    const char *instance;
    double lease_s;
    /* with an instance name: the instance's volume leases (catalog/
     * instances.h), shared with its recall service, which gives them back
     * once idle and unloaded. Each archive write holds the lease of every
     * volume it writes. NULL: the push keeps a table of its own and gives
     * a volume back after each write once the backend has unloaded it. */
    volume_holds_t *volume_holds;
} push_opts_t;

push_t *push_open(const push_opts_t *opts, si_error_t *err);
/* Stops the aggregator; uploads must be finished. */
void push_close(push_t *p);
/* Settings that apply at once on reload (sizes, window, copies, mode, identity). */
void push_reconfigure(push_t *p, const push_conf_t *conf, const char *munge_socket,
                      bool peercred);

typedef struct {
    uint64_t discarded;             /* uploads never acknowledged, removed */
    uint64_t requeued;              /* ARCHIVING -> RECEIVED */
    uint64_t verified;              /* cache files re-hashed and matching */
    uint64_t failed;                /* acknowledged files whose cache copy is gone/bad */
    uint64_t pending;               /* RECEIVED files waiting to be archived */
} push_recovery_t;

/* At start-up, after cache_recover and before uploads or the aggregator. */
int push_recover(push_t *p, push_recovery_t *out, si_error_t *err);

/* The aggregator thread: archives when enough bytes wait or the window
 * passed; push_kick wakes it (tests, shutdown). */
int push_start(push_t *p, si_error_t *err);
void push_kick(push_t *p);

/* stageind's ladder step: the "push" group of conf, push_open, push_recover
 * (logged) and push_start. opts->conf is ignored (read from conf). */
push_t *push_service_start(const si_conf_t *conf, const push_opts_t *opts, si_error_t *err);

/* ---- receiving one file ------------------------------------------------------- */

typedef struct {
    uid_t uid;                      /* the pusher: owner of a new dataset */
    gid_t gid;
    const char *dataset;
    const char *key;                /* path inside the dataset */
    const char *push_uuid;          /* add to this push of the caller's; NULL: new */
    int mode;                       /* new dataset's mode; -1: push.dataset_mode */
    uint64_t size;
    const char *checksum;           /* "sha256:<hex>" to verify, or NULL */
    int64_t mtime;                  /* unix seconds; -1: now */
    bool shared;                    /* the dataset exists and takes every user's files
                                     * (S3's configured archive buckets); else only
                                     * its owner's */
} push_file_t;

typedef struct {
    char uuid[PUSH_UUID_LEN + 1];
    int64_t object_id;
    char bucket[SI_BUCKET_MAX + 1];
    char object_key[SI_KEY_MAX + 1]; /* dataset/key */
    uint64_t size;
    char checksum[SI_CHECKSUM_TEXT_MAX];
} push_received_t;

/* Validates, checks permissions, records the file (not yet acknowledged)
 * and opens its cache writer. */
int push_upload_begin(push_t *p, const push_file_t *file, push_upload_t **out,
                      si_error_t *err);
/* How an asynchronous begin ended: rc 0 with u (recorded, its cache writer
 * open: the bytes may come), or -1 with errnum and err (u NULL, nothing
 * kept). Runs on the push's recorder thread: it must not block. */
typedef void (*push_upload_begun_fn)(void *arg, push_upload_t *u, int rc, int errnum,
                                     const si_error_t *err);
/* As push_upload_begin without waiting for the catalog: the file is checked
 * at once (-1 with err, begun not called), then recorded with the other
 * uploads that begin meanwhile, in one transaction, and begun called
 * (possibly before this returns). file's strings must stay valid until then. */
int push_upload_begin_async(push_t *p, const push_file_t *file, push_upload_begun_fn begun,
                            void *arg, si_error_t *err);
int push_upload_write(push_upload_t *u, const void *data, size_t len, si_error_t *err);
/* The file's checksum learnt after its bytes (a trailer), before finish or
 * submit: they are refused (EBADMSG) unless they match it; EINVAL when it
 * is not "sha256:<hex>" or differs from the one given at begin. */
int push_upload_expect(push_upload_t *u, const char *checksum, si_error_t *err);
/* Checks size and checksum, makes the cache file durable and marks the file
 * RECEIVED: from then on it is acknowledged. Frees u either way. */
int push_upload_finish(push_upload_t *u, push_received_t *out, si_error_t *err);
/* How a submitted upload ended: rc 0 (durable and RECEIVED: acknowledge
 * it), or -1 with errnum and why (nothing of it kept). Runs on the cache's
 * committer thread: it must not block. */
typedef void (*push_upload_done_fn)(void *arg, int rc, int errnum,
                                    const push_received_t *file, const char *why);
/* As push_upload_finish, without waiting: the file goes with the next
 * batch commit and done is called once that batch is durable or failed
 * (possibly before this returns). -1 (err set, done not called) when it
 * failed at once. Frees u either way. */
int push_upload_submit(push_upload_t *u, push_upload_done_fn done, void *done_arg,
                       si_error_t *err);
/* Removes everything the upload recorded; frees u. */
void push_upload_abort(push_upload_t *u);
uint64_t push_upload_received(const push_upload_t *u);

/* ---- status ----------------------------------------------------------------------- */

typedef struct {
    int copy;
    char volume[40];
    int64_t file_seq;
    uint64_t position;
} push_copy_t;

typedef struct {
    int64_t object_id;
    char *bucket;
    char *object_key;               /* dataset/key */
    const char *key;                /* inside object_key: the key in the dataset */
    uint64_t size;
    char checksum[SI_CHECKSUM_TEXT_MAX];
    char state[12];
    char *error;
    size_t ncopies;
    push_copy_t *copies;
} push_item_t;

typedef struct {
    char uuid[PUSH_UUID_LEN + 1];
    char state[12];
    char *dataset;
    uid_t uid;
    gid_t gid;
    double created, updated;
    size_t files_total, files_durable, files_failed;
    uint64_t bytes_total;
    size_t nitems;
    push_item_t *items;             /* by key */
} push_status_t;

/* Owner or root (EACCES otherwise); caller_uid (uid_t)-1: no check. */
int push_get(push_t *p, const char *uuid, uid_t caller_uid, push_status_t **out,
             si_error_t *err);
void push_status_free(push_status_t *st);

/* ---- archiving ---------------------------------------------------------------------- */

typedef struct {
    size_t files;                   /* made DURABLE */
    uint64_t bytes;
    size_t failed;                  /* made FAILED */
    /* none due: when the oldest file waiting is (wall clock; 0: none waits) */
    double next_due;
} push_archived_t;

/* One aggregate, if one is due (force: whatever waits, window or not).
 * Returns 1 when an aggregate was attempted, 0 when none was due. A failed
 * archive write puts the files back (FAILED after max_attempts) and returns
 * -1 with the reason. */
int push_archive_once(push_t *p, bool force, push_archived_t *out, si_error_t *err);

typedef struct {
    uint64_t received_files, received_bytes;   /* waiting to be archived */
    uint64_t archiving_files;
    uint64_t durable_files, failed_files;
    uint64_t archive_files_written;            /* since open */
    uint64_t pushes_taken_over;                /* from dead instances, since open */
    uint64_t commits_fenced;                   /* aggregates dropped: a push was
                                                * taken over meanwhile */
} push_metrics_t;

int push_metrics(push_t *p, push_metrics_t *out, si_error_t *err);
/* Prometheus text of push_metrics (stagein_push_*) appended to out; nothing
 * when the catalog cannot be read. push: the push_t. */
void push_metrics_text(FILE *out, void *push);

/* ---- the control API routes: POST /api/v1/push, GET /api/v1/push/{id} -------- */

int push_routes(push_t *p, http_server_t *server, si_error_t *err);

#endif
