/* Removal of old history; see history.h. */
#include "config.h"
#include "catalog/history.h"

#include <errno.h>
#include <stdlib.h>

#include "catalog/db.h"
#include "catalog/internal.h"

#define REQUEST_ENDED " state IN ('RELEASED', 'FAILED', 'CANCELLED') AND finished < ?1 AND updated < ?1"
/* served by requests_by_finished */
#define REQUESTS_DUE "FROM requests WHERE" REQUEST_ENDED
#define PUSH_ARCHIVED(p)                                                                    \
    " NOT EXISTS (SELECT 1 FROM push_items i WHERE i.push_id = " p ".id"                    \
    " AND i.state NOT IN ('DURABLE', 'DISCARDED'))"
#define PUSHES_DUE "FROM pushes p WHERE p.updated < ?1 AND" PUSH_ARCHIVED("p")

static const char requests_pick[] = "SELECT id " REQUESTS_DUE " ORDER BY finished LIMIT ?2";
static const char requests_count[] =
    "SELECT count(*), (SELECT count(*) FROM request_items WHERE request_id IN"
    " (SELECT id " REQUESTS_DUE ")) " REQUESTS_DUE;
/* a request's items go in transactions of PURGE_CHUNK, before the request
 * (ended is final): a job's request of a million files took SQLite's write
 * lock for 3.6 s in one (BENCHMARKS.md) */
#define PURGE_CHUNK 10000
static const char request_items_delete[] =
    "DELETE FROM request_items WHERE (request_id, object_id) IN (SELECT request_id, object_id"
    " FROM request_items WHERE request_id IN (SELECT value FROM json_each(?1)) LIMIT ?2)";
static const char requests_delete[] =
    "DELETE FROM requests WHERE id IN (SELECT value FROM json_each(?1))"
    " AND state IN ('RELEASED', 'FAILED', 'CANCELLED')";
static const char pushes_pick[] = "SELECT p.id " PUSHES_DUE " ORDER BY p.id LIMIT ?2";
static const char pushes_count[] =
    "SELECT count(*), (SELECT count(*) FROM push_items WHERE push_id IN"
    " (SELECT p.id " PUSHES_DUE ")) " PUSHES_DUE;
/* only archived files: one received since the pick keeps its push */
static const char push_files_delete[] =
    "DELETE FROM push_items WHERE object_id IN (SELECT object_id FROM push_items"
    " WHERE push_id IN (SELECT value FROM json_each(?1)) AND state IN ('DURABLE', 'DISCARDED')"
    " LIMIT ?2)";
static const char pushes_delete[] =
    "DELETE FROM pushes WHERE id IN (SELECT value FROM json_each(?1)) AND" PUSH_ARCHIVED("pushes");

static int count_due(db_t *db, const char *sql, double before, uint64_t *rows, uint64_t *children,
                     si_error_t *err)
{
    db_stmt_t *s = db_cached(db, sql, err);
    if (!s)
        return -1;
    db_bind_double(s, 1, before);
    int step = db_step(s);
    if (step == DB_ROW) {
        *rows = (uint64_t)db_column_int64(s, 0);
        *children = (uint64_t)db_column_int64(s, 1);
    }
    db_reset(s);
    return step == DB_ROW ? 0 : db_error(db, err, "counting the history to purge");
}

/* One statement on the picked ids (and a limit, when the statement takes
 * one) in a transaction of its own: the rows it changed, or -1. */
static int64_t delete_in(catalog_t *cat, const char *sql, const int64_t *ids, size_t n,
                         bool limited, si_error_t *err)
{
    db_t *db = catalog_driver(cat);
    if (catalog_begin(cat, err) < 0)
        return -1;
    db_stmt_t *s = db_cached(db, sql, err);
    if (!s) {
        catalog_rollback(cat);
        return -1;
    }
    if (db_bind_int64_list(s, 1, ids, n) < 0) {
        db_reset(s);
        catalog_rollback(cat);
        return si_errnoprintf(err, ENOMEM, "out of memory");
    }
    if (limited)
        db_bind_int64(s, 2, PURGE_CHUNK);
    int step = db_step(s);
    int64_t changed = db_changes(db);
    db_reset(s);
    if (step != DB_DONE) {
        db_error(db, err, "purging history");
        catalog_rollback(cat);
        return -1;
    }
    return catalog_commit(cat, err) < 0 ? -1 : changed;
}

/* One batch: up to `batch` ids picked, their children deleted a chunk per
 * transaction, then the rows themselves; added to rows and children.
 * Returns how many were picked (0: none left), -1 on error. */
static ssize_t purge_batch(catalog_t *cat, const char *pick, const char *children_delete,
                           const char *delete, double before, int64_t *ids, size_t batch,
                           uint64_t *rows, uint64_t *children, si_error_t *err)
{
    db_t *db = catalog_driver(cat);
    size_t n = 0;
    db_stmt_t *s = db_cached(db, pick, err);
    if (!s)
        return -1;
    db_bind_double(s, 1, before);
    db_bind_int64(s, 2, (int64_t)batch);
    int step = db_step_ids(s, ids, batch, &n);
    db_reset(s);
    if (step != DB_DONE)
        return db_error(db, err, "choosing the history to purge");
    if (n == 0)
        return 0;
    int64_t changed;
    do {
        if ((changed = delete_in(cat, children_delete, ids, n, true, err)) < 0)
            return -1;
        *children += (uint64_t)changed;
    } while (changed == PURGE_CHUNK);
    /* a push that received a file since the pick stays (the guard) and is
     * not picked again */
    if ((changed = delete_in(cat, delete, ids, n, false, err)) < 0)
        return -1;
    *rows += (uint64_t)changed;
    return (ssize_t)n;
}

int catalog_history_purge(catalog_t *cat, double before, size_t batch, bool dry_run,
                          catalog_history_purged_t *out, si_error_t *err)
{
    *out = (catalog_history_purged_t){0};
    db_t *db = catalog_driver(cat);
    if (dry_run)
        return count_due(db, requests_count, before, &out->requests, &out->request_items,
                         err) < 0 ||
                       count_due(db, pushes_count, before, &out->pushes, &out->push_files,
                                 err) < 0
                   ? -1
                   : 0;
    if (batch == 0)
        batch = 1;
    int64_t *ids = malloc(batch * sizeof(*ids));
    if (!ids)
        return si_errnoprintf(err, ENOMEM, "out of memory");
    ssize_t got;
    do
        got = purge_batch(cat, requests_pick, request_items_delete, requests_delete, before, ids,
                          batch, &out->requests, &out->request_items, err);
    while (got > 0);
    if (got == 0)
        do
            got = purge_batch(cat, pushes_pick, push_files_delete, pushes_delete, before, ids,
                              batch, &out->pushes, &out->push_files, err);
        while (got > 0);
    free(ids);
    return got < 0 ? -1 : 0;
}
