/* The recall service among several instances on one catalog: the heartbeat
 * thread (the instance's row and leases renewed; items of dead instances
 * queued again), the object leases that make an object recalled by one
 * instance however many ask for it, and the volume leases that keep a
 * volume in at most one drive of the site. See internal.h and
 * catalog/instances.h.
 *
 * An object is recalled under its object lease: claimed (in one transaction
 * per scan) before its items are marked STARTED, dropped in the transaction
 * that completes them. A STARTED item without a live object lease is an
 * orphan (its instance died) and any instance's heartbeat queues it again.
 * A volume lease is held while this instance has objects queued on the
 * volume and while its backend keeps the volume loaded; the objects on a
 * volume another instance holds are left to that one, which sees the same
 * queue. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/array.h"
#include "common/clock.h"
#include "daemon/recall/internal.h"
#include "common/thread.h"

struct recall_site {
    si_log_t *log;
    catalog_t *cat;            /* the heartbeat thread's own connection */
    recall_instance_t inst;
    long pid;
    void (*kick)(void *);
    void *kick_arg;

    pthread_t thread;
    bool running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    bool healthy;              /* the last heartbeat renewed the leases */
    bool evicted;              /* another process has the name: never again */
    double last_ok;            /* wall seconds of the last good heartbeat */
    uint64_t beats, beat_failures, orphans_requeued;
};

static void beat(recall_site_t *site)
{
    si_error_t err;
    double now = si_wall_now();
    int rc = instance_heartbeat(site->cat, site->inst.name, site->inst.host, site->pid, now,
                                site->inst.lease_s, &err);
    bool evicted = rc < 0 && errno == ESTALE;
    int64_t orphans = 0;
    if (rc == 0)
        orphans = instance_requeue_orphans(site->cat, now, &err);
    pthread_mutex_lock(&site->mu);
    bool was = site->healthy;
    if (rc == 0) {
        site->beats++;
        site->last_ok = now;
        site->healthy = !site->evicted;
        if (orphans > 0)
            site->orphans_requeued += (uint64_t)orphans;
    } else {
        site->beat_failures++;
        site->evicted |= evicted;
        /* the leases last lease_s from the last good beat: stop taking work
         * well before they run out */
        if (evicted || now - site->last_ok >= site->inst.lease_s / 2)
            site->healthy = false;
    }
    bool healthy = site->healthy;
    pthread_mutex_unlock(&site->mu);
    if (rc < 0)
        si_log(site->log, was && !healthy ? SI_LOG_ERROR : SI_LOG_WARNING,
               "instance %s: heartbeat failed%s: %s", site->inst.name,
               healthy ? "" : "; taking no new work until it succeeds", err.text);
    else if (!was && healthy)
        si_log(site->log, SI_LOG_NOTICE, "instance %s: heartbeat renewed; taking work again",
               site->inst.name);
    if (orphans > 0) {
        si_log(site->log, SI_LOG_NOTICE, "instance %s: %" PRId64 " items of a stopped instance "
               "queued again", site->inst.name, orphans);
        site->kick(site->kick_arg);
    } else if (orphans < 0) {
        si_log(site->log, SI_LOG_WARNING, "instance %s: %s", site->inst.name, err.text);
    }
}

