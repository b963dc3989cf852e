/* The recall service; see recall.h.
 *
 * Locks: mu guards the flight table, the done queue and the counters. The
 * backend's callbacks take mu (with the backend's locks held), so the
 * service thread never holds mu while it calls the backend. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "catalog/catalog.h"
#include "catalog/requests.h"
#include "common/array.h"
#include "common/text.h"
#include "daemon/archive/recall.h"

#define FLIGHT_BUCKETS 4096
/* Seconds before a batch the backend refused (no such volume yet, ...) is tried again. */
#define BACKEND_RETRY_S 2.0
/* Seconds finished objects gather before their items are completed in one
 * transaction: each transaction also re-counts its requests' items, so one
 * per object (a drive streams thousands per second) would cost O(items)
 * each. */
#define COMPLETE_EVERY_S 0.02
/* Seconds between scans for cancelled and released requests. */
#define HOUSEKEEPING_S 0.2

enum {
    SQL_OBJECT,
    SQL_COPIES,
    SQL_REQUEST_STATE,
    SQL_RELEASED_PINS,
    SQL_NOTE_SET,
    SQL_NOTE_CLEAR,
    SQL_COUNT
};

static const char *const sql_text[SQL_COUNT] = {
    [SQL_OBJECT] = "SELECT size, coalesce(checksum, ''), bucket, key FROM objects WHERE id = ?1",
    [SQL_COPIES] = "SELECT t.copy, v.label, coalesce(t.file_seq, -1), t.position, t.length"
                   " FROM tape_copies t JOIN volumes v ON v.id = t.volume_id"
                   " WHERE t.object_id = ?1 AND v.state NOT IN ('failed', 'disabled')"
                   " ORDER BY t.copy",
    [SQL_REQUEST_STATE] = "SELECT state FROM requests WHERE id = ?1",
    /* pins the cache still holds for requests already released */
    [SQL_RELEASED_PINS] = "SELECT DISTINCT p.request_id FROM cache_pins p"
                          " JOIN requests r ON r.id = p.request_id WHERE r.state = 'RELEASED'",
    /* why an active request is not progressing (shown by its status) */
    [SQL_NOTE_SET] = "UPDATE requests SET error = ?2 WHERE id = ?1"
                     " AND state IN ('SUBMITTED', 'STARTED') AND error IS NOT ?2",
    [SQL_NOTE_CLEAR] = "UPDATE requests SET error = NULL WHERE id = ?1"
                       " AND state IN ('SUBMITTED', 'STARTED') AND error LIKE 'waiting%'",
};

/* An object handed to the backend, and the requests waiting for it. */
typedef struct flight {
    struct flight *next;
    int64_t object_id;
    uint64_t size;
    uint64_t bytes, bytes_saved;
    int64_t *waiters;
    size_t nwaiters, cap;
    bool cancelled;
    /* the bytes are checked and their commit to the cache is queued: the
     * backend's done waits here until the commit has happened */
    bool committing;
    bool committed;            /* its bytes are in the cache, verified */
    struct done *deferred;     /* a done that arrived while committing */
    char *commit_error;        /* a failed commit: the done reports it */
} flight_t;

typedef struct done {
    struct done *next;
    int64_t object_id;
    bool ok;
    char why[];
} done_t;

typedef struct {
    int64_t request;
    char text[300];
} note_t;

typedef struct {
    int64_t request_id, object_id;
    int priority;
    int64_t deadline;
} pending_t;

typedef struct session {
    cache_writer_t *w;
    int64_t object_id;
    bool present;              /* already cached: the bytes are not needed */
} session_t;

struct recall_service {
    si_log_t *log;
    cache_t *cache;
    catalog_t *cat;
    requests_t *rq;
    sqlite3_stmt *stmt[SQL_COUNT];
    archive_backend_t *backend;
    double progress_interval, poll_interval;

    pthread_t thread;
    bool running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    flight_t *flights[FLIGHT_BUCKETS];
    done_t *done_head, **done_tail;
    double done_since;         /* monotonic seconds of the oldest queued done */
    recall_stats_t st;

    /* Checked objects are committed by the cache in batches (group
     * commit, cache_writer_submit), off the backend's reading threads: a
     * drive goes on to its next read while earlier objects are made
     * durable. */
    pthread_cond_t commit_cv;  /* a commit ended */
    bool kicked;               /* new work in the catalog: scan now */

    /* service thread only */
    char names[SI_BUCKET_MAX + SI_KEY_MAX + 2]; /* the loaded item's "bucket\0key" */
    note_t *notes;
    size_t nnotes;
    double retry_after, last_housekeeping, last_progress, last_scan;
};

static double mono_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* ---- the flight table (mu held) -------------------------------------------- */

static size_t bucket_of(int64_t object_id)
{
    uint64_t x = (uint64_t)object_id * UINT64_C(0x9e3779b97f4a7c15);
    return (size_t)(x >> 52) % FLIGHT_BUCKETS;
}

static flight_t *flight_get(recall_service_t *rs, int64_t object_id)
{
    for (flight_t *f = rs->flights[bucket_of(object_id)]; f; f = f->next)
        if (f->object_id == object_id)
            return f;
    return NULL;
}

