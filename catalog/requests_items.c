/* Stage requests' items: one item's transitions, the batched ones of the
 * recall service's group commit, and recovery at restart. */
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

/* ---- item transitions ------------------------------------------------------------- */

static int item_state(requests_t *r, int64_t request, int64_t object, char *state, size_t size,
                      si_error_t *err)
{
    db_stmt_t *s = requests_stmt(r, SQL_ITEM_STATE);
    requests_param_int(s, ":request", request);
    requests_param_int(s, ":object", object);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return si_errnoprintf(err, ENOENT, "request %lld has no item for object %lld", (long long)request,
                    (long long)object);
    if (rc != DB_ROW)
        return requests_db_fail(r, err, "reading an item");
    snprintf(state, size, "%s", db_column_text(s, 0));
    db_reset(s);
    return 0;
}

/* Runs one item UPDATE inside a transaction; EBUSY when it changed nothing. */
static int item_transition(requests_t *r, sql_id_t id, int64_t request, int64_t object,
                           const char *state, const char *error, uint64_t bytes,
                           const char *what, si_error_t *err)
{
    char was[12] = "";
    if (requests_begin(r, err) < 0)
        return -1;
    if (item_state(r, request, object, was, sizeof(was), err) < 0)
        goto error;
    bool was_completed = strcmp(was, "COMPLETED") == 0;
    db_stmt_t *s = requests_stmt(r, id);
    requests_param_int(s, ":request", request);
    requests_param_int(s, ":object", object);
    requests_param_real(s, ":now", si_wall_now());
    requests_param_text(s, ":state", state);
    requests_param_text(s, ":error", error);
    requests_param_int(s, ":bytes", (int64_t)bytes);
    if (db_step(s) != DB_DONE) {
        requests_db_fail(r, err, what);
        goto error;
    }
    if (db_changes(r->db) == 0) {
        si_errnoprintf(err, EBUSY, "request %lld, object %lld: cannot %s an item that is %s",
             (long long)request, (long long)object, what, was);
        goto error;
    }
    /* pins follow COMPLETED: taken on completion, given back on requeue */
    sql_id_t pin = id == SQL_ITEM_FINISH && strcmp(state, "COMPLETED") == 0 ? SQL_PIN
                   : id == SQL_ITEM_REQUEUE && was_completed               ? SQL_UNPIN
                                                                           : SQL_COUNT;
    if (pin != SQL_COUNT) {
        s = requests_stmt(r, pin);
        requests_param_int(s, ":object", object);
        requests_param_int(s, ":request", request);
        requests_param_real(s, ":now", si_wall_now());
        if (db_step(s) != DB_DONE) {
            requests_db_fail(r, err, "updating the cache pin");
            goto error;
        }
    }
    if (requests_follow_items(r, request, err) < 0)
        goto error;
    return requests_commit(r, err);
error:
    return requests_rollback_fail(r);
}

int requests_item_started(requests_t *r, int64_t request_id, int64_t object_id, si_error_t *err)
{
    return item_transition(r, SQL_ITEM_START, request_id, object_id, NULL, NULL, 0, "start", err);
}

int requests_item_progress(requests_t *r, int64_t request_id, int64_t object_id,
                           uint64_t bytes_done, si_error_t *err)
{
    return item_transition(r, SQL_ITEM_PROGRESS, request_id, object_id, NULL, NULL, bytes_done,
                           "record progress of", err);
}

int requests_item_completed(requests_t *r, int64_t request_id, int64_t object_id,
                            si_error_t *err)
{
    return item_transition(r, SQL_ITEM_FINISH, request_id, object_id, "COMPLETED", NULL, 0,
                           "complete", err);
}

int requests_item_failed(requests_t *r, int64_t request_id, int64_t object_id,
                         const char *reason, si_error_t *err)
{
    return item_transition(r, SQL_ITEM_FINISH, request_id, object_id, "FAILED",
                           reason ? reason : "failed", 0, "fail", err);
}

int requests_item_requeue(requests_t *r, int64_t request_id, int64_t object_id,
                          si_error_t *err)
{
    return item_transition(r, SQL_ITEM_REQUEUE, request_id, object_id, NULL, NULL, 0, "requeue",
                           err);
}

/* ---- restart -------------------------------------------------------------------------- */

int requests_recover(requests_t *r, requests_recovery_t *out, si_error_t *err)
{
    requests_recovery_t rec = {0};
    if (requests_begin(r, err) < 0)
        return -1;
    if (db_exec(r->db, "UPDATE request_items SET state = 'SUBMITTED', bytes_done = 0, started = NULL"
                     " WHERE state = 'STARTED' AND request_id IN"
                     " (SELECT id FROM requests WHERE state IN ('SUBMITTED', 'STARTED'))", NULL) < 0) {
        requests_db_fail(r, err, "re-queueing interrupted items");
        goto error;
    }
    rec.requeued_items = (uint64_t)db_changes(r->db);
    db_stmt_t *s = NULL;
    if (!(s = db_prepare(r->db, "SELECT count(*) FROM requests WHERE state IN ('SUBMITTED', 'STARTED')", NULL)) || db_step(s) != DB_ROW) {
        db_finalize(s);
        requests_db_fail(r, err, "counting active requests");
        goto error;
    }
    rec.active_requests = (uint64_t)db_column_int64(s, 0);
    db_finalize(s);
    char detail[96];
    snprintf(detail, sizeof(detail), "%llu items queued again, %llu active requests",
             (unsigned long long)rec.requeued_items, (unsigned long long)rec.active_requests);
    if (requests_log_commit(r, "requests.recovered", NULL, detail,
                            "logging the recovery", err) < 0)
        return -1;
    if (out)
        *out = rec;
    return 0;
error:
    return requests_rollback_fail(r);
}

