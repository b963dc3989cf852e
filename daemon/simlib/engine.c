/* The simulated library engine; see engine.h. A discrete-event loop over a
 * heap of timed events; the same loop runs on the virtual clock (time jumps)
 * and on the scaled real-time clock (the thread sleeps until the next event
 * or a submission). */
#include "config.h"
#include "daemon/simlib/engine.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/simlib/clock.h"
#include "common/array.h"

enum { EV_ARRIVAL, EV_DRIVE, EV_ROBOT, EV_WAKE, EV_FAULT, EV_TRANSFER };

typedef struct {
    double t;
    uint64_t seq;
    int kind;
    int index;
    uint64_t gen;         /* EV_DRIVE: the drive operation it ends */
} event_t;

typedef struct {
    sched_request_t req;
    sched_file_t *files;
    size_t n;
} arrival_t;

typedef struct {
    int volume;
    uint64_t object;
    uint64_t size;
} write_job_t;

enum { OP_NONE, OP_UNLOAD, OP_LOAD, OP_POSITION, OP_READ, OP_WRITE_POSITION, OP_WRITE };

/* A read's byte transfer (real-time mode with a fetch callback). */
enum { XFER_NONE, XFER_RUNNING, XFER_DONE };

typedef struct {
    simlib_drive_state_t state;
    int volume;           /* mounted, or -1 */
    int target;           /* volume to mount next, or -1 */
    uint64_t head;
    uint64_t gen;         /* current operation; events of older ones are stale */
    int op;
    double op_start, op_end;
    bool has_read;
    sched_read_t read;
    uint64_t request_of_read;
    bool has_write;
    write_job_t write;
    uint64_t mounts;
    bool failed;
    int xfer;             /* XFER_*: the current read's byte transfer */
    bool read_elapsed;    /* modelled read over, waiting for the transfer */
    bool end_at_transfer; /* the read's EV_DRIVE is pushed when its transfer returns */
    char xfer_why[300];   /* the finished transfer's error, "" when it worked */
} drive_t;

/* One per drive: runs that drive's fetches off the engine thread. Fields
 * other than abandoned are guarded by the engine's lock. */
typedef struct {
    simlib_t *lib;
    int drive;
    pthread_t thread;
    bool started;
    pthread_cond_t cv;    /* wakes the worker: a job posted, or stop */
    bool posted;          /* job waits to be taken */
    bool busy;            /* a fetch is running */
    simlib_read_t job;
    uint64_t gen;         /* the drive operation the job belongs to */
    atomic_bool abandoned;
    /* A read interrupted while its fetch ran: queued again once the fetch
     * returned, so that two fetches of one object never overlap. */
    bool retry_pending;
    sched_read_t retry;
} transfer_worker_t;

typedef struct {
    bool failed;
    bool busy;
    double busy_until;
    double last_end;      /* end of its previous move (serialisation check) */
    int drive;            /* the move's drive */
    bool to_drive;        /* slot -> drive (true) or drive -> slot */
    int volume;
} robot_t;

typedef struct {
    int drive;
    bool to_drive;
    int volume;
} robot_job_t;

typedef struct {
    int slot;             /* home slot */
    int in_drive;         /* -1 when not in a drive */
    bool moving;
    bool reserved;        /* chosen by a drive, on its way */
    bool lost;
} volstate_t;

struct simlib {
    pthread_mutex_t mu;
    pthread_cond_t cv;        /* wakes the engine thread */
    pthread_cond_t idle_cv;   /* signalled when no request is open */
    pthread_t thread;
    bool running, stop;

    simlib_config_t cfg;      /* deep copy */
    simlib_callbacks_t cb;
    simclock_t clock;
    double now;
    sched_t *sched;

    drive_t *drives;
    transfer_worker_t *workers; /* real-time mode with a fetch callback, else NULL */
    robot_t *robots;
    volstate_t *vols;
    uint8_t *unavailable;

    event_t *heap;
    size_t nheap, cap_heap;
    uint64_t seq;

    arrival_t *arrivals;
    size_t narrivals, cap_arrivals;
    robot_job_t *rjobs;       /* FIFO of waiting robot moves */
    size_t nrjobs, cap_rjobs;
    write_job_t *writes;
    size_t nwrites, cap_writes;

    uint8_t *reads_per_object;  /* by scheduler object index */
    size_t cap_reads;
    bool dispatch_needed;
    double engine_sleeps_until; /* real time: the engine thread's wake-up, -inf when awake */
    uint64_t open_requests;
    simlib_stats_t st;
};

