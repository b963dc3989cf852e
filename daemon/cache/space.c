/* Cache space: reservations before recalls, LRU eviction between the
 * watermarks, and backpressure when pinned data leaves no room. */
#include "config.h"
#include "daemon/cache/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/text.h"

/* ---- reservations: a table by object id -------------------------------------- */

/* Open addressing with linear probing; object id 0 marks a free slot (ids
 * start at 1), and the table is at most half full. A sorted array cost a
 * memmove of the reservations behind each one committed: a recall reserves
 * a volume's objects ahead, so 60,000 64 KiB objects in flight made that
 * memmove 5.7 % of stageind's CPU (BENCHMARKS.md). */
static size_t reservation_home(const cache_t *c, int64_t object_id)
{
    return (size_t)(((uint64_t)object_id * 0x9E3779B97F4A7C15ULL) >> 20) & (c->res_cap - 1);
}

static size_t reservation_slot(const cache_t *c, int64_t object_id)
{
    size_t i = reservation_home(c, object_id);
    while (c->res[i].object_id && c->res[i].object_id != object_id)
        i = (i + 1) & (c->res_cap - 1);
    return i;
}

cache_reservation_t *cache_reservation_find(cache_t *c, int64_t object_id)
{
    if (!c->res_cap)
        return NULL;
    size_t i = reservation_slot(c, object_id);
    return c->res[i].object_id ? &c->res[i] : NULL;
}

static int reservations_resize(cache_t *c, size_t cap)
{
    cache_reservation_t *old = c->res;
    size_t old_cap = c->res_cap;
    if (!(c->res = calloc(cap, sizeof(*c->res)))) {
        c->res = old;
        return -1;
    }
    c->res_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].object_id)
            c->res[reservation_slot(c, old[i].object_id)] = old[i];
    free(old);
    return 0;
}

static int reservation_add(cache_t *c, int64_t object_id, uint64_t size, si_error_t *err)
{
    if (object_id == 0) /* negative: an unrecorded writer's provisional id */
        return si_errnoprintf(err, EINVAL, "object id %" PRId64 " is not a catalog object id",
                              object_id);
    if (2 * (c->nres + 1) > c->res_cap &&
        reservations_resize(c, c->res_cap ? 2 * c->res_cap : 64) < 0)
        return si_errnoprintf(err, ENOMEM, "cache: out of memory for reservations");
    size_t i = reservation_slot(c, object_id);
    if (!c->res[i].object_id)
        c->nres++;
    else
        c->reserved -= c->res[i].size;
    c->res[i] = (cache_reservation_t){object_id, size, false};
    c->reserved += size;
    return 0;
}

void cache_reservation_forget(cache_t *c, int64_t object_id)
{
    if (!c->res_cap)
        return;
    size_t mask = c->res_cap - 1, hole = reservation_slot(c, object_id);
    if (!c->res[hole].object_id)
        return;
    c->reserved -= c->res[hole].size;
    c->nres--;
    /* shift back the entries of the run after the hole whose home is not
     * between the hole and them, so that every probe still finds them */
    for (size_t j = (hole + 1) & mask; c->res[j].object_id; j = (j + 1) & mask) {
        size_t home = reservation_home(c, c->res[j].object_id);
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            c->res[hole] = c->res[j];
            hole = j;
        }
    }
    c->res[hole].object_id = 0;
}

/* ---- shared: reservations in the catalog, seen by the other instances ---------- */

int cache_reservations_unpublish(cache_t *c, const int64_t *object_ids, size_t n,
                                 si_error_t *err)
{
    if (n == 0)
        return 0;
    db_stmt_t *s = cache_stmt(c, SQL_RES_DELETE);
    db_bind_text(s, 1, c->conf.instance, -1);
    if (db_bind_int64_list(s, 2, object_ids, n) < 0)
        return si_errnoprintf(err, ENOMEM, "out of memory");
    int step = db_step(s);
    db_reset(s);
    return step == DB_DONE ? 0 : cache_db_error(c, err, "giving reservations back");
}

void cache_reservation_drop(cache_t *c, int64_t object_id)
{
    pthread_mutex_lock(&c->wlock);
    bool had = cache_reservation_find(c, object_id) != NULL;
    if (had)
        cache_reservation_forget(c, object_id);
    pthread_mutex_unlock(&c->wlock);
    /* a row left by a failure counts for the others until this instance
     * opens the cache again or its lease expires */
    if (had && cache_shared(c))
        cache_reservations_unpublish(c, &object_id, 1, NULL);
}

