/* Stage requests' shared layer: the prepared statements, transactions,
 * finding a request and ending it, and moving a request along its items.
 * requests.c, requests_holders.c and requests_items.c call it; it calls
 * none of them (the folder's files form a tree). */
#include "config.h"
#include "catalog/requests.h"
#include "catalog/internal.h"
#include "catalog/requests_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/array.h"
#include "common/clock.h"
#include "common/groups.h"
#include "common/text.h"
#include "common/uuid.h"

/* Read permission of a dataset d: root reads everything, others as the
 * catalog's one rule says. */
#define READABLE_SQL "(:uid = 0 OR " CATALOG_DATASET_READABLE_SQL ")"

#define REQUEST_FINAL_SQL "('COMPLETED', 'FAILED', 'CANCELLED', 'RELEASED')"

static const char *const sql_text[SQL_COUNT] = {
    /* the bytes a user holds in the cache or waits for: each object once,
     * pinned by one of the user's requests or in one still to be staged */
    [SQL_USER_STAGED] =
        "SELECT coalesce(sum(o.size), 0) FROM objects o WHERE o.id IN"
        " (SELECT p.object_id FROM cache_pins p JOIN requests q ON q.id = p.request_id"
        "  WHERE q.uid = :uid"
        "  UNION SELECT i.object_id FROM request_items i JOIN requests q ON q.id = i.request_id"
        "  WHERE q.uid = :uid AND q.state IN ('SUBMITTED', 'STARTED')"
        "  AND i.state IN ('SUBMITTED', 'STARTED'))",
    [SQL_DATASET_FIND] =
        "SELECT d.id, d.owner_uid, d.owner_gid, d.mode, " READABLE_SQL
        " FROM datasets d WHERE d.name = :name",
    [SQL_DATASET_ITEMS] =
        "INSERT OR IGNORE INTO request_items(request_id, object_id, state)"
        " SELECT :request, object_id, 'SUBMITTED' FROM dataset_members WHERE dataset_id = :dataset",
    [SQL_OBJECT_FIND] = "SELECT id FROM objects WHERE bucket = :bucket AND key = :key",
    [SQL_PREFIX_OBJECTS] =
        "SELECT id, key FROM objects WHERE bucket = :bucket"
        " AND substr(key, 1, length(:prefix)) = :prefix ORDER BY key",
    /* how many datasets hold the object, how many of them are readable,
     * whether it is a pushed file not yet archived (it joins its dataset, and
     * so gets its owner's permissions, only when durable), and whether the
     * caller pushed it (its writer reads it whatever the dataset's mode: a
     * shared S3 archive bucket) */
    [SQL_OBJECT_ACCESS] =
        "SELECT count(*), coalesce(sum(" READABLE_SQL "), 0),"
        " (SELECT count(*) FROM push_items p WHERE p.object_id = :object"
        "  AND p.state <> 'DURABLE'),"
        " EXISTS (SELECT 1 FROM push_items pi JOIN pushes p ON p.id = pi.push_id"
        "  WHERE pi.object_id = :object AND p.uid = :uid)"
        " FROM dataset_members m JOIN datasets d ON d.id = m.dataset_id"
        " WHERE m.object_id = :object",
    [SQL_REQUEST_INSERT] =
        "INSERT INTO requests(uuid, uid, gid, job_id, priority, deadline, pin_lifetime,"
        " state, created, updated) VALUES (:uuid, :uid, :gid, :job, :priority, :deadline,"
        " :pin, 'SUBMITTED', :now, :now)",
    [SQL_ITEM_INSERT] =
        "INSERT OR IGNORE INTO request_items(request_id, object_id, state)"
        " VALUES (:request, :object, 'SUBMITTED')",
    [SQL_REQUEST_TOTALS] =
        "SELECT count(*), coalesce(sum(o.size), 0) FROM request_items i"
        " JOIN objects o ON o.id = i.object_id WHERE i.request_id = :request",
    [SQL_REQUEST_FIND] =
        "SELECT id, uuid, uid, gid, job_id, priority, deadline, pin_lifetime, state, error,"
        " created, updated, coalesce(finished, 0), expired, end_reason"
        " FROM requests WHERE uuid = :uuid",
    [SQL_REQUEST_ITEMS] =
        "SELECT i.object_id, o.bucket, o.key, o.size, i.bytes_done, i.state, i.error,"
        " coalesce(i.started, 0), coalesce(i.finished, 0),"
        " EXISTS (SELECT 1 FROM cache_pins p WHERE p.request_id = i.request_id"
        " AND p.object_id = i.object_id)"
        " FROM request_items i JOIN objects o ON o.id = i.object_id"
        " WHERE i.request_id = :request ORDER BY o.bucket, o.key",
    [SQL_QUEUE_AHEAD] =
        "SELECT count(*) FROM requests WHERE state IN ('SUBMITTED', 'STARTED')"
        " AND (priority > :priority OR (priority = :priority AND"
        " (created < :created OR (created = :created AND id < :id))))",
    [SQL_REQUEST_SET_STATE] =
        "UPDATE requests SET state = :state, error = :error, updated = :now,"
        " finished = CASE WHEN :state IN " REQUEST_FINAL_SQL " THEN coalesce(finished, :now)"
        " END, end_reason = coalesce(:reason, end_reason), expired = max(expired, :expired)"
        " WHERE id = :request",
    [SQL_ITEMS_CANCEL] =
        "UPDATE request_items SET state = 'CANCELLED', finished = :now"
        " WHERE request_id = :request AND state IN ('SUBMITTED', 'STARTED')",
    [SQL_ITEM_CANCEL] =
        "UPDATE request_items SET state = 'CANCELLED', finished = :now"
        " WHERE request_id = :request AND object_id = :object"
        " AND state IN ('SUBMITTED', 'STARTED')",
    /* what the request still holds or waits for */
    [SQL_REQUEST_HELD] =
        "SELECT (SELECT count(*) FROM cache_pins WHERE request_id = :request) +"
        " (SELECT count(*) FROM request_items WHERE request_id = :request"
        " AND state IN ('SUBMITTED', 'STARTED'))",
    /* Pins are rows of cache_pins (schema 1.3); its triggers keep cache.pins. */
    [SQL_UNPIN_REQUEST] = "DELETE FROM cache_pins WHERE request_id = :request",
    [SQL_BIND_JOB] = "UPDATE requests SET job_id = :job, updated = :now WHERE id = :request",
    [SQL_ITEM_START] =
        "UPDATE request_items SET state = 'STARTED', started = :now, bytes_done = 0"
        " WHERE request_id = :request AND object_id = :object AND state = 'SUBMITTED'",
    [SQL_ITEM_PROGRESS] =
        "UPDATE request_items SET bytes_done = :bytes"
        " WHERE request_id = :request AND object_id = :object AND state = 'STARTED'",
    [SQL_ITEM_FINISH] =
        "UPDATE request_items SET state = :state, error = :error, finished = :now,"
        " bytes_done = CASE WHEN :state = 'COMPLETED'"
        " THEN (SELECT size FROM objects WHERE id = object_id) ELSE bytes_done END"
        " WHERE request_id = :request AND object_id = :object"
        " AND state IN ('SUBMITTED', 'STARTED')",
    [SQL_ITEM_STATE] =
        "SELECT state FROM request_items WHERE request_id = :request AND object_id = :object",
    [SQL_ITEM_REQUEUE] =
        "UPDATE request_items SET state = 'SUBMITTED', bytes_done = 0, error = NULL,"
        " started = NULL, finished = NULL WHERE request_id = :request AND object_id = :object",
    [SQL_PIN] =
        "INSERT OR IGNORE INTO cache_pins(object_id, request_id, since)"
        " SELECT :object, :request, :now WHERE EXISTS"
        " (SELECT 1 FROM cache WHERE object_id = :object)",
    [SQL_UNPIN] = "DELETE FROM cache_pins WHERE object_id = :object AND request_id = :request",
    /* SQL_ITEM_START, _FINISH (COMPLETED) and SQL_PIN for a batch of one
     * request's objects (a list: db_bind_int64_list), one statement each;
     * the items moved are returned */
    [SQL_ITEMS_START] =
        "UPDATE request_items SET state = 'STARTED', started = :now, bytes_done = 0"
        " WHERE request_id = :request AND object_id IN (SELECT value FROM json_each(:objects))"
        " AND state = 'SUBMITTED' RETURNING object_id",
    [SQL_ITEMS_FINISH] =
        "UPDATE request_items SET state = 'COMPLETED', error = NULL, finished = :now,"
        " bytes_done = (SELECT size FROM objects WHERE id = object_id)"
        " WHERE request_id = :request AND object_id IN (SELECT value FROM json_each(:objects))"
        " AND state IN ('SUBMITTED', 'STARTED') RETURNING object_id",
    [SQL_ITEMS_CACHED] =
        "SELECT object_id FROM cache WHERE object_id IN (SELECT value FROM json_each(:objects))",
    [SQL_ITEMS_PIN] =
        "INSERT OR IGNORE INTO cache_pins(object_id, request_id, since)"
        " SELECT value, :request, :now FROM json_each(:objects)"
        " WHERE EXISTS (SELECT 1 FROM cache WHERE object_id = value)",
    [SQL_ITEM_COUNTS] =
        "SELECT coalesce(sum(state IN ('SUBMITTED', 'STARTED')), 0),"
        " coalesce(sum(state IN ('STARTED', 'COMPLETED', 'FAILED')), 0),"
        " coalesce(sum(state = 'FAILED'), 0)"
        " FROM request_items WHERE request_id = :request",
    [SQL_ITEM_ANY_PENDING] = "SELECT EXISTS (SELECT 1 FROM request_items"
                             " WHERE request_id = :request AND state IN ('SUBMITTED', 'STARTED'))",
    /* PostgreSQL locks the row (sql_pg): see requests_follow_items */
    [SQL_REQUEST_STATE_BY_ID] = "SELECT state FROM requests WHERE id = :request",
    [SQL_PENDING] =
        "SELECT i.request_id, i.object_id, r.priority, coalesce(r.deadline, 0)"
        " FROM request_items i JOIN requests r ON r.id = i.request_id"
        " WHERE i.state = 'SUBMITTED' AND r.state IN ('SUBMITTED', 'STARTED')"
        " ORDER BY r.priority DESC, r.created, r.id, i.object_id",
    [SQL_LOCALITY] =
        "SELECT o.size, EXISTS (SELECT 1 FROM cache c WHERE c.object_id = o.id),"
        " EXISTS (SELECT 1 FROM tape_copies t JOIN volumes v ON v.id = t.volume_id"
        "  WHERE t.object_id = o.id AND v.state NOT IN ('failed', 'disabled')),"
        " EXISTS (SELECT 1 FROM tape_copies t JOIN volumes v ON v.id = t.volume_id"
        "  WHERE t.object_id = o.id AND v.state = 'disabled'),"
        " EXISTS (SELECT 1 FROM tape_copies t JOIN volumes v ON v.id = t.volume_id"
        "  WHERE t.object_id = o.id AND v.state = 'failed')"
        " FROM objects o WHERE o.bucket = :bucket AND o.key = :key",
    [SQL_HOLDER_ADD] =
        "INSERT INTO request_holders(request_id, kind, holder, running, since)"
        " VALUES (:request, :kind, :holder, :running, :now)"
        " ON CONFLICT (request_id, kind, holder) DO UPDATE SET running = max(request_holders.running, :running)",
    [SQL_HOLDER_DEL] =
        "DELETE FROM request_holders WHERE request_id = :request AND kind = :kind"
        " AND holder = :holder",
    [SQL_HOLDER_DROP_SUBMISSIONS] =
        "DELETE FROM request_holders WHERE request_id = :request AND kind = 'submission'",
    [SQL_HOLDERS_DROP_JOBS] =
        "DELETE FROM request_holders WHERE request_id = :request AND kind IN ('job', 'array')",
    /* all holders, array holders, job holders of other jobs than :holder,
     * running ones */
    [SQL_HOLDER_COUNTS] =
        "SELECT count(*), coalesce(sum(kind = 'array'), 0),"
        " coalesce(sum(kind = 'array' AND holder = :array), 0),"
        " coalesce(sum(kind = 'job' AND holder <> :holder), 0), coalesce(sum(running), 0)"
        " FROM request_holders WHERE request_id = :request",
    [SQL_HOLDER_RESOLVE] =
        "UPDATE request_holders SET kind = :kind, holder = :holder"
        " WHERE request_id = :request AND kind = 'submission' AND holder = :submission",
    [SQL_HOLDERS_ALL] =
        "SELECT r.id, r.uuid, r.uid, r.created, h.kind, h.holder, h.running, h.since"
        " FROM request_holders h JOIN requests r ON r.id = h.request_id"
        " WHERE r.state <> 'RELEASED' ORDER BY r.id, h.kind, h.holder",
    [SQL_EXPIRED] =
        "SELECT uuid, pin_lifetime FROM requests r"
        " WHERE state IN ('COMPLETED', 'FAILED', 'CANCELLED')"
        " AND finished + pin_lifetime <= :now"
        " AND NOT EXISTS (SELECT 1 FROM request_holders h"
        "  WHERE h.request_id = r.id AND h.running <> 0)"
        " ORDER BY finished",
    [SQL_RECENT_JOBS] =
        "SELECT DISTINCT job_id FROM requests WHERE job_id IS NOT NULL AND created >= :since",
};

