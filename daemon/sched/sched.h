/* The recall scheduler: pending recall items per volume, the choice of the
 * volume a free drive mounts next (volume_choice.c) and the order of reads on
 * a mounted volume (read_order.c). It owns no drives and no clock: the
 * library engine (simlib/engine.h) asks it what to do, with the time, and
 * reports back. The same code runs in the daemon and in the benchmark.
 *
 * Objective: a job can start only when all of its files are staged, so the
 * quantity optimised is each request's completion time (weighted by priority,
 * urged by deadlines), not only the drives' throughput. Each decision says in
 * its comment which part of that objective it serves.
 *
 * Not thread-safe: one owner (the engine, under its lock) calls it. */
#ifndef STAGEIN_SCHED_H
#define STAGEIN_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "daemon/sched/read_order.h"
#include "daemon/tape/model.h"

#define SCHED_MAX_COPIES 4
#define SCHED_DEFAULT_POLICY "job-aware"

typedef enum {
    MOUNT_OLDEST,    /* volumes in order of their oldest request (FIFO) */
    MOUNT_DCACHE,    /* dCache-like: oldest past max-wait, else most queued bytes */
    MOUNT_CTA,       /* CTA-like: a queue qualifies by bytes, files or age */
    MOUNT_EDF,       /* earliest deadline among a volume's pending requests, then
                      * priority, then age */
    MOUNT_JOB_AWARE, /* request completion gained per second of drive time,
                      * under deadline feasibility checks */
} sched_mount_rule_t;

typedef enum {
    COPY_FIRST,      /* always the first copy; another only after a failure */
    COPY_LATE,       /* queued on every copy's volume; the first pass to reach it reads it */
} sched_copy_rule_t;

typedef struct {
    const char *name;
    const char *summary;
    sched_mount_rule_t mount;
    order_algo_t order;
    bool cta_costs;          /* order with CTA's heuristic instead of the true model */
    sched_copy_rule_t copies;
} sched_policy_t;

/* The policies, in benchmark order; the table ends with a NULL name. */
extern const sched_policy_t sched_policies[];
const sched_policy_t *sched_policy_find(const char *name, si_error_t *err);

typedef struct {
    int volume;           /* library volume index */
    uint64_t offset;      /* logical bytes from BOT */
    uint64_t size;
} sched_copy_t;

typedef struct {
    uint64_t object;      /* caller's id: equal ids are the same object */
    int ncopies;          /* 1..SCHED_MAX_COPIES */
    sched_copy_t copies[SCHED_MAX_COPIES];
} sched_file_t;

typedef struct {
    uint64_t id;
    int priority;         /* higher is served first; 0 is normal */
    double deadline;      /* absolute time the job wants its data by; <= 0: none */
} sched_request_t;

typedef struct {
    int nvolumes;
    tape_profile_t profile;
    double cta_min_bytes;      /* CTA-like queue qualification (500 GB) */
    double cta_min_files;      /* (10,000) */
    double cta_min_age_s;      /* (default 600 s) */
    double dcache_max_wait_s;  /* dCache-like (default 3600 s) */
    uint64_t order_max_evals;  /* local search bound, 0 = default */
    int drives;                /* drives serving the library (deadline feasibility
                                * checks); 0 = unknown, taken as 1 */
} sched_options_t;

/* The defaults of every option above; nvolumes and profile must be set. */
void sched_options_default(sched_options_t *opt);

typedef struct {
    /* A request finished: failed = how many of its files could not be recalled
     * (why: the first failure's reason, NULL when none). */
    void (*request_done)(void *arg, uint64_t request, double now, size_t failed,
                         const char *why);
    void *arg;
} sched_callbacks_t;

typedef struct sched sched_t;

sched_t *sched_new(const sched_policy_t *policy, const sched_options_t *opt,
                   const sched_callbacks_t *cb, si_error_t *err);
void sched_free(sched_t *s);
const sched_policy_t *sched_policy(const sched_t *s);

/* A request for n files at time now. An object already staged counts at
 * once; one queued or being read is shared (recalled once). Nothing changes
 * on failure (bad volume index, no copies, duplicate request id). */
int sched_submit(sched_t *s, double now, const sched_request_t *req, const sched_file_t *files,
                 size_t n, si_error_t *err);

/* ---- the engine's questions and reports -------------------------------- */

/* The volume a free drive should work on next: its own (drive_volume, head)
 * while that has queued reads, else another one. unavailable[v] != 0: in
 * another drive, moving, or out of reach. Returns -1 to stay idle; then
 * *wake_at is when the answer may change without new submissions (INFINITY
 * if never). */
int sched_choose_volume(sched_t *s, double now, int drive_volume, uint64_t head,
                        const uint8_t *unavailable, double *wake_at);

typedef struct {
    size_t object;        /* scheduler's index, for the reports below */
    uint64_t object_id;
    int volume;
    uint64_t offset;
    uint64_t size;
} sched_read_t;

/* The next read on the mounted volume from head: 1 with *out, 0 when its
 * queue is empty. The object is then "reading" until reported. */
int sched_next_read(sched_t *s, int volume, uint64_t head, double now, sched_read_t *out);
void sched_read_done(sched_t *s, const sched_read_t *r, double now);
/* The copy could not be read (why names volume and offset). Queues another
 * copy and returns 1, or fails the object for its requests and returns 0. */
int sched_read_failed(sched_t *s, const sched_read_t *r, double now, const char *why);
/* The read was interrupted (drive failure): queued again on the same volume. */
void sched_read_retry(sched_t *s, const sched_read_t *r);
/* The volume left its drive: its plan is rebuilt from the head at the next mount. */
void sched_volume_released(sched_t *s, int volume);
/* The volume can no longer be mounted: its queue moves to other copies or fails. */
void sched_volume_lost(sched_t *s, int volume, double now, const char *why);

/* Drive time a pass over the volume's queued reads takes from head (0 for
 * a volume about to be mounted), following the plan the policy makes: the
 * drive's locate-or-stream decision before each read, plus the reads. A
 * volume being read: what is left of its pass. The plan is kept for the
 * mount. -1 when out of memory. */
double sched_volume_pass_time(sched_t *s, int volume, uint64_t head);

/* ---- the read order seen from outside (a drive's Recommended Access Order) ---- */

typedef struct {
    uint64_t object_id;
    uint64_t offset, size;
} sched_pending_t;

/* The reads left in the mounted volume's pass from head, in the order
 * sched_next_read will give them (the pass is planned now when it was not):
 * up to max into out; returns how many. */
size_t sched_volume_plan(sched_t *s, int volume, uint64_t head, sched_pending_t *out, size_t max);
/* Reorders the rest of the volume's pass: the reads of ids[0..n) first, in
 * that order, then the others as they were. Ids not in the pass are
 * skipped. Returns how many reads were placed by ids. */
size_t sched_volume_reorder(sched_t *s, int volume, const uint64_t *ids, size_t n);
/* The model's estimated positioning time (seconds) of reading reads[0..n)
 * in that order from head: what an order is compared by. */
double sched_order_locate_time(const sched_t *s, uint64_t head, const sched_pending_t *reads,
                               size_t n);

/* Queued (not yet reading) objects, all volumes / one volume. */
size_t sched_queued(const sched_t *s);
size_t sched_volume_queued(const sched_t *s, int volume);
/* Objects that could not be recalled (no readable, reachable copy). */
size_t sched_failed_objects(const sched_t *s);
/* Requests not yet complete. */
size_t sched_open_requests(const sched_t *s);

#endif
