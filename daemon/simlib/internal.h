/* The simulated library's state, shared by the engine's own files only:
 * engine.c (the event loop, life cycle and public operations) calls the
 * drive, robot, fault and transfer steps in drives.c, never the reverse. */
#ifndef STAGEIN_SIMLIB_INTERNAL_H
#define STAGEIN_SIMLIB_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/simlib/clock.h"
#include "daemon/simlib/engine.h"

enum { EV_ARRIVAL, EV_DRIVE, EV_ROBOT, EV_WAKE, EV_FAULT, EV_TRANSFER };

typedef struct {
    double t;
    uint64_t seq;
    int kind;
    int index;
    uint64_t gen;         /* EV_DRIVE: the drive operation it ends */
    bool worker;          /* EV_DRIVE of a read whose transfer worker waits for it
                           * and handles it (the engine thread is not woken for it) */
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
    double stream_end;    /* the streaming read just ended: its modelled end, else 0 */
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
    double wait_until;    /* its read ends then (modelled): the worker handles the end */
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
    bool *robot_usable;       /* scratch of robot_choose, one per robot */
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

/* drives.c: the steps the event loop calls */
void engine_dispatch_all(simlib_t *lib);
void engine_drive_event(simlib_t *lib, int d);
void engine_drive_op(simlib_t *lib, int d, int op, simlib_drive_state_t state, double duration);
/* No working drive, or the volume is not in a working drive and no robot
 * works: its queued reads can never be served. */
void engine_fail_unreachable(simlib_t *lib);
void engine_fault_event(simlib_t *lib, const simlib_fault_t *f);
event_t engine_pop_event(simlib_t *lib);
int engine_push_event(simlib_t *lib, double t, int kind, int index, uint64_t gen);
/* The earliest event the engine thread must wake for (worker events left
 * out), INFINITY when none. */
double engine_next_wake(const simlib_t *lib);
void engine_robot_event(simlib_t *lib, int r);
double engine_thread_cpu(void);
/* Engine thread: a transfer of drive d (operation gen) returned. */
void engine_transfer_event(simlib_t *lib, int d, uint64_t gen);
/* Worker thread, engine lock held: the fetch of job (operation gen) returned. */
void engine_transfer_finished(simlib_t *lib, transfer_worker_t *w, uint64_t gen, int rc,
                              const si_error_t *err);
void engine_violation(simlib_t *lib, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
