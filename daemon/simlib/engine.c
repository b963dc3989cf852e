/* The simulated library engine; see engine.h. A discrete-event loop over a
 * heap of timed events; the same loop runs on the virtual clock (time jumps)
 * and on the scaled real-time clock (the thread sleeps until the next event
 * or a submission). */
#include "config.h"
#include "daemon/simlib/engine.h"
#include "daemon/simlib/internal.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "daemon/simlib/clock.h"
#include "common/array.h"

static void step_due(simlib_t *lib);

/* Timed waits end when asked, not up to the default 50 us later: a drive
 * waits for its read's modelled end every object. */
static void precise_timers(void)
{
    prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
}

static void *transfer_main(void *arg)
{
    transfer_worker_t *w = arg;
    simlib_t *lib = w->lib;
    precise_timers();
    pthread_mutex_lock(&lib->mu);
    for (;;) {
        while (!w->posted && !lib->stop)
            pthread_cond_wait(&w->cv, &lib->mu);
        if (lib->stop)
            break; /* a job not taken yet stays posted for a restart */
        simlib_read_t job = w->job;
        uint64_t gen = w->gen;
        w->posted = false;
        w->busy = true;
        pthread_mutex_unlock(&lib->mu);
        si_error_t err = {{0}};
        int rc = lib->cb.fetch(lib->cb.arg, &job, &err);
        pthread_mutex_lock(&lib->mu);
        w->busy = false;
        engine_transfer_finished(lib, w, gen, rc, &err);
        if (lib->stop)
            break;
        /* The worker runs what is due itself: it waits for its read's
         * modelled end, and the drive's next read starts (and is posted to
         * this worker) at once, without hand-offs through the engine thread
         * per object. The engine thread is woken only when it sleeps past a
         * new event of its own. */
        while (w->wait_until > 0 && !w->posted && !lib->stop &&
               simclock_now(&lib->clock) < w->wait_until)
            simclock_wait_until(&lib->clock, w->wait_until, &w->cv, &lib->mu);
        w->wait_until = 0;
        step_due(lib);
        if (engine_next_wake(lib) < lib->engine_sleeps_until)
            pthread_cond_signal(&lib->cv);
    }
    pthread_mutex_unlock(&lib->mu);
    return NULL;
}

/* A drive failed during its read: the transfer is abandoned. Returns true
 * when its fetch is still running (the read is then retried once it
 * returned, by transfer_event). */

static void process_event(simlib_t *lib, const event_t *e)
{
    lib->now = e->t;
    switch (e->kind) {
    case EV_ARRIVAL: {
        arrival_t *a = &lib->arrivals[e->index];
        si_error_t err = {{0}};
        double c0 = engine_thread_cpu();
        if (sched_submit(lib->sched, lib->now, &a->req, a->files, a->n, &err) == 0)
            lib->open_requests++;
        else if (lib->cb.request_done)
            lib->cb.request_done(lib->cb.arg, a->req.id, lib->now, a->n, err.text);
        lib->st.sched_cpu_s += engine_thread_cpu() - c0;
        free(a->files);
        a->files = NULL;
        lib->st.requests++;
        lib->dispatch_needed = true;
        break;
    }
    case EV_DRIVE:
        if (e->gen == lib->drives[e->index].gen && !lib->drives[e->index].failed)
            engine_drive_event(lib, e->index);
        break;
    case EV_ROBOT:
        engine_robot_event(lib, e->index);
        break;
    case EV_WAKE:
        lib->dispatch_needed = true;
        break;
    case EV_FAULT:
        engine_fault_event(lib, &lib->cfg.faults[e->index]);
        break;
    case EV_TRANSFER:
        engine_transfer_event(lib, e->index, e->gen);
        break;
    default:
        break;
    }
}

static void on_request_done(void *arg, uint64_t request, double now, size_t failed,
                            const char *why)
{
    simlib_t *lib = arg;
    lib->open_requests--;
    if (failed)
        lib->st.requests_failed++;
    if (now > lib->st.makespan)
        lib->st.makespan = now;
    if (lib->cb.request_done)
        lib->cb.request_done(lib->cb.arg, request, now, failed, why);
    if (lib->open_requests == 0)
        pthread_cond_broadcast(&lib->idle_cv);
}

