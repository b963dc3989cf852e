/* The recall service; see recall.h. Its thread's steps and its life cycle;
 * the flight table and the backend's sink are in flight.c, the catalog work
 * in items.c (internal.h: the state they share, and the locks). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/array.h"
#include "common/clock.h"
#include "daemon/recall/internal.h"
#include "common/thread.h"

/* ---- the service's steps -------------------------------------------------------- */

/* A request's item fails with the reason (a request no longer active is
 * left as it is). */
static void fail_item(recall_service_t *rs, int64_t request, int64_t object, const char *why)
{
    si_error_t err;
    if (requests_item_failed(rs->rq, request, object, why, &err) == 0) {
        pthread_mutex_lock(&rs->mu);
        rs->st.items_failed++;
        pthread_mutex_unlock(&rs->mu);
    } else if (errno != EBUSY) {
        si_log(rs->log, SI_LOG_ERROR, "recall: %s", err.text);
    }
}

/* A failed recall: its waiting items fail with the reason. */
static void recall_failed(recall_service_t *rs, flight_t *f, const char *why)
{
    char subject[32];
    snprintf(subject, sizeof(subject), "%" PRId64, f->object_id);
    cache_unreserve(rs->cache, f->object_id);
    catalog_event(rs->cat, "object.recall_failed", subject, why);
    if (!f->cancelled)
        si_log(rs->log, SI_LOG_WARNING, "recall of object %" PRId64 " failed: %s", f->object_id,
               why);
    for (size_t i = 0; i < f->nwaiters; i++)
        fail_item(rs, f->waiters[i], f->object_id, why);
}

/* The dones queued so far: failures one by one, the recalled objects'
 * items completed in one transaction. */
static void drain_done(recall_service_t *rs)
{
    pthread_mutex_lock(&rs->mu);
    done_t *list = rs->done_head;
    rs->done_head = NULL;
    rs->done_tail = &rs->done_head;
    rs->ndone = 0;
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
        flight_t *f = recall_flight_remove(rs, d->object_id);
        if (d->ok)
            rs->st.objects_recalled++;
        else
            rs->st.objects_failed++;
        pthread_mutex_unlock(&rs->mu);
        if (f)
            recall_flight_volumes_done(rs, f);
        if (f && !d->ok) {
            recall_failed(rs, f, d->why);
            recall_release_objects(rs, &f->object_id, 1);
            recall_flight_free(f);
        } else if (f) {
            if (si_array_grow((void **)&recalled, &cap, nrecalled + 1, sizeof(*recalled)) < 0) {
                recall_flight_free(f); /* the items stay STARTED; a restart queues them again */
                free(d);
                continue;
            }
            recalled[nrecalled++] = f;
            for (size_t i = 0; i < f->nwaiters; i++)
                if (recall_item_list_add(&items, f->waiters[i], f->object_id) == 0)
                    /* the first waiter's pin came with the bytes (sink_commit) */
                    items.v[items.n - 1].pinned = f->committed && f->pinned == f->waiters[i];
        }
        free(d);
    }
    recall_complete_items(rs, &items, recalled, nrecalled);
    for (size_t i = 0; i < nrecalled; i++)
        recall_flight_free(recalled[i]);
    free(recalled);
    free(items.v);
}

/* Cancelled (or released) requests leave the objects they wait for; an
 * object nobody waits for any more is withdrawn from the backend. */