int cache_reservations_drop_stale(cache_t *c, bool own_too, si_error_t *err)
{
    db_stmt_t *s = cache_stmt(c, SQL_RES_DROP_STALE);
    db_bind_text(s, 1, c->conf.instance, -1);
    db_bind_double(s, 2, si_wall_now() - c->conf.lease_s);
    db_bind_int(s, 3, own_too);
    int step = db_step(s);
    db_reset(s);
    return step == DB_DONE ? 0 : cache_db_error(c, err, "dropping dead instances' reservations");
}

/* Records the reservations just added in memory, then reads the usage and
 * the others' reservations afresh: of two instances reserving at once the
 * later to record sees the earlier's rows, so together they never pass the
 * capacity (both may refuse, and try again). outcome[k] stays
 * CACHE_RESERVED, or the last ones are given back: the first of them
 * CACHE_WOULD_BLOCK (block says why), the rest CACHE_NOT_TRIED. 0, or -1
 * on error (all given back). */
static int publish_reservations(cache_t *c, const int64_t *object_ids, const uint64_t *sizes,
                                size_t n, int *outcome, cache_block_t *block, si_error_t *err);

/* Space set aside, here and (shared) by the live other instances; lock held. */
static uint64_t reserved_all(cache_t *c)
{
    pthread_mutex_lock(&c->wlock);
    uint64_t mine = c->reserved;
    pthread_mutex_unlock(&c->wlock);
    return mine + c->others_reserved;
}

/* ---- eviction --------------------------------------------------------------------- */

typedef struct {
    int64_t object_id;
    cache_place_t place;
} victim_t;

/* Evicts unpinned objects, least recently used first, until used + extra
 * is at most the low watermark or nothing unpinned is left. Rows go in one
 * transaction per batch; files are unlinked after the commit (a crash in
 * between leaves files without rows, which recovery removes). Lock held. */
static int evict_locked(cache_t *c, uint64_t extra, si_error_t *err)
{
    enum { BATCH = 64 };
    victim_t cand[BATCH], gone[BATCH];
    if (cache_flush_access_locked(c, err) < 0 || cache_refresh_totals(c, 0, err) < 0)
        return -1;
    while (c->used + extra > c->low_bytes) {
        size_t n = 0, ngone = 0;
        db_stmt_t *s = cache_stmt(c, SQL_LRU);
        db_bind_int(s, 1, BATCH);
        int step;
        while (n < BATCH && (step = db_step(s)) == DB_ROW)
            cand[n++] = (victim_t){db_column_int64(s, 0),
                                   {(uint64_t)db_column_int64(s, 1),
                                    (uint64_t)db_column_int64(s, 3),
                                    db_column_type(s, 2) == DB_NULL ? 0 : db_column_int64(s, 2)}};
        if (n < BATCH && step != DB_DONE)
            return cache_db_error(c, err, "choosing objects to evict");
        db_reset(s);
        if (!n)
            break;
        if (cache_begin(c, err) < 0)
            return -1;
        uint64_t freed = 0;
        for (size_t i = 0; i < n && c->used - freed + extra > c->low_bytes; i++) {
            s = cache_stmt(c, SQL_ROW_DELETE_UNPINNED);
            db_bind_int64(s, 1, cand[i].object_id);
            if (db_step(s) != DB_DONE) {
                cache_db_error(c, err, "evicting");
                cache_rollback(c);
                return -1;
            }
            if (db_changes(c->db) > 0) { /* not pinned meanwhile */
                gone[ngone++] = cand[i];
                freed += cand[i].place.size;
            }
        }
        if (cache_commit(c, err) < 0)
            return -1;
        cache_usage_changed(c, ngone);
        for (size_t i = 0; i < ngone; i++) {
            uint64_t size = gone[i].place.size;
            if (gone[i].place.segment)
                cache_segment_released_locked(c, &gone[i].place);
            else
                cache_unlink_object(c, gone[i].object_id);
            /* shared: the totals were read a moment ago, others move them too */
            c->used -= size < c->used ? size : c->used;
            c->objects -= c->objects > 0;
            c->counters.evicted_objects++;
            c->counters.evicted_bytes += size;
        }
        cache_punch_due_locked(c, false);
        if (ngone)
            cache_changed_locked(c);
        else
            break; /* every candidate got pinned under us: nothing more to gain now */
    }
    return 0;
}

