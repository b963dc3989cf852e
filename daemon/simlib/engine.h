/* The simulated tape library engine: N drives, M slots, R robots (one move
 * at a time each), volumes with a fill level, driven by the recall scheduler
 * (sched/sched.h) on a clock (clock.h). Operations: mount and unmount (robot
 * contention), locate, read, write (append), position report. Faults: a drive
 * fails at time t, a robot fails at time t, an unreadable region on a volume.
 *
 * Invariants checked on every run (simlib_stats_t.violations): each object
 * read exactly once; a volume never in two drives; no read from a volume that
 * is not mounted in the reading drive; each robot's moves never overlap.
 *
 * Threads: every public function takes the engine's lock, so any thread may
 * submit, inject faults or read the state. In real-time mode simlib_start()
 * runs the library on its own thread; in virtual mode simlib_run() runs it to
 * completion on the caller's. request_done and read_done run on the engine's
 * thread with the lock held: they must not call simlib_* (hand the news to
 * your own queue).
 *
 * Byte transfers (real-time mode with a fetch callback): each drive has a
 * transfer worker thread. When a modelled read STARTS, its fetch is handed to
 * that drive's worker, which runs it WITHOUT the engine's lock, so the engine
 * thread never waits for data I/O and the drives' transfers overlap. The read
 * completes when both the modelled read time has elapsed and the fetch has
 * returned, whichever is later: a slow fetch delays only its own drive. fetch
 * calls for different drives run concurrently (it must be thread-safe); it
 * must not call simlib_* either. A drive that fails mid-read sets the read's
 * `abandoned` flag: the fetch should stop soon and return -1; its result is
 * discarded, and the read is queued again only after the fetch returned (so
 * two fetches of one object never overlap). simlib_stop abandons running
 * transfers the same way and joins the workers. */
#ifndef STAGEIN_SIMLIB_ENGINE_H
#define STAGEIN_SIMLIB_ENGINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/conf.h"
#include "common/error.h"
#include "daemon/sched/sched.h"
#include "daemon/tape/model.h"

#define SIMLIB_LABEL_MAX 32

typedef enum { FAULT_DRIVE, FAULT_ROBOT, FAULT_REGION } simlib_fault_kind_t;

typedef struct {
    simlib_fault_kind_t kind;
    int index;           /* drive or robot number (FAULT_DRIVE/ROBOT) */
    double at;           /* simulated time (FAULT_DRIVE/ROBOT) */
    int volume;          /* FAULT_REGION: volume index, or -1 to use label */
    char label[SIMLIB_LABEL_MAX + 1]; /* FAULT_REGION from configuration */
    uint64_t start;      /* FAULT_REGION: logical bytes */
    uint64_t length;
} simlib_fault_t;

typedef struct {
    char label[SIMLIB_LABEL_MAX + 1];
    uint64_t used;       /* bytes written (fill level) */
} simlib_volume_t;

typedef struct {
    int drives;
    int slots;
    int robots;
    double time_scale;   /* 0: virtual clock; > 0: real time scaled */
    tape_profile_t profile;
    int nvolumes;
    simlib_volume_t *volumes;   /* owned by the config */
    size_t cap_volumes;
    size_t nfaults, cap_faults;
    simlib_fault_t *faults;     /* owned by the config */
    /* Real time, optional (not owned): the robots are another library's
     * too, shared with other instances' engines (robot_ledger.h). */
    struct robot_ledger *shared_robots;
} simlib_config_t;

/* Group "library" (M's daemon/volume adds library.volume_dir). */
extern const si_conf_key_t library_conf_keys[];

/* Library shape, clock, profile (library.profile + the "tape" group) and
 * faults from conf; no volumes (the caller adds them). */
int simlib_config_from_conf(const si_conf_t *conf, simlib_config_t *cfg, si_error_t *err);
/* Defaults: 1 drive, 10 slots, 1 robot, virtual clock, LTO-9. */
void simlib_config_default(simlib_config_t *cfg);
int simlib_config_add_volume(simlib_config_t *cfg, const char *label, uint64_t used,
                             si_error_t *err);
int simlib_config_add_fault(simlib_config_t *cfg, const simlib_fault_t *f, si_error_t *err);
void simlib_config_free(simlib_config_t *cfg);

typedef struct {
    uint64_t request;    /* 0 for a write */
    uint64_t object;
    int volume;
    int drive;
    uint64_t offset, size;
    double t;            /* completion time */
    bool ok;
    const char *why;     /* failure reason when !ok */
    /* fetch only: becomes true when the engine gave up the read (drive
     * failure, simlib_stop); the fetch should stop and return -1. NULL in
     * read_done. */
    const atomic_bool *abandoned;
} simlib_read_t;