/* ---- helpers ---------------------------------------------------------------- */

int requests_db_fail(requests_t *r, si_error_t *err, const char *what)
{
    return si_errnoprintf(err, EIO, "catalog %s: %s: %s", catalog_path(r->cat), what,
                          db_errmsg(r->db));
}

db_stmt_t *requests_stmt(requests_t *r, sql_id_t id)
{
    db_stmt_t *s = r->stmt[id];
    db_reset(s);
    db_clear_bindings(s);
    return s;
}

void requests_param_text(db_stmt_t *s, const char *name, const char *v)
{
    int i = db_bind_index(s, name);
    if (i > 0)
        v ? db_bind_text_copy(s, i, v) : db_bind_null(s, i);
}

void requests_param_int(db_stmt_t *s, const char *name, int64_t v)
{
    int i = db_bind_index(s, name);
    if (i > 0)
        db_bind_int64(s, i, v);
}

void requests_param_real(db_stmt_t *s, const char *name, double v)
{
    int i = db_bind_index(s, name);
    if (i > 0)
        db_bind_double(s, i, v);
}

char *requests_dup_column(db_stmt_t *s, int col)
{
    const char *t = db_column_text(s, col);
    return t ? strdup(t) : NULL;
}

void requests_reset_all(requests_t *r)
{
    for (int i = 0; i < SQL_COUNT; i++)
        db_reset(r->stmt[i]);
}