static flight_t *flight_remove(recall_service_t *rs, int64_t object_id)
{
    for (flight_t **p = &rs->flights[bucket_of(object_id)]; *p; p = &(*p)->next)
        if ((*p)->object_id == object_id) {
            flight_t *f = *p;
            *p = f->next;
            rs->st.in_flight--;
            return f;
        }
    return NULL;
}

static int flight_add_waiter(flight_t *f, int64_t request)
{
    for (size_t i = 0; i < f->nwaiters; i++)
        if (f->waiters[i] == request)
            return 0;
    if (f->nwaiters == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 4;
        int64_t *w = realloc(f->waiters, cap * sizeof(*w));
        if (!w)
            return -1;
        f->waiters = w;
        f->cap = cap;
    }
    f->waiters[f->nwaiters++] = request;
    return 1;
}

static void flight_free(flight_t *f)
{
    if (f) {
        free(f->waiters);
        free(f->deferred);
        free(f->commit_error);
        free(f);
    }
}

/* ---- backend callbacks (backend thread) ------------------------------------- */

static int sink_begin(void *arg, const archive_item_t *item, void **session, si_error_t *err)
{
    recall_service_t *rs = arg;
    session_t *s = calloc(1, sizeof(*s));
    if (!s)
        return si_errprintf(err, "out of memory");
    s->object_id = item->object_id;
    /* a read again of an object whose earlier bytes are being committed
     * (another copy after a failed read) waits for that commit */
    pthread_mutex_lock(&rs->mu);
    for (flight_t *f; (f = flight_get(rs, item->object_id)) && f->committing;)
        pthread_cond_wait(&rs->commit_cv, &rs->mu);
    pthread_mutex_unlock(&rs->mu);
    if (cache_writer_open(rs->cache, item->object_id, item->size,
                          item->checksum[0] ? item->checksum : NULL, &s->w, err) < 0) {
        if (errno != EEXIST) {
            free(s);
            return -1;
        }
        s->present = true;
    }
    *session = s;
    return 0;
}

static int sink_write(void *arg, void *session, const void *buf, size_t len, si_error_t *err)
{
    session_t *s = session;
    (void)arg;
    return s->present ? 0 : cache_writer_write(s->w, buf, len, err);
}

/* mu held: a done into the service thread's queue */
static void queue_done_locked(recall_service_t *rs, done_t *d)
{
    if (!rs->done_head)
        rs->done_since = mono_now();
    d->next = NULL;
    *rs->done_tail = d;
    rs->done_tail = &d->next;
    pthread_cond_signal(&rs->cv);
}

static done_t *done_new(int64_t object_id, bool ok, const char *why)
{
    size_t len = why ? strlen(why) : 0;
    done_t *d = malloc(sizeof(*d) + len + 1);
    if (!d)
        return NULL;
    d->next = NULL;
    d->object_id = object_id;
    d->ok = ok;
    memcpy(d->why, why ? why : "", len + 1);
    return d;
}

/* The cache's word on a submitted object (its committer thread): the
 * held-back done, if it came meanwhile, goes on. */
static void on_committed(void *arg, int64_t object_id, int rc, int errnum, const char *why)
{
    recall_service_t *rs = arg;
    (void)errnum;
    pthread_mutex_lock(&rs->mu);
    flight_t *f = flight_get(rs, object_id);
    if (f) {
        f->committing = false;
        f->committed = rc == 0;
        if (rc < 0) {
            free(f->commit_error);
            f->commit_error = strdup(why ? why : "commit failed");
        }
        done_t *d = f->deferred;
        f->deferred = NULL;
        /* what counts is whether verified bytes are in the cache now */
        if (d && d->ok != (rc == 0)) {
            done_t *settled = done_new(d->object_id, rc == 0, rc == 0 ? NULL : why);
            if (settled) {
                free(d);
                d = settled;
            }
        }
        if (d)
            queue_done_locked(rs, d);
    }
    pthread_cond_broadcast(&rs->commit_cv);
    pthread_mutex_unlock(&rs->mu);
    if (rc < 0)
        si_log(rs->log, SI_LOG_ERROR, "recall: %s", why ? why : "commit failed");
}

/* Checks the bytes now (a mismatch is the backend's to read again) and
 * queues their commit, pinned by the first waiting request in the batch's
 * transaction (so that the object cannot be evicted before the others pin
 * it); the object's done is held back until the commit ended. */
static int sink_commit(void *arg, void *session, si_error_t *err)
{
    recall_service_t *rs = arg;
    session_t *s = session;
    if (s->present) {
        free(s);
        return 0;
    }
    pthread_mutex_lock(&rs->mu);
    flight_t *f = flight_get(rs, s->object_id);
    int64_t pin = f && f->nwaiters ? f->waiters[0] : 0;
    if (f)
        f->committing = true;
    pthread_mutex_unlock(&rs->mu);
    if (cache_writer_submit(s->w, pin, on_committed, rs, err) < 0) {
        int saved = errno;
        cache_writer_abort(s->w);
        pthread_mutex_lock(&rs->mu);
        if ((f = flight_get(rs, s->object_id)))
            f->committing = false;
        pthread_cond_broadcast(&rs->commit_cv);
        pthread_mutex_unlock(&rs->mu);
        free(s);
        errno = saved;
        return -1;
    }
    free(s);
    return 0;
}

static int sink_write_fd(void *arg, void *session, int fd, uint64_t off, uint64_t len,
                         si_error_t *err)
{
    session_t *s = session;
    (void)arg;
    return s->present ? 0 : cache_writer_copy_fd(s->w, fd, off, len, err);
}

