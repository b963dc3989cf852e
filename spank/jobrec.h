/* The prolog's record of a job on its node, for user_init and the epilog
 * (other processes): run_dir/job-<id>, root-owned, mode 0644, one
 * "key=value" line per fact (request, staging outcome, agent pid and socket,
 * notes for the job's output). A later line for a key replaces an earlier. */
#ifndef SPANK_JOBREC_H
#define SPANK_JOBREC_H

#include <stddef.h>

#include "common/error.h"

#define JOBREC_VALUE_MAX 1024

/* Appends key=value (newlines in value become spaces); creates run_dir
 * (0755) and the record as needed. */
int jobrec_set(const char *run_dir, const char *job, const char *key, const char *value,
               si_error_t *err);

/* The last value of key into buf: 1 found, 0 not (or no record), -1 error. */
int jobrec_get(const char *run_dir, const char *job, const char *key, char *buf, size_t size,
               si_error_t *err);

/* Removes the record; 0 also when there was none. */
int jobrec_remove(const char *run_dir, const char *job, si_error_t *err);

#endif