int requests_begin(requests_t *r, si_error_t *err)
{
    if (catalog_begin(r->cat, err) < 0) {
        errno = EIO;
        return -1;
    }
    return 0;
}

static void rollback(requests_t *r)
{
    requests_reset_all(r);
    catalog_rollback(r->cat);
}

/* The common failure exit: undoes the transaction, keeps the errno that
 * describes the failure, returns -1. */
int requests_rollback_fail(requests_t *r)
{
    int saved = errno;
    rollback(r);
    errno = saved;
    return -1;
}

int requests_commit(requests_t *r, si_error_t *err)
{
    requests_reset_all(r);
    if (catalog_commit(r->cat, err) < 0) {
        errno = EIO;
        return -1;
    }
    return 0;
}

int requests_rows(requests_t *r, db_stmt_t *s, size_t elem, requests_row_fn fill, void **out,
                  size_t *count, const char *what, si_error_t *err)
{
    unsigned char *list = NULL;
    size_t n = 0, cap = 0;
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        if (si_array_grow((void **)&list, &cap, n + 1, elem) < 0) {
            free(list);
            db_reset(s);
            return si_errnoprintf(err, ENOMEM, "out of memory");
        }
        unsigned char *rec = list + n++ * elem;
        memset(rec, 0, elem);
        fill(s, rec);
    }
    db_reset(s);
    if (rc != DB_DONE) {
        free(list);
        return requests_db_fail(r, err, what);
    }
    *out = list;
    *count = n;
    return 0;
}