static void sink_abort(void *arg, void *session)
{
    session_t *s = session;
    (void)arg;
    if (!s->present)
        cache_writer_abort(s->w);
    free(s);
}

static void on_progress(void *arg, int64_t object_id, uint64_t bytes)
{
    recall_service_t *rs = arg;
    pthread_mutex_lock(&rs->mu);
    flight_t *f = flight_get(rs, object_id);
    if (f)
        f->bytes = bytes;
    pthread_mutex_unlock(&rs->mu);
}

static void on_done(void *arg, int64_t object_id, bool ok, const char *why)
{
    recall_service_t *rs = arg;
    pthread_mutex_lock(&rs->mu);
    flight_t *f = flight_get(rs, object_id);
    if (f && !f->committing && f->committed)
        ok = true, why = NULL; /* verified bytes are in the cache, whatever the read said */
    else if (ok && f && !f->committing && f->commit_error)
        why = f->commit_error, ok = false; /* read, but not committed */
    done_t *d = done_new(object_id, ok, why);
    if (!d) {
        pthread_mutex_unlock(&rs->mu);
        return; /* the item stays STARTED; a restart queues it again */
    }
    if (f && f->committing) {
        free(f->deferred);
        f->deferred = d;
    } else {
        queue_done_locked(rs, d);
    }
    pthread_mutex_unlock(&rs->mu);
}

/* ---- catalog helpers (service thread) ----------------------------------------- */

static sqlite3_stmt *stmt(recall_service_t *rs, int id)
{
    sqlite3_reset(rs->stmt[id]);
    sqlite3_clear_bindings(rs->stmt[id]);
    return rs->stmt[id];
}

/* Size, checksum and readable copies of an object (0 copies is possible);
 * its bucket and key land in rs->names (item_names copies them). */
static int load_item(recall_service_t *rs, int64_t object_id, archive_item_t *item,
                     si_error_t *err)
{
    memset(item, 0, sizeof(*item));
    item->object_id = object_id;
    sqlite3_stmt *s = stmt(rs, SQL_OBJECT);
    sqlite3_bind_int64(s, 1, object_id);
    if (sqlite3_step(s) != SQLITE_ROW) {
        sqlite3_reset(s);
        return si_errprintf(err, "object %" PRId64 " is not in the catalog", object_id);
    }
    item->size = (uint64_t)sqlite3_column_int64(s, 0);
    snprintf(item->checksum, sizeof(item->checksum), "%s", sqlite3_column_text(s, 1));
    int blen = snprintf(rs->names, SI_BUCKET_MAX + 1, "%s", sqlite3_column_text(s, 2));
    snprintf(rs->names + blen + 1, SI_KEY_MAX + 1, "%s", sqlite3_column_text(s, 3));
    sqlite3_reset(s);
    s = stmt(rs, SQL_COPIES);
    sqlite3_bind_int64(s, 1, object_id);
    while (sqlite3_step(s) == SQLITE_ROW && item->ncopies < ARCHIVE_MAX_COPIES) {
        archive_copy_t *c = &item->copies[item->ncopies++];
        c->copy = sqlite3_column_int(s, 0);
        snprintf(c->volume, sizeof(c->volume), "%s", sqlite3_column_text(s, 1));
        c->file_seq = sqlite3_column_int64(s, 2);
        c->position = (uint64_t)sqlite3_column_int64(s, 3);
        c->length = (uint64_t)sqlite3_column_int64(s, 4);
    }
    sqlite3_reset(s);
    return 0;
}

/* The names load_item read, copied for the backend ("bucket\0key", one
 * allocation, freed by submit_batch). */
static int item_names(recall_service_t *rs, archive_item_t *item)
{
    size_t blen = strlen(rs->names), klen = strlen(rs->names + blen + 1);
    char *copy = malloc(blen + klen + 2);
    if (!copy)
        return -1;
    memcpy(copy, rs->names, blen + klen + 2);
    item->bucket = copy;
    item->key = copy + blen + 1;
    return 0;
}

static bool request_active(recall_service_t *rs, int64_t request)
{
    sqlite3_stmt *s = stmt(rs, SQL_REQUEST_STATE);
    sqlite3_bind_int64(s, 1, request);
    bool active = false;
    if (sqlite3_step(s) == SQLITE_ROW) {
        const char *state = (const char *)sqlite3_column_text(s, 0);
        active = strcmp(state, "SUBMITTED") == 0 || strcmp(state, "STARTED") == 0;
    }
    sqlite3_reset(s);
    return active;
}

/* Says in the request's status why it waits; "" clears that note. */
static void note(recall_service_t *rs, int64_t request, const char *text)
{
    size_t i;
    for (i = 0; i < rs->nnotes && rs->notes[i].request != request; i++)
        ;
    bool had = i < rs->nnotes;
    if (!*text && !had)
        return;
    if (had && strcmp(rs->notes[i].text, text) == 0)
        return;
    sqlite3_stmt *s = stmt(rs, *text ? SQL_NOTE_SET : SQL_NOTE_CLEAR);
    sqlite3_bind_int64(s, 1, request);
    if (*text)
        sqlite3_bind_text(s, 2, text, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(s) != SQLITE_DONE)
        si_log(rs->log, SI_LOG_WARNING, "recall: noting request %" PRId64 ": %s", request,
               sqlite3_errmsg(catalog_db(rs->cat)));
    sqlite3_reset(s);
    if (!*text) {
        rs->notes[i] = rs->notes[--rs->nnotes];
        return;
    }
    if (!had) {
        note_t *n = realloc(rs->notes, (rs->nnotes + 1) * sizeof(*n));
        if (!n)
            return;
        rs->notes = n;
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

typedef struct {
    requests_item_outcome_t *v;
    size_t n, cap;
} item_list_t;

static int item_list_add(item_list_t *l, int64_t request, int64_t object)
{
    if (si_array_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v)) < 0)
        return -1;
    l->v[l->n++] = (requests_item_outcome_t){request, object, 0};
    return 0;
}