/* ---- helpers ---------------------------------------------------------------- */

static void violation(simlib_t *lib, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violation(simlib_t *lib, const char *fmt, ...)
{
    if (lib->st.violations++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(lib->st.first_violation, sizeof(lib->st.first_violation), fmt, ap);
        va_end(ap);
    }
}

static double thread_cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static bool ev_less(const event_t *a, const event_t *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static int push_event(simlib_t *lib, double t, int kind, int index, uint64_t gen)
{
    if (si_array_grow((void **)&lib->heap, &lib->cap_heap, lib->nheap + 1, sizeof(event_t)) < 0)
        return -1;
    event_t e = {t, lib->seq++, kind, index, gen};
    size_t i = lib->nheap++;
    while (i > 0 && ev_less(&e, &lib->heap[(i - 1) / 2])) {
        lib->heap[i] = lib->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    lib->heap[i] = e;
    return 0;
}

static event_t pop_event(simlib_t *lib)
{
    event_t top = lib->heap[0];
    event_t last = lib->heap[--lib->nheap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= lib->nheap)
            break;
        if (c + 1 < lib->nheap && ev_less(&lib->heap[c + 1], &lib->heap[c]))
            c++;
        if (!ev_less(&lib->heap[c], &last))
            break;
        lib->heap[i] = lib->heap[c];
        i = c;
    }
    if (lib->nheap)
        lib->heap[i] = last;
    return top;
}

const char *simlib_drive_state_name(simlib_drive_state_t s)
{
    static const char *const names[] = {"empty", "idle", "unloading", "wait-robot", "loading",
                                        "positioning", "reading", "writing", "failed"};
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

/* The unreadable region overlapping [start, end) of a volume, or NULL. */
static const simlib_fault_t *bad_region(const simlib_t *lib, int volume, uint64_t start,
                                        uint64_t end)
{
    for (size_t i = 0; i < lib->cfg.nfaults; i++) {
        const simlib_fault_t *f = &lib->cfg.faults[i];
        if (f->kind == FAULT_REGION && f->volume == volume && f->start < end &&
            start < f->start + f->length)
            return f;
    }
    return NULL;
}

/* ---- robots ------------------------------------------------------------------ */

static void robot_start_jobs(simlib_t *lib)
{
    for (int r = 0; r < lib->cfg.robots && lib->nrjobs > 0; r++) {
        robot_t *rb = &lib->robots[r];
        if (rb->failed || rb->busy)
            continue;
        robot_job_t job = lib->rjobs[0];
        memmove(lib->rjobs, lib->rjobs + 1, (lib->nrjobs - 1) * sizeof(robot_job_t));
        lib->nrjobs--;
        if (lib->now < rb->last_end)
            violation(lib, "robot %d started a move at %.3f before its previous one ended "
                      "at %.3f", r, lib->now, rb->last_end);
        volstate_t *vs = &lib->vols[job.volume];
        if (job.to_drive && vs->in_drive >= 0)
            violation(lib, "volume %s moved to drive %d while in drive %d",
                      lib->cfg.volumes[job.volume].label, job.drive, vs->in_drive);
        vs->moving = true;
        if (!job.to_drive)
            vs->in_drive = -1;
        rb->busy = true;
        rb->drive = job.drive;
        rb->to_drive = job.to_drive;
        rb->volume = job.volume;
        rb->busy_until = lib->now + lib->cfg.profile.robot_move_s;
        lib->st.robot_moves++;
        push_event(lib, rb->busy_until, EV_ROBOT, r, 0);
    }
}

static int robot_request(simlib_t *lib, int drive, bool to_drive, int volume)
{
    if (si_array_grow((void **)&lib->rjobs, &lib->cap_rjobs, lib->nrjobs + 1, sizeof(robot_job_t)) < 0)
        return -1;
    lib->rjobs[lib->nrjobs++] = (robot_job_t){drive, to_drive, volume};
    robot_start_jobs(lib);
    return 0;
}

/* ---- drives -------------------------------------------------------------------- */

/* Starts an operation of drive d; its end is an EV_DRIVE event, which the
 * caller pushes (drive_op) or leaves to the read's transfer. */
static void drive_op_begin(simlib_t *lib, int d, int op, simlib_drive_state_t state,
                           double duration)
{
    drive_t *dr = &lib->drives[d];
    dr->op = op;
    dr->state = state;
    dr->op_start = lib->now;
    dr->op_end = lib->now + duration;
    dr->gen++;
    dr->end_at_transfer = false;
}

static void drive_op(simlib_t *lib, int d, int op, simlib_drive_state_t state, double duration)
{
    drive_op_begin(lib, d, op, state, duration);
    push_event(lib, lib->drives[d].op_end, EV_DRIVE, d, lib->drives[d].gen);
}

static int sched_choose(simlib_t *lib, int d, double *wake_at)
{
    drive_t *dr = &lib->drives[d];
    for (int v = 0; v < lib->cfg.nvolumes; v++) {
        volstate_t *vs = &lib->vols[v];
        lib->unavailable[v] = vs->lost || vs->moving || vs->reserved ||
                              (vs->in_drive >= 0 && vs->in_drive != d);
    }
    double c0 = thread_cpu();
    int v = sched_choose_volume(lib->sched, lib->now, dr->volume, dr->head, lib->unavailable,
                                wake_at);
    lib->st.sched_cpu_s += thread_cpu() - c0;
    return v;
}

static void start_unload(simlib_t *lib, int d)
{
    drive_t *dr = &lib->drives[d];
    const tape_profile_t *p = &lib->cfg.profile;
    sched_volume_released(lib->sched, dr->volume);
    drive_op(lib, d, OP_UNLOAD, DRIVE_UNLOADING, tape_rewind_time(p, dr->head) + p->unload_s);
}

static void start_write(simlib_t *lib, int d)
{
    drive_t *dr = &lib->drives[d];
    const tape_profile_t *p = &lib->cfg.profile;
    uint64_t eod = lib->cfg.volumes[dr->volume].used;
    double t = tape_locate_time(p, dr->head, eod);
    lib->st.locate_s += t;
    drive_op(lib, d, OP_WRITE_POSITION, DRIVE_POSITIONING, t);
}

static void transfer_start(simlib_t *lib, int d);

/* Starts the next read on the drive's mounted volume; false when none. */
static bool start_next_read(simlib_t *lib, int d)
{
    drive_t *dr = &lib->drives[d];
    sched_read_t r;
    double c0 = thread_cpu();
    int got = sched_next_read(lib->sched, dr->volume, dr->head, lib->now, &r);
    lib->st.sched_cpu_s += thread_cpu() - c0;
    if (!got)
        return false;
    const tape_profile_t *p = &lib->cfg.profile;
    if (r.volume != dr->volume || dr->state == DRIVE_EMPTY || lib->vols[r.volume].in_drive != d)
        violation(lib, "read of object %llu from volume %d, not mounted in drive %d",
                  (unsigned long long)r.object_id, r.volume, d);
    /* Positioning, the drive's behaviour whatever the policy: a locate, or
     * streaming over the gap when that is quicker and the gap is readable. */
    double t = r.offset >= dr->head && bad_region(lib, r.volume, dr->head, r.offset)
                   ? tape_locate_time(p, dr->head, r.offset)
                   : tape_seek_time(p, dr->head, r.offset, NULL);
    dr->has_read = true;
    dr->read = r;
    lib->st.locate_s += t;
    if (lib->workers && r.offset >= dr->head &&
        !bad_region(lib, r.volume, dr->head, r.offset + r.size)) {
        /* Real time, nothing unreadable on the way: the positioning and the
         * read are one operation of the same modelled length, and the bytes
         * start moving now. A positioning of its own would cost a wake-up of
         * the engine thread per object (the gap between two members of an
         * archive file is a 512-byte header), more than a 64 KiB read. The
         * read's end is pushed when its transfer returns (transfer_finished),
         * so that a drive whose bytes arrive after its modelled time goes on
         * to its next read on its worker, without the engine thread. */
        drive_op_begin(lib, d, OP_READ, DRIVE_READING, t + tape_read_time(p, r.size));
        dr->op_start += t; /* the read proper, for read_s */
        dr->end_at_transfer = true;
        transfer_start(lib, d);
        return true;
    }
    drive_op(lib, d, OP_POSITION, DRIVE_POSITIONING, t);
    return true;
}

/* Gives an idle drive work: a write, its own volume's reads, or a switch. */
static void drive_dispatch(simlib_t *lib, int d)
{
    drive_t *dr = &lib->drives[d];
    if (dr->failed || (dr->state != DRIVE_EMPTY && dr->state != DRIVE_IDLE))
        return;
    /* Writes first: they hold data not yet safe anywhere else. */
    for (size_t i = 0; i < lib->nwrites; i++) {
        write_job_t *w = &lib->writes[i];
        volstate_t *vs = &lib->vols[w->volume];
        bool mine = vs->in_drive == d && !vs->moving;
        if (!mine && (vs->in_drive >= 0 || vs->moving || vs->reserved || vs->lost))
            continue;
        dr->has_write = true;
        dr->write = *w;
        memmove(w, w + 1, (lib->nwrites - i - 1) * sizeof(*w));
        lib->nwrites--;
        if (mine) {
            start_write(lib, d);
        } else {
            vs->reserved = true;
            dr->target = dr->write.volume;
            if (dr->volume >= 0)
                start_unload(lib, d);
            else {
                dr->state = DRIVE_WAIT_ROBOT;
                robot_request(lib, d, true, dr->target);
            }
        }
        return;
    }
    double wake_at;
    int v = sched_choose(lib, d, &wake_at);
    if (v < 0) {
        if (isfinite(wake_at))
            push_event(lib, wake_at > lib->now ? wake_at : lib->now, EV_WAKE, d, 0);
        return;
    }
    if (v == dr->volume) {
        if (!start_next_read(lib, d))
            dr->state = DRIVE_IDLE;
        return;
    }
    lib->vols[v].reserved = true;
    dr->target = v;
    if (dr->volume >= 0) {
        start_unload(lib, d);
    } else {
        dr->state = DRIVE_WAIT_ROBOT;
        robot_request(lib, d, true, v);
    }
}

static void dispatch_all(simlib_t *lib)
{
    lib->dispatch_needed = false;
    for (int d = 0; d < lib->cfg.drives; d++)
        drive_dispatch(lib, d);
}

static void report_read(simlib_t *lib, int d, bool ok, const char *why)
{
    drive_t *dr = &lib->drives[d];
    if (!lib->cb.read_done)
        return;
    simlib_read_t rr = {0, dr->read.object_id, dr->read.volume, d, dr->read.offset,
                        dr->read.size, lib->now, ok, why, NULL};
    lib->cb.read_done(lib->cb.arg, &rr);
}

static void read_finished(simlib_t *lib, int d)
{
    drive_t *dr = &lib->drives[d];
    sched_read_t r = dr->read;
    dr->has_read = false;
    const simlib_fault_t *bad = bad_region(lib, r.volume, r.offset, r.offset + r.size);
    char why[300] = "";
    if (bad) {
        snprintf(why, sizeof(why), "volume %s: unreadable region at offset %llu (object %llu at "
                 "%llu, %llu bytes)", lib->cfg.volumes[r.volume].label,
                 (unsigned long long)bad->start, (unsigned long long)r.object_id,
                 (unsigned long long)r.offset, (unsigned long long)r.size);
    } else if (dr->xfer == XFER_DONE && *dr->xfer_why) {
        snprintf(why, sizeof(why), "%s", dr->xfer_why);
    }
    dr->xfer = XFER_NONE;
    dr->read_elapsed = false;
    if (*why) {
        lib->st.read_failures++;
        report_read(lib, d, false, why);
        sched_read_failed(lib->sched, &r, lib->now, why);
        lib->dispatch_needed = true; /* another copy may be on another volume */
        return;
    }
    size_t old_cap = lib->cap_reads;
    if (si_array_grow((void **)&lib->reads_per_object, &lib->cap_reads, r.object + 1, 1) == 0) {
        if (lib->cap_reads > old_cap)
            memset(lib->reads_per_object + old_cap, 0, lib->cap_reads - old_cap);
        if (lib->reads_per_object[r.object]++ >= 1)
            violation(lib, "object %llu read twice", (unsigned long long)r.object_id);
    }
    lib->st.reads++;
    lib->st.bytes_read += r.size;
    report_read(lib, d, true, NULL);
    sched_read_done(lib->sched, &r, lib->now);
}

/* ---- byte transfers (real-time mode) ---------------------------------------------- */

/* The modelled read of drive d starts: its bytes start moving on the drive's
 * worker. */
static void transfer_start(simlib_t *lib, int d)
{
    drive_t *dr = &lib->drives[d];
    transfer_worker_t *w = &lib->workers[d];
    dr->xfer = XFER_RUNNING;
    dr->read_elapsed = false;
    dr->xfer_why[0] = 0;
    atomic_store(&w->abandoned, false);
    w->job = (simlib_read_t){0, dr->read.object_id, dr->read.volume, d, dr->read.offset,
                             dr->read.size, lib->now, true, NULL, &w->abandoned};
    w->gen = dr->gen;
    w->posted = true;
    pthread_cond_signal(&w->cv);
}

/* The read ends (modelled time over and bytes moved): reported, the drive
 * goes on. */
static void read_complete(simlib_t *lib, int d)
{
    drive_t *dr = &lib->drives[d];
    dr->op = OP_NONE;
    dr->state = DRIVE_IDLE;
    read_finished(lib, d);
    if (!start_next_read(lib, d))
        lib->dispatch_needed = true;
}

/* Engine thread: a transfer of drive d (operation gen) returned. */
static void transfer_event(simlib_t *lib, int d, uint64_t gen)
{
    transfer_worker_t *w = &lib->workers[d];
    drive_t *dr = &lib->drives[d];
    if (w->retry_pending && !w->busy) {
        /* the abandoned fetch is over: the interrupted read may run again */
        w->retry_pending = false;
        sched_read_retry(lib->sched, &w->retry);
        lib->dispatch_needed = true;
    }
    if (gen == dr->gen && !dr->failed && dr->op == OP_READ && dr->xfer == XFER_DONE &&
        dr->read_elapsed)
        read_complete(lib, d);
}

/* Worker thread, engine lock held: the fetch of job (operation gen) returned. */
static void transfer_finished(simlib_t *lib, transfer_worker_t *w, uint64_t gen, int rc,
                              const si_error_t *err)
{
    drive_t *dr = &lib->drives[w->drive];
    bool current = gen == dr->gen && !dr->failed && dr->xfer == XFER_RUNNING;
    if (current) {
        dr->xfer = XFER_DONE;
        snprintf(dr->xfer_why, sizeof(dr->xfer_why), "%s",
                 rc == 0 ? "" : *err->text ? err->text : "fetch failed");
        if (dr->end_at_transfer) {
            /* the read ends at its modelled end, or now when the bytes came later */
            dr->end_at_transfer = false;
            double now = simclock_now(&lib->clock);
            push_event(lib, dr->op_end > now ? dr->op_end : now, EV_DRIVE, w->drive, gen);
        }
    }
    /* An abandoned transfer's result is dropped; its retry is due now. */
    if (current || w->retry_pending)
        push_event(lib, simclock_now(&lib->clock), EV_TRANSFER, w->drive, gen);
}

static void step_due(simlib_t *lib);

static void *transfer_main(void *arg)
{
    transfer_worker_t *w = arg;
    simlib_t *lib = w->lib;
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
        transfer_finished(lib, w, gen, rc, &err);
        if (lib->stop)
            break;
        /* The worker runs what is due itself: when the modelled read is over,
         * the drive's next read starts (and is posted to this worker) at once,
         * without two hand-offs through the engine thread per object. The
         * engine thread is woken only when it sleeps past a new event. */
        step_due(lib);
        if (lib->nheap > 0 && lib->heap[0].t < lib->engine_sleeps_until)
            pthread_cond_signal(&lib->cv);
    }
    pthread_mutex_unlock(&lib->mu);
    return NULL;
}

/* A drive failed during its read: the transfer is abandoned. Returns true
 * when its fetch is still running (the read is then retried once it
 * returned, by transfer_event). */
static bool transfer_abandon(simlib_t *lib, int d)
{
    drive_t *dr = &lib->drives[d];
    transfer_worker_t *w = lib->workers ? &lib->workers[d] : NULL;
    bool running = false;
    if (w && dr->xfer == XFER_RUNNING) {
        atomic_store(&w->abandoned, true);
        w->posted = false; /* not taken yet: never runs */
        running = w->busy;
    }
    dr->xfer = XFER_NONE;
    dr->read_elapsed = false;
    dr->end_at_transfer = false;
    return running;
}

static void drive_event(simlib_t *lib, int d)
{
    drive_t *dr = &lib->drives[d];
    const tape_profile_t *p = &lib->cfg.profile;
    switch (dr->op) {
    case OP_UNLOAD:
        /* Rewound and unloaded: the robot takes the cartridge home. */
        dr->head = 0;
        dr->state = DRIVE_WAIT_ROBOT;
        dr->op = OP_NONE;
        robot_request(lib, d, false, dr->volume);
        break;
    case OP_LOAD:
        dr->state = DRIVE_IDLE;
        dr->op = OP_NONE;
        dr->head = 0;
        dr->mounts++;
        lib->st.mounts++;
        if (dr->has_write) {
            start_write(lib, d);
        } else if (!start_next_read(lib, d)) {
            lib->dispatch_needed = true;
        }
        break;
    case OP_POSITION: {
        dr->head = dr->read.offset;
        const simlib_fault_t *bad = bad_region(lib, dr->read.volume, dr->read.offset,
                                               dr->read.offset + dr->read.size);
        /* A read into a bad region fails when the head reaches it. */
        uint64_t upto = bad && bad->start > dr->read.offset ? bad->start : dr->read.offset;
        double t = bad ? tape_read_time(p, upto - dr->read.offset)
                       : tape_read_time(p, dr->read.size);
        drive_op(lib, d, OP_READ, DRIVE_READING, t);
        if (!bad && lib->workers)
            transfer_start(lib, d);
        break;
    }
    case OP_READ: {
        const simlib_fault_t *bad = bad_region(lib, dr->read.volume, dr->read.offset,
                                               dr->read.offset + dr->read.size);
        lib->st.read_s += dr->op_end - dr->op_start;
        dr->head = bad ? (bad->start > dr->read.offset ? bad->start : dr->read.offset)
                       : dr->read.offset + dr->read.size;
        if (dr->xfer == XFER_RUNNING) {
            /* the bytes are still moving: the read ends when they are in */
            dr->read_elapsed = true;
            break;
        }
        read_complete(lib, d);
        break;
    }
    case OP_WRITE_POSITION:
        dr->head = lib->cfg.volumes[dr->volume].used;
        drive_op(lib, d, OP_WRITE, DRIVE_WRITING, tape_read_time(p, dr->write.size));
        break;
    case OP_WRITE: {
        simlib_volume_t *v = &lib->cfg.volumes[dr->volume];
        uint64_t at = v->used;
        v->used += dr->write.size;
        dr->head = v->used;
        dr->has_write = false;
        dr->op = OP_NONE;
        dr->state = DRIVE_IDLE;
        if (lib->cb.read_done) {
            simlib_read_t rr = {0, dr->write.object, dr->volume, d, at, dr->write.size,
                                lib->now, true, NULL, NULL};
            lib->cb.read_done(lib->cb.arg, &rr);
        }
        lib->dispatch_needed = true;
        break;
    }
    default:
        break;
    }
}

static void robot_event(simlib_t *lib, int r)
{
    robot_t *rb = &lib->robots[r];
    rb->busy = false;
    rb->last_end = lib->now;
    volstate_t *vs = &lib->vols[rb->volume];
    vs->moving = false;
    drive_t *dr = &lib->drives[rb->drive];
    if (rb->to_drive) {
        vs->reserved = false;
        if (dr->volume >= 0)
            violation(lib, "volume %s loaded into drive %d which holds %s",
                      lib->cfg.volumes[rb->volume].label, rb->drive,
                      lib->cfg.volumes[dr->volume].label);
        vs->in_drive = rb->drive;
        dr->volume = rb->volume;
        dr->target = -1;
        dr->head = 0;
        if (dr->failed) {
            /* Arrived at a drive that failed meanwhile: take it back. */
            robot_request(lib, rb->drive, false, rb->volume);
        } else {
            drive_op(lib, rb->drive, OP_LOAD, DRIVE_LOADING, lib->cfg.profile.load_s);
        }
    } else {
        vs->in_drive = -1;
        if (dr->volume == rb->volume)
            dr->volume = -1;
        lib->dispatch_needed = true; /* the volume is available again */
        if (!dr->failed) {
            dr->state = DRIVE_EMPTY;
            if (dr->target >= 0) {
                dr->state = DRIVE_WAIT_ROBOT;
                robot_request(lib, rb->drive, true, dr->target);
            }
        }
    }
    robot_start_jobs(lib);
}

/* No working drive, or the volume is not in a working drive and no robot
 * works: its queued reads can never be served. */
static void fail_unreachable(simlib_t *lib)
{
    bool any_drive = false, any_robot = false;
    for (int d = 0; d < lib->cfg.drives; d++)
        any_drive |= !lib->drives[d].failed;
    for (int r = 0; r < lib->cfg.robots; r++)
        any_robot |= !lib->robots[r].failed;
    if (any_drive && any_robot)
        return;
    /* Repeated: a lost volume's reads move to other copies, which may be
     * out of reach too. */
    for (int round = 0; round <= SCHED_MAX_COPIES; round++) {
        bool moved = false;
        for (int v = 0; v < lib->cfg.nvolumes; v++) {
            volstate_t *vs = &lib->vols[v];
            bool mounted_ok = vs->in_drive >= 0 && !lib->drives[vs->in_drive].failed &&
                              !vs->moving;
            if (mounted_ok)
                continue;
            vs->lost = true;
            if (sched_volume_queued(lib->sched, v) == 0)
                continue;
            char why[200];
            snprintf(why, sizeof(why), "volume %s cannot be mounted: %s",
                     lib->cfg.volumes[v].label,
                     any_drive ? "no working robot" : "no working drive");
            sched_volume_lost(lib->sched, v, lib->now, why);
            moved = true;
        }
        if (!moved)
            break;
    }
    lib->dispatch_needed = true;
}

static void fault_event(simlib_t *lib, const simlib_fault_t *f)
{
    if (f->kind == FAULT_ROBOT) {
        /* A robot in the middle of a move finishes it, then stops. */
        lib->robots[f->index].failed = true;
        fail_unreachable(lib);
        return;
    }
    if (f->kind != FAULT_DRIVE)
        return;
    drive_t *dr = &lib->drives[f->index];
    if (dr->failed)
        return;
    dr->failed = true;
    dr->gen++; /* its pending operation never completes */
    if (dr->has_read) {
        /* Interrupted read: retried, on another drive once the cartridge is
         * out (and its abandoned transfer has stopped). */
        if (dr->op == OP_READ && lib->now > dr->op_start)
            lib->st.read_s += (lib->now < dr->op_end ? lib->now : dr->op_end) - dr->op_start;
        if (transfer_abandon(lib, f->index)) {
            lib->workers[f->index].retry_pending = true;
            lib->workers[f->index].retry = dr->read;
        } else {
            sched_read_retry(lib->sched, &dr->read);
        }
        dr->has_read = false;
    }
    if (dr->has_write) {
        write_job_t w = dr->write;
        dr->has_write = false;
        if (si_array_grow((void **)&lib->writes, &lib->cap_writes, lib->nwrites + 1, sizeof(w)) == 0)
            lib->writes[lib->nwrites++] = w;
    }
    if (dr->target >= 0 && dr->state == DRIVE_WAIT_ROBOT && dr->volume < 0) {
        /* Cancel a pending fetch that has not started. */
        for (size_t i = 0; i < lib->nrjobs; i++)
            if (lib->rjobs[i].drive == f->index && lib->rjobs[i].to_drive) {
                lib->vols[lib->rjobs[i].volume].reserved = false;
                memmove(&lib->rjobs[i], &lib->rjobs[i + 1],
                        (lib->nrjobs - i - 1) * sizeof(robot_job_t));
                lib->nrjobs--;
                break;
            }
        dr->target = -1;
    }
    /* A volume chosen but not yet on its way (the drive was still unloading
     * its previous one) is free for the other drives again. */
    if (dr->target >= 0 && !lib->vols[dr->target].moving)
        lib->vols[dr->target].reserved = false;
    dr->target = -1;
    bool robot_on_it = false;
    for (int r = 0; r < lib->cfg.robots; r++)
        robot_on_it |= lib->robots[r].busy && lib->robots[r].drive == f->index;
    for (size_t i = 0; i < lib->nrjobs; i++)
        robot_on_it |= lib->rjobs[i].drive == f->index && !lib->rjobs[i].to_drive;
    if (dr->volume >= 0 && !robot_on_it) {
        /* The cartridge is ejected from the dead drive and taken home. */
        sched_volume_released(lib->sched, dr->volume);
        robot_request(lib, f->index, false, dr->volume);
    }
    dr->state = DRIVE_FAILED;
    fail_unreachable(lib);
    lib->dispatch_needed = true;
}

static void process_event(simlib_t *lib, const event_t *e)
{
    lib->now = e->t;
    switch (e->kind) {
    case EV_ARRIVAL: {
        arrival_t *a = &lib->arrivals[e->index];
        si_error_t err = {{0}};
        double c0 = thread_cpu();
        if (sched_submit(lib->sched, lib->now, &a->req, a->files, a->n, &err) == 0)
            lib->open_requests++;
        else if (lib->cb.request_done)
            lib->cb.request_done(lib->cb.arg, a->req.id, lib->now, a->n, err.text);
        lib->st.sched_cpu_s += thread_cpu() - c0;
        free(a->files);
        a->files = NULL;
        lib->st.requests++;
        lib->dispatch_needed = true;
        break;
    }
    case EV_DRIVE:
        if (e->gen == lib->drives[e->index].gen && !lib->drives[e->index].failed)
            drive_event(lib, e->index);
        break;
    case EV_ROBOT:
        robot_event(lib, e->index);
        break;
    case EV_WAKE:
        lib->dispatch_needed = true;
        break;
    case EV_FAULT:
        fault_event(lib, &lib->cfg.faults[e->index]);
        break;
    case EV_TRANSFER:
        transfer_event(lib, e->index, e->gen);
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
    simlib_volume_t *v = realloc(cfg->volumes, (size_t)(cfg->nvolumes + 1) * sizeof(*v));
    if (!v)
        return si_errprintf(err, "out of memory");
    cfg->volumes = v;
    snprintf(v[cfg->nvolumes].label, sizeof(v->label), "%s", label);
    v[cfg->nvolumes].used = used;
    cfg->nvolumes++;
    return 0;
}

int simlib_config_add_fault(simlib_config_t *cfg, const simlib_fault_t *f, si_error_t *err)
{
    simlib_fault_t *a = realloc(cfg->faults, (cfg->nfaults + 1) * sizeof(*a));
    if (!a)
        return si_errprintf(err, "out of memory");
    cfg->faults = a;
    a[cfg->nfaults++] = *f;
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
    lib->cfg = *cfg;
    lib->cfg.volumes = malloc((size_t)cfg->nvolumes * sizeof(simlib_volume_t));
    lib->cfg.faults = malloc((cfg->nfaults + 1) * sizeof(simlib_fault_t));
    lib->drives = calloc((size_t)cfg->drives, sizeof(drive_t));
    lib->robots = calloc((size_t)cfg->robots, sizeof(robot_t));
    lib->vols = calloc((size_t)cfg->nvolumes, sizeof(volstate_t));
    lib->unavailable = calloc((size_t)cfg->nvolumes, 1);
    if (!lib->cfg.volumes || !lib->cfg.faults || !lib->drives || !lib->robots || !lib->vols ||
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
    pthread_mutex_init(&lib->mu, NULL);
    pthread_cond_init(&lib->cv, NULL);
    pthread_cond_init(&lib->idle_cv, NULL);
    if (lib->clock.real && lib->cb.fetch) {
        if (!(lib->workers = calloc((size_t)cfg->drives, sizeof(transfer_worker_t)))) {
            si_errprintf(err, "out of memory");
            simlib_free(lib);
            return NULL;
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
            push_event(lib, cfg->faults[i].at, EV_FAULT, (int)i, 0);
    return lib;
error:
    sched_free(lib->sched);
    free(lib->cfg.volumes);
    free(lib->cfg.faults);
    free(lib->drives);
    free(lib->robots);
    free(lib->vols);
    free(lib->unavailable);
    free(lib);
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
        rc = push_event(lib, at, EV_ARRIVAL, (int)lib->narrivals, 0);
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
        push_event(lib, current_time(lib), EV_WAKE, 0, 0);
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
        simlib_fault_t *a = realloc(lib->cfg.faults, (lib->cfg.nfaults + 1) * sizeof(*a));
        if (!a) {
            rc = si_errprintf(err, "out of memory");
        } else {
            lib->cfg.faults = a;
            a[lib->cfg.nfaults] = *f;
            if (f->kind != FAULT_REGION) {
                double now = current_time(lib);
                push_event(lib, f->at > now ? f->at : now, EV_FAULT, (int)lib->cfg.nfaults, 0);
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
        event_t e = pop_event(lib);
        process_event(lib, &e);
        /* Dispatch once all events of this instant are in. */
        if (lib->dispatch_needed && (lib->nheap == 0 || lib->heap[0].t > e.t))
            dispatch_all(lib);
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
            dispatch_all(lib);
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
            violation(lib, "stalled at %.1f s with %zu reads queued", lib->now,
                      sched_queued(lib->sched));
            break;
        }
        fail_unreachable(lib);
        dispatch_all(lib);
        if (lib->nheap == 0)
            break;
    }
    if (lib->open_requests > 0)
        violation(lib, "%llu requests never completed", (unsigned long long)lib->open_requests);
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
        event_t e = pop_event(lib);
        process_event(lib, &e);
    }
    lib->now = due;
    if (lib->dispatch_needed)
        dispatch_all(lib);
    fail_unreachable(lib);
    if (lib->dispatch_needed)
        dispatch_all(lib);
}

static void *engine_thread(void *arg)
{
    simlib_t *lib = arg;
    pthread_mutex_lock(&lib->mu);
    while (!lib->stop) {
        step_due(lib);
        double next = lib->nheap > 0 ? lib->heap[0].t : INFINITY;
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
            drive_op(lib, drive, OP_LOAD, DRIVE_LOADING, ready_s);
    }
    pthread_mutex_unlock(&lib->mu);
    return rc;
}