int requests_log_commit(requests_t *r, const char *event, const char *subject,
                        const char *detail, const char *what, si_error_t *err)
{
    if (catalog_event(r->cat, event, subject, detail) < 0) {
        requests_db_fail(r, err, what);
        return requests_rollback_fail(r);
    }
    return requests_commit(r, err);
}

/* Where PostgreSQL's statement differs. Two instances completing the last
 * items of one request in concurrent transactions each saw the other's
 * item still pending (read committed), and neither completed the request:
 * it stayed STARTED with every item COMPLETED (tests/0020). The row lock
 * makes the later one wait and then see the earlier one's items. SQLite
 * has one writer at a time. */
static const char *const sql_pg[SQL_COUNT] = {
    [SQL_REQUEST_STATE_BY_ID] = "SELECT state FROM requests WHERE id = :request FOR UPDATE",
};

/* ---- open / close ------------------------------------------------------------- */

requests_t *requests_open(catalog_t *cat, si_error_t *err)
{
    requests_t *r = calloc(1, sizeof(*r));
    if (!r) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    r->cat = cat;
    r->db = catalog_driver(cat);
    for (int i = 0; i < SQL_COUNT; i++) {
        const char *sql = sql_pg[i] ? db_sql(r->db, sql_text[i], sql_pg[i]) : sql_text[i];
        if (!(r->stmt[i] = db_prepare(r->db, sql, NULL))) {
            si_errprintf(err, "catalog %s: preparing request statements: %s", catalog_path(cat),
                         db_errmsg(r->db));
            requests_close(r);
            return NULL;
        }
    }
    return r;
}

