/* Running the stagein command for a job from the root prolog and epilog:
 * as the job's user (so stageind sees the user's MUNGE identity and the
 * files' permissions apply), with a clean environment, bounded in time. */
#ifndef SPANK_RUN_H
#define SPANK_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/error.h"

typedef struct {
    uid_t uid;                 /* the user to run as (root runs as is) */
    gid_t gid;
    double timeout_s;          /* then SIGTERM, and SIGKILL 2 s later */
    char *const *env;          /* the environment; NULL: only PATH and LC_ALL */
} run_as_t;

/* Runs argv[0] (an absolute path) with argv; its stdout and stderr together
 * land in out (NUL-terminated, the first size-1 bytes kept). Returns its exit
 * status (128+N when killed by signal N), or -1 with err when it could not
 * be run or did not end within the timeout. */
int run_command(const run_as_t *as, char *const argv[], char *out, size_t size,
                si_error_t *err);

/* Starts argv detached from the caller (own session, stdio to log_path), as
 * the user; *pid is the command's process. -1 when it could not start. */
int run_detached(const run_as_t *as, char *const argv[], const char *log_path, pid_t *pid,
                 si_error_t *err);

/* SIGTERM to pid, SIGKILL after grace_s if it still runs. true when it is
 * gone (or was already). Only for processes run_detached started. */
bool run_stop(pid_t pid, double grace_s);

#endif
