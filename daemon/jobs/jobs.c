#include "config.h"
#include "daemon/jobs/jobs.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "catalog/catalog_conf.h"
#include "catalog/history.h"
#include "catalog/requests.h"
#include "daemon/jobs/reconcile.h"
#include "daemon/jobs/slurm.h"
#include "common/clock.h"
#include "common/thread.h"

const si_conf_key_t jobs_conf_keys[] = {
    {"slurm", SI_CONF_GROUP, 0, 0, NULL},
    {"slurm.squeue", SI_CONF_STRING, 0, 0, NULL},
    {"slurm.reconcile_interval", SI_CONF_FLOAT, 0.1, 86400.0, NULL},
    {"slurm.squeue_timeout", SI_CONF_FLOAT, 1.0, 3600.0, NULL},
    {"slurm.submission_grace", SI_CONF_FLOAT, 1.0, 86400.0, NULL},
    {"slurm.expiry_interval", SI_CONF_FLOAT, 0.1, 3600.0, NULL},
    SI_CONF_KEYS_END,
};

#define DEFAULT_SQUEUE "/usr/bin/squeue"
/* requests or pushes per transaction of the history's purge */
#define PURGE_BATCH 1000
/* jobs of requests this much older than a submission cannot be its job */
#define KNOWN_JOBS_S 3600.0

int jobs_conf_from(const si_conf_t *conf, jobs_conf_t *out, si_error_t *err)
{
    jobs_conf_t c = {
        .interval_s = si_conf_float(conf, "slurm.reconcile_interval", 30.0),
        .timeout_s = si_conf_float(conf, "slurm.squeue_timeout", 30.0),
        .submission_grace_s = si_conf_float(conf, "slurm.submission_grace", 300.0),
        .expiry_interval_s = si_conf_float(conf, "slurm.expiry_interval", 10.0),
        .history_days = catalog_conf_history_days(conf),
    };
    const char *squeue = si_conf_string(conf, "slurm.squeue", NULL);
    if (squeue) {
        /* "" turns reconciliation off (a site without Slurm) */
        if (*squeue && squeue[0] != '/')
            return si_errprintf(err, "slurm.squeue '%.200s' is not an absolute path", squeue);
        if ((size_t)snprintf(c.squeue, sizeof(c.squeue), "%s", squeue) >= sizeof(c.squeue))
            return si_errprintf(err, "slurm.squeue is too long");
        if (*squeue && access(squeue, X_OK) < 0)
            return si_errprintf(err, "slurm.squeue %s: %s (set slurm.squeue = \"\" to run "
                                     "without Slurm)", squeue, strerror(errno));
    } else if (access(DEFAULT_SQUEUE, X_OK) == 0) {
        snprintf(c.squeue, sizeof(c.squeue), "%s", DEFAULT_SQUEUE);
    }
    *out = c;
    return 0;
}

struct jobs_service {
    jobs_conf_t conf;
    si_log_t *log;
    catalog_t *cat;
    requests_t *requests;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stop, woken;
    char last_error[256];      /* squeue's last failure, logged once per change */
};

static void on_expired(const char *uuid, int64_t lifetime, void *arg)
{
    jobs_service_t *j = arg;
    si_log(j->log, SI_LOG_NOTICE, "request %s expired: its pin lifetime of %lld s passed;"
                                  " its pins are released", uuid, (long long)lifetime);
}

static void expire(jobs_service_t *j)
{
    si_error_t err;
    size_t n = 0;
    if (requests_expire(j->requests, si_wall_now(), on_expired, j, &n, &err) < 0)
        si_log(j->log, SI_LOG_ERROR, "pin expiry: %s", err.text);
}

/* The history is purged ten times per period kept, at most hourly: a row
 * outlives catalog.history_days by a tenth of it at most. */
static double purge_interval(const jobs_service_t *j)
{
    double s = j->conf.history_days * 86400.0 / 10;
    return s < 3600.0 ? s : 3600.0;
}

static void purge_history(jobs_service_t *j)
{
    si_error_t err;
    catalog_history_purged_t gone;
    double before = si_wall_now() - j->conf.history_days * 86400.0;
    if (catalog_history_purge(j->cat, before, PURGE_BATCH, false, &gone, &err) < 0)
        si_log(j->log, SI_LOG_ERROR, "history purge: %s", err.text);
    else if (gone.requests || gone.pushes)
        si_log(j->log, SI_LOG_NOTICE,
               "history purge: %" PRIu64 " requests (%" PRIu64 " items) and %" PRIu64
               " pushes (%" PRIu64 " files) ended more than %g days ago removed from the catalog"
               " (catalog.history_days)", gone.requests, gone.request_items, gone.pushes,
               gone.push_files, j->conf.history_days);
}

static void apply(jobs_service_t *j, const reconcile_action_t *a)
{
    si_error_t err;
    if (a->verb == RECONCILE_RESOLVE) {
        if (requests_resolve_submission(j->requests, a->request_id, a->holder, a->to_kind, a->to,
                                        &err) < 0)
            si_log(j->log, SI_LOG_ERROR, "request %s: %s", a->uuid, err.text);
        else
            si_log(j->log, SI_LOG_INFO, "request %s: submission %s is %s %s", a->uuid,
                   a->holder, requests_holder_kind_name(a->to_kind), a->to);
        return;
    }
    bool released = false;
    if (requests_unhold(j->requests, a->uuid, (uid_t)-1, a->kind, a->holder, a->why, &released,
                        NULL, &err) < 0) {
        if (errno != ENOENT) /* gone meanwhile (an epilog released it) */
            si_log(j->log, SI_LOG_ERROR, "request %s: %s", a->uuid, err.text);
        return;
    }
    si_log(j->log, released ? SI_LOG_NOTICE : SI_LOG_INFO, "request %s: %s%s", a->uuid, a->why,
           released ? "; released" : "");
}