void requests_close(requests_t *r)
{
    if (!r)
        return;
    for (int i = 0; i < SQL_COUNT; i++)
        db_finalize(r->stmt[i]);
    free(r);
}

/* ---- shared by the request files ---------------------------------------------- */

int requests_check_job_id(const char *job, si_error_t *err)
{
    if (!job || !*job || strlen(job) > 64 || !si_utf8_valid(job, strlen(job)))
        return si_errnoprintf(err, EINVAL, "job id must be 1 to 64 characters of text");
    return 0;
}

int requests_add_holder(requests_t *r, int64_t request, requests_holder_kind_t kind,
                        const char *holder, bool running, si_error_t *err)
{
    db_stmt_t *s = requests_stmt(r, SQL_HOLDER_ADD);
    requests_param_int(s, ":request", request);
    requests_param_text(s, ":kind", requests_holder_kind_name(kind));
    requests_param_text(s, ":holder", holder);
    requests_param_int(s, ":running", running);
    requests_param_real(s, ":now", si_wall_now());
    if (db_step(s) != DB_DONE)
        return requests_db_fail(r, err, "recording who holds a request");
    return 0;
}

/* Finds a request; EACCES unless the caller owns it or is root. */
int requests_find(requests_t *r, const char *uuid, uid_t caller, requests_status_t *st,
                  si_error_t *err)
{
    if (!uuid || strlen(uuid) != REQUESTS_UUID_LEN)
        return si_errnoprintf(err, ENOENT, "no request '%.64s' (a request id is a 36-character uuid)",
                    uuid ? uuid : "");
    db_stmt_t *s = requests_stmt(r, SQL_REQUEST_FIND);
    requests_param_text(s, ":uuid", uuid);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return si_errnoprintf(err, ENOENT, "no request %s", uuid);
    if (rc != DB_ROW)
        return requests_db_fail(r, err, "looking up a request");
    st->id = db_column_int64(s, 0);
    snprintf(st->uuid, sizeof(st->uuid), "%s", db_column_text(s, 1));
    st->uid = (uid_t)db_column_int64(s, 2);
    st->gid = (gid_t)db_column_int64(s, 3);
    st->job_id = requests_dup_column(s, 4);
    st->priority = db_column_int(s, 5);
    st->deadline = db_column_int64(s, 6);
    st->pin_lifetime = db_column_int64(s, 7);
    snprintf(st->state, sizeof(st->state), "%s", db_column_text(s, 8));
    st->error = requests_dup_column(s, 9);
    st->created = db_column_double(s, 10);
    st->updated = db_column_double(s, 11);
    st->finished = db_column_double(s, 12);
    st->expired = db_column_int(s, 13) != 0;
    st->end_reason = requests_dup_column(s, 14);
    db_reset(s);
    if (caller != (uid_t)-1 && caller != 0 && caller != st->uid) {
        free(st->job_id);
        free(st->error);
        free(st->end_reason);
        st->job_id = st->error = st->end_reason = NULL;
        return si_errnoprintf(err, EACCES, "request %s belongs to uid %u, not to uid %u", uuid,
                    (unsigned)st->uid, (unsigned)caller);
    }
    return 0;
}

bool requests_is_active_state(const char *state)
{
    return strcmp(state, "SUBMITTED") == 0 || strcmp(state, "STARTED") == 0;
}

/* reason (NULL: keep) says why it ended; expired marks a release by expiry. */
static int set_request_state(requests_t *r, int64_t id, const char *state, const char *error,
                             const char *reason, bool expired, si_error_t *err)
{
    db_stmt_t *s = requests_stmt(r, SQL_REQUEST_SET_STATE);
    requests_param_text(s, ":state", state);
    requests_param_text(s, ":error", error);
    requests_param_text(s, ":reason", reason);
    requests_param_int(s, ":expired", expired);
    requests_param_real(s, ":now", si_wall_now());
    requests_param_int(s, ":request", id);
    if (db_step(s) != DB_DONE)
        return requests_db_fail(r, err, "updating a request");
    return 0;
}

