/* The scheduler's state, shared by sched.c and volume_choice.c only. */
#ifndef STAGEIN_SCHED_INTERNAL_H
#define STAGEIN_SCHED_INTERNAL_H

#include "daemon/sched/sched.h"

enum { OBJ_QUEUED, OBJ_READING, OBJ_DONE, OBJ_FAILED };

typedef struct {
    uint64_t id;
    sched_copy_t copies[SCHED_MAX_COPIES];
    uint8_t ncopies;
    uint8_t state;
    uint8_t tried;        /* copies that failed */
    uint8_t eligible;     /* copies whose volume queue may serve it now */
    uint8_t mark;         /* scratch: deduplication while planning */
    int priority;         /* highest priority among its requests */
    uint64_t seq;         /* arrival order, for FIFO */
    double arrival;
    long waiters;         /* head of its list in sched.waiters, -1 none */
    char *why;            /* failure reason (OBJ_FAILED) */
} obj_t;

typedef struct {
    uint64_t id;
    int priority;
    double deadline;
    double arrival;
    size_t nfiles;
    size_t remaining;
    size_t failed;
    char why[256];
} req_t;

typedef struct {
    size_t req;
    long next;
} waiter_t;

/* Open addressing map uint64 -> index. */
typedef struct {
    uint64_t *keys;
    size_t *vals;
    size_t cap;           /* power of two; 0 = empty */
    size_t n;
} idmap_t;

typedef struct {
    size_t *items;        /* object indices; stale entries are skipped lazily */
    size_t n, cap;
    size_t *plan;         /* read order of the current mount */
    size_t plan_n, plan_pos;
    bool planned;
    size_t merged;        /* items[0..merged) are in the plan */
    /* A plan prepared (for its pass time) but not started: reused by the
     * next mount while nothing joined the queue (version), and its files,
     * bytes and the head are the same. */
    uint64_t version;     /* bumped by every push */
    bool prepared;
    uint64_t prep_version;
    size_t prep_files;
    uint64_t prep_bytes, prep_head;
    double prep_pass_s;   /* planned pass time: positioning + reads */
    bool critical;        /* job-aware: chosen by the makespan guard */
} vq_t;

struct sched {
    const sched_policy_t *policy;
    sched_options_t opt;
    sched_callbacks_t cb;
    tape_cost_model_t costs;
    obj_t *objs;
    size_t nobjs, cap_objs;
    req_t *reqs;
    size_t nreqs, cap_reqs;
    waiter_t *waiters;
    size_t nwaiters, cap_waiters;
    idmap_t obj_ids, req_ids;
    vq_t *vq;
    uint64_t seq;
    size_t nqueued;       /* objects in OBJ_QUEUED */
    size_t open_requests;
    size_t failed_objects;
};

/* Index of v among the object's copies, or -1. */
int sched_copy_index(const obj_t *o, int volume);
/* Is this queue entry a read the volume may serve now? */
bool sched_entry_live(const sched_t *s, size_t obj, int volume);

/* Has the volume at least one live queued read? */
bool sched_volume_has_work(const sched_t *s, int volume);

#endif
