/* The daemon's process chores, shaped like munged's: detach with a pipe so
 * the parent exits only once start-up succeeded, one instance per state
 * directory (a lock file), and a pid file. */
#ifndef STAGEIN_DAEMON_PROCESS_H
#define STAGEIN_DAEMON_PROCESS_H

#include <stdbool.h>
#include <sys/types.h>

#include "common/error.h"

/* Forks into the background. Returns in the daemon process only, with
 * *notify_fd open: write the start-up result with process_started(). The
 * parent waits on the pipe and exits 0 on success, or prints the child's
 * error and exits 1. */
int process_daemonize(int *notify_fd, si_error_t *err);
/* Reports start-up to the waiting parent (error NULL: success) and closes
 * the pipe; no-op when fd < 0 (foreground). */
void process_started(int fd, const char *error);

/* Takes an exclusive lock on path and writes our pid into it. Another
 * holder: -1 with its pid named in err (and in *holder when not NULL).
 * The lock lasts until process_unlock or exit. */
int process_lock(const char *path, int *fd, pid_t *holder, si_error_t *err);
void process_unlock(int fd);

int process_write_pid(const char *path, si_error_t *err);

/* mkdir -p with mode for the missing components. */
int process_mkdirs(const char *path, mode_t mode, si_error_t *err);

/* The state directory is the service's own: others may reach the sockets
 * in it (0711) but list and read nothing; the catalog files are 0600
 * (made so also where an older version left them readable). */
int process_private_state(const char *state_dir, const char *catalog, si_error_t *err);

#endif
