/* Shared by the stage-request files only (requests.c, requests_core.c,
 * requests_holders.c, requests_items.c): the connection's statements and the
 * helpers requests_core.c defines for the others. Not part of requests.h. */
#ifndef STAGEIN_CATALOG_REQUESTS_INTERNAL_H
#define STAGEIN_CATALOG_REQUESTS_INTERNAL_H

#include "catalog/requests.h"
#include "catalog/internal.h"

/* The queries of requests_metrics and requests_list (requests.c), for the
 * tests of their plans. */
extern const char requests_metrics_sql[];
extern const char requests_list_sql[];

/* The request statements, prepared once per connection (requests_open). */
typedef enum {
    SQL_DATASET_FIND,
    SQL_DATASET_ITEMS,
    SQL_OBJECT_FIND,
    SQL_PREFIX_OBJECTS,
    SQL_OBJECT_ACCESS,
    SQL_REQUEST_INSERT,
    SQL_ITEM_INSERT,
    SQL_REQUEST_TOTALS,
    SQL_REQUEST_FIND,
    SQL_REQUEST_ITEMS,
    SQL_QUEUE_AHEAD,
    SQL_REQUEST_SET_STATE,
    SQL_ITEMS_CANCEL,
    SQL_ITEM_CANCEL,
    SQL_REQUEST_HELD,
    SQL_UNPIN_REQUEST,
    SQL_BIND_JOB,
    SQL_ITEM_START,
    SQL_ITEM_PROGRESS,
    SQL_ITEM_FINISH,
    SQL_ITEM_STATE,
    SQL_ITEM_REQUEUE,
    SQL_PIN,
    SQL_UNPIN,
    SQL_ITEMS_START,
    SQL_ITEMS_FINISH,
    SQL_ITEMS_CACHED,
    SQL_ITEMS_PIN,
    SQL_ITEM_COUNTS,
    SQL_ITEM_ANY_PENDING,
    SQL_REQUEST_STATE_BY_ID,
    SQL_PENDING,
    SQL_LOCALITY,
    SQL_HOLDER_ADD,
    SQL_HOLDER_DEL,
    SQL_HOLDER_DROP_SUBMISSIONS,
    SQL_HOLDERS_DROP_JOBS,
    SQL_HOLDER_COUNTS,
    SQL_HOLDER_RESOLVE,
    SQL_HOLDERS_ALL,
    SQL_EXPIRED,
    SQL_RECENT_JOBS,
    SQL_USER_STAGED,
    SQL_COUNT
} sql_id_t;

struct requests {
    catalog_t *cat;
    db_t *db;
    db_stmt_t *stmt[SQL_COUNT];
    char *groups;                  /* ",g1,g2," of the request being created */
};

/* Defined in requests_core.c: */

/* An EIO error naming the catalog, what failed and the engine's message; -1. */
int requests_db_fail(requests_t *r, si_error_t *err, const char *what);

/* The connection's statement id, reset and with bindings cleared. */
db_stmt_t *requests_stmt(requests_t *r, sql_id_t id);

/* Binds a named parameter when the statement has it (text: NULL binds NULL). */
void requests_param_text(db_stmt_t *s, const char *name, const char *v);
void requests_param_int(db_stmt_t *s, const char *name, int64_t v);
void requests_param_real(db_stmt_t *s, const char *name, double v);

/* A copy of a text column; NULL for NULL. */
char *requests_dup_column(db_stmt_t *s, int col);

/* Every row of s (reset after) into a new array of elem-byte records, each
 * zeroed and then filled by fill: one loop for the queries that list rows.
 * what names the query in an error; *out is NULL when there is no row. */
typedef void (*requests_row_fn)(db_stmt_t *s, void *rec);
int requests_rows(requests_t *r, db_stmt_t *s, size_t elem, requests_row_fn fill, void **out,
                  size_t *count, const char *what, si_error_t *err);

/* Resets every prepared statement (before a commit or rollback). */
void requests_reset_all(requests_t *r);

/* Transactions: errno EIO on failure. */
int requests_begin(requests_t *r, si_error_t *err);
int requests_commit(requests_t *r, si_error_t *err);

/* The common failure exit: undoes the transaction, keeps the errno that
 * describes the failure, returns -1. */
int requests_rollback_fail(requests_t *r);

/* The end of a change: its event logged (what names it in an error), then
 * the commit; a failed log rolls the transaction back. */
int requests_log_commit(requests_t *r, const char *event, const char *subject,
                        const char *detail, const char *what, si_error_t *err);

/* A job id is 1 to 64 characters of UTF-8 text. */
int requests_check_job_id(const char *job, si_error_t *err);

/* Records (or marks running) a holder of the request. */
int requests_add_holder(requests_t *r, int64_t request, requests_holder_kind_t kind,
                        const char *holder, bool running, si_error_t *err);

/* Finds a request; EACCES unless the caller owns it or is root. */
int requests_find(requests_t *r, const char *uuid, uid_t caller, requests_status_t *st,
                  si_error_t *err);

/* SUBMITTED or STARTED. */
bool requests_is_active_state(const char *state);

/* Frees the strings requests_find filled in (st itself is the caller's). */
void requests_status_clear(requests_status_t *st);

/* The failure exit of a change to one request: rolled back, errno kept. */
int requests_abandon(requests_t *r, requests_status_t *st);

/* Ends st's request inside the caller's transaction: cancels the items not
 * yet finished; a release also gives back its pins. */
int requests_end_found(requests_t *r, requests_status_t *st, bool release, const char *why,
                       bool expired, si_error_t *err);

/* After an item changed: the request follows its items while it is active. */
int requests_follow_items(requests_t *r, int64_t request, si_error_t *err);

#endif