static void drop_inactive(recall_service_t *rs)
{
    int64_t *checked = NULL;
    bool *active = NULL;
    size_t nchecked = 0, cap_checked = 0, cap_active = 0;
    int64_t *withdraw = NULL;
    size_t nwithdraw = 0, capw = 0;
    pthread_mutex_lock(&rs->mu);
    for (size_t b = 0; b < rs->nbuckets; b++)
        for (flight_t *f = rs->flights[b]; f; f = f->next) {
            size_t keep = 0;
            for (size_t i = 0; i < f->nwaiters; i++) {
                size_t k;
                for (k = 0; k < nchecked && checked[k] != f->waiters[i]; k++)
                    ;
                if (k == nchecked) {
                    if (si_array_grow((void **)&checked, &cap_checked, nchecked + 1,
                                      sizeof(*checked)) < 0 ||
                        si_array_grow((void **)&active, &cap_active, nchecked + 1,
                                      sizeof(*active)) < 0)
                        goto out;
                    checked[nchecked] = f->waiters[i];
                    active[nchecked++] = recall_request_active(rs, f->waiters[i]);
                }
                if (active[k])
                    f->waiters[keep++] = f->waiters[i];
            }
            f->nwaiters = keep;
            if (keep == 0 && !f->cancelled) {
                if (si_array_grow((void **)&withdraw, &capw, nwithdraw + 1, sizeof(*withdraw)) < 0)
                    goto out;
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
    db_stmt_t *s = recall_stmt(rs, SQL_RELEASED_PINS);
    while (n < 64 && db_step(s) == DB_ROW)
        ids[n++] = db_column_int64(s, 0);
    db_reset(s);
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
    for (size_t b = 0; b < rs->nbuckets; b++)
        for (flight_t *f = rs->flights[b]; f; f = f->next) {
            if (f->bytes == f->bytes_saved || f->bytes >= f->size)
                continue;
            f->bytes_saved = f->bytes;
            for (size_t i = 0; i < f->nwaiters; i++) {
                if (si_array_grow((void **)&u, &cap, n + 1, sizeof(*u)) < 0)
                    goto out;
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
    if (si_array_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v)) < 0)
        return 1;
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
        recall_note(rs, request, text);
        si_log(rs->log, SI_LOG_WARNING, "recall: request %" PRId64 ": %s", request, err.text);
        for (size_t i = 0; i < nb->n; i++) {
            pthread_mutex_lock(&rs->mu);
            flight_t *f = recall_flight_remove(rs, nb->items[i].object_id);
            pthread_mutex_unlock(&rs->mu);
            if (f)
                recall_flight_volumes_done(rs, f);
            recall_flight_free(f);
            cache_unreserve(rs->cache, nb->items[i].object_id);
            recall_release_objects(rs, &nb->items[i].object_id, 1);
        }
        rs->retry_after = si_mono_now() + BACKEND_RETRY_S;
    } else {
        for (size_t i = 0; i < nb->n; i++)
            recall_item_list_add(started, request, nb->items[i].object_id);
    }
    for (size_t i = 0; i < nb->n; i++)
        free((char *)nb->items[i].bucket);
    nb->n = 0;
}

/* A claimed object lease goes back at the end of the scan. */
#define UNCLAIM(object)                                                              \
    do {                                                                             \
        if (si_array_grow((void **)&unclaim, &capu, nunclaim + 1, sizeof(*unclaim)) == 0) \
            unclaim[nunclaim++] = (object);                                          \
    } while (0)

/* Reserves the cache space of the objects this scan claimed and loaded, in
 * one cache_reserve_many, in the order the scan takes them: reserved[k] is
 * what came of want[k]'s (CACHE_NOT_TRIED for those not to recall here,
 * which the scan asks about again if it gets to them). */
static void reserve_claimed(recall_service_t *rs, const int64_t *want,
                            const archive_item_t *items, const bool *claimed, size_t nwant,
                            int *reserved, cache_block_t *block)
{
    int64_t *ids = malloc((nwant ? nwant : 1) * sizeof(*ids));
    uint64_t *sizes = malloc((nwant ? nwant : 1) * sizeof(*sizes));
    size_t *at = malloc((nwant ? nwant : 1) * sizeof(*at));
    int *outcome = malloc((nwant ? nwant : 1) * sizeof(*outcome));
    size_t n = 0;
    for (size_t k = 0; k < nwant; k++) {
        reserved[k] = CACHE_NOT_TRIED;
        bool usable = items[k].bucket &&
                      (items[k].ncopies > 0 || rs->backend->ops->copies_optional);
        if (ids && sizes && at && claimed[k] && usable) {
            ids[n] = want[k];
            sizes[n] = items[k].size;
            at[n++] = k;
        }
    }
    si_error_t err;
    if (n && outcome && cache_reserve_many(rs->cache, ids, sizes, n, outcome, block, &err) < 0)
        si_log(rs->log, SI_LOG_WARNING, "recall: %s", err.text); /* the rest one by one */
    for (size_t j = 0; outcome && j < n; j++)
        reserved[at[j]] = outcome[j];
    free(ids);
    free(sizes);
    free(at);
    free(outcome);
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
    bool backend_ok = si_mono_now() >= rs->retry_after;
    bool taking = recall_site_healthy(rs->site);
    /* Object leases first, in one transaction: the objects not in flight
     * here and not cached are this instance's to recall only when it gets
     * their lease (another instance may be recalling them). */
    int64_t *want = calloc(l.n ? l.n : 1, sizeof(*want));
    /* want[k]'s object as loaded (no names: not loaded) */
    archive_item_t *items = calloc(l.n ? l.n : 1, sizeof(*items));
    bool *claimed = calloc(l.n ? l.n : 1, sizeof(*claimed));
    int *reserved = malloc((l.n ? l.n : 1) * sizeof(*reserved)); /* see reserve_claimed */
    bool *handed = calloc(l.n ? l.n : 1, sizeof(*handed));
    int64_t *unclaim = NULL;   /* claimed, then not handed to the backend */
    size_t nwant = 0, nunclaim = 0, capu = 0;
    /* what the first pass learnt of each item's object: -1 not asked, 0 not
     * cached, 1 cached (the main loop does not ask the cache again) */
    signed char *cached_now = malloc(l.n ? l.n : 1);
    /* the objects asked about: those not in flight here */
    int64_t *ask = malloc((l.n ? l.n : 1) * sizeof(*ask));
    size_t *ask_at = malloc((l.n ? l.n : 1) * sizeof(*ask_at));
    signed char *ask_cached = malloc(l.n ? l.n : 1);
    if (!want || !items || !claimed || !reserved || !handed || !cached_now || !ask || !ask_at ||
        !ask_cached) {
        free(want);
        free(items);
        free(claimed);
        free(reserved);
        free(handed);
        free(cached_now);
        free(ask);
        free(ask_at);
        free(ask_cached);
        free(l.v);
        return;
    }
    size_t nask = 0;
    for (size_t i = 0; i < l.n; i++) {
        cached_now[i] = -1;
        if (!taking || !backend_ok)
            continue;
        pthread_mutex_lock(&rs->mu);
        bool flying = recall_flight_get(rs, l.v[i].object_id) != NULL;
        pthread_mutex_unlock(&rs->mu);
        if (!flying) {
            ask_at[nask] = i;
            ask[nask++] = l.v[i].object_id;
        }
    }
    /* the cache, then the objects not cached, asked in batches (one read
     * transaction each), not one statement per item */
    if (cache_stat_many(rs->cache, ask, nask, ask_cached, &err) < 0) {
        si_log(rs->log, SI_LOG_WARNING, "recall: %s", err.text);
        nask = 0; /* the main loop asks item by item */
    }
    size_t nload = 0;
    for (size_t k = 0; k < nask; k++) {
        cached_now[ask_at[k]] = ask_cached[k];
        if (!ask_cached[k])
            ask[nload++] = ask[k];
    }
    recall_load_items(rs, ask, nload, items);
    recall_volume_view_t view;
    recall_volume_view(rs, &view);
    for (size_t k = 0; k < nload; k++) {
        /* an object whose volumes are all out of reach is not claimed (it
         * would be given back at the end of the scan, at each scan) */
        if (items[k].bucket && !recall_volumes_in_reach(rs, &view, &items[k])) {
            free((char *)items[k].bucket);
            continue;
        }
        if (nwant != k)
            items[nwant] = items[k];
        want[nwant++] = ask[k];
    }
    recall_volume_view_free(&view);
    free(ask);
    free(ask_at);
    free(ask_cached);
    recall_claim_objects(rs, want, nwant, claimed);
    char blocked[300] = "";
    /* the space of the claimed objects to recall, reserved together:
     * reserved[k] is what came of want[k]'s, handed[k] whether the loop
     * below took it on (else it is given back at the end) */
    cache_block_t pre_block = {.generation = 0};
    reserve_claimed(rs, want, items, claimed, nwant, reserved, &pre_block);
    size_t next_want = 0;
    new_batch_t nb = {0};
    int64_t *waiting = NULL;   /* requests with an item held back this round */
    size_t nwaiting = 0, cap_waiting = 0;
    item_list_t started = {0}, cached = {0}; /* moved on together at the end */
    for (size_t i = 0; i < l.n; i++) {
        const pending_t *p = &l.v[i];
        if (nb.n && (int64_t)nb.batch.id != p->request_id)
            submit_batch(rs, &nb, &started);
        /* the object is being recalled for another request: share it */
        pthread_mutex_lock(&rs->mu);
        flight_t *f = recall_flight_get(rs, p->object_id);
        int added = f && !f->cancelled ? recall_flight_add_waiter(f, p->request_id) : -1;
        if (added == 1)
            rs->st.items_shared++;
        pthread_mutex_unlock(&rs->mu);
        /* a second item of an object this scan handed to the backend (the
         * first pass asked for it twice): its lease is the flight's */
        if (f && next_want < nwant && want[next_want] == p->object_id)
            next_want++;
        if (added >= 0) {
            recall_item_list_add(&started, p->request_id, p->object_id);
            continue;
        }
        if (f)
            continue; /* being withdrawn; queued again once it is done */
        bool mine = false;
        archive_item_t *pre = NULL; /* the object as the first pass loaded it */
        size_t at_want = nwant; /* want[at_want] is this item's object */
        if (next_want < nwant && want[next_want] == p->object_id) {
            pre = items[next_want].bucket ? &items[next_want] : NULL;
            at_want = next_want;
            mine = claimed[next_want++];
        }
        cache_entry_t ce;
        if (cached_now[i] == 1 ||
            (cached_now[i] < 0 && cache_stat(rs->cache, p->object_id, &ce, NULL) == 1)) {
            recall_item_list_add(&cached, p->request_id, p->object_id);
            if (mine)
                UNCLAIM(p->object_id);
            continue;
        }
        if (!taking)
            continue; /* the heartbeat fails: others may take it */
        if (!mine && backend_ok) {
            pthread_mutex_lock(&rs->mu);
            rs->st.left_to_others++;
            pthread_mutex_unlock(&rs->mu);
            continue; /* another instance recalls it */
        }
        if (*blocked || !backend_ok) {
            if (si_array_grow((void **)&waiting, &cap_waiting, nwaiting + 1, sizeof(*waiting)) == 0)
                waiting[nwaiting++] = p->request_id;
            continue;
        }
        archive_item_t item;
        int got = 0;
        if (pre) {
            item = *pre; /* its names are item's now */
            pre->bucket = NULL;
        } else {
            got = recall_load_item(rs, p->object_id, &item, &err);
        }
        if (got == 0 && item.ncopies == 0 && !rs->backend->ops->copies_optional)
            got = si_errprintf(&err, "object %" PRId64 " has no tape copy on a usable volume "
                               "(none recorded, or its volumes are failed or disabled)",
                               p->object_id);
        flight_t *nf = got < 0 ? NULL : calloc(1, sizeof(*nf));
        if (!nf)
            free((char *)item.bucket);
        if (got < 0) {
            fail_item(rs, p->request_id, p->object_id, err.text);
            UNCLAIM(p->object_id);
            continue;
        }
        if (!nf)
            break;
        if (recall_claim_volumes(rs, &item, nf) == 0) {
            /* its volumes are other instances' (or this one holds enough) */
            free((char *)item.bucket);
            recall_flight_free(nf);
            UNCLAIM(p->object_id);
            pthread_mutex_lock(&rs->mu);
            rs->st.left_to_others++;
            pthread_mutex_unlock(&rs->mu);
            continue;
        }
        cache_block_t block = pre_block;
        int rc = at_want < nwant ? reserved[at_want] : CACHE_NOT_TRIED;
        if (at_want < nwant)
            handed[at_want] = true; /* what comes of its reservation is decided here */
        if (rc < 0 || rc == CACHE_NOT_TRIED)
            rc = cache_reserve(rs->cache, p->object_id, item.size, &block, &err);
        if (rc != CACHE_RESERVED) {
            free((char *)item.bucket);
            recall_flight_volumes_done(rs, nf);
            recall_flight_free(nf);
            UNCLAIM(p->object_id);
        }
        if (rc < 0) {
            /* EFBIG: larger than the whole cache; nothing will change that */
            fail_item(rs, p->request_id, p->object_id, err.text);
            continue;
        }
        if (rc == CACHE_PRESENT) {
            recall_item_list_add(&cached, p->request_id, p->object_id);
            continue;
        }
        if (rc == CACHE_WOULD_BLOCK) {
            snprintf(blocked, sizeof(blocked), "waiting for cache space: %s", block.reason);
            if (si_array_grow((void **)&waiting, &cap_waiting, nwaiting + 1, sizeof(*waiting)) == 0)
                waiting[nwaiting++] = p->request_id;
            continue;
        }
        nf->object_id = p->object_id;
        nf->size = item.size;
        int inserted = -1;
        if (recall_flight_add_waiter(nf, p->request_id) >= 0 &&
            si_array_grow((void **)&nb.items, &nb.cap, nb.n + 1, sizeof(*nb.items)) >= 0) {
            pthread_mutex_lock(&rs->mu);
            inserted = recall_flight_insert(rs, nf);
            pthread_mutex_unlock(&rs->mu);
        }
        if (inserted < 0) {
            recall_flight_volumes_done(rs, nf);
            recall_flight_free(nf);
            free((char *)item.bucket);
            cache_unreserve(rs->cache, p->object_id);
            UNCLAIM(p->object_id);
            break;
        }
        nb.batch = (archive_batch_t){(uint64_t)p->request_id, p->priority, (double)p->deadline};
        nb.items[nb.n++] = item;
    }
    submit_batch(rs, &nb, &started);
    recall_items_commit(rs, &started, false, NULL, 0);
    /* leases claimed for objects found cached meanwhile, or held back */
    for (size_t i = next_want; i < nwant; i++)
        if (claimed[i])
            UNCLAIM(want[i]);
    /* space reserved for objects not recalled after all (unless another
     * item of the object went on with the reservation) */
    for (size_t k = 0; k < nwant; k++) {
        if (reserved[k] != CACHE_RESERVED || handed[k])
            continue;
        pthread_mutex_lock(&rs->mu);
        bool flying = recall_flight_get(rs, want[k]) != NULL;
        pthread_mutex_unlock(&rs->mu);
        if (!flying)
            cache_unreserve(rs->cache, want[k]);
    }
    free(reserved);
    free(handed);
    recall_release_objects(rs, unclaim, nunclaim);
    free(unclaim);
    for (size_t k = 0; k < nwant; k++) /* loaded, then not handed on */
        free((char *)items[k].bucket);
    free(items);
    free(want);
    free(claimed);
    free(cached_now);
    size_t from_cache = recall_complete_items(rs, &cached, NULL, 0);
    pthread_mutex_lock(&rs->mu);
    rs->st.items_from_cache += from_cache;
    pthread_mutex_unlock(&rs->mu);
    free(started.v);
    free(cached.v);
    /* notes: the requests held back say why; the others no longer wait */
    for (size_t i = 0; i < nwaiting; i++)
        if (*blocked)
            recall_note(rs, waiting[i], blocked);
    for (size_t k = rs->nnotes; k > 0; k--) {
        int64_t req = rs->notes[k - 1].request;
        bool still = false;
        for (size_t i = 0; i < nwaiting && !still; i++)
            still = waiting[i] == req;
        if (!still && (*blocked || backend_ok))
            recall_note(rs, req, "");
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
        double now = si_mono_now();
        pthread_mutex_lock(&rs->mu);
        bool complete = rs->done_head &&
                        (now - rs->done_since >= rs->complete_gap || recall_all_done(rs));
        pthread_mutex_unlock(&rs->mu);
        if (complete) {
            drain_done(rs);
            double took = si_mono_now() - now;
            rs->complete_gap =
                fmin(COMPLETE_MAX_S, fmax(COMPLETE_EVERY_S, COMPLETE_SPACING * took));
        }
        if (now - rs->last_housekeeping >= HOUSEKEEPING_S) {
            rs->last_housekeeping = now;
            drop_inactive(rs);
            unpin_released(rs);
            recall_release_idle_volumes(rs);
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
            if (rs->done_head && recall_all_done(rs))
                next = si_mono_now();
            else if (rs->done_head && rs->done_since + rs->complete_gap < next)
                next = rs->done_since + rs->complete_gap;
            if (rs->last_housekeeping + HOUSEKEEPING_S < next)
                next = rs->last_housekeeping + HOUSEKEEPING_S;
            if (rs->last_progress + rs->progress_interval < next)
                next = rs->last_progress + rs->progress_interval;
            struct timespec until = si_wall_deadline(next - si_mono_now());
            pthread_cond_timedwait(&rs->cv, &rs->mu, &until);
        }
        pthread_mutex_unlock(&rs->mu);
    }
    return NULL;
}

void recall_service_kick(void *arg)
{
    recall_service_t *rs = arg;
    si_flag_raise(&rs->mu, &rs->cv, &rs->kicked);
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
    rs->complete_gap = COMPLETE_EVERY_S;
    if (opts->instance) {
        rs->inst = *opts->instance;
    } else { /* one instance alone (tests, tools) */
        rs->inst = (recall_instance_t){.name = "local", .host = "localhost", .lease_s = 30,
                                       .heartbeat_s = 10, .volumes_per_drive = 0};
    }
    rs->progress_interval = si_conf_float(opts->conf, "archive.progress_interval", 1.0);
    rs->poll_interval = si_conf_float(opts->conf, "archive.poll_interval", 1.0);
    pthread_mutex_init(&rs->mu, NULL);
    pthread_cond_init(&rs->cv, NULL);
    pthread_cond_init(&rs->commit_cv, NULL);
    cache_recovery_t rep = {0};
    if (!(rs->cat = catalog_open_opts(opts->catalog, err))) {
        si_errprefix(err, "recall: catalog");
        goto error;
    }
    if (recall_statements_prepare(rs, err) < 0)
        goto error;
    if (!(rs->rq = requests_open(rs->cat, err)))
        goto error;
    if (cache_recover(rs->cache, &rep, err) < 0) {
        si_errprefix(err, "cache recovery");
        goto error;
    }
    rs->st.cache_dropped = rep.ndropped;
    si_log(rs->log, SI_LOG_NOTICE, "cache: %" PRIu64 " objects, %" PRIu64 " bytes; %" PRIu64
           " temp files removed, %" PRIu64 " files without a row removed, %" PRIu64
           " segment ranges without a row freed, %" PRIu64 " empty segments removed, %zu cached"
           " copies dropped, %" PRIu64 " re-verified", rep.objects, rep.bytes,
           rep.temp_files_removed, rep.files_without_row, rep.orphan_ranges,
           rep.segments_removed, rep.ndropped, rep.verified);
    cache_recovery_free(&rep);
    if (requeue_lost(rs, err) < 0)
        goto error;
    if (rs->st.requeued_at_start)
        si_log(rs->log, SI_LOG_NOTICE, "recall: %" PRIu64 " completed items queued again: "
               "their cached objects are gone", rs->st.requeued_at_start);
    archive_backend_opts_t bo = {
        .conf = opts->conf, .state_dir = opts->state_dir,
        .cb = recall_backend_callbacks(rs),
        .log = rs->log,
    };
    if (si_conf_setting(opts->conf, "archive.committers"))
        si_log(rs->log, SI_LOG_WARNING, "archive.committers is no longer used: the cache"
               " commits objects in batches (cache.commit_bytes, commit_objects, commit_delay)");
    if (!(rs->backend = archive_backend_new(&bo, err)))
        goto error;
    rs->volume_leases = !rs->backend->ops->copies_optional;
    if (rs->volume_leases && !(rs->holds = volume_holds_new(rs->inst.name, rs->inst.lease_s))) {
        si_errprintf(err, "out of memory");
        goto error;
    }
    if (!(rs->site = recall_site_start(&rs->inst, opts->catalog, rs->log, recall_service_kick, rs,
                                       err)))
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
    if (rs->running)
        si_thread_stop(rs->thread, &rs->mu, &rs->cv, &rs->stop);
    recall_site_stop(rs->site); /* the leases lapse unless the caller unregisters */
    /* the backend first: no callback runs after it is gone */
    archive_backend_free(rs->backend);
    /* objects still queued in the cache are committed (their items stay
     * STARTED and complete from the cache at the next start); their word
     * must not reach a service that is gone */
    cache_commit_drain(rs->cache);
    for (size_t b = 0; b < rs->nbuckets; b++)
        while (rs->flights[b]) {
            flight_t *f = rs->flights[b];
            rs->flights[b] = f->next;
            cache_unreserve(rs->cache, f->object_id);
            recall_flight_free(f);
        }
    free(rs->flights);
    while (rs->done_head) {
        done_t *d = rs->done_head;
        rs->done_head = d->next;
        free(d);
    }
    requests_close(rs->rq);
    recall_statements_finalize(rs);
    catalog_close(rs->cat);
    free(rs->notes);
    volume_holds_free(rs->holds);
    pthread_mutex_destroy(&rs->mu);
    pthread_cond_destroy(&rs->cv);
    pthread_cond_destroy(&rs->commit_cv);
    free(rs);
}

archive_backend_t *recall_service_backend(recall_service_t *rs)
{
    return rs->backend;
}

volume_holds_t *recall_service_volume_holds(recall_service_t *rs)
{
    return rs->holds;
}

void recall_service_stats(recall_service_t *rs, recall_stats_t *out)
{
    pthread_mutex_lock(&rs->mu);
    *out = rs->st;
    pthread_mutex_unlock(&rs->mu);
    out->volumes_held = rs->holds ? volume_holds_count(rs->holds) : 0;
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
    fprintf(out, "# HELP stagein_recalls_left_to_others_total Objects left to the instance "
            "holding their lease or volume.\n# TYPE stagein_recalls_left_to_others_total counter\n"
            "stagein_recalls_left_to_others_total %" PRIu64 "\n", st.left_to_others);
    recall_site_metrics(rs->site, out);
    archive_metrics(rs->backend, out);
}