/* ---- configuration copies and life cycle --------------------------------------- */

void simlib_config_default(simlib_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->drives = 1;
    cfg->slots = 10;
    cfg->robots = 1;
    cfg->time_scale = 0;
    tape_profile_builtin("lto9", &cfg->profile, NULL);
}

int simlib_config_add_volume(simlib_config_t *cfg, const char *label, uint64_t used,
                             si_error_t *err)
{
    size_t len = strlen(label);
    if (len == 0 || len > SIMLIB_LABEL_MAX)
        return si_errprintf(err, "volume label '%s' must be 1..%d characters", label,
                            SIMLIB_LABEL_MAX);
    if (used > (uint64_t)cfg->profile.capacity)
        return si_errprintf(err, "volume %s: fill %llu bytes exceeds the capacity %.0f", label,
                            (unsigned long long)used, cfg->profile.capacity);
    if (si_array_grow((void **)&cfg->volumes, &cfg->cap_volumes, (size_t)cfg->nvolumes + 1,
                      sizeof(*cfg->volumes)) < 0)
        return si_errprintf(err, "out of memory");
    simlib_volume_t *v = cfg->volumes;
    snprintf(v[cfg->nvolumes].label, sizeof(v->label), "%s", label);
    v[cfg->nvolumes].used = used;
    cfg->nvolumes++;
    return 0;
}

int simlib_config_add_fault(simlib_config_t *cfg, const simlib_fault_t *f, si_error_t *err)
{
    if (si_array_grow((void **)&cfg->faults, &cfg->cap_faults, cfg->nfaults + 1,
                      sizeof(*cfg->faults)) < 0)
        return si_errprintf(err, "out of memory");
    cfg->faults[cfg->nfaults++] = *f;
    return 0;
}

void simlib_config_free(simlib_config_t *cfg)
{
    free(cfg->volumes);
    free(cfg->faults);
    cfg->volumes = NULL;
    cfg->faults = NULL;
    cfg->nvolumes = 0;
    cfg->nfaults = 0;
    cfg->cap_volumes = 0;
    cfg->cap_faults = 0;
}

static int fault_check(const simlib_config_t *cfg, const simlib_fault_t *f, si_error_t *err)
{
    switch (f->kind) {
    case FAULT_DRIVE:
        if (f->index < 0 || f->index >= cfg->drives)
            return si_errprintf(err, "fault: drive %d does not exist (0..%d)", f->index,
                                cfg->drives - 1);
        break;
    case FAULT_ROBOT:
        if (f->index < 0 || f->index >= cfg->robots)
            return si_errprintf(err, "fault: robot %d does not exist (0..%d)", f->index,
                                cfg->robots - 1);
        break;
    case FAULT_REGION:
        if (f->volume < 0 || f->volume >= cfg->nvolumes)
            return si_errprintf(err, "fault: volume %s does not exist",
                                *f->label ? f->label : "(none given)");
        if (f->length == 0)
            return si_errprintf(err, "fault: unreadable region of length 0");
        break;
    }
    if (f->kind != FAULT_REGION && !(f->at >= 0))
        return si_errprintf(err, "fault: time %g must be >= 0", f->at);
    return 0;
}

