/* Runs a workload on the virtual clock under one policy and measures it: the
 * benchmark's and the tests' common driver. */
#ifndef STAGEIN_SIMLIB_REPLAY_H
#define STAGEIN_SIMLIB_REPLAY_H

#include "daemon/simlib/workload.h"

typedef struct {
    double makespan_s;          /* last request completion */
    double mean_completion_s;   /* request completion - arrival, mean */
    double p95_completion_s;
    uint64_t mounts;
    double locate_s;            /* positioning time, all drives */
    double efficiency;          /* bytes / (drives x rate x makespan) */
    double cpu_s;               /* scheduler CPU seconds */
    uint64_t missed_deadlines;  /* requests with a deadline completed after it */
    double lateness_s;          /* sum of their lateness (completion - deadline) */
    uint64_t requests, requests_failed, reads, objects_failed;
    uint64_t violations;        /* broken engine invariants */
    char first_violation[256];
    char first_failure[256];    /* why the first failed request failed */
} replay_result_t;

int workload_replay(const workload_t *w, const sched_policy_t *policy, replay_result_t *out,
                    si_error_t *err);

#endif
