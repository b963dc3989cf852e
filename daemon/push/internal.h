/* The push context, shared by the push module's own files only. */
#ifndef STAGEIN_PUSH_INTERNAL_H
#define STAGEIN_PUSH_INTERNAL_H

#include <pthread.h>
#include "catalog/catalog.h"
#include "catalog/db.h"
#include "daemon/push/push.h"

/* The catalog statements (db.c: their text). */
enum {
    /* receiving an upload (receive.c) */
    PUSH_SQL_DATASET_BY_NAME, PUSH_SQL_DATASET_INSERT, PUSH_SQL_PUSH_FOR_UPLOAD,
    PUSH_SQL_PUSH_INSERT, PUSH_SQL_OBJECT_INSERT, PUSH_SQL_ITEM_INSERT,
    PUSH_SQL_RECEIVED_CHECKSUM, PUSH_SQL_MARK_RECEIVED, PUSH_SQL_RECEIVED_TOUCH,
    /* an upload never acknowledged, and recovery (push.c) */
    PUSH_SQL_DISCARD_MARK, PUSH_SQL_DISCARD_FIND_PUSH, PUSH_SQL_DISCARD_ITEM,
    PUSH_SQL_DISCARD_OBJECT, PUSH_SQL_DISCARD_PUSH, PUSH_SQL_DISCARD_DATASET,
    PUSH_SQL_IDS_UNACKNOWLEDGED, PUSH_SQL_IDS_RECEIVED, PUSH_SQL_ITEM_FAILED, PUSH_SQL_OBJECT,
    /* a push's status and the metrics (push.c) */
    PUSH_SQL_PUSH_BY_UUID, PUSH_SQL_PUSH_ITEMS, PUSH_SQL_COPIES, PUSH_SQL_COUNT_BY_STATE,
    /* aggregates written to the archive (archive.c) */
    PUSH_SQL_RECEIVED_OLDEST_FIRST, PUSH_SQL_MARK_ARCHIVING, PUSH_SQL_DATASET_STALE,
    PUSH_SQL_DATASET_MEMBER, PUSH_SQL_MARK_DURABLE, PUSH_SQL_PUSH_TOUCH, PUSH_SQL_PUT_BACK,
    PUSH_SQL_COUNT
};

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
    uint64_t received_since_pass;   /* bytes acknowledged since the aggregator's last look */
    uint64_t archive_files_written;
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
int push_db_error(push_t *p, si_error_t *err, const char *what);
/* A statement run once to completion (no rows expected). */
int push_exec(push_t *p, const char *sql, si_error_t *err);

/* Removes an upload never acknowledged (RECEIVING or DISCARDED): its item,
 * cache file, object, and its push and dataset when they were made for it
 * alone. Lock NOT held (it takes it around catalog steps). */
int push_discard_object(push_t *p, int64_t object_id, si_error_t *err);

#endif