simlib_t *simlib_new(const simlib_config_t *cfg, const sched_policy_t *policy,
                     const sched_options_t *opt, const simlib_callbacks_t *cb, si_error_t *err)
{
    if (cfg->drives < 1 || cfg->robots < 1 || cfg->nvolumes < 1)
        return si_errprintf(err, "library needs at least one drive, robot and volume "
                            "(drives %d, robots %d, volumes %d)", cfg->drives, cfg->robots,
                            cfg->nvolumes), NULL;
    if (cfg->nvolumes > cfg->slots + cfg->drives)
        return si_errprintf(err, "library: %d volumes do not fit in %d slots", cfg->nvolumes,
                            cfg->slots), NULL;
    simlib_t *lib = calloc(1, sizeof(*lib));
    if (!lib)
        return si_errprintf(err, "out of memory"), NULL;
    /* first, so that simlib_free can undo whatever follows */
    pthread_mutex_init(&lib->mu, NULL);
    pthread_cond_init(&lib->cv, NULL);
    pthread_cond_init(&lib->idle_cv, NULL);
    lib->cfg = *cfg;
    lib->cfg.volumes = malloc((size_t)cfg->nvolumes * sizeof(simlib_volume_t));
    lib->cfg.faults = malloc((cfg->nfaults + 1) * sizeof(simlib_fault_t));
    lib->cfg.cap_volumes = (size_t)cfg->nvolumes; /* the sizes of the copies above */
    lib->cfg.cap_faults = cfg->nfaults + 1;
    lib->drives = calloc((size_t)cfg->drives, sizeof(drive_t));
    lib->robots = calloc((size_t)cfg->robots, sizeof(robot_t));
    lib->robot_usable = calloc((size_t)cfg->robots, sizeof(bool));
    lib->vols = calloc((size_t)cfg->nvolumes, sizeof(volstate_t));
    lib->unavailable = calloc((size_t)cfg->nvolumes, 1);
    if (!lib->cfg.volumes || !lib->cfg.faults || !lib->drives || !lib->robots || !lib->robot_usable ||
        !lib->vols ||
        !lib->unavailable) {
        si_errprintf(err, "out of memory");
        goto error;
    }
    memcpy(lib->cfg.volumes, cfg->volumes, (size_t)cfg->nvolumes * sizeof(simlib_volume_t));
    if (cfg->nfaults)
        memcpy(lib->cfg.faults, cfg->faults, cfg->nfaults * sizeof(simlib_fault_t));
    for (size_t i = 0; i < cfg->nfaults; i++) {
        simlib_fault_t *f = &lib->cfg.faults[i];
        if (f->kind == FAULT_REGION && f->volume < 0)
            for (int v = 0; v < cfg->nvolumes; v++)
                if (strcmp(cfg->volumes[v].label, f->label) == 0)
                    f->volume = v;
        if (fault_check(cfg, f, err) < 0)
            goto error;
    }
    if (cb)
        lib->cb = *cb;
    sched_options_t so = *opt;
    so.nvolumes = cfg->nvolumes;
    so.profile = cfg->profile;
    so.drives = cfg->drives;
    sched_callbacks_t scb = {on_request_done, lib};
    lib->sched = sched_new(policy, &so, &scb, err);
    if (!lib->sched)
        goto error;
    for (int d = 0; d < cfg->drives; d++) {
        lib->drives[d].volume = -1;
        lib->drives[d].target = -1;
    }
    for (int v = 0; v < cfg->nvolumes; v++) {
        lib->vols[v].slot = v;
        lib->vols[v].in_drive = -1;
    }
    if (cfg->time_scale > 0)
        simclock_init_real(&lib->clock, cfg->time_scale);
    else
        simclock_init_virtual(&lib->clock);
    if (lib->clock.real && lib->cb.fetch) {
        if (!(lib->workers = calloc((size_t)cfg->drives, sizeof(transfer_worker_t)))) {
            si_errprintf(err, "out of memory");
            goto error;
        }
        for (int d = 0; d < cfg->drives; d++) {
            lib->workers[d].lib = lib;
            lib->workers[d].drive = d;
            atomic_init(&lib->workers[d].abandoned, false);
            pthread_cond_init(&lib->workers[d].cv, NULL);
        }
    }
    for (size_t i = 0; i < cfg->nfaults; i++)
        if (cfg->faults[i].kind != FAULT_REGION)
            engine_push_event(lib, cfg->faults[i].at, EV_FAULT, (int)i, 0);
    return lib;
error:
    simlib_free(lib);
    return NULL;
}

void simlib_free(simlib_t *lib)
{
    if (!lib)
        return;
    simlib_stop(lib);
    for (size_t i = 0; i < lib->narrivals; i++)
        free(lib->arrivals[i].files);
    sched_free(lib->sched);
    pthread_mutex_destroy(&lib->mu);
    pthread_cond_destroy(&lib->cv);
    pthread_cond_destroy(&lib->idle_cv);
    for (int d = 0; lib->workers && d < lib->cfg.drives; d++)
        pthread_cond_destroy(&lib->workers[d].cv);
    free(lib->workers);
    free(lib->cfg.volumes);
    free(lib->cfg.faults);
    free(lib->drives);
    free(lib->robots);
    free(lib->robot_usable);
    free(lib->vols);
    free(lib->unavailable);
    free(lib->heap);
    free(lib->arrivals);
    free(lib->rjobs);
    free(lib->writes);
    free(lib->reads_per_object);
    free(lib);
}

