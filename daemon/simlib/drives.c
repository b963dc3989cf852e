/* The simulated library's drives, robots and faults: what each event does to
 * them, and the byte transfers of real-time reads. The event loop in engine.c
 * calls down into these steps; they only push events back onto its heap. */
#include "config.h"
#include "daemon/simlib/engine.h"
#include "daemon/simlib/internal.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/simlib/clock.h"
#include "common/array.h"
#include "daemon/simlib/robot_ledger.h"

/* ---- helpers ---------------------------------------------------------------- */

void engine_violation(simlib_t *lib, const char *fmt, ...)
{
    if (lib->st.violations++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(lib->st.first_violation, sizeof(lib->st.first_violation), fmt, ap);
        va_end(ap);
    }
}

double engine_thread_cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static bool ev_less(const event_t *a, const event_t *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static int push_event(simlib_t *lib, event_t e)
{
    if (si_array_grow((void **)&lib->heap, &lib->cap_heap, lib->nheap + 1, sizeof(event_t)) < 0)
        return -1;
    e.seq = lib->seq++;
    size_t i = lib->nheap++;
    while (i > 0 && ev_less(&e, &lib->heap[(i - 1) / 2])) {
        lib->heap[i] = lib->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    lib->heap[i] = e;
    return 0;
}

int engine_push_event(simlib_t *lib, double t, int kind, int index, uint64_t gen)
{
    return push_event(lib, (event_t){.t = t, .kind = kind, .index = index, .gen = gen});
}

double engine_next_wake(const simlib_t *lib)
{
    if (lib->nheap == 0)
        return INFINITY;
    if (!lib->heap[0].worker)
        return lib->heap[0].t;
    /* a few events (drives, robots, arrivals): a scan costs less than a wake */
    double next = INFINITY;
    for (size_t i = 1; i < lib->nheap; i++)
        if (!lib->heap[i].worker && lib->heap[i].t < next)
            next = lib->heap[i].t;
    return next;
}

event_t engine_pop_event(simlib_t *lib)
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

/* The robot for the next move: a working one this engine is not moving;
 * with shared robots, the one free soonest for every instance, booked, and
 * *wait how long (simulated seconds) its moves for others take first.
 * -1: none. */
static int robot_choose(simlib_t *lib, double *wait)
{
    *wait = 0;
    int first = -1;
    for (int r = 0; r < lib->cfg.robots; r++) {
        lib->robot_usable[r] = !lib->robots[r].failed && !lib->robots[r].busy;
        if (first < 0 && lib->robot_usable[r])
            first = r;
    }
    if (first < 0 || !lib->cfg.shared_robots || !lib->clock.real)
        return first;
    int r;
    double wait_s;
    si_error_t err;
    if (robot_ledger_book(lib->cfg.shared_robots, lib->robot_usable,
                          lib->cfg.profile.robot_move_s * lib->clock.scale, &r, &wait_s,
                          &err) < 0) {
        lib->st.robot_ledger_errors++; /* the move goes ahead, unshared */
        return first;
    }
    *wait = wait_s / lib->clock.scale;
    return r;
}

static void robot_start_jobs(simlib_t *lib)
{
    while (lib->nrjobs > 0) {
        double wait;
        int r = robot_choose(lib, &wait);
        if (r < 0)
            break;
        robot_t *rb = &lib->robots[r];
        robot_job_t job = lib->rjobs[0];
        memmove(lib->rjobs, lib->rjobs + 1, (lib->nrjobs - 1) * sizeof(robot_job_t));
        lib->nrjobs--;
        if (lib->now < rb->last_end)
            engine_violation(lib, "robot %d started a move at %.3f before its previous one ended "
                             "at %.3f", r, lib->now, rb->last_end);
        volstate_t *vs = &lib->vols[job.volume];
        if (job.to_drive && vs->in_drive >= 0)
            engine_violation(lib, "volume %s moved to drive %d while in drive %d",
                             lib->cfg.volumes[job.volume].label, job.drive, vs->in_drive);
        vs->moving = true;
        if (!job.to_drive)
            vs->in_drive = -1;
        rb->busy = true;
        rb->drive = job.drive;
        rb->to_drive = job.to_drive;
        rb->volume = job.volume;
        rb->busy_until = lib->now + wait + lib->cfg.profile.robot_move_s;
        lib->st.robot_moves++;
        lib->st.robot_wait_s += wait;
        engine_push_event(lib, rb->busy_until, EV_ROBOT, r, 0);
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
    dr->stream_end = 0;
}

void engine_drive_op(simlib_t *lib, int d, int op, simlib_drive_state_t state, double duration)
{
    drive_op_begin(lib, d, op, state, duration);
    engine_push_event(lib, lib->drives[d].op_end, EV_DRIVE, d, lib->drives[d].gen);
}

static int sched_choose(simlib_t *lib, int d, double *wake_at)
{
    drive_t *dr = &lib->drives[d];
    for (int v = 0; v < lib->cfg.nvolumes; v++) {
        volstate_t *vs = &lib->vols[v];
        lib->unavailable[v] = vs->lost || vs->moving || vs->reserved ||
                              (vs->in_drive >= 0 && vs->in_drive != d);
    }
    double c0 = engine_thread_cpu();
    int v = sched_choose_volume(lib->sched, lib->now, dr->volume, dr->head, lib->unavailable,
                                wake_at);
    lib->st.sched_cpu_s += engine_thread_cpu() - c0;
    return v;
}

static void start_unload(simlib_t *lib, int d)
{
    drive_t *dr = &lib->drives[d];
    const tape_profile_t *p = &lib->cfg.profile;
    sched_volume_released(lib->sched, dr->volume);
    engine_drive_op(lib, d, OP_UNLOAD, DRIVE_UNLOADING,
                    tape_rewind_time(p, dr->head) + p->unload_s);
}

static void start_write(simlib_t *lib, int d)
{
    drive_t *dr = &lib->drives[d];
    const tape_profile_t *p = &lib->cfg.profile;
    uint64_t eod = lib->cfg.volumes[dr->volume].used;
    double t = tape_locate_time(p, dr->head, eod);
    lib->st.locate_s += t;
    engine_drive_op(lib, d, OP_WRITE_POSITION, DRIVE_POSITIONING, t);
}

static void transfer_start(simlib_t *lib, int d);

/* Starts the next read on the drive's mounted volume; false when none. */
static bool start_next_read(simlib_t *lib, int d)
{
    drive_t *dr = &lib->drives[d];
    sched_read_t r;
    double c0 = engine_thread_cpu();
    int got = sched_next_read(lib->sched, dr->volume, dr->head, lib->now, &r);
    lib->st.sched_cpu_s += engine_thread_cpu() - c0;
    if (!got)
        return false;
    const tape_profile_t *p = &lib->cfg.profile;
    if (r.volume != dr->volume || dr->state == DRIVE_EMPTY || lib->vols[r.volume].in_drive != d)
        engine_violation(lib, "read of object %llu from volume %d, not mounted in drive %d",
                         (unsigned long long)r.object_id, r.volume, d);
    /* Positioning, the drive's behaviour whatever the policy: a locate, or
     * streaming over the gap when that is quicker and the gap is readable. */
    bool streamed = false;
    double t = r.offset >= dr->head && bad_region(lib, r.volume, dr->head, r.offset)
                   ? tape_locate_time(p, dr->head, r.offset)
                   : tape_seek_time(p, dr->head, r.offset, &streamed);
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
        double duration = t + tape_read_time(p, r.size);
        /* The drive's buffer: after a streaming read the tape read on while
         * the host finished it late, up to the buffer's worth, so this read
         * began that much earlier (and may be over already: the host is
         * behind the tape); a read after a locate has nothing buffered. */
        double ahead = 0;
        if (dr->stream_end > 0 && (streamed || t == 0) && lib->now > dr->stream_end) {
            ahead = fmin(lib->now - dr->stream_end, p->buffer_bytes / p->rate);
            lib->st.buffered_s += ahead;
        }
        drive_op_begin(lib, d, OP_READ, DRIVE_READING, duration - ahead);
        dr->op_start += t - ahead; /* the read proper, for read_s */
        dr->end_at_transfer = true;
        transfer_start(lib, d);
        return true;
    }
    engine_drive_op(lib, d, OP_POSITION, DRIVE_POSITIONING, t);
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
            engine_push_event(lib, wake_at > lib->now ? wake_at : lib->now, EV_WAKE, d, 0);
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

void engine_dispatch_all(simlib_t *lib)
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
            engine_violation(lib, "object %llu read twice", (unsigned long long)r.object_id);
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
    dr->stream_end = dr->op_end; /* the next read may stream on from here */
    if (!start_next_read(lib, d))
        lib->dispatch_needed = true;
    dr->stream_end = 0;
}

/* Engine thread: a transfer of drive d (operation gen) returned. */
void engine_transfer_event(simlib_t *lib, int d, uint64_t gen)
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
void engine_transfer_finished(simlib_t *lib, transfer_worker_t *w, uint64_t gen, int rc,
                              const si_error_t *err)
{
    drive_t *dr = &lib->drives[w->drive];
    bool current = gen == dr->gen && !dr->failed && dr->xfer == XFER_RUNNING;
    if (current) {
        dr->xfer = XFER_DONE;
        snprintf(dr->xfer_why, sizeof(dr->xfer_why), "%s",
                 rc == 0 ? "" : *err->text ? err->text : "fetch failed");
        if (dr->end_at_transfer) {
            /* the read ends at its modelled end, or now when the bytes came
             * later; at its end, the worker (waiting for it) ends it and
             * starts the next read: no hand-off through the engine thread
             * per object, whose wake-up delays cost small objects a quarter
             * of the drive's time (BENCHMARKS.md, "Segment files") */
            dr->end_at_transfer = false;
            double now = simclock_now(&lib->clock);
            bool ahead = dr->op_end > now;
            push_event(lib, (event_t){.t = ahead ? dr->op_end : now, .kind = EV_DRIVE,
                                      .index = w->drive, .gen = gen, .worker = ahead});
            w->wait_until = ahead ? dr->op_end : 0;
        }
    }
    /* An abandoned transfer's result is dropped; its retry is due now. */
    if (current || w->retry_pending)
        engine_push_event(lib, simclock_now(&lib->clock), EV_TRANSFER, w->drive, gen);
}

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

void engine_drive_event(simlib_t *lib, int d)
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
        engine_drive_op(lib, d, OP_READ, DRIVE_READING, t);
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
        engine_drive_op(lib, d, OP_WRITE, DRIVE_WRITING, tape_read_time(p, dr->write.size));
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

void engine_robot_event(simlib_t *lib, int r)
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
            engine_violation(lib, "volume %s loaded into drive %d which holds %s",
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
            engine_drive_op(lib, rb->drive, OP_LOAD, DRIVE_LOADING, lib->cfg.profile.load_s);
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
void engine_fail_unreachable(simlib_t *lib)
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

void engine_fault_event(simlib_t *lib, const simlib_fault_t *f)
{
    if (f->kind == FAULT_ROBOT) {
        /* A robot in the middle of a move finishes it, then stops. */
        lib->robots[f->index].failed = true;
        engine_fail_unreachable(lib);
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
    engine_fail_unreachable(lib);
    lib->dispatch_needed = true;
}