static int pinned_totals(cache_t *c, uint64_t *objects, uint64_t *bytes, uint64_t *requests,
                         si_error_t *err)
{
    db_stmt_t *s = cache_stmt(c, SQL_PINNED);
    if (db_step(s) != DB_ROW)
        return cache_db_error(c, err, "summing pinned objects");
    *objects = (uint64_t)db_column_int64(s, 0);
    *bytes = (uint64_t)db_column_int64(s, 1);
    db_reset(s);
    s = cache_stmt(c, SQL_PIN_REQUESTS);
    if (db_step(s) != DB_ROW)
        return cache_db_error(c, err, "counting pinning requests");
    *requests = (uint64_t)db_column_int64(s, 0);
    db_reset(s);
    return 0;
}

static int would_block(cache_t *c, int64_t object_id, uint64_t size, cache_block_t *block,
                       si_error_t *err)
{
    uint64_t pobj, pbytes, preq;
    if (pinned_totals(c, &pobj, &pbytes, &preq, err) < 0)
        return -1;
    c->counters.blocked++;
    pthread_mutex_lock(&c->wlock);
    uint64_t reserved = c->reserved;
    size_t nres = c->nres;
    pthread_mutex_unlock(&c->wlock);
    if (block) {
        char b[5][32], others[64] = "";
        if (c->others_reserved)
            snprintf(others, sizeof(others), " (and %s by other instances)",
                     si_format_bytes(c->others_reserved, b[4], sizeof(b[4])));
        snprintf(block->reason, sizeof(block->reason),
                 "cache full: %s pinned (%" PRIu64 " objects, %" PRIu64 " requests),"
                 " %s reserved for %zu recalls%s, capacity %s; object %" PRId64 " needs %s",
                 si_format_bytes(pbytes, b[0], sizeof(b[0])), pobj, preq,
                 si_format_bytes(reserved, b[1], sizeof(b[1])), nres, others,
                 si_format_bytes(c->capacity, b[2], sizeof(b[2])), object_id,
                 si_format_bytes(size, b[3], sizeof(b[3])));
        block->generation = c->generation;
    }
    return CACHE_WOULD_BLOCK;
}

/* A reservation this instance holds already: 1 (the same one), 0 none, -1
 * one of another size. */
static int reservation_held(cache_t *c, int64_t object_id, uint64_t size, si_error_t *err)
{
    pthread_mutex_lock(&c->wlock);
    cache_reservation_t *r = cache_reservation_find(c, object_id);
    uint64_t had = r ? r->size : 0;
    pthread_mutex_unlock(&c->wlock);
    if (!r)
        return 0;
    if (had != size)
        return si_errnoprintf(err, EINVAL,
                              "object %" PRId64 " is already reserved with %" PRIu64
                              " bytes, not %" PRIu64, object_id, had, size);
    return 1;
}

/* Reserves in memory for an object whose cache row was just found absent
 * under this lock: the usage, evicting above the high watermark, the
 * capacity. CACHE_RESERVED (not yet published, when shared),
 * CACHE_WOULD_BLOCK or -1. */
static int reserve_absent_locked(cache_t *c, int64_t object_id, uint64_t size,
                                 cache_block_t *block, si_error_t *err)
{
    /* shared: what the other instances wrote or evicted counts too; read
     * at most once a second, and again before any eviction */
    if (cache_refresh_totals(c, 1.0, err) < 0)
        return -1;
    if (size > c->capacity) {
        char b[2][32];
        return si_errnoprintf(err, EFBIG, "object %" PRId64 " (%s) is larger than the cache (%s)",
                          object_id, si_format_bytes(size, b[0], sizeof(b[0])),
                          si_format_bytes(c->capacity, b[1], sizeof(b[1])));
    }
    if (c->used + reserved_all(c) + size > c->high_bytes) {
        if (c->used + reserved_all(c) + size > c->capacity) {
            /* before evicting in vain, see whether unpinned data could make room */
            uint64_t pobj, pbytes, preq;
            if (cache_load_totals(c, err) < 0 ||
                pinned_totals(c, &pobj, &pbytes, &preq, err) < 0)
                return -1;
            if (pbytes + reserved_all(c) + size > c->capacity)
                return would_block(c, object_id, size, block, err);
        }
        if (evict_locked(c, reserved_all(c) + size, err) < 0)
            return -1;
        if (c->used + reserved_all(c) + size > c->capacity)
            return would_block(c, object_id, size, block, err);
    }
    pthread_mutex_lock(&c->wlock);
    int added = reservation_add(c, object_id, size, err);
    pthread_mutex_unlock(&c->wlock);
    return added < 0 ? -1 : CACHE_RESERVED;
}