static void *site_main(void *arg)
{
    recall_site_t *site = arg;
    pthread_mutex_lock(&site->mu);
    while (!site->stop) {
        pthread_mutex_unlock(&site->mu);
        beat(site);
        pthread_mutex_lock(&site->mu);
        struct timespec until = si_wall_deadline(site->inst.heartbeat_s);
        while (!site->stop && pthread_cond_timedwait(&site->cv, &site->mu, &until) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&site->mu);
    return NULL;
}

recall_site_t *recall_site_start(const recall_instance_t *inst, const catalog_open_opts_t *copts,
                                 si_log_t *log, void (*kick)(void *), void *kick_arg,
                                 si_error_t *err)
{
    recall_site_t *site = calloc(1, sizeof(*site));
    if (!site)
        return si_errprintf(err, "out of memory"), NULL;
    site->log = log;
    site->inst = *inst;
    site->pid = (long)getpid();
    site->kick = kick;
    site->kick_arg = kick_arg;
    site->healthy = true;
    site->last_ok = si_wall_now();
    pthread_mutex_init(&site->mu, NULL);
    pthread_cond_init(&site->cv, NULL);
    if (!(site->cat = catalog_open_opts(copts, err))) {
        si_errprefix(err, "instance heartbeat: catalog");
        goto error;
    }
    if (pthread_create(&site->thread, NULL, site_main, site) != 0) {
        si_errprintf(err, "instance: cannot start the heartbeat thread");
        goto error;
    }
    site->running = true;
    return site;
error:
    recall_site_stop(site);
    return NULL;
}

void recall_site_stop(recall_site_t *site)
{
    if (!site)
        return;
    if (site->running)
        si_thread_stop(site->thread, &site->mu, &site->cv, &site->stop);
    catalog_close(site->cat);
    pthread_mutex_destroy(&site->mu);
    pthread_cond_destroy(&site->cv);
    free(site);
}

bool recall_site_healthy(recall_site_t *site)
{
    pthread_mutex_lock(&site->mu);
    bool ok = site->healthy;
    pthread_mutex_unlock(&site->mu);
    return ok;
}

void recall_site_metrics(recall_site_t *site, FILE *out)
{
    pthread_mutex_lock(&site->mu);
    uint64_t beats = site->beats, failures = site->beat_failures, orphans = site->orphans_requeued;
    bool healthy = site->healthy;
    pthread_mutex_unlock(&site->mu);
    fprintf(out,
            "# HELP stagein_instance_heartbeats_total Heartbeats that renewed this instance's "
            "leases.\n# TYPE stagein_instance_heartbeats_total counter\n"
            "stagein_instance_heartbeats_total{instance=\"%s\"} %" PRIu64 "\n"
            "# HELP stagein_instance_heartbeat_failures_total Heartbeats that failed.\n"
            "# TYPE stagein_instance_heartbeat_failures_total counter\n"
            "stagein_instance_heartbeat_failures_total{instance=\"%s\"} %" PRIu64 "\n"
            "# HELP stagein_instance_taking_work 1 while the leases are renewed (new work taken).\n"
            "# TYPE stagein_instance_taking_work gauge\n"
            "stagein_instance_taking_work{instance=\"%s\"} %d\n"
            "# HELP stagein_instance_orphans_requeued_total Items of stopped instances this "
            "instance queued again.\n# TYPE stagein_instance_orphans_requeued_total counter\n"
            "stagein_instance_orphans_requeued_total{instance=\"%s\"} %" PRIu64 "\n",
            site->inst.name, beats, site->inst.name, failures, site->inst.name, healthy,
            site->inst.name, orphans);
}

/* ---- object and volume leases (service thread, its own connection) ---------------- */

int recall_claim_objects(recall_service_t *rs, const int64_t *objects, size_t n, bool *claimed)
{
    if (n == 0)
        return 0;
    si_error_t err;
    if (catalog_begin(rs->cat, &err) < 0)
        goto error;
    if (lease_claim_objects(rs->cat, objects, n, rs->inst.name, si_wall_now(), rs->inst.lease_s,
                            claimed, &err) < 0) {
        catalog_rollback(rs->cat);
        goto error;
    }
    if (catalog_commit(rs->cat, &err) < 0)
        goto error;
    return 0;
error:
    memset(claimed, 0, n * sizeof(*claimed));
    si_log(rs->log, SI_LOG_ERROR, "recall: claiming objects: %s", err.text);
    return -1;
}

int recall_release_objects(recall_service_t *rs, const int64_t *objects, size_t n)
{
    si_error_t err;
    bool own = !db_in_transaction(catalog_driver(rs->cat));
    if (n == 0)
        return 0;
    if (own && catalog_begin(rs->cat, &err) < 0)
        goto error;
    if (lease_release_objects(rs->cat, objects, n, rs->inst.name, &err) < 0) {
        if (own)
            catalog_rollback(rs->cat);
        goto error;
    }
    if (own && catalog_commit(rs->cat, &err) < 0)
        goto error;
    return 0;
error:
    /* the leases lapse after lease_s; their items are done or failed by now */
    si_log(rs->log, SI_LOG_WARNING, "recall: releasing object leases: %s", err.text);
    return -1;
}

/* How many more volumes this instance may take. Only volumes with objects
 * queued count (one left loaded in an idle drive does not: the next mount
 * unloads it); at most volumes_per_drive per drive, so that the volumes of a
 * site's queue go to the instances with free drives (0: no bound, an
 * instance alone, whose backend then sees the whole queue to plan its
 * mounts). */
static size_t volume_room(recall_service_t *rs)
{
    if (rs->inst.volumes_per_drive <= 0)
        return SIZE_MAX;
    size_t busy = volume_holds_busy(rs->holds);
    archive_status_t st;
    si_error_t err;
    size_t drives = archive_status(rs->backend, &st, &err) == 0 && st.drives > 0
                        ? (size_t)st.drives : 1;
    size_t most = drives * (size_t)rs->inst.volumes_per_drive;
    return busy < most ? most - busy : 0;
}

static int view_add(const char *name, const char *holder, void *arg)
{
    (void)holder;
    recall_volume_view_t *v = arg;
    if (si_array_grow((void **)&v->others, &v->cap, v->nothers + 1, sizeof(*v->others)) < 0)
        return 1;
    snprintf(v->others[v->nothers++], sizeof(v->others[0]), "%s", name);
    return 0;
}

void recall_volume_view(recall_service_t *rs, recall_volume_view_t *view)
{
    memset(view, 0, sizeof(*view));
    view->room = SIZE_MAX;
    if (!rs->volume_leases)
        return;
    si_error_t err;
    if (lease_each_held(rs->cat, LEASE_VOLUME, rs->inst.name, si_wall_now(), view_add, view,
                        &err) < 0)
        si_log(rs->log, SI_LOG_WARNING, "recall: %s", err.text);
    view->room = volume_room(rs);
}

void recall_volume_view_free(recall_volume_view_t *view)
{
    free(view->others);
    free(view->planned);
    view->others = NULL;
    view->planned = NULL;
}

static bool view_has(char (*labels)[ARCHIVE_LABEL_MAX + 1], size_t n, const char *label)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(labels[i], label) == 0)
            return true;
    return false;
}