void requests_status_clear(requests_status_t *st)
{
    free(st->job_id);
    free(st->error);
    free(st->end_reason);
    st->job_id = st->error = st->end_reason = NULL;
}

/* The failure exit of a change to one request: rolled back, errno kept. */
int requests_abandon(requests_t *r, requests_status_t *st)
{
    int saved = errno;
    rollback(r);
    requests_status_clear(st);
    errno = saved;
    return -1;
}

/* Ends st's request inside the caller's transaction: cancels the items not
 * yet finished; a release also gives back its pins. */
int requests_end_found(requests_t *r, requests_status_t *st, bool release, const char *why,
                       bool expired, si_error_t *err)
{
    db_stmt_t *s = requests_stmt(r, SQL_ITEMS_CANCEL);
    requests_param_real(s, ":now", si_wall_now());
    requests_param_int(s, ":request", st->id);
    if (db_step(s) != DB_DONE)
        return requests_db_fail(r, err, "cancelling items");
    if (release) {
        s = requests_stmt(r, SQL_UNPIN_REQUEST);
        requests_param_int(s, ":request", st->id);
        if (db_step(s) != DB_DONE)
            return requests_db_fail(r, err, "unpinning");
    }
    const char *state = release ? "RELEASED" : "CANCELLED";
    char detail[300];
    snprintf(detail, sizeof(detail), "%s (was %s)", why, st->state);
    if (set_request_state(r, st->id, state, st->error, why, expired, err) < 0)
        return -1;
    if (catalog_event(r->cat, expired ? "request.expired" : release ? "request.released"
                                                                    : "request.cancelled",
                      st->uuid, detail) < 0)
        return requests_db_fail(r, err, "recording the change");
    return 0;
}

const char *requests_holder_kind_name(requests_holder_kind_t k)
{
    switch (k) {
    case REQUESTS_HOLDER_SUBMISSION: return "submission";
    case REQUESTS_HOLDER_JOB: return "job";
    case REQUESTS_HOLDER_ARRAY: return "array";
    }
    return "?";
}

/* After an item changed: the request follows its items while it is active. */
int requests_follow_items(requests_t *r, int64_t request, si_error_t *err)
{
    db_stmt_t *s = requests_stmt(r, SQL_REQUEST_STATE_BY_ID);
    requests_param_int(s, ":request", request);
    if (db_step(s) != DB_ROW)
        return si_errnoprintf(err, ENOENT, "no request with id %lld", (long long)request);
    char state[12];
    snprintf(state, sizeof(state), "%s", db_column_text(s, 0));
    db_reset(s);
    if (!requests_is_active_state(state))
        return 0;
    if (strcmp(state, "STARTED") == 0) {
        /* nothing changes while an item is pending: one index probe, not a
         * count of every item (this runs after each batch of completions) */
        s = requests_stmt(r, SQL_ITEM_ANY_PENDING);
        requests_param_int(s, ":request", request);
        if (db_step(s) != DB_ROW)
            return requests_db_fail(r, err, "looking for pending items");
        bool pending = db_column_int64(s, 0) != 0;
        db_reset(s);
        if (pending)
            return 0;
    }
    s = requests_stmt(r, SQL_ITEM_COUNTS);
    requests_param_int(s, ":request", request);
    if (db_step(s) != DB_ROW)
        return requests_db_fail(r, err, "counting items");
    int64_t pending = db_column_int64(s, 0), touched = db_column_int64(s, 1),
            failed = db_column_int64(s, 2);
    db_reset(s);
    const char *next = pending == 0 ? (failed ? "FAILED" : "COMPLETED")
                                    : touched ? "STARTED" : "SUBMITTED";
    if (strcmp(next, state) == 0)
        return 0;
    char error[64] = "";
    if (failed)
        snprintf(error, sizeof(error), "%lld files failed", (long long)failed);
    if (set_request_state(r, request, next, failed ? error : NULL, NULL, false, err) < 0)
        return -1;
    if (pending == 0) {
        char id[32];
        snprintf(id, sizeof(id), "%lld", (long long)request);
        if (catalog_event(r->cat, failed ? "request.failed" : "request.completed", id,
                          failed ? error : NULL) < 0)
            return requests_db_fail(r, err, "logging the request's end");
    }
    return 0;
}
