/* The push context, shared by the push module's own files only. */
#ifndef STAGEIN_PUSH_INTERNAL_H
#define STAGEIN_PUSH_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>

#include "catalog/catalog.h"
#include "daemon/push/push.h"

struct push {
    pthread_mutex_t lock;           /* guards cat, conf and the counters */
    pthread_cond_t wake;            /* the aggregator's */
    push_conf_t conf;
    catalog_t *cat;                 /* the push's own connection */
    cache_t *cache;
    char cache_dir[4096];
    archive_backend_t *backend;
    si_log_t *log;
    char munge_socket[4096];        /* "" : libmunge's default */
    bool peercred;

    pthread_t thread;
    bool running, stopping, kicked;
    uint64_t received_since_pass;   /* bytes acknowledged since the aggregator's last look */
    uint64_t archive_files_written;
};

/* An acknowledged upload of size bytes: wakes the aggregator once enough
 * waits for an aggregate (its own timer sees the window pass). A look per
 * upload cost O(files waiting) under the lock the uploads take. */
void push_note_received(push_t *p, uint64_t size);

/* Maps the connection's error into err (errno EIO); returns -1. */
int push_db_error(push_t *p, si_error_t *err, const char *what);
/* One statement run to completion (no rows expected); lock held. */
int push_exec(push_t *p, const char *sql, si_error_t *err);
sqlite3_stmt *push_prepare(push_t *p, const char *sql, si_error_t *err);
double push_now(void);

/* Removes an upload never acknowledged (RECEIVING or DISCARDED): its item,
 * cache file, object, and its push and dataset when they were made for it
 * alone. Lock NOT held (it takes it around catalog steps). */
int push_discard_object(push_t *p, int64_t object_id, si_error_t *err);

#endif