bool recall_volumes_in_reach(recall_service_t *rs, recall_volume_view_t *view,
                             const archive_item_t *item)
{
    if (!rs->volume_leases || item->ncopies == 0)
        return true; /* no usable copy: the main loop fails its items with the reason */
    for (int c = 0; c < item->ncopies; c++) {
        const char *label = item->copies[c].volume;
        if (volume_holds_has(rs->holds, label) ||
            view_has(view->planned, view->nplanned, label))
            return true;
        if (view->room > 0 && !view_has(view->others, view->nothers, label) &&
            si_array_grow((void **)&view->planned, &view->cap_planned, view->nplanned + 1,
                          sizeof(*view->planned)) == 0) {
            snprintf(view->planned[view->nplanned++], sizeof(view->planned[0]), "%s", label);
            if (view->room != SIZE_MAX)
                view->room--;
            return true;
        }
    }
    return false;
}

int recall_claim_volumes(recall_service_t *rs, archive_item_t *item, flight_t *f)
{
    f->nvols = 0;
    if (!rs->volume_leases)
        return item->ncopies > 0 || rs->backend->ops->copies_optional;
    int keep = 0;
    double now = si_wall_now();
    for (int c = 0; c < item->ncopies; c++) {
        const char *label = item->copies[c].volume;
        if (!volume_holds_has(rs->holds, label) && volume_room(rs) == 0)
            continue;
        si_error_t err;
        int rc = volume_hold(rs->holds, rs->cat, label, now, &err);
        if (rc < 0)
            si_log(rs->log, SI_LOG_WARNING, "recall: volume %s: %s", label, err.text);
        if (rc != 1)
            continue; /* another instance has it: the objects on it are its own */
        snprintf(f->vols[f->nvols++], sizeof(f->vols[0]), "%s", label);
        item->copies[keep++] = item->copies[c];
    }
    item->ncopies = keep;
    return keep > 0;
}

void recall_flight_volumes_done(recall_service_t *rs, flight_t *f)
{
    double now = si_mono_now();
    bool idle = false;
    for (int i = 0; i < f->nvols; i++)
        idle |= volume_unhold(rs->holds, f->vols[i], now);
    /* room for another volume: the queue is looked at again now */
    if (idle && rs->inst.volumes_per_drive > 0) {
        pthread_mutex_lock(&rs->mu);
        rs->kicked = true;
        pthread_mutex_unlock(&rs->mu);
    }
    f->nvols = 0;
}

static int backend_loaded(void *arg, const char *label)
{
    return archive_volume_loaded(arg, label);
}

void recall_release_idle_volumes(recall_service_t *rs)
{
    if (!rs->holds)
        return;
    /* kept a moment after the last user, so the next request's objects on
     * it find it held; kept while the backend has it loaded. The volumes
     * the push's archive writes used are given back here too. */
    si_error_t err;
    if (volume_holds_release_idle(rs->holds, rs->cat, si_mono_now(), rs->poll_interval,
                                  backend_loaded, rs->backend, &err) < 0)
        si_log(rs->log, SI_LOG_WARNING, "recall: giving volume leases back: %s", err.text);
}