/* The items STARTED, or COMPLETED (pinned; "object.recalled" events for
 * the recalled flights in the same transaction), in one transaction. On a
 * catalog failure every outcome is left 0 and -1 returned. */
static int items_commit(recall_service_t *rs, item_list_t *l, bool complete,
                        flight_t **recalled, size_t nrecalled)
{
    if (!l->n && !nrecalled)
        return 0;
    si_error_t err;
    if (catalog_begin(rs->cat, &err) < 0)
        goto error;
    for (size_t i = 0; i < nrecalled; i++) {
        char subject[32], detail[64];
        snprintf(subject, sizeof(subject), "%" PRId64, recalled[i]->object_id);
        snprintf(detail, sizeof(detail), "%" PRIu64 " bytes for %zu requests",
                 recalled[i]->size, recalled[i]->nwaiters);
        catalog_event(rs->cat, "object.recalled", subject, detail);
    }
    int rc = complete ? requests_items_completed_in(rs->rq, l->v, l->n, &err)
                      : requests_items_started_in(rs->rq, l->v, l->n, &err);
    if (rc < 0) {
        catalog_rollback(rs->cat);
        goto error;
    }
    if (catalog_commit(rs->cat, &err) < 0)
        goto error;
    return 0;
error:
    for (size_t i = 0; i < l->n; i++)
        l->v[i].outcome = 0;
    si_log(rs->log, SI_LOG_ERROR, "recall: %s", err.text);
    return -1;
}

/* Completions in one batch; an item whose object is no longer cached is
 * queued again (and a scan is due). Returns how many completed. */
