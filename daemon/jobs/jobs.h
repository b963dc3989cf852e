/* The life of requests after they are accepted (stageind's "jobs" service):
 * pins expire after their lifetime, and requests held by Slurm jobs are
 * reconciled against Slurm (squeue at a bounded rate), so that no path -
 * scancel while pending, a node failure, an epilog that could not reach
 * stageind - leaves a request and its pins behind; the history older than
 * catalog.history_days is purged. One thread; woken early when a holder
 * goes (an array task ended). */
#ifndef STAGEIN_JOBS_H
#define STAGEIN_JOBS_H

#include <limits.h>
#include <stdbool.h>

#include "catalog/catalog.h"
#include "common/conf.h"
#include "common/error.h"
#include "common/log.h"

/* Group "slurm". */
extern const si_conf_key_t jobs_conf_keys[];

typedef struct {
    char squeue[PATH_MAX];     /* "": no reconciliation against Slurm */
    double interval_s;         /* between passes */
    double timeout_s;          /* for one squeue */
    double submission_grace_s; /* a submission no job claimed by then is dropped */
    double expiry_interval_s;  /* between pin expiry checks */
    double history_days;       /* older history is purged (catalog.history_days; 0: kept) */
} jobs_conf_t;

int jobs_conf_from(const si_conf_t *conf, jobs_conf_t *out, si_error_t *err);

typedef struct jobs_service jobs_service_t;

typedef struct {
    const catalog_open_opts_t *catalog; /* the service opens a connection of its own */
    jobs_conf_t conf;
    si_log_t *log;
} jobs_opts_t;

jobs_service_t *jobs_service_start(const jobs_opts_t *opts, si_error_t *err);
/* Runs a pass soon (a holder went, or a request was bound). */
void jobs_service_wake(jobs_service_t *j);
void jobs_service_stop(jobs_service_t *j);

#endif