/* ---- public operations ------------------------------------------------------------- */

static double current_time(simlib_t *lib)
{
    return lib->clock.real ? simclock_now(&lib->clock) : lib->now;
}

int simlib_submit(simlib_t *lib, double at, const sched_request_t *req, const sched_file_t *files,
                  size_t n, si_error_t *err)
{
    sched_file_t *copy = malloc((n + 1) * sizeof(*copy));
    if (!copy)
        return si_errprintf(err, "request %llu: out of memory", (unsigned long long)req->id);
    memcpy(copy, files, n * sizeof(*copy));
    pthread_mutex_lock(&lib->mu);
    double now = current_time(lib);
    if (at < now)
        at = now;
    int rc = si_array_grow((void **)&lib->arrivals, &lib->cap_arrivals, lib->narrivals + 1,
                  sizeof(arrival_t));
    if (rc == 0) {
        lib->arrivals[lib->narrivals] = (arrival_t){*req, copy, n};
        rc = engine_push_event(lib, at, EV_ARRIVAL, (int)lib->narrivals, 0);
        if (rc == 0)
            lib->narrivals++;
    }
    pthread_cond_signal(&lib->cv);
    pthread_mutex_unlock(&lib->mu);
    if (rc < 0) {
        free(copy);
        return si_errprintf(err, "request %llu: out of memory", (unsigned long long)req->id);
    }
    return 0;
}

int simlib_volume_refill(simlib_t *lib, int volume, uint64_t used)
{
    if (volume < 0 || volume >= lib->cfg.nvolumes)
        return -1;
    pthread_mutex_lock(&lib->mu);
    simlib_volume_t *v = &lib->cfg.volumes[volume];
    if (used > v->used)
        v->used = used < (uint64_t)lib->cfg.profile.capacity ? used
                                                             : (uint64_t)lib->cfg.profile.capacity;
    pthread_mutex_unlock(&lib->mu);
    return 0;
}

int simlib_write(simlib_t *lib, double at, int volume, uint64_t object, uint64_t size,
                 si_error_t *err)
{
    (void)at; /* writes queue at once; the engine serves them before recalls */
    if (volume < 0 || volume >= lib->cfg.nvolumes)
        return si_errprintf(err, "write: volume %d does not exist", volume);
    pthread_mutex_lock(&lib->mu);
    simlib_volume_t *v = &lib->cfg.volumes[volume];
    int rc = 0;
    if (v->used + size > (uint64_t)lib->cfg.profile.capacity)
        rc = si_errprintf(err, "write: volume %s has %llu bytes free, %llu needed", v->label,
                          (unsigned long long)((uint64_t)lib->cfg.profile.capacity - v->used),
                          (unsigned long long)size);
    else if (si_array_grow((void **)&lib->writes, &lib->cap_writes, lib->nwrites + 1,
                  sizeof(write_job_t)) < 0)
        rc = si_errprintf(err, "write: out of memory");
    if (rc == 0) {
        lib->writes[lib->nwrites++] = (write_job_t){volume, object, size};
        lib->dispatch_needed = true;
        engine_push_event(lib, current_time(lib), EV_WAKE, 0, 0);
        pthread_cond_signal(&lib->cv);
    }
    pthread_mutex_unlock(&lib->mu);
    return rc;
}

int simlib_inject(simlib_t *lib, const simlib_fault_t *f, si_error_t *err)
{
    pthread_mutex_lock(&lib->mu);
    int rc = fault_check(&lib->cfg, f, err);
    if (rc == 0) {
        if (si_array_grow((void **)&lib->cfg.faults, &lib->cfg.cap_faults, lib->cfg.nfaults + 1,
                          sizeof(*lib->cfg.faults)) < 0) {
            rc = si_errprintf(err, "out of memory");
        } else {
            lib->cfg.faults[lib->cfg.nfaults] = *f;
            if (f->kind != FAULT_REGION) {
                double now = current_time(lib);
                engine_push_event(lib, f->at > now ? f->at : now, EV_FAULT, (int)lib->cfg.nfaults,
                                  0);
            }
            lib->cfg.nfaults++;
            pthread_cond_signal(&lib->cv);
        }
    }
    pthread_mutex_unlock(&lib->mu);
    return rc;
}