static size_t complete_items(recall_service_t *rs, item_list_t *l, flight_t **recalled,
                             size_t nrecalled)
{
    size_t done = 0;
    bool failed = items_commit(rs, l, true, recalled, nrecalled) < 0;
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

/* ---- the service's steps -------------------------------------------------------- */

/* A failed recall: its waiting items fail with the reason. */
static void recall_failed(recall_service_t *rs, flight_t *f, const char *why)
{
    char subject[32];
    snprintf(subject, sizeof(subject), "%" PRId64, f->object_id);
    si_error_t err;
    cache_unreserve(rs->cache, f->object_id);
    catalog_event(rs->cat, "object.recall_failed", subject, why);
    if (!f->cancelled)
        si_log(rs->log, SI_LOG_WARNING, "recall of object %" PRId64 " failed: %s", f->object_id,
               why);
    for (size_t i = 0; i < f->nwaiters; i++) {
        if (requests_item_failed(rs->rq, f->waiters[i], f->object_id, why, &err) == 0) {
            pthread_mutex_lock(&rs->mu);
            rs->st.items_failed++;
            pthread_mutex_unlock(&rs->mu);
        } else if (errno != EBUSY) {
            si_log(rs->log, SI_LOG_ERROR, "recall: %s", err.text);
        }
    }
}

/* The dones queued so far: failures one by one, the recalled objects'
 * items completed in one transaction. */
static void drain_done(recall_service_t *rs)
{
    pthread_mutex_lock(&rs->mu);
    done_t *list = rs->done_head;
    rs->done_head = NULL;
    rs->done_tail = &rs->done_head;
    pthread_mutex_unlock(&rs->mu);
    if (!list)
        return;
    flight_t **recalled = NULL;
    size_t nrecalled = 0, cap = 0;
    item_list_t items = {0};
    while (list) {
        done_t *d = list;
        list = d->next;
        pthread_mutex_lock(&rs->mu);
        flight_t *f = flight_remove(rs, d->object_id);
        if (d->ok)
            rs->st.objects_recalled++;
        else
            rs->st.objects_failed++;
        pthread_mutex_unlock(&rs->mu);
        if (f && !d->ok) {
            recall_failed(rs, f, d->why);
            flight_free(f);
        } else if (f) {
            if (si_array_grow((void **)&recalled, &cap, nrecalled + 1, sizeof(*recalled)) < 0) {
                flight_free(f); /* the items stay STARTED; a restart queues them again */
                free(d);
                continue;
            }
            recalled[nrecalled++] = f;
            for (size_t i = 0; i < f->nwaiters; i++)
                item_list_add(&items, f->waiters[i], f->object_id);
        }
        free(d);
    }
    complete_items(rs, &items, recalled, nrecalled);
    for (size_t i = 0; i < nrecalled; i++)
        flight_free(recalled[i]);
    free(recalled);
    free(items.v);
}

/* Cancelled (or released) requests leave the objects they wait for; an
 * object nobody waits for any more is withdrawn from the backend. */
static void drop_inactive(recall_service_t *rs)
{
    int64_t *checked = NULL;
    bool *active = NULL;
    size_t nchecked = 0, cap = 0;
    int64_t *withdraw = NULL;
    size_t nwithdraw = 0, capw = 0;
    pthread_mutex_lock(&rs->mu);
    for (size_t b = 0; b < FLIGHT_BUCKETS; b++)
        for (flight_t *f = rs->flights[b]; f; f = f->next) {
            size_t keep = 0;
            for (size_t i = 0; i < f->nwaiters; i++) {
                size_t k;
                for (k = 0; k < nchecked && checked[k] != f->waiters[i]; k++)
                    ;
                if (k == nchecked) {
                    if (nchecked == cap) {
                        cap = cap ? 2 * cap : 16;
                        int64_t *c = realloc(checked, cap * sizeof(*c));
                        bool *a = realloc(active, cap * sizeof(*a));
                        if (c)
                            checked = c;
                        if (a)
                            active = a;
                        if (!c || !a)
                            goto out;
                    }
                    checked[nchecked] = f->waiters[i];
                    active[nchecked++] = request_active(rs, f->waiters[i]);
                }
                if (active[k])
                    f->waiters[keep++] = f->waiters[i];
            }
            f->nwaiters = keep;
            if (keep == 0 && !f->cancelled) {
                if (nwithdraw == capw) {
                    capw = capw ? 2 * capw : 16;
                    int64_t *w = realloc(withdraw, capw * sizeof(*w));
                    if (!w)
                        goto out;
                    withdraw = w;
                }
                f->cancelled = true;
                withdraw[nwithdraw++] = f->object_id;
            }
        }
out:
    pthread_mutex_unlock(&rs->mu);
    for (size_t i = 0; i < nwithdraw; i++)
        archive_cancel(rs->backend, withdraw[i]);
    free(checked);
    free(active);
    free(withdraw);
}

/* Released requests: their pins in the cache go (the catalog's item pins
 * went with the release itself). */
static void unpin_released(recall_service_t *rs)
{
    int64_t ids[64];
    size_t n = 0;
    sqlite3_stmt *s = stmt(rs, SQL_RELEASED_PINS);
    while (n < 64 && sqlite3_step(s) == SQLITE_ROW)
        ids[n++] = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    for (size_t i = 0; i < n; i++) {
        si_error_t err;
        if (cache_unpin_request(rs->cache, ids[i], NULL, &err) < 0)
            si_log(rs->log, SI_LOG_WARNING, "recall: %s", err.text);
    }
}

static void save_progress(recall_service_t *rs)
{
    typedef struct {
        int64_t object, request;
        uint64_t bytes;
    } upd_t;
    upd_t *u = NULL;
    size_t n = 0, cap = 0;
    pthread_mutex_lock(&rs->mu);
    for (size_t b = 0; b < FLIGHT_BUCKETS; b++)
        for (flight_t *f = rs->flights[b]; f; f = f->next) {
            if (f->bytes == f->bytes_saved || f->bytes >= f->size)
                continue;
            f->bytes_saved = f->bytes;
            for (size_t i = 0; i < f->nwaiters; i++) {
                if (n == cap) {
                    cap = cap ? 2 * cap : 16;
                    upd_t *g = realloc(u, cap * sizeof(*g));
                    if (!g)
                        goto out;
                    u = g;
                }
                u[n++] = (upd_t){f->object_id, f->waiters[i], f->bytes};
            }
        }
out:
    pthread_mutex_unlock(&rs->mu);
    for (size_t i = 0; i < n; i++) {
        si_error_t err;
        requests_item_progress(rs->rq, u[i].request, u[i].object, u[i].bytes, &err);
    }
    free(u);
}

typedef struct {
    pending_t *v;
    size_t n, cap;
} pending_list_t;

static int collect_pending(int64_t request_id, int64_t object_id, int priority, int64_t deadline,
                           void *arg)
{
    pending_list_t *l = arg;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        pending_t *v = realloc(l->v, cap * sizeof(*v));
        if (!v)
            return 1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (pending_t){request_id, object_id, priority, deadline};
    return 0;
}

typedef struct {
    archive_batch_t batch;
    archive_item_t *items;
    size_t n, cap;
} new_batch_t;

/* Hands a request's new objects to the backend; marks their items STARTED.
 * When the backend refuses, the objects leave the flight table again and
 * the items stay queued, with the reason in the request's status. */
static void submit_batch(recall_service_t *rs, new_batch_t *nb, item_list_t *started)
{
    if (nb->n == 0)
        return;
    si_error_t err;
    int64_t request = (int64_t)nb->batch.id;
    if (archive_recall(rs->backend, &nb->batch, nb->items, nb->n, &err) < 0) {
        char text[300];
        snprintf(text, sizeof(text), "waiting for the archive: %s", err.text);
        note(rs, request, text);
        si_log(rs->log, SI_LOG_WARNING, "recall: request %" PRId64 ": %s", request, err.text);
        for (size_t i = 0; i < nb->n; i++) {
            pthread_mutex_lock(&rs->mu);
            flight_free(flight_remove(rs, nb->items[i].object_id));
            pthread_mutex_unlock(&rs->mu);
            cache_unreserve(rs->cache, nb->items[i].object_id);
        }
        rs->retry_after = mono_now() + BACKEND_RETRY_S;
    } else {
        for (size_t i = 0; i < nb->n; i++)
            item_list_add(started, request, nb->items[i].object_id);
    }
    for (size_t i = 0; i < nb->n; i++)
        free((char *)nb->items[i].bucket);
    nb->n = 0;
}

static void scan_pending(recall_service_t *rs)
{
    pending_list_t l = {0};
    si_error_t err;
    if (requests_pending(rs->rq, collect_pending, &l, &err) < 0) {
        si_log(rs->log, SI_LOG_ERROR, "recall: %s", err.text);
        free(l.v);
        return;
    }
    bool backend_ok = mono_now() >= rs->retry_after;
    char blocked[300] = "";
    new_batch_t nb = {0};
    int64_t *waiting = NULL;   /* requests with an item held back this round */
    size_t nwaiting = 0;
    item_list_t started = {0}, cached = {0}; /* moved on together at the end */
    for (size_t i = 0; i < l.n; i++) {
        const pending_t *p = &l.v[i];
        if (nb.n && (int64_t)nb.batch.id != p->request_id)
            submit_batch(rs, &nb, &started);
        /* the object is being recalled for another request: share it */
        pthread_mutex_lock(&rs->mu);
        flight_t *f = flight_get(rs, p->object_id);
        int added = f && !f->cancelled ? flight_add_waiter(f, p->request_id) : -1;
        if (added == 1)
            rs->st.items_shared++;
        pthread_mutex_unlock(&rs->mu);
        if (added >= 0) {
            item_list_add(&started, p->request_id, p->object_id);
            continue;
        }
        if (f)
            continue; /* being withdrawn; queued again once it is done */
        cache_entry_t ce;
        if (cache_stat(rs->cache, p->object_id, &ce, NULL) == 1) {
            item_list_add(&cached, p->request_id, p->object_id);
            continue;
        }
        if (*blocked || !backend_ok) {
            int64_t *w = realloc(waiting, (nwaiting + 1) * sizeof(*w));
            if (w) {
                waiting = w;
                waiting[nwaiting++] = p->request_id;
            }
            continue;
        }
        archive_item_t item;
        int loaded = load_item(rs, p->object_id, &item, &err);
        if (loaded == 0 && item.ncopies == 0 && !rs->backend->ops->copies_optional)
            loaded = si_errprintf(&err, "object %" PRId64 " has no tape copy on a usable volume "
                                  "(none recorded, or its volumes are failed or disabled)",
                                  p->object_id);
        if (loaded < 0) {
            char why[sizeof(err.text)];
            snprintf(why, sizeof(why), "%s", err.text);
            if (requests_item_failed(rs->rq, p->request_id, p->object_id, why, &err) == 0) {
                pthread_mutex_lock(&rs->mu);
                rs->st.items_failed++;
                pthread_mutex_unlock(&rs->mu);
            }
            continue;
        }
        cache_block_t block;
        int rc = cache_reserve(rs->cache, p->object_id, item.size, &block, &err);
        if (rc < 0) {
            /* EFBIG: larger than the whole cache; nothing will change that */
            char why[sizeof(err.text)];
            snprintf(why, sizeof(why), "%s", err.text);
            if (requests_item_failed(rs->rq, p->request_id, p->object_id, why, &err) == 0) {
                pthread_mutex_lock(&rs->mu);
                rs->st.items_failed++;
                pthread_mutex_unlock(&rs->mu);
            }
            continue;
        }
        if (rc == CACHE_PRESENT) {
            item_list_add(&cached, p->request_id, p->object_id);
            continue;
        }
        if (rc == CACHE_WOULD_BLOCK) {
            snprintf(blocked, sizeof(blocked), "waiting for cache space: %s", block.reason);
            int64_t *w = realloc(waiting, (nwaiting + 1) * sizeof(*w));
            if (w) {
                waiting = w;
                waiting[nwaiting++] = p->request_id;
            }
            continue;
        }
        flight_t *nf = calloc(1, sizeof(*nf));
        if (!nf || flight_add_waiter(nf, p->request_id) < 0 || item_names(rs, &item) < 0 ||
            (nb.n == nb.cap && !(nb.items = realloc(nb.items,
                                                    (nb.cap = nb.cap ? 2 * nb.cap : 64) *
                                                        sizeof(*nb.items))))) {
            flight_free(nf);
            free((char *)item.bucket);
            cache_unreserve(rs->cache, p->object_id);
            break;
        }
        nf->object_id = p->object_id;
        nf->size = item.size;
        pthread_mutex_lock(&rs->mu);
        size_t b = bucket_of(p->object_id);
        nf->next = rs->flights[b];
        rs->flights[b] = nf;
        rs->st.in_flight++;
        pthread_mutex_unlock(&rs->mu);
        nb.batch = (archive_batch_t){(uint64_t)p->request_id, p->priority, (double)p->deadline};
        nb.items[nb.n++] = item;
    }
    submit_batch(rs, &nb, &started);
    items_commit(rs, &started, false, NULL, 0);
    size_t from_cache = complete_items(rs, &cached, NULL, 0);
    pthread_mutex_lock(&rs->mu);
    rs->st.items_from_cache += from_cache;
    pthread_mutex_unlock(&rs->mu);
    free(started.v);
    free(cached.v);
    /* notes: the requests held back say why; the others no longer wait */
    for (size_t i = 0; i < nwaiting; i++)
        if (*blocked)
            note(rs, waiting[i], blocked);
    for (size_t k = rs->nnotes; k > 0; k--) {
        int64_t req = rs->notes[k - 1].request;
        bool still = false;
        for (size_t i = 0; i < nwaiting && !still; i++)
            still = waiting[i] == req;
        if (!still && (*blocked || backend_ok))
            note(rs, req, "");
    }
    pthread_mutex_lock(&rs->mu);
    rs->st.waiting_for_space = *blocked != 0;
    pthread_mutex_unlock(&rs->mu);
    free(waiting);
    free(nb.items);
    free(l.v);
}

/* Seconds from now until t on the monotonic clock, as an absolute
 * CLOCK_REALTIME deadline for pthread_cond_timedwait (cv uses the default clock). */
static struct timespec realtime_in(double seconds)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    double t = until.tv_sec + until.tv_nsec / 1e9 + (seconds > 0 ? seconds : 0);
    until.tv_sec = (time_t)t;
    until.tv_nsec = (long)((t - (double)until.tv_sec) * 1e9);
    return until;
}