typedef struct {
    /* A request is complete (all files read, or failed ones listed). */
    void (*request_done)(void *arg, uint64_t request, double t, size_t failed, const char *why);
    /* One read finished (ok) or failed on this copy. */
    void (*read_done)(void *arg, const simlib_read_t *r);
    /* Real-time mode, optional: move the bytes of a read (e.g. through
     * daemon/volume's tapevol_read). Called on the drive's transfer worker,
     * without the engine's lock, as the modelled read starts; the read ends
     * when both are done. Returning -1 makes the read fail like an
     * unreadable region, with err's text. */
    int (*fetch)(void *arg, const simlib_read_t *r, si_error_t *err);
    void *arg;
} simlib_callbacks_t;

typedef struct simlib simlib_t;

simlib_t *simlib_new(const simlib_config_t *cfg, const sched_policy_t *policy,
                     const sched_options_t *opt, const simlib_callbacks_t *cb, si_error_t *err);
void simlib_free(simlib_t *lib);

/* A request arriving at simulated time at (earlier than now: now). */
int simlib_submit(simlib_t *lib, double at, const sched_request_t *req, const sched_file_t *files,
                  size_t n, si_error_t *err);
/* Appends size bytes of object at the end of data of a volume, at time at;
 * *offset receives where it was written once the engine has run it. */
/* The volume's fill level as read from its image again (another instance
 * of a shared site appended to it): its end of data moves forward to used
 * (never back). 0, or -1 when the volume does not exist. */
int simlib_volume_refill(simlib_t *lib, int volume, uint64_t used);
int simlib_write(simlib_t *lib, double at, int volume, uint64_t object, uint64_t size,
                 si_error_t *err);

/* Fault injection at run time (the config's faults are applied at start). */
int simlib_inject(simlib_t *lib, const simlib_fault_t *f, si_error_t *err);

/* Before the engine runs: drive holds volume with its head at head (a
 * forecast that starts from a running library's state); ready_s > 0: the
 * volume is still being mounted, for that many simulated seconds. */
int simlib_preload(simlib_t *lib, int drive, int volume, uint64_t head, double ready_s,
                   si_error_t *err);

/* Virtual clock: runs until no event is left. */
int simlib_run(simlib_t *lib, si_error_t *err);
/* Real-time clock: starts / stops the engine thread. */
int simlib_start(simlib_t *lib, si_error_t *err);
void simlib_stop(simlib_t *lib);
/* Real-time clock: waits until every submitted request is complete. */
void simlib_wait_idle(simlib_t *lib);
double simlib_now(simlib_t *lib);

typedef enum {
    DRIVE_EMPTY, DRIVE_IDLE, DRIVE_UNLOADING, DRIVE_WAIT_ROBOT, DRIVE_LOADING,
    DRIVE_POSITIONING, DRIVE_READING, DRIVE_WRITING, DRIVE_FAILED,
} simlib_drive_state_t;

const char *simlib_drive_state_name(simlib_drive_state_t s);

/* Position report of one drive. */
typedef struct {
    simlib_drive_state_t state;
    int volume;          /* -1 when empty */
    int target;          /* the volume it is about to mount (unloading, waiting
                          * for a robot), or -1 */
    uint64_t head;       /* logical offset */
    double busy_s;       /* simulated seconds left of the operation in progress */
    tape_pos_t pos;      /* physical position of the head */
    uint64_t mounts;
} simlib_drive_info_t;

int simlib_drive_info(simlib_t *lib, int drive, simlib_drive_info_t *info);
/* Where a volume is: its slot (-1 while moving or in a drive) and drive (-1). */
int simlib_volume_where(simlib_t *lib, int volume, int *slot, int *drive);

typedef struct {
    double now;
    double makespan;          /* last request completion */
    uint64_t requests, requests_failed;
    uint64_t reads, read_failures, objects_failed;
    uint64_t bytes_read;      /* requested bytes delivered */
    uint64_t mounts, robot_moves;
    double robot_wait_s;      /* moves waiting for another instance's (shared_robots) */
    uint64_t robot_ledger_errors; /* bookings that failed: those moves went unshared */
    double locate_s;          /* positioning: locates and reading through gaps */
    double read_s;
    double buffered_s;        /* drive time the buffer absorbed: the host was late
                               * with a read while the tape streamed on (real time) */
    double sched_cpu_s;       /* CPU seconds spent in scheduler decisions */
    uint64_t violations;      /* broken invariants (0 in a correct run) */
    char first_violation[256];
} simlib_stats_t;

void simlib_stats(simlib_t *lib, simlib_stats_t *st);

#endif