/* One round: every event due, then the drives that may have work. */
static void run_due(simlib_t *lib, double until)
{
    while (lib->nheap > 0 && lib->heap[0].t <= until) {
        event_t e = engine_pop_event(lib);
        process_event(lib, &e);
        /* Dispatch once all events of this instant are in. */
        if (lib->dispatch_needed && (lib->nheap == 0 || lib->heap[0].t > e.t))
            engine_dispatch_all(lib);
    }
}

int simlib_run(simlib_t *lib, si_error_t *err)
{
    if (lib->clock.real)
        return si_errprintf(err, "simlib_run needs the virtual clock (time_scale = 0)");
    pthread_mutex_lock(&lib->mu);
    for (;;) {
        run_due(lib, INFINITY);
        if (lib->dispatch_needed)
            engine_dispatch_all(lib);
        if (lib->nheap > 0)
            continue;
        if (sched_queued(lib->sched) == 0)
            break;
        /* Work left but nothing can happen: drives idle yet not choosing it
         * (cannot be with a sane policy) or nothing able to serve it. */
        bool any_robot = false, any_drive = false;
        for (int r = 0; r < lib->cfg.robots; r++)
            any_robot |= !lib->robots[r].failed;
        for (int d = 0; d < lib->cfg.drives; d++)
            any_drive |= !lib->drives[d].failed;
        if (any_robot && any_drive) {
            engine_violation(lib, "stalled at %.1f s with %zu reads queued", lib->now,
                             sched_queued(lib->sched));
            break;
        }
        engine_fail_unreachable(lib);
        engine_dispatch_all(lib);
        if (lib->nheap == 0)
            break;
    }
    if (lib->open_requests > 0)
        engine_violation(lib, "%llu requests never completed",
                         (unsigned long long)lib->open_requests);
    pthread_mutex_unlock(&lib->mu);
    return 0;
}

/* Real time, engine lock held: every event due, then the drives that may
 * have work. Run by the engine thread and by a transfer worker whose fetch
 * returned. */
static void step_due(simlib_t *lib)
{
    lib->now = simclock_now(&lib->clock);
    /* Events carry their own times, so accounting is exact even when the
     * thread wakes late. */
    double due = lib->now;
    while (lib->nheap > 0 && lib->heap[0].t <= due) {
        event_t e = engine_pop_event(lib);
        process_event(lib, &e);
    }
    lib->now = due;
    if (lib->dispatch_needed)
        engine_dispatch_all(lib);
    engine_fail_unreachable(lib);
    if (lib->dispatch_needed)
        engine_dispatch_all(lib);
}

static void *engine_thread(void *arg)
{
    simlib_t *lib = arg;
    precise_timers();
    pthread_mutex_lock(&lib->mu);
    while (!lib->stop) {
        step_due(lib);
        double next = engine_next_wake(lib);
        lib->engine_sleeps_until = next;
        simclock_wait_until(&lib->clock, next, &lib->cv, &lib->mu);
        lib->engine_sleeps_until = -INFINITY; /* awake: it looks at the heap again */
    }
    pthread_mutex_unlock(&lib->mu);
    return NULL;
}

int simlib_start(simlib_t *lib, si_error_t *err)
{
    if (!lib->clock.real)
        return si_errprintf(err, "simlib_start needs the real-time clock (time_scale > 0)");
    pthread_mutex_lock(&lib->mu);
    if (lib->running) {
        pthread_mutex_unlock(&lib->mu);
        return si_errprintf(err, "library engine already running");
    }
    lib->stop = false;
    lib->engine_sleeps_until = -INFINITY;
    int rc = pthread_create(&lib->thread, NULL, engine_thread, lib);
    lib->running = rc == 0;
    for (int d = 0; rc == 0 && lib->workers && d < lib->cfg.drives; d++) {
        transfer_worker_t *w = &lib->workers[d];
        rc = pthread_create(&w->thread, NULL, transfer_main, w);
        w->started = rc == 0;
    }
    pthread_mutex_unlock(&lib->mu);
    if (rc != 0) {
        simlib_stop(lib);
        return si_errprintf(err, "cannot start the library threads");
    }
    return 0;
}

