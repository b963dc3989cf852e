/* The push context, shared by the push module's own files only. */
#ifndef STAGEIN_PUSH_INTERNAL_H
#define STAGEIN_PUSH_INTERNAL_H

#include <pthread.h>
#include "catalog/catalog.h"
#include "catalog/db.h"
#include "daemon/archive/backend.h"
#include "daemon/push/push.h"

/* The catalog statements (db.c: their text). */
enum {
    /* receiving an upload (receive.c) */
    PUSH_SQL_DATASET_BY_NAME, PUSH_SQL_DATASET_INSERT, PUSH_SQL_PUSH_FOR_UPLOAD,
    PUSH_SQL_PUSH_INSERT, PUSH_SQL_OBJECT_INSERT, PUSH_SQL_ITEM_INSERT,
    PUSH_SQL_RECEIVED_CHECKSUM, PUSH_SQL_MARK_RECEIVED, PUSH_SQL_RECEIVED_TOUCH,
    PUSH_SQL_OBJECT_EXISTS, PUSH_SQL_OBJECT_INSERT_NEW, PUSH_SQL_ITEM_INSERT_RECEIVED,
    /* an upload never acknowledged, and recovery (push.c) */
    PUSH_SQL_DISCARD_MARK, PUSH_SQL_DISCARD_FIND_PUSH, PUSH_SQL_DISCARD_ITEM,
    PUSH_SQL_DISCARD_OBJECT, PUSH_SQL_DISCARD_PUSH, PUSH_SQL_DISCARD_DATASET,
    PUSH_SQL_IDS_UNACKNOWLEDGED, PUSH_SQL_IDS_RECEIVED, PUSH_SQL_ITEM_FAILED, PUSH_SQL_OBJECT,
    /* a push's status and the metrics (push.c) */
    PUSH_SQL_PUSH_BY_UUID, PUSH_SQL_PUSH_ITEMS, PUSH_SQL_COPIES, PUSH_SQL_COUNT_BY_STATE,
    /* aggregates written to the archive (archive.c) */
    PUSH_SQL_RECEIVED_OLDEST_FIRST, PUSH_SQL_MARK_ARCHIVING, PUSH_SQL_DATASET_STALE,
    PUSH_SQL_DATASET_MEMBER, PUSH_SQL_MARK_DURABLE, PUSH_SQL_PUSH_TOUCH, PUSH_SQL_PUT_BACK,
    /* pushes claimed by one of several instances (claims.c) */
    PUSH_SQL_REQUEUE_PUSH, PUSH_SQL_PUSH_PENDING, PUSH_SQL_ARCHIVING_PUSHES,
    PUSH_SQL_UNACKNOWLEDGED_BEFORE,
    PUSH_SQL_COUNT
};

/* The lease kind of a push's archiving (name: the push's uuid). */
#define PUSH_LEASE "push"

/* What the aggregator knows of a push's lease: its own (until released),
 * or another live instance's (asked again after `until`). */
typedef struct {
    int64_t push_id;
    bool mine;
    double until;
} push_claim_t;

struct push {
    pthread_mutex_t lock;           /* guards cat, conf and the counters */
    pthread_cond_t wake;            /* the aggregator's */
    push_conf_t conf;
    catalog_t *cat;                 /* the push's own connection */
    db_t *db;                       /* cat's driver */
    db_stmt_t *stmt[PUSH_SQL_COUNT]; /* on db, prepared once (db_cached, db.c) */
    cache_t *cache;
    char cache_dir[4096];
    archive_backend_t *backend;
    si_log_t *log;
    char munge_socket[4096];        /* "" : libmunge's default */
    bool peercred;

    pthread_t thread;
    bool running, stopping, kicked;

    /* uploads beginning, recorded together by the recorder (receive.c,
     * started with the first; push_close stops it once no upload begins
     * any more, after it recorded every one queued) */
    pthread_mutex_t begin_mu;       /* guards what follows; never held with lock */
    pthread_cond_t begin_cv;
    struct push_begin *begin_head, *begin_tail;
    pthread_t recorder;
    bool recorder_running, recorder_stopping;
    /* what the aggregator's last look found waiting (not due), plus what
     * was acknowledged since: an aggregate's worth wakes it */
    uint64_t waiting_bytes;
    size_t waiting_files;
    /* the push whose time of last activity the cache's batch (its commit
     * generation) set last: record_received's, on the committer thread */
    int64_t touched_push;
    uint64_t touched_batch;
    uint64_t archive_files_written;
    /* an aggregate's files may be left ARCHIVING by a write whose outcome
     * the catalog refused to record (put back in vain): alone, the next
     * pass queues every ARCHIVING file again (the aggregator's alone) */
    bool archiving_orphaned;

