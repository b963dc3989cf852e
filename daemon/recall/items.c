/* The recall service's catalog work: the object and its copies for the
 * backend, the request's notes, and the items moved on in batches (one
 * catalog transaction each); see internal.h. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "common/text.h"
#include "daemon/recall/internal.h"

/* The object's row (size, checksum, bucket, key from column at on) into
 * item; -1 when out of memory. */
static int item_set_object(archive_item_t *item, db_stmt_t *s, int at)
{
    item->size = (uint64_t)db_column_int64(s, at);
    snprintf(item->checksum, sizeof(item->checksum), "%s", db_column_text(s, at + 1));
    const char *bucket = db_column_text(s, at + 2), *key = db_column_text(s, at + 3);
    size_t blen = strnlen(bucket, SI_BUCKET_MAX), klen = strnlen(key, SI_KEY_MAX);
    char *names = malloc(blen + klen + 2);
    if (!names)
        return -1;
    memcpy(names, bucket, blen);
    names[blen] = '\0';
    memcpy(names + blen + 1, key, klen);
    names[blen + 1 + klen] = '\0';
    item->bucket = names;
    item->key = names + blen + 1;
    return 0;
}

/* A copy's row (copy, label, file_seq, position, length from column at on). */
static void item_add_copy(archive_item_t *item, db_stmt_t *s, int at)
{
    if (item->ncopies >= ARCHIVE_MAX_COPIES)
        return;
    archive_copy_t *c = &item->copies[item->ncopies++];
    c->copy = db_column_int(s, at);
    snprintf(c->volume, sizeof(c->volume), "%s", db_column_text(s, at + 1));
    c->file_seq = db_column_int64(s, at + 2);
    c->position = (uint64_t)db_column_int64(s, at + 3);
    c->length = (uint64_t)db_column_int64(s, at + 4);
}

int recall_load_item(recall_service_t *rs, int64_t object_id, archive_item_t *item,
                     si_error_t *err)
{
    memset(item, 0, sizeof(*item));
    item->object_id = object_id;
    db_stmt_t *s = recall_stmt(rs, SQL_OBJECT);
    db_bind_int64(s, 1, object_id);
    if (db_step(s) != DB_ROW) {
        db_reset(s);
        return si_errprintf(err, "object %" PRId64 " is not in the catalog", object_id);
    }
    int rc = item_set_object(item, s, 0);
    db_reset(s);
    if (rc < 0)
        return si_errnoprintf(err, ENOMEM, "object %" PRId64 ": out of memory", object_id);
    s = recall_stmt(rs, SQL_COPIES);
    db_bind_int64(s, 1, object_id);
    while (db_step(s) == DB_ROW)
        item_add_copy(item, s, 0);
    db_reset(s);
    return 0;
}

/* Objects loaded per read transaction and statement: one statement per
 * object would take and drop SQLite's WAL read lock on its own, and make a
 * round trip to PostgreSQL. */
#define LOAD_CHUNK 256

typedef struct {
    int64_t id;
    size_t at; /* its index in the caller's array */
} load_slot_t;

static int by_slot_id(const void *a, const void *b)
{
    const load_slot_t *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id ? 1 : x->at < y->at ? -1 : x->at > y->at;
}