static void *service_main(void *arg)
{
    recall_service_t *rs = arg;
    for (;;) {
        pthread_mutex_lock(&rs->mu);
        bool stop = rs->stop, kicked = rs->kicked;
        rs->kicked = false;
        pthread_mutex_unlock(&rs->mu);
        if (stop)
            break;
        double now = mono_now();
        pthread_mutex_lock(&rs->mu);
        bool complete = rs->done_head && now - rs->done_since >= COMPLETE_EVERY_S;
        pthread_mutex_unlock(&rs->mu);
        if (complete)
            drain_done(rs);
        if (now - rs->last_housekeeping >= HOUSEKEEPING_S) {
            rs->last_housekeeping = now;
            drop_inactive(rs);
            unpin_released(rs);
        }
        if (now - rs->last_progress >= rs->progress_interval) {
            rs->last_progress = now;
            save_progress(rs);
        }
        /* New requests wake the service (recall_service_kick); the scan
         * every poll_interval only catches what came another way (a
         * request written to the catalog by another process). Finished
         * objects wake it too, but do not rescan the catalog: that query
         * per object competed with the commits for the catalog. */
        if (kicked || now - rs->last_scan >= rs->poll_interval) {
            rs->last_scan = now;
            scan_pending(rs);
        }
        pthread_mutex_lock(&rs->mu);
        if (!rs->stop && !rs->kicked) {
            double next = rs->last_scan + rs->poll_interval;
            if (rs->done_head && rs->done_since + COMPLETE_EVERY_S < next)
                next = rs->done_since + COMPLETE_EVERY_S;
            if (rs->last_housekeeping + HOUSEKEEPING_S < next)
                next = rs->last_housekeeping + HOUSEKEEPING_S;
            if (rs->last_progress + rs->progress_interval < next)
                next = rs->last_progress + rs->progress_interval;
            struct timespec until = realtime_in(next - mono_now());
            pthread_cond_timedwait(&rs->cv, &rs->mu, &until);
        }
        pthread_mutex_unlock(&rs->mu);
    }
    return NULL;
}