void simlib_stop(simlib_t *lib)
{
    pthread_mutex_lock(&lib->mu);
    bool running = lib->running;
    lib->stop = true;
    pthread_cond_signal(&lib->cv);
    for (int d = 0; lib->workers && d < lib->cfg.drives; d++) {
        /* a fetch in progress stops at its next chunk */
        if (lib->workers[d].busy)
            atomic_store(&lib->workers[d].abandoned, true);
        pthread_cond_signal(&lib->workers[d].cv);
    }
    pthread_mutex_unlock(&lib->mu);
    if (running)
        pthread_join(lib->thread, NULL);
    for (int d = 0; lib->workers && d < lib->cfg.drives; d++)
        if (lib->workers[d].started) {
            pthread_join(lib->workers[d].thread, NULL);
            lib->workers[d].started = false;
        }
    lib->running = false;
}

void simlib_wait_idle(simlib_t *lib)
{
    pthread_mutex_lock(&lib->mu);
    while (lib->open_requests > 0 || lib->nheap > 0) {
        /* Pending arrivals count as open work too. */
        bool arrivals = false;
        for (size_t i = 0; i < lib->nheap; i++)
            arrivals |= lib->heap[i].kind == EV_ARRIVAL;
        if (lib->open_requests == 0 && !arrivals)
            break;
        pthread_cond_wait(&lib->idle_cv, &lib->mu);
    }
    pthread_mutex_unlock(&lib->mu);
}

double simlib_now(simlib_t *lib)
{
    pthread_mutex_lock(&lib->mu);
    double t = current_time(lib);
    pthread_mutex_unlock(&lib->mu);
    return t;
}

int simlib_drive_info(simlib_t *lib, int drive, simlib_drive_info_t *info)
{
    if (drive < 0 || drive >= lib->cfg.drives)
        return -1;
    pthread_mutex_lock(&lib->mu);
    const drive_t *dr = &lib->drives[drive];
    info->state = dr->failed ? DRIVE_FAILED : dr->state;
    info->volume = dr->volume;
    info->target = dr->target;
    info->head = dr->head;
    info->busy_s = dr->op != OP_NONE && dr->op_end > lib->now ? dr->op_end - lib->now : 0;
    info->pos = tape_position(&lib->cfg.profile, dr->head);
    info->mounts = dr->mounts;
    pthread_mutex_unlock(&lib->mu);
    return 0;
}

int simlib_volume_where(simlib_t *lib, int volume, int *slot, int *drive)
{
    if (volume < 0 || volume >= lib->cfg.nvolumes)
        return -1;
    pthread_mutex_lock(&lib->mu);
    const volstate_t *vs = &lib->vols[volume];
    *drive = vs->in_drive;
    *slot = vs->in_drive < 0 && !vs->moving ? vs->slot : -1;
    pthread_mutex_unlock(&lib->mu);
    return 0;
}

void simlib_stats(simlib_t *lib, simlib_stats_t *st)
{
    pthread_mutex_lock(&lib->mu);
    *st = lib->st;
    st->objects_failed = sched_failed_objects(lib->sched);
    st->now = current_time(lib);
    pthread_mutex_unlock(&lib->mu);
}

int simlib_preload(simlib_t *lib, int drive, int volume, uint64_t head, double ready_s,
                   si_error_t *err)
{
    pthread_mutex_lock(&lib->mu);
    int rc = 0;
    if (lib->running || drive < 0 || drive >= lib->cfg.drives || volume < 0 ||
        volume >= lib->cfg.nvolumes || lib->drives[drive].volume >= 0 ||
        lib->vols[volume].in_drive >= 0)
        rc = si_errprintf(err, "cannot preload volume %d into drive %d", volume, drive);
    else {
        lib->drives[drive].volume = volume;
        lib->drives[drive].head = head;
        lib->drives[drive].state = DRIVE_IDLE;
        lib->vols[volume].in_drive = drive;
        if (ready_s > 0) /* ends as a mount does: the head at the beginning */
            engine_drive_op(lib, drive, OP_LOAD, DRIVE_LOADING, ready_s);
    }
    pthread_mutex_unlock(&lib->mu);
    return rc;
}