/* The first of the slots for id (ids may repeat: each gets the rows). */
static load_slot_t *slot_first(load_slot_t *slots, size_t n, int64_t id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (slots[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && slots[lo].id == id ? &slots[lo] : NULL;
}

void recall_load_items(recall_service_t *rs, const int64_t *ids, size_t n, archive_item_t *items)
{
    db_t *db = catalog_driver(rs->cat);
    for (size_t k = 0; k < n; k++) {
        memset(&items[k], 0, sizeof(items[k]));
        items[k].object_id = ids[k];
    }
    load_slot_t *slots = malloc((n < LOAD_CHUNK ? n : LOAD_CHUNK) * sizeof(*slots) + 1);
    if (!slots)
        return; /* not loaded: the scan loads each item itself */
    for (size_t i = 0; i < n; i += LOAD_CHUNK) {
        size_t end = i + LOAD_CHUNK < n ? i + LOAD_CHUNK : n, m = end - i;
        for (size_t k = 0; k < m; k++)
            slots[k] = (load_slot_t){ids[i + k], i + k};
        qsort(slots, m, sizeof(*slots), by_slot_id);
        si_error_t err;
        bool txn = !db_in_transaction(db) && db_begin_readonly(db, &err) == 0;
        db_stmt_t *s = recall_stmt(rs, SQL_OBJECTS);
        if (db_bind_int64_list(s, 1, ids + i, m) == 0)
            while (db_step(s) == DB_ROW)
                for (load_slot_t *t = slot_first(slots, m, db_column_int64(s, 0));
                     t && t < slots + m && t->id == db_column_int64(s, 0); t++)
                    if (!items[t->at].bucket)
                        item_set_object(&items[t->at], s, 1);
        db_reset(s);
        s = recall_stmt(rs, SQL_OBJECTS_COPIES);
        if (db_bind_int64_list(s, 1, ids + i, m) == 0)
            while (db_step(s) == DB_ROW)
                for (load_slot_t *t = slot_first(slots, m, db_column_int64(s, 0));
                     t && t < slots + m && t->id == db_column_int64(s, 0); t++)
                    if (items[t->at].bucket) /* the object's row came first */
                        item_add_copy(&items[t->at], s, 1);
        db_reset(s);
        if (txn) /* it only read: a failed commit loses nothing */
            db_commit(db, &err);
    }
    free(slots);
}

bool recall_request_active(recall_service_t *rs, int64_t request)
{
    db_stmt_t *s = recall_stmt(rs, SQL_REQUEST_STATE);
    db_bind_int64(s, 1, request);
    bool active = false;
    if (db_step(s) == DB_ROW) {
        const char *state = db_column_text(s, 0);
        active = strcmp(state, "SUBMITTED") == 0 || strcmp(state, "STARTED") == 0;
    }
    db_reset(s);
    return active;
}

void recall_note(recall_service_t *rs, int64_t request, const char *text)
{
    size_t i;
    for (i = 0; i < rs->nnotes && rs->notes[i].request != request; i++)
        ;
    bool had = i < rs->nnotes;
    if (!*text && !had)
        return;
    if (had && strcmp(rs->notes[i].text, text) == 0)
        return;
    db_stmt_t *s = recall_stmt(rs, *text ? SQL_NOTE_SET : SQL_NOTE_CLEAR);
    db_bind_int64(s, 1, request);
    if (*text)
        db_bind_text_copy(s, 2, text);
    if (db_step(s) != DB_DONE)
        si_log(rs->log, SI_LOG_WARNING, "recall: noting request %" PRId64 ": %s", request,
               db_errmsg(catalog_driver(rs->cat)));
    db_reset(s);
    if (!*text) {
        rs->notes[i] = rs->notes[--rs->nnotes];
        return;
    }
    if (!had) {
        if (si_array_grow((void **)&rs->notes, &rs->cap_notes, rs->nnotes + 1,
                          sizeof(*rs->notes)) < 0)
            return;
        i = rs->nnotes++;
        rs->notes[i].request = request;
    }
    snprintf(rs->notes[i].text, sizeof(rs->notes[i].text), "%s", text);
}

/* Pins a cached object for a request and completes its item. Returns 0, or
 * -1 when the object is no longer cached (the item then stays queued). */
static int complete_from_cache(recall_service_t *rs, int64_t request, int64_t object)
{
    si_error_t err;
    if (cache_pin(rs->cache, object, request, &err) < 0) {
        if (errno != ENOENT)
            si_log(rs->log, SI_LOG_WARNING, "recall: %s", err.text);
        return -1;
    }
    if (requests_item_completed(rs->rq, request, object, &err) < 0) {
        if (errno != EBUSY) /* EBUSY: cancelled meanwhile */
            si_log(rs->log, SI_LOG_ERROR, "recall: %s", err.text);
        return 0;
    }
    pthread_mutex_lock(&rs->mu);
    rs->st.items_completed++;
    pthread_mutex_unlock(&rs->mu);
    return 0;
}

/* ---- items moved on in batches (one catalog transaction each) -------------------- */

int recall_item_list_add(item_list_t *l, int64_t request, int64_t object)
{
    if (si_array_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v)) < 0)
        return -1;
    l->v[l->n++] = (requests_item_outcome_t){.request_id = request, .object_id = object};
    return 0;
}