int cache_reserve_locked(cache_t *c, int64_t object_id, uint64_t size, cache_block_t *block,
                         si_error_t *err)
{
    if (object_id == 0) /* negative: an unrecorded writer's provisional id */
        return si_errnoprintf(err, EINVAL, "object id %" PRId64 " is not a catalog object id",
                          object_id);
    int held = reservation_held(c, object_id, size, err);
    if (held != 0)
        return held < 0 ? -1 : CACHE_RESERVED;
    db_stmt_t *s = cache_stmt(c, SQL_ROW_GET);
    db_bind_int64(s, 1, object_id);
    int step = db_step(s);
    db_reset(s);
    if (step == DB_ROW)
        return CACHE_PRESENT;
    if (step != DB_DONE)
        return cache_db_error(c, err, "looking up a cached object");
    int rc = reserve_absent_locked(c, object_id, size, block, err);
    if (rc != CACHE_RESERVED || !cache_shared(c))
        return rc;
    return publish_reservations(c, &object_id, &size, 1, &rc, block, err) < 0 ? -1 : rc;
}

static int publish_reservations(cache_t *c, const int64_t *object_ids, const uint64_t *sizes,
                                size_t n, int *outcome, cache_block_t *block, si_error_t *err)
{
    db_stmt_t *s = cache_stmt(c, SQL_RES_INSERT);
    db_bind_text(s, 1, c->conf.instance, -1);
    int step = db_bind_int64_list(s, 2, object_ids, n) < 0 ||
                       db_bind_int64_list(s, 3, (const int64_t *)sizes, n) < 0
                   ? DB_ERROR
                   : (db_bind_double(s, 4, si_wall_now()), db_step(s));
    db_reset(s);
    if (step != DB_DONE) {
        cache_db_error(c, err, "recording reservations");
        pthread_mutex_lock(&c->wlock);
        for (size_t k = 0; k < n; k++)
            cache_reservation_forget(c, object_ids[k]);
        pthread_mutex_unlock(&c->wlock);
        return -1;
    }
    if (cache_load_totals(c, err) < 0) {
        pthread_mutex_lock(&c->wlock);
        for (size_t k = 0; k < n; k++)
            cache_reservation_forget(c, object_ids[k]);
        pthread_mutex_unlock(&c->wlock);
        cache_reservations_unpublish(c, object_ids, n, NULL);
        return -1;
    }
    /* past the capacity with the others' reservations: the last ones go
     * back, and the earliest of those says why */
    size_t keep = n;
    while (keep > 0 && c->used + reserved_all(c) > c->capacity) {
        keep--;
        pthread_mutex_lock(&c->wlock);
        cache_reservation_forget(c, object_ids[keep]);
        pthread_mutex_unlock(&c->wlock);
        outcome[keep] = CACHE_NOT_TRIED;
    }
    if (keep < n) {
        cache_reservations_unpublish(c, object_ids + keep, n - keep, NULL);
        outcome[keep] = would_block(c, object_ids[keep], sizes[keep], block, err);
    }
    return 0;
}

int cache_reserve_many(cache_t *c, const int64_t *object_ids, const uint64_t *sizes, size_t n,
                       int *outcome, cache_block_t *block, si_error_t *err)
{
    enum { CHUNK = CACHE_LOOKUP_CHUNK };
    int64_t present[CHUNK], fresh[CHUNK];
    uint64_t fresh_sizes[CHUNK];
    size_t fresh_at[CHUNK];
    int published[CHUNK], rc = 0;
    bool blocked = false;
    for (size_t k = 0; k < n; k++)
        outcome[k] = CACHE_NOT_TRIED;
    for (size_t i = 0; i < n && rc == 0 && !blocked; i += CHUNK) {
        size_t end = i + CHUNK < n ? i + CHUNK : n, npresent = 0, nfresh = 0;
        pthread_mutex_lock(&c->lock);
        rc = cache_rows_present_locked(c, object_ids + i, end - i, present, &npresent, err);
        for (size_t k = i; rc == 0 && k < end && !blocked; k++) {
            si_error_t own; /* this object's alone: cache_reserve tells it again */
            int held = object_ids[k] < 1 ? -1 : reservation_held(c, object_ids[k], sizes[k], &own);
            if (held != 0)
                outcome[k] = held < 0 ? -1 : CACHE_NOT_TRIED;
            else if (db_ids_find(present, npresent, object_ids[k]))
                outcome[k] = CACHE_PRESENT;
            else
                outcome[k] = reserve_absent_locked(c, object_ids[k], sizes[k], block, &own);
            blocked = outcome[k] == CACHE_WOULD_BLOCK;
            if (outcome[k] == CACHE_RESERVED && cache_shared(c)) {
                fresh[nfresh] = object_ids[k];
                fresh_sizes[nfresh] = sizes[k];
                published[nfresh] = CACHE_RESERVED;
                fresh_at[nfresh++] = k;
            }
        }
        if (nfresh && publish_reservations(c, fresh, fresh_sizes, nfresh, published, block,
                                           err) < 0) {
            rc = -1;
            for (size_t f = 0; f < nfresh; f++)
                published[f] = -1;
        }
        for (size_t f = 0; f < nfresh; f++) {
            outcome[fresh_at[f]] = published[f];
            blocked |= published[f] == CACHE_WOULD_BLOCK;
        }
        pthread_mutex_unlock(&c->lock);
    }
    return rc;
}