static void reconcile(jobs_service_t *j)
{
    requests_holder_t *holders = NULL;
    requests_job_id_t *known = NULL;
    slurm_job_t *jobs = NULL;
    reconcile_action_t *plan = NULL;
    size_t nh = 0, nj = 0, np = 0, nk = 0;
    si_error_t err;
    double now = si_wall_now();
    if (requests_holders(j->requests, &holders, &nh, &err) < 0 ||
        requests_recent_jobs(j->requests, now - j->conf.submission_grace_s - KNOWN_JOBS_S,
                             &known, &nk, &err) < 0) {
        si_log(j->log, SI_LOG_ERROR, "job reconciliation: %s", err.text);
        return;
    }
    if (nh == 0)
        goto out;
    if (slurm_jobs_query(j->conf.squeue, j->conf.timeout_s, &jobs, &nj, &err) < 0) {
        /* Slurm unreachable says nothing about the jobs: hold everything */
        if (strcmp(err.text, j->last_error) != 0)
            si_log(j->log, SI_LOG_WARNING, "job reconciliation skipped: %s", err.text);
        snprintf(j->last_error, sizeof(j->last_error), "%s", err.text);
        goto out;
    }
    j->last_error[0] = '\0';
    if (reconcile_plan(holders, nh, known, nk, jobs, nj, now, j->conf.submission_grace_s,
                       &plan, &np, &err) < 0) {
        si_log(j->log, SI_LOG_ERROR, "job reconciliation: %s", err.text);
        goto out;
    }
    for (size_t i = 0; i < np; i++)
        apply(j, &plan[i]);
out:
    free(plan);
    free(jobs);
    free(known);
    free(holders);
}

static void *run(void *arg)
{
    jobs_service_t *j = arg;
    double next_expiry = 0, next_reconcile = 0;
    /* not at start: the first pass waits a while (or a tenth of the period) */
    double next_purge = si_wall_now() + (j->conf.history_days > 0 ? purge_interval(j) : 0);
    pthread_mutex_lock(&j->lock);
    while (!j->stop) {
        double now = si_wall_now();
        bool do_expiry = now >= next_expiry;
        bool do_reconcile = j->conf.squeue[0] && (now >= next_reconcile || j->woken);
        j->woken = false;
        if (do_expiry || do_reconcile) {
            pthread_mutex_unlock(&j->lock);
            if (do_expiry) {
                expire(j);
                requests_fold_totals(j->requests);
                next_expiry = si_wall_now() + j->conf.expiry_interval_s;
            }
            if (j->conf.history_days > 0 && si_wall_now() >= next_purge) {
                purge_history(j);
                next_purge = si_wall_now() + purge_interval(j);
            }
            if (do_reconcile) {
                reconcile(j);
                next_reconcile = si_wall_now() + j->conf.interval_s;
            }
            pthread_mutex_lock(&j->lock);
            continue;
        }
        double until = next_expiry;
        if (j->conf.squeue[0] && next_reconcile < until)
            until = next_reconcile;
        struct timespec ts = {.tv_sec = (time_t)until,
                              .tv_nsec = (long)((until - (double)(time_t)until) * 1e9)};
        if (!j->stop && !j->woken)
            pthread_cond_timedwait(&j->cond, &j->lock, &ts);
    }
    pthread_mutex_unlock(&j->lock);
    return NULL;
}

jobs_service_t *jobs_service_start(const jobs_opts_t *opts, si_error_t *err)
{
    jobs_service_t *j = calloc(1, sizeof(*j));
    if (!j) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    j->conf = opts->conf;
    j->log = opts->log;
    if (!(j->cat = catalog_open_opts(opts->catalog, err)) ||
        !(j->requests = requests_open(j->cat, err))) {
        catalog_close(j->cat);
        free(j);
        return NULL;
    }
    pthread_mutex_init(&j->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_REALTIME);
    pthread_cond_init(&j->cond, &ca);
    pthread_condattr_destroy(&ca);
    int rc = pthread_create(&j->thread, NULL, run, j);
    if (rc != 0) {
        si_errprintf(err, "cannot start the job reconciliation thread: %s", strerror(rc));
        requests_close(j->requests);
        catalog_close(j->cat);
        pthread_mutex_destroy(&j->lock);
        pthread_cond_destroy(&j->cond);
        free(j);
        return NULL;
    }
    if (j->conf.squeue[0])
        si_log(j->log, SI_LOG_INFO, "requests bound to Slurm jobs are reconciled with %s every"
                                    " %.1f s", j->conf.squeue, j->conf.interval_s);
    else
        si_log(j->log, SI_LOG_NOTICE, "no squeue (slurm.squeue): requests held by jobs are"
                                      " released only by their epilogs and pin expiry");
    return j;
}

void jobs_service_wake(jobs_service_t *j)
{
    if (!j)
        return;
    si_flag_raise(&j->lock, &j->cond, &j->woken);
}

void jobs_service_stop(jobs_service_t *j)
{
    if (!j)
        return;
    si_thread_stop(j->thread, &j->lock, &j->cond, &j->stop);
    requests_close(j->requests);
    catalog_close(j->cat);
    pthread_mutex_destroy(&j->lock);
    pthread_cond_destroy(&j->cond);
    free(j);
}