    /* several instances (claims.c; the aggregator thread's alone) */
    char instance[65];              /* "" : alone, no leases */
    double lease_s;
    push_claim_t *claims;
    size_t nclaims, claims_cap;
    double next_sweep;              /* monotonic */
    double next_upload_sweep;
    uint64_t pushes_taken_over, commits_fenced;
    /* the volume leases of archive writes (claims.c): the instance's table,
     * or the push's own (owns_holds), and the volumes the write in progress
     * holds (the aggregator thread's alone) */
    volume_holds_t *holds;
    bool owns_holds;
    char write_vols[ARCHIVE_MAX_COPIES + 1][ARCHIVE_LABEL_MAX + 1];
    int nwrite_vols;
};

/* An acknowledged upload of size bytes: wakes the aggregator once enough
 * waits for an aggregate (its own timer sees the window pass). A look per
 * upload cost O(files waiting) under the lock the uploads take. */
void push_note_received(push_t *p, uint64_t size);

/* ---- the catalog (db.c; lock held) ---- */
/* Prepares every statement on p->cat; push_db_close finalizes them. */
int push_db_open(push_t *p, si_error_t *err);
void push_db_close(push_t *p);
/* The text of statement `which`: for db_cached on another connection (the
 * cache's, whose batch transaction records received files). */
const char *push_sql(int which);
/* Statement `which` (PUSH_SQL_*), reset and unbound: the caller binds,
 * steps and resets it, and never finalizes it. */
db_stmt_t *push_stmt(push_t *p, int which);
/* Maps the connection's error into err (errno EIO); returns -1. */
/* EAGAIN when push's catalog connection found its server unreachable (the
 * client is told to retry: 503), else EIO. */
int push_db_errno(push_t *p);
int push_db_error(push_t *p, si_error_t *err, const char *what);
/* A statement run once to completion (no rows expected). */
int push_exec(push_t *p, const char *sql, si_error_t *err);
/* Alone (no other instance writes): every file still ARCHIVING back to
 * RECEIVED, for an aggregator between aggregates; *n how many. */
int push_requeue_archiving(push_t *p, uint64_t *n, si_error_t *err);

/* ---- several instances (claims.c; lock held) ---- */
bool push_shared(const push_t *p);
/* Whether this instance archives push_id's files: 1 (its lease: new, still
 * its own, or taken over from a dead instance, whose interrupted archive
 * write is then queued again), 0 (another live instance's), -1 error. */
int push_claim(push_t *p, int64_t push_id, const char *uuid, si_error_t *err);
/* Inside the transaction that commits (or puts back) an aggregate: 1 while
 * the push is still this instance's (extending its lease; the lease row
 * stays locked until the commit, so a take-over waits for it), 0 when
 * another instance took it over (the aggregate must not be committed). */
int push_fence(push_t *p, int64_t push_id, const char *uuid, si_error_t *err);
/* After an aggregate: gives back the lease of a push with nothing left to
 * archive. */
void push_release_if_done(push_t *p, int64_t push_id, const char *uuid);
/* With an instance name and a backend with volumes: every archive write
 * claims the volume lease of each volume before the backend chooses it
 * (archive_backend_t.write_claims). 0, or -1 when out of memory. */
int push_volume_claims_start(push_t *p, volume_holds_t *shared, si_error_t *err);
/* After an archive write (written or not): its volumes' holds ended. */
void push_volume_claims_done(push_t *p);
/* At close: the backend's claims hook cleared, the own table freed. */
void push_volume_claims_stop(push_t *p);
/* Every lease_s/2 (now: at once): the pushes with files ARCHIVING that no
 * live instance is writing (their instance died, or an aggregate was
 * dropped) are claimed and their files queued again. Alone: the files of
 * a write put back in vain (archiving_orphaned), at once. Between
 * aggregates only. */
int push_sweep(push_t *p, bool now, si_error_t *err);
void push_claims_free(push_t *p);

/* Several instances (push.c), every lease_s/2 (now: at once), lock NOT held: the uploads never
 * acknowledged that no instance writes any more (begun over a lease time
 * ago, and no writer of theirs open here nor in a live instance's temp
 * folder: their instance died mid-upload) are removed as an unacknowledged
 * upload is; *removed (may be NULL) counts them. */
int push_sweep_uploads(push_t *p, bool now, uint64_t *removed, si_error_t *err);

/* Removes an upload never acknowledged (RECEIVING or DISCARDED): its item,
 * cache file, object, and its push and dataset when they were made for it
 * alone. Lock NOT held (it takes it around catalog steps). */
int push_discard_object(push_t *p, int64_t object_id, si_error_t *err);

#endif