int cache_reserve(cache_t *c, int64_t object_id, uint64_t size, cache_block_t *block,
                  si_error_t *err)
{
    if (object_id < 1)
        return si_errnoprintf(err, EINVAL, "object id %" PRId64 " is not a catalog object id",
                              object_id);
    pthread_mutex_lock(&c->lock);
    int rc = cache_reserve_locked(c, object_id, size, block, err);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

void cache_unreserve(cache_t *c, int64_t object_id)
{
    pthread_mutex_lock(&c->lock);
    pthread_mutex_lock(&c->wlock);
    cache_reservation_t *r = cache_reservation_find(c, object_id);
    bool drop = r && !r->writing; /* a writer gives its reservation back itself */
    pthread_mutex_unlock(&c->wlock);
    if (drop) {
        cache_reservation_drop(c, object_id);
        cache_changed_locked(c);
    }
    pthread_mutex_unlock(&c->lock);
}

bool cache_wait(cache_t *c, uint64_t generation, int timeout_ms)
{
    struct timespec until = si_mono_deadline(timeout_ms / 1000.0);
    pthread_mutex_lock(&c->lock);
    while (c->generation == generation)
        if (pthread_cond_timedwait(&c->changed, &c->lock, &until) == ETIMEDOUT)
            break;
    bool changed = c->generation != generation;
    pthread_mutex_unlock(&c->lock);
    return changed;
}

int cache_trim(cache_t *c, uint64_t *evicted_objects, uint64_t *evicted_bytes, si_error_t *err)
{
    pthread_mutex_lock(&c->lock);
    uint64_t objects = c->counters.evicted_objects, bytes = c->counters.evicted_bytes;
    int rc = cache_refresh_totals(c, 0, err);
    if (rc == 0 && cache_shared(c))
        rc = cache_reservations_drop_stale(c, false, err); /* dead instances' */
    if (rc == 0 && c->used + reserved_all(c) > c->high_bytes)
        rc = evict_locked(c, reserved_all(c), err);
    cache_punch_due_locked(c, false);
    if (evicted_objects)
        *evicted_objects = c->counters.evicted_objects - objects;
    if (evicted_bytes)
        *evicted_bytes = c->counters.evicted_bytes - bytes;
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int cache_usage(cache_t *c, cache_usage_t *out, si_error_t *err)
{
    /* asked periodically (the status page's sampler, /metrics): the time to
     * let go of idle segment files, another instance's removed ones among them */
    cache_kept_sweep(c, false);
    pthread_mutex_lock(&c->lock);
    cache_usage_t u = c->counters;
    int rc = cache_refresh_totals(c, 0, err); /* shared: the site's usage now */
    if (rc == 0)
        rc = pinned_totals(c, &u.pinned_objects, &u.pinned_bytes, &u.pinning_requests, err);
    u.capacity = c->capacity;
    u.high_bytes = c->high_bytes;
    u.low_bytes = c->low_bytes;
    u.used_bytes = c->used;
    u.objects = c->objects;
    pthread_mutex_lock(&c->wlock);
    u.reserved_bytes = c->reserved;
    u.reservations = c->nres;
    u.writers = c->writers;
    pthread_mutex_unlock(&c->wlock);
    pthread_mutex_unlock(&c->lock);
    if (rc == 0)
        *out = u;
    return rc;
}
