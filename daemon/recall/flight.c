/* The recall service's flight table (the objects handed to the backend and
 * the requests waiting for each) and the sink the backend streams their
 * bytes into: the cache writer, checked, then committed by the cache in
 * batches; see internal.h. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "common/clock.h"
#include "daemon/recall/internal.h"

/* Recalled objects of at least this size are written with O_DIRECT. A
 * direct write holds the drive's thread for the disk's time: for 1 MiB
 * objects that cost one drive 10-15 % of its rate (tests/bench/drive_rate);
 * 16 MiB and larger kept the full rate with 30-40 % less CPU per GB. */
#define RECALL_DIRECT_MIN_SIZE (4 * CACHE_DIRECT_MIN_SIZE)

/* ---- the flight table (mu held) -------------------------------------------- */

static size_t flight_bucket(const recall_service_t *rs, int64_t object_id)
{
    uint64_t x = (uint64_t)object_id * UINT64_C(0x9e3779b97f4a7c15);
    return (size_t)(x >> 24) & (rs->nbuckets - 1);
}

/* Twice the buckets, the flights rechained: with 60,000 64 KiB objects in
 * flight, 4,096 fixed buckets made every lookup walk a chain of about 15
 * (2-4 % of stageind's CPU, BENCHMARKS.md). */
static int flights_grow(recall_service_t *rs)
{
    size_t old_n = rs->nbuckets, n = old_n ? 2 * old_n : FLIGHT_BUCKETS_MIN;
    flight_t **old = rs->flights, **grown = calloc(n, sizeof(*grown));
    if (!grown)
        return -1;
    rs->flights = grown;
    rs->nbuckets = n;
    for (size_t b = 0; b < old_n; b++)
        while (old[b]) {
            flight_t *f = old[b];
            old[b] = f->next;
            size_t to = flight_bucket(rs, f->object_id);
            f->next = grown[to];
            grown[to] = f;
        }
    free(old);
    return 0;
}

int recall_flight_insert(recall_service_t *rs, flight_t *f)
{
    if (rs->st.in_flight >= 2 * rs->nbuckets && flights_grow(rs) < 0 && !rs->nbuckets)
        return -1; /* a table that cannot grow still takes it, with longer chains */
    size_t b = flight_bucket(rs, f->object_id);
    f->next = rs->flights[b];
    rs->flights[b] = f;
    rs->st.in_flight++;
    return 0;
}

flight_t *recall_flight_get(recall_service_t *rs, int64_t object_id)
{
    if (!rs->nbuckets)
        return NULL;
    for (flight_t *f = rs->flights[flight_bucket(rs, object_id)]; f; f = f->next)
        if (f->object_id == object_id)
            return f;
    return NULL;
}

flight_t *recall_flight_remove(recall_service_t *rs, int64_t object_id)
{
    if (!rs->nbuckets)
        return NULL;
    for (flight_t **p = &rs->flights[flight_bucket(rs, object_id)]; *p; p = &(*p)->next)
        if ((*p)->object_id == object_id) {
            flight_t *f = *p;
            *p = f->next;
            rs->st.in_flight--;
            return f;
        }
    return NULL;
}

int recall_flight_add_waiter(flight_t *f, int64_t request)
{
    for (size_t i = 0; i < f->nwaiters; i++)
        if (f->waiters[i] == request)
            return 0;
    if (si_array_grow((void **)&f->waiters, &f->cap, f->nwaiters + 1, sizeof(*f->waiters)) < 0)
        return -1;
    f->waiters[f->nwaiters++] = request;
    return 1;
}

void recall_flight_free(flight_t *f)
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
    for (flight_t *f; (f = recall_flight_get(rs, item->object_id)) && f->committing;)
        pthread_cond_wait(&rs->commit_cv, &rs->mu);
    pthread_mutex_unlock(&rs->mu);
    if (cache_writer_open(rs->cache, item->object_id, item->size,
                          item->checksum[0] ? item->checksum : NULL, &s->w, err) < 0) {
        if (errno != EEXIST) {
            free(s);
            return -1;
        }
        s->present = true;
    } else if (item->size >= RECALL_DIRECT_MIN_SIZE) {
        /* the job reads it later, mostly from the disk: the page cache's
         * copy would cost the drive's thread more CPU than the hash */
        cache_writer_direct(s->w);
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
    /* the first of a drain wakes the service, which then sleeps until the
     * drain is due: a wake-up per object would cost the drive's thread a
     * CPU it needs (two cores, a 64 KiB object every 164 us); the last
     * object in flight wakes it too (recall_all_done) */
    bool first = !rs->done_head;
    if (first)
        rs->done_since = si_mono_now();
    d->next = NULL;
    *rs->done_tail = d;
    rs->done_tail = &d->next;
    rs->ndone++;
    if (first || recall_all_done(rs))
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
    flight_t *f = recall_flight_get(rs, object_id);
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
    flight_t *f = recall_flight_get(rs, s->object_id);
    int64_t pin = f && f->nwaiters ? f->waiters[0] : 0;
    if (f) {
        f->committing = true;
        f->pinned = pin;
    }
    pthread_mutex_unlock(&rs->mu);
    if (cache_writer_submit(s->w, pin, on_committed, rs, err) < 0) {
        int saved = errno;
        cache_writer_abort(s->w);
        pthread_mutex_lock(&rs->mu);
        if ((f = recall_flight_get(rs, s->object_id)))
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

static void *sink_room(void *arg, void *session, size_t *len)
{
    session_t *s = session;
    (void)arg;
    if (s->present) { /* the bytes are dropped: write takes them */
        *len = 0;
        return NULL;
    }
    return cache_writer_room(s->w, len);
}

static int sink_landed(void *arg, void *session, size_t len, si_error_t *err)
{
    session_t *s = session;
    (void)arg;
    return cache_writer_landed(s->w, len, err);
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
    flight_t *f = recall_flight_get(rs, object_id);
    if (f)
        f->bytes = bytes;
    pthread_mutex_unlock(&rs->mu);
}

static void on_done(void *arg, int64_t object_id, bool ok, const char *why)
{
    recall_service_t *rs = arg;
    pthread_mutex_lock(&rs->mu);
    flight_t *f = recall_flight_get(rs, object_id);
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

archive_recall_cb_t recall_backend_callbacks(recall_service_t *rs)
{
    return (archive_recall_cb_t){sink_begin, sink_write, sink_commit, sink_abort, on_progress,
                                 on_done, rs, sink_write_fd, sink_room, sink_landed};
}