/* The leases of recalled objects, given back in one statement. */
static int recall_release_recalled(recall_service_t *rs, flight_t **recalled, size_t n)
{
    if (n == 0)
        return 0;
    int64_t *ids = malloc(n * sizeof(*ids));
    int rc = 0;
    if (!ids) { /* one at a time, then */
        for (size_t i = 0; i < n; i++)
            rc |= recall_release_objects(rs, &recalled[i]->object_id, 1);
        return rc;
    }
    for (size_t i = 0; i < n; i++)
        ids[i] = recalled[i]->object_id;
    rc = recall_release_objects(rs, ids, n);
    free(ids);
    return rc;
}

/* An object.recalled event per recalled object, in one statement. */
static void recalled_events(recall_service_t *rs, flight_t **recalled, size_t n)
{
    enum { SUBJECT = 24, DETAIL = 160 };
    char *text = malloc(n * (SUBJECT + DETAIL) + 1);
    const char **subjects = malloc(2 * n * sizeof(*subjects) + 1);
    if (!text || !subjects) {
        free(text);
        free(subjects);
        si_log(rs->log, SI_LOG_WARNING, "recall: out of memory for %zu recall events", n);
        return;
    }
    const char **details = subjects + n;
    for (size_t i = 0; i < n; i++) {
        char *subject = text + i * (SUBJECT + DETAIL), *detail = subject + SUBJECT;
        snprintf(subject, SUBJECT, "%" PRId64, recalled[i]->object_id);
        snprintf(detail, DETAIL, "%" PRIu64 " bytes for %zu requests by instance %s",
                 recalled[i]->size, recalled[i]->nwaiters, rs->inst.name);
        subjects[i] = subject;
        details[i] = detail;
    }
    catalog_events(rs->cat, "object.recalled", subjects, details, n);
    free(text);
    free(subjects);
}

int recall_items_commit(recall_service_t *rs, item_list_t *l, bool complete,
                        flight_t **recalled, size_t nrecalled)
{
    if (!l->n && !nrecalled)
        return 0;
    si_error_t err;
    if (catalog_begin(rs->cat, &err) < 0)
        goto error;
    recalled_events(rs, recalled, nrecalled);
    int rc = complete ? requests_items_completed_in(rs->rq, l->v, l->n, &err)
                      : requests_items_started_in(rs->rq, l->v, l->n, &err);
    if (rc < 0) {
        catalog_rollback(rs->cat);
        goto error;
    }
    /* the recalled objects' leases go with their items' completion */
    if (recall_release_recalled(rs, recalled, nrecalled) < 0) {
        catalog_rollback(rs->cat);
        goto error;
    }
    if (catalog_commit(rs->cat, &err) < 0)
        goto error;
    return 0;
error:
    recall_release_recalled(rs, recalled, nrecalled); /* outside the failed transaction */
    for (size_t i = 0; i < l->n; i++)
        l->v[i].outcome = 0;
    si_log(rs->log, SI_LOG_ERROR, "recall: %s", err.text);
    return -1;
}

size_t recall_complete_items(recall_service_t *rs, item_list_t *l, flight_t **recalled,
                             size_t nrecalled)
{
    size_t done = 0;
    bool failed = recall_items_commit(rs, l, true, recalled, nrecalled) < 0;
    for (size_t i = 0; i < l->n; i++) {
        requests_item_outcome_t *it = &l->v[i];
        si_error_t err;
        if (failed) /* one at a time, as the batch could not be */
            done += complete_from_cache(rs, it->request_id, it->object_id) == 0;
        else if (it->outcome == REQUESTS_ITEM_DONE)
            done++;
        else if (it->outcome == REQUESTS_ITEM_NOT_CACHED) {
            if (requests_item_requeue(rs->rq, it->request_id, it->object_id, &err) < 0 &&
                errno != EBUSY)
                si_log(rs->log, SI_LOG_ERROR, "recall: %s", err.text);
            rs->kicked = true;
        }
    }
    pthread_mutex_lock(&rs->mu);
    rs->st.items_completed += done;
    pthread_mutex_unlock(&rs->mu);
    l->n = 0;
    return done;
}
