/* The daemon's log: one object passed in contexts (never a global), writing
 * "time level message" lines to stderr or a file, or to syslog. Thread safe. */
#ifndef SI_LOG_H
#define SI_LOG_H

#include <stdarg.h>
#include <stdbool.h>

#include "common/error.h"

typedef enum {
    SI_LOG_ERROR = 0,
    SI_LOG_WARNING,
    SI_LOG_NOTICE,
    SI_LOG_INFO,
    SI_LOG_DEBUG,
} si_log_level_t;

typedef struct si_log si_log_t;

typedef struct {
    const char *ident;      /* program name: syslog ident and line prefix */
    si_log_level_t level;   /* messages above this level are dropped */
    const char *file;       /* append to this file; NULL: stderr */
    bool syslog;            /* syslog(3) instead of stderr/file */
    bool stderr_too;        /* with file or syslog, copy to stderr as well */
} si_log_opts_t;

si_log_t *si_log_open(const si_log_opts_t *opts, si_error_t *err);
/* Reopens the file (after rotation) and applies a new level; on failure the
 * old destination stays in use. */
int si_log_reopen(si_log_t *log, const si_log_opts_t *opts, si_error_t *err);
void si_log_close(si_log_t *log);

void si_log(si_log_t *log, si_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void si_vlog(si_log_t *log, si_log_level_t level, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
bool si_log_enabled(const si_log_t *log, si_log_level_t level);

/* "error|warning|notice|info|debug" <-> level; -1 for an unknown name. */
int si_log_level_parse(const char *name);
const char *si_log_level_name(si_log_level_t level);

#endif
