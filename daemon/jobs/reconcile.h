/* Requests against Slurm's jobs: which holders are gone (their job or array
 * ended, or no job ever claimed a submission) and which submissions Slurm
 * has named. Pure: the caller lists holders and jobs, then applies the plan. */
#ifndef STAGEIN_JOBS_RECONCILE_H
#define STAGEIN_JOBS_RECONCILE_H

#include <stddef.h>

#include "catalog/requests.h"
#include "common/error.h"
#include "daemon/jobs/slurm.h"

typedef enum {
    RECONCILE_UNHOLD,          /* the holder goes (why says why) */
    RECONCILE_RESOLVE,         /* the submission holder becomes to_kind/to */
} reconcile_verb_t;

typedef struct {
    reconcile_verb_t verb;
    int64_t request_id;
    char uuid[REQUESTS_UUID_LEN + 1];
    requests_holder_kind_t kind;   /* the holder acted on */
    char holder[96];
    requests_holder_kind_t to_kind;
    char to[24];
    char why[200];
} reconcile_action_t;

/* A submission matches a job of the same uid submitted by the same session
 * (sid) from the second the request was made to grace_s after it, that no
 * request names (known: the jobs of recent requests, released ones too);
 * one no job matched by then is dropped. now: unix seconds. */
int reconcile_plan(const requests_holder_t *holders, size_t nholders,
                   const requests_job_id_t *known, size_t nknown, const slurm_job_t *jobs,
                   size_t njobs, double now, double grace_s, reconcile_action_t **plan,
                   size_t *nplan, si_error_t *err);

#endif