void recall_service_kick(void *arg)
{
    recall_service_t *rs = arg;
    pthread_mutex_lock(&rs->mu);
    rs->kicked = true;
    pthread_cond_signal(&rs->cv);
    pthread_mutex_unlock(&rs->mu);
}

/* ---- life cycle ------------------------------------------------------------------ */

/* Completed items whose cached object is gone (dropped by the cache's
 * recovery, or missing) are queued again. */
static int requeue_lost(recall_service_t *rs, si_error_t *err)
{
    requests_item_ref_t *refs = NULL;
    size_t n = 0;
    if (requests_completed_items(rs->rq, &refs, &n, err) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        cache_entry_t ce;
        int rc = cache_stat(rs->cache, refs[i].object_id, &ce, err);
        if (rc < 0) {
            free(refs);
            return -1;
        }
        if (rc == 1) {
            /* the cache's own pin record follows the item's */
            cache_pin(rs->cache, refs[i].object_id, refs[i].request_id, NULL);
            continue;
        }
        if (requests_item_requeue(rs->rq, refs[i].request_id, refs[i].object_id, err) < 0) {
            free(refs);
            return -1;
        }
        rs->st.requeued_at_start++;
    }
    free(refs);
    return 0;
}

recall_service_t *recall_service_start(const recall_opts_t *opts, si_error_t *err)
{
    recall_service_t *rs = calloc(1, sizeof(*rs));
    if (!rs)
        return si_errprintf(err, "out of memory"), NULL;
    rs->log = opts->log;
    rs->cache = opts->cache;
    rs->done_tail = &rs->done_head;
    rs->progress_interval = si_conf_float(opts->conf, "archive.progress_interval", 1.0);
    rs->poll_interval = si_conf_float(opts->conf, "archive.poll_interval", 1.0);
    pthread_mutex_init(&rs->mu, NULL);
    pthread_cond_init(&rs->cv, NULL);
    pthread_cond_init(&rs->commit_cv, NULL);
    cache_recovery_t rep = {0};
    if (!(rs->cat = catalog_open(opts->catalog_path, 0, err))) {
        si_errprefix(err, "recall: catalog");
        goto error;
    }
    for (int i = 0; i < SQL_COUNT; i++)
        if (sqlite3_prepare_v3(catalog_db(rs->cat), sql_text[i], -1, SQLITE_PREPARE_PERSISTENT,
                               &rs->stmt[i], NULL) != SQLITE_OK) {
            catalog_sqlerr(rs->cat, err, "recall: preparing statements");
            goto error;
        }
    if (!(rs->rq = requests_open(rs->cat, err)))
        goto error;
    if (cache_recover(rs->cache, &rep, err) < 0) {
        si_errprefix(err, "cache recovery");
        goto error;
    }
    rs->st.cache_dropped = rep.ndropped;
    si_log(rs->log, SI_LOG_NOTICE, "cache: %" PRIu64 " objects, %" PRIu64 " bytes; %" PRIu64
           " temp files removed, %zu cached copies dropped, %" PRIu64 " re-verified",
           rep.objects, rep.bytes, rep.temp_files_removed, rep.ndropped, rep.verified);
    cache_recovery_free(&rep);
    if (requeue_lost(rs, err) < 0)
        goto error;
    if (rs->st.requeued_at_start)
        si_log(rs->log, SI_LOG_NOTICE, "recall: %" PRIu64 " completed items queued again: "
               "their cached objects are gone", rs->st.requeued_at_start);
    archive_backend_opts_t bo = {
        .conf = opts->conf, .state_dir = opts->state_dir,
        .cb = {sink_begin, sink_write, sink_commit, sink_abort, on_progress, on_done, rs,
               sink_write_fd},
        .log = rs->log,
    };
    if (si_conf_setting(opts->conf, "archive.committers"))
        si_log(rs->log, SI_LOG_WARNING, "archive.committers is no longer used: the cache"
               " commits objects in batches (cache.commit_bytes, commit_objects, commit_delay)");
    if (!(rs->backend = archive_backend_new(&bo, err)))
        goto error;
    if (pthread_create(&rs->thread, NULL, service_main, rs) != 0) {
        si_errprintf(err, "recall: cannot start its thread");
        goto error;
    }
    rs->running = true;
    return rs;
error:
    recall_service_stop(rs);
    return NULL;
}

