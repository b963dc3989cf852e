/* What Slurm says about its jobs, as stageind's job reconciliation needs it:
 * `squeue -h -a -t all -O ...` (fields a user cannot shape: ids, uid, state,
 * submit time, the submitting process's session), parsed into records. */
#ifndef STAGEIN_JOBS_SLURM_H
#define STAGEIN_JOBS_SLURM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "common/error.h"

typedef struct {
    char id[24];               /* this record's job id */
    char array_id[24];         /* the array's job id, "" when not an array */
    uid_t uid;
    char state[24];            /* PENDING, RUNNING, COMPLETED, ... */
    time_t submitted;          /* unix seconds (squeue's local time) */
    long sid;                  /* session id of the submitting process, -1 unknown */
} slurm_job_t;

/* The squeue argument vector after the program (NULL-terminated). */
extern const char *const slurm_squeue_args[];

/* Parses squeue's output (one record per line, fields as slurm_squeue_args
 * asks); err names the line of a malformed record. *jobs malloc'd. */
int slurm_jobs_parse(const char *text, slurm_job_t **jobs, size_t *n, si_error_t *err);

/* Runs squeue (its path) with SLURM_CONF from the environment, bounded by
 * timeout_s, and parses its output. -1 when it could not run, failed or
 * timed out (err says which, with its message). */
int slurm_jobs_query(const char *squeue, double timeout_s, slurm_job_t **jobs, size_t *n,
                     si_error_t *err);

/* True once the job's tasks are over for good (COMPLETING, COMPLETED,
 * CANCELLED, FAILED, ...): it needs its data no more. */
bool slurm_state_final(const char *state);

#endif
