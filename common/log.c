#include "config.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"

struct si_log {
    pthread_mutex_t lock;   /* one line at a time from every thread */
    char ident[64];
    si_log_level_t level;
    int fd;                 /* file or stderr; -1 with syslog only */
    bool own_fd;
    bool use_syslog;
    bool stderr_too;
};

static const char *const level_names[] = {"error", "warning", "notice", "info", "debug"};
static const int syslog_priorities[] = {LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO, LOG_DEBUG};

int si_log_level_parse(const char *name)
{
    for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
        if (name && strcmp(name, level_names[i]) == 0)
            return (int)i;
    return -1;
}

const char *si_log_level_name(si_log_level_t level)
{
    if ((int)level < 0 || level > SI_LOG_DEBUG)
        return "?";
    return level_names[level];
}

static int open_destination(const si_log_opts_t *opts, int *fd, bool *own, si_error_t *err)
{
    if (opts->file) {
        int f = open(opts->file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
        if (f < 0)
            return si_errprintf(err, "cannot open log file %s: %s", opts->file, strerror(errno));
        *fd = f;
        *own = true;
    } else {
        *fd = opts->syslog ? -1 : STDERR_FILENO;
        *own = false;
    }
    return 0;
}

si_log_t *si_log_open(const si_log_opts_t *opts, si_error_t *err)
{
    if ((int)opts->level < 0 || opts->level > SI_LOG_DEBUG) {
        si_errprintf(err, "log level %d is out of range", (int)opts->level);
        return NULL;
    }
    si_log_t *log = calloc(1, sizeof(*log));
    if (!log) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    if (open_destination(opts, &log->fd, &log->own_fd, err) < 0) {
        free(log);
        return NULL;
    }
    pthread_mutex_init(&log->lock, NULL);
    snprintf(log->ident, sizeof(log->ident), "%s", opts->ident ? opts->ident : "stagein");
    log->level = opts->level;
    log->use_syslog = opts->syslog;
    log->stderr_too = opts->stderr_too;
    if (log->use_syslog)
        openlog(log->ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
    return log;
}

int si_log_reopen(si_log_t *log, const si_log_opts_t *opts, si_error_t *err)
{
    int fd = -1;
    bool own = false;
    if ((int)opts->level < 0 || opts->level > SI_LOG_DEBUG)
        return si_errprintf(err, "log level %d is out of range", (int)opts->level);
    if (open_destination(opts, &fd, &own, err) < 0)
        return -1;
    pthread_mutex_lock(&log->lock);
    if (log->own_fd)
        close(log->fd);
    if (log->use_syslog && !opts->syslog)
        closelog();
    if (!log->use_syslog && opts->syslog)
        openlog(log->ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
    log->fd = fd;
    log->own_fd = own;
    log->level = opts->level;
    log->use_syslog = opts->syslog;
    log->stderr_too = opts->stderr_too;
    pthread_mutex_unlock(&log->lock);
    return 0;
}

void si_log_close(si_log_t *log)
{
    if (!log)
        return;
    if (log->own_fd)
        close(log->fd);
    if (log->use_syslog)
        closelog();
    pthread_mutex_destroy(&log->lock);
    free(log);
}

bool si_log_enabled(const si_log_t *log, si_log_level_t level)
{
    return log && level <= log->level;
}

void si_vlog(si_log_t *log, si_log_level_t level, const char *fmt, va_list ap)
{
    if (!si_log_enabled(log, level))
        return;
    int saved_errno = errno;
    char msg[2048];
    vsnprintf(msg, sizeof(msg), fmt, ap);

    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    char stamp[32];
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
    char line[2200];
    int n = snprintf(line, sizeof(line), "%s.%03ld %s[%ld] %s: %s\n", stamp,
                     (long)(tv.tv_usec / 1000), log->ident, (long)getpid(),
                     level_names[level], msg);
    size_t len = n < 0 ? 0 : (size_t)n >= sizeof(line) ? sizeof(line) - 1 : (size_t)n;

    pthread_mutex_lock(&log->lock);
    if (log->use_syslog)
        syslog(syslog_priorities[level], "%s", msg);
    /* one write(2) per line (more only after a short write), so that lines
     * from several processes appending to one file never interleave; a line
     * that cannot be written is dropped: the log has nowhere to say so */
    if (log->fd >= 0)
        (void)si_write_all(log->fd, line, len);
    if (log->stderr_too && log->fd != STDERR_FILENO)
        (void)si_write_all(STDERR_FILENO, line, len);
    pthread_mutex_unlock(&log->lock);
    errno = saved_errno;
}

void si_log(si_log_t *log, si_log_level_t level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    si_vlog(log, level, fmt, ap);
    va_end(ap);
}
