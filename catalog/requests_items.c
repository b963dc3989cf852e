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

/* A batch's statements take one request's items at a time, at most this
 * many: bounded text, bounded time holding the write lock. */
#define ITEMS_CHUNK 1024

typedef struct {
    int64_t *ids;     /* the objects asked for */
    int64_t *got;     /* those the statement returned, sorted */
    bool *taken;      /* got[k] given to an item already */
    size_t nids, ngot;
} id_set_t;

/* Runs s (its :objects the set's ids) and keeps the object ids it returns. */
static int id_set_run(requests_t *r, db_stmt_t *s, id_set_t *set, si_error_t *err,
                      const char *what)
{
    int i = db_bind_index(s, ":objects");
    if (db_bind_int64_list(s, i, set->ids, set->nids) < 0)
        return si_errnoprintf(err, ENOMEM, "out of memory");
    int rc = db_step_ids(s, set->got, set->nids, &set->ngot);
    db_reset(s);
    if (rc != DB_DONE)
        return requests_db_fail(r, err, what);
    memset(set->taken, 0, set->ngot * sizeof(*set->taken));
    return 0;
}

/* Whether the statement returned object (each returned row answers one
 * item: a second item of the same object is not moved twice). */
static bool id_set_take(id_set_t *set, int64_t object)
{
    const int64_t *at = db_ids_find(set->got, set->ngot, object);
    for (; at && at < set->got + set->ngot && *at == object; at++)
        if (!set->taken[at - set->got])
            return set->taken[at - set->got] = true;
    return false;
}

/* One request's items (a run of the batch): their transition, in set-based
 * statements. */
static int items_run(requests_t *r, sql_id_t id, requests_item_outcome_t *items, size_t n,
                     double now, id_set_t *set, si_error_t *err)
{
    int64_t request = items[0].request_id;
    bool finish = id == SQL_ITEMS_FINISH;
    /* completed only while its object is cached: the pin follows */
    set->nids = 0;
    for (size_t i = 0; finish && i < n; i++)
        if (!items[i].pinned)
            set->ids[set->nids++] = items[i].object_id;
    if (set->nids) {
        if (id_set_run(r, requests_stmt(r, SQL_ITEMS_CACHED), set, err,
                       "checking cached objects") < 0)
            return -1;
        for (size_t i = 0; i < n; i++)
            if (!items[i].pinned && !db_ids_find(set->got, set->ngot, items[i].object_id))
                items[i].outcome = REQUESTS_ITEM_NOT_CACHED;
    }
    set->nids = 0;
    for (size_t i = 0; i < n; i++)
        if (items[i].outcome != REQUESTS_ITEM_NOT_CACHED)
            set->ids[set->nids++] = items[i].object_id;
    if (!set->nids)
        return 0;
    db_stmt_t *s = requests_stmt(r, id);
    requests_param_int(s, ":request", request);
    requests_param_real(s, ":now", now);
    if (id_set_run(r, s, set, err, "updating a batch of items") < 0)
        return -1;
    size_t npin = 0;
    for (size_t i = 0; i < n; i++) {
        requests_item_outcome_t *it = &items[i];
        if (it->outcome == REQUESTS_ITEM_NOT_CACHED)
            continue;
        it->outcome = id_set_take(set, it->object_id) ? REQUESTS_ITEM_DONE : REQUESTS_ITEM_BUSY;
        if (finish && it->outcome == REQUESTS_ITEM_DONE && !it->pinned)
            set->ids[npin++] = it->object_id;
    }
    if (!npin)
        return 0;
    set->nids = npin;
    s = requests_stmt(r, SQL_ITEMS_PIN);
    requests_param_int(s, ":request", request);
    requests_param_real(s, ":now", now);
    if (id_set_run(r, s, set, err, "updating the cache pins") < 0)
        return -1;
    return 0;
}

/* item_transition for many items, inside the caller's transaction: a few
 * statements per request and batch, not several per item (each runs its
 * triggers' programs once); each request touched is moved along once, at
 * the end. */
static int items_transition_in(requests_t *r, sql_id_t id, requests_item_outcome_t *items,
                               size_t n, si_error_t *err)
{
    size_t most = n < ITEMS_CHUNK ? n : ITEMS_CHUNK;
    id_set_t set = {.ids = malloc(most * sizeof(*set.ids) + 1),
                    .got = malloc(most * sizeof(*set.got) + 1),
                    .taken = malloc(most * sizeof(*set.taken) + 1)};
    int rc = set.ids && set.got && set.taken ? 0 : si_errnoprintf(err, ENOMEM, "out of memory");
    double now = si_wall_now();
    for (size_t i = 0; i < n; i++)
        items[i].outcome = 0;
    /* runs of one request's items (they come grouped by request, mostly) */
    for (size_t at = 0; at < n && rc == 0;) {
        size_t end = at + 1;
        while (end < n && end - at < most && items[end].request_id == items[at].request_id)
            end++;
        rc = items_run(r, id, items + at, end - at, now, &set, err);
        at = end;
    }
    free(set.ids);
    free(set.got);
    free(set.taken);
    /* each request once, in ascending order: the follow-up locks its row
     * (PostgreSQL), and two instances' batches lock them in the same order */
    int64_t *requests = rc == 0 ? malloc(n * sizeof(*requests) + 1) : NULL;
    if (rc == 0 && !requests)
        rc = si_errnoprintf(err, ENOMEM, "out of memory");
    size_t nreq = 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (items[i].outcome == REQUESTS_ITEM_DONE)
            requests[nreq++] = items[i].request_id;
    db_ids_sort(requests, nreq);
    for (size_t i = 0; i < nreq && rc == 0; i++)
        if (i == 0 || requests[i] != requests[i - 1])
            rc = requests_follow_items(r, requests[i], err);
    free(requests);
    requests_reset_all(r);
    return rc;
}

int requests_items_started_in(requests_t *r, requests_item_outcome_t *items, size_t n,
                              si_error_t *err)
{
    return items_transition_in(r, SQL_ITEMS_START, items, n, err);
}

int requests_items_completed_in(requests_t *r, requests_item_outcome_t *items, size_t n,
                                si_error_t *err)
{
    return items_transition_in(r, SQL_ITEMS_FINISH, items, n, err);
}