int requests_completed_items(requests_t *r, requests_item_ref_t **refs, size_t *count,
                             si_error_t *err)
{
    db_stmt_t *s = NULL;
    if (!(s = db_prepare(r->db, "SELECT i.request_id, i.object_id FROM request_items i"
                           " JOIN requests q ON q.id = i.request_id"
                           " WHERE i.state = 'COMPLETED' AND q.state != 'RELEASED'"
                           " ORDER BY i.object_id, i.request_id", NULL)))
        return requests_db_fail(r, err, "listing completed items");
    requests_item_ref_t *out = NULL;
    size_t n = 0, cap = 0;
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        if (si_array_grow((void **)&out, &cap, n + 1, sizeof(*out)) < 0) {
            free(out);
            db_finalize(s);
            return si_errnoprintf(err, ENOMEM, "out of memory");
        }
        out[n].request_id = db_column_int64(s, 0);
        out[n].object_id = db_column_int64(s, 1);
        n++;
    }
    if (rc != DB_DONE) {
        requests_db_fail(r, err, "listing completed items");
        db_finalize(s);
        free(out);
        return -1;
    }
    db_finalize(s);
    *refs = out;
    *count = n;
    return 0;
}

/* ---- batched item transitions (the recall service's group commit) ---------------- */

/* The item UPDATE of item_transition for many items, inside the caller's
 * transaction; each request touched is moved along once, at the end. */
static int items_transition_in(requests_t *r, sql_id_t id, requests_item_outcome_t *items,
                               size_t n, si_error_t *err)
{
    db_stmt_t *cached = NULL;
    if (id == SQL_ITEM_FINISH &&
        !(cached = db_prepare(r->db, "SELECT 1 FROM cache WHERE object_id = ?1", NULL)))
        return requests_db_fail(r, err, "preparing a batch of items");
    double now = si_wall_now();
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        requests_item_outcome_t *it = &items[i];
        if (cached && !it->pinned) {
            /* completed only while its object is cached: the pin follows */
            db_bind_int64(cached, 1, it->object_id);
            int step = db_step(cached);
            db_reset(cached);
            if (step != DB_ROW && step != DB_DONE) {
                rc = requests_db_fail(r, err, "checking a cached object");
                break;
            }
            if (step == DB_DONE) {
                it->outcome = REQUESTS_ITEM_NOT_CACHED;
                continue;
            }
        }
        db_stmt_t *s = requests_stmt(r, id);
        requests_param_int(s, ":request", it->request_id);
        requests_param_int(s, ":object", it->object_id);
        requests_param_real(s, ":now", now);
        requests_param_text(s, ":state", id == SQL_ITEM_FINISH ? "COMPLETED" : NULL);
        requests_param_text(s, ":error", NULL);
        requests_param_int(s, ":bytes", 0);
        if (db_step(s) != DB_DONE) {
            rc = requests_db_fail(r, err, "updating a batch of items");
            break;
        }
        it->outcome = db_changes(r->db) ? REQUESTS_ITEM_DONE : REQUESTS_ITEM_BUSY;
        db_reset(s);
        if (it->outcome != REQUESTS_ITEM_DONE || id != SQL_ITEM_FINISH || it->pinned)
            continue;
        s = requests_stmt(r, SQL_PIN);
        requests_param_int(s, ":object", it->object_id);
        requests_param_int(s, ":request", it->request_id);
        requests_param_real(s, ":now", now);
        if (db_step(s) != DB_DONE)
            rc = requests_db_fail(r, err, "updating the cache pin");
        db_reset(s);
    }
    db_finalize(cached);
    /* each request once (items come grouped by request, mostly) */
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (items[i].outcome != REQUESTS_ITEM_DONE)
            continue;
        bool seen = false;
        for (size_t k = 0; k < i && !seen; k++)
            seen = items[k].outcome == REQUESTS_ITEM_DONE &&
                   items[k].request_id == items[i].request_id;
        if (!seen)
            rc = requests_follow_items(r, items[i].request_id, err);
    }
    requests_reset_all(r);
    return rc;
}

int requests_items_started_in(requests_t *r, requests_item_outcome_t *items, size_t n,
                              si_error_t *err)
{
    return items_transition_in(r, SQL_ITEM_START, items, n, err);
}

int requests_items_completed_in(requests_t *r, requests_item_outcome_t *items, size_t n,
                                si_error_t *err)
{
    return items_transition_in(r, SQL_ITEM_FINISH, items, n, err);
}
