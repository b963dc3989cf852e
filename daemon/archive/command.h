/* Running a site's command on a batch of paths (the hsm backend's stage and
 * archive commands): `/bin/sh -c '<command> "$@"' stagein PATH...`, so the
 * paths arrive as arguments appended to the configured command line, in
 * its own process group, stdin from /dev/null, stdout and stderr captured
 * (the tail kept for error messages), bounded by a time limit after which
 * the whole group gets SIGTERM and, 5 s later, SIGKILL. */
#ifndef STAGEIN_ARCHIVE_COMMAND_H
#define STAGEIN_ARCHIVE_COMMAND_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

#define ARCHIVE_COMMAND_OUTPUT_MAX 2048

typedef struct {
    int status;                /* exit status; -1 when a signal ended it */
    int signal;                /* the signal that ended it, or 0 */
    bool timed_out;            /* the limit passed (or stop was set): it was killed */
    double seconds;            /* how long it ran */
    char output[ARCHIVE_COMMAND_OUTPUT_MAX]; /* the end of its output, NUL-terminated */
} archive_command_result_t;

/* Runs command on paths[0..n). stop (may be NULL) is polled: set, it ends
 * the command as the time limit does. Returns 0 when the command ran
 * (res says how it ended), -1 when it could not be started. */
int archive_command_run(const char *command, const char *const *paths, size_t n,
                        double timeout_s, const atomic_bool *stop,
                        archive_command_result_t *res, si_error_t *err);

/* "exited with status 3: <last line of output>", "timed out after 5 s", ...
 * into out, for an item's failure reason. */
void archive_command_describe(const archive_command_result_t *res, double timeout_s, char *out,
                              size_t size);

#endif