void recall_service_stop(recall_service_t *rs)
{
    if (!rs)
        return;
    if (rs->running) {
        pthread_mutex_lock(&rs->mu);
        rs->stop = true;
        pthread_cond_signal(&rs->cv);
        pthread_mutex_unlock(&rs->mu);
        pthread_join(rs->thread, NULL);
    }
    /* the backend first: no callback runs after it is gone */
    archive_backend_free(rs->backend);
    /* objects still queued in the cache are committed (their items stay
     * STARTED and complete from the cache at the next start); their word
     * must not reach a service that is gone */
    cache_commit_drain(rs->cache);
    for (size_t b = 0; b < FLIGHT_BUCKETS; b++)
        while (rs->flights[b]) {
            flight_t *f = rs->flights[b];
            rs->flights[b] = f->next;
            cache_unreserve(rs->cache, f->object_id);
            flight_free(f);
        }
    while (rs->done_head) {
        done_t *d = rs->done_head;
        rs->done_head = d->next;
        free(d);
    }
    requests_close(rs->rq);
    for (int i = 0; i < SQL_COUNT; i++)
        sqlite3_finalize(rs->stmt[i]);
    catalog_close(rs->cat);
    free(rs->notes);
    pthread_mutex_destroy(&rs->mu);
    pthread_cond_destroy(&rs->cv);
    pthread_cond_destroy(&rs->commit_cv);
    free(rs);
}

archive_backend_t *recall_service_backend(recall_service_t *rs)
{
    return rs->backend;
}

void recall_service_stats(recall_service_t *rs, recall_stats_t *out)
{
    pthread_mutex_lock(&rs->mu);
    *out = rs->st;
    pthread_mutex_unlock(&rs->mu);
}

void recall_service_metrics(FILE *out, void *arg)
{
    recall_service_t *rs = arg;
    recall_stats_t st;
    recall_service_stats(rs, &st);
    fprintf(out,
            "# HELP stagein_recalls_total Objects recalled from the archive into the cache.\n"
            "# TYPE stagein_recalls_total counter\nstagein_recalls_total %" PRIu64 "\n"
            "# HELP stagein_recall_failures_total Objects whose recall failed.\n"
            "# TYPE stagein_recall_failures_total counter\n"
            "stagein_recall_failures_total %" PRIu64 "\n"
            "# HELP stagein_items_shared_total Request items that joined a recall in flight.\n"
            "# TYPE stagein_items_shared_total counter\n"
            "stagein_items_shared_total %" PRIu64 "\n"
            "# HELP stagein_items_from_cache_total Request items served by the cache at once.\n"
            "# TYPE stagein_items_from_cache_total counter\n"
            "stagein_items_from_cache_total %" PRIu64 "\n"
            "# HELP stagein_recalls_in_flight Objects being recalled.\n"
            "# TYPE stagein_recalls_in_flight gauge\nstagein_recalls_in_flight %" PRIu64 "\n"
            "# HELP stagein_cache_backpressure 1 while recalls wait for cache space.\n"
            "# TYPE stagein_cache_backpressure gauge\nstagein_cache_backpressure %" PRIu64 "\n",
            st.objects_recalled, st.objects_failed, st.items_shared, st.items_from_cache,
            st.in_flight, st.waiting_for_space);
    archive_metrics(rs->backend, out);
}
