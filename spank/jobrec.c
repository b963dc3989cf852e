#include "config.h"
#include "spank/jobrec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int record_path(const char *run_dir, const char *job, char *buf, size_t size,
                       si_error_t *err)
{
    if (!*job || strchr(job, '/'))
        return si_errprintf(err, "job id '%s' cannot name a record", job);
    if ((size_t)snprintf(buf, size, "%s/job-%s", run_dir, job) >= size)
        return si_errprintf(err, "record path under %s is too long", run_dir);
    return 0;
}

int jobrec_set(const char *run_dir, const char *job, const char *key, const char *value,
               si_error_t *err)
{
    char path[4096], line[JOBREC_VALUE_MAX + 64];
    if (record_path(run_dir, job, path, sizeof(path), err) < 0)
        return -1;
    if (strchr(key, '=') || strchr(key, '\n'))
        return si_errprintf(err, "record key '%s' contains '=' or a newline", key);
    int n = snprintf(line, sizeof(line), "%s=%.*s\n", key, JOBREC_VALUE_MAX - 1, value);
    for (char *p = line + strlen(key) + 1; p < line + n - 1; p++)
        if (*p == '\n')
            *p = ' ';
    if (mkdir(run_dir, 0755) < 0 && errno != EEXIST)
        return si_errnoprintf(err, errno, "cannot create %s: %s", run_dir, strerror(errno));
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return si_errnoprintf(err, errno, "cannot open %s: %s", path, strerror(errno));
    /* One write with O_APPEND: a line is never interleaved with another. */
    ssize_t w = write(fd, line, (size_t)n);
    int saved = errno;
    close(fd);
    if (w != n)
        return si_errnoprintf(err, saved, "cannot write %s: %s", path,
                              w < 0 ? strerror(saved) : "short write");
    return 0;
}

int jobrec_get(const char *run_dir, const char *job, const char *key, char *buf, size_t size,
               si_error_t *err)
{
    char path[4096], line[JOBREC_VALUE_MAX + 64];
    if (record_path(run_dir, job, path, sizeof(path), err) < 0)
        return -1;
    FILE *f = fopen(path, "re");
    if (!f) {
        if (errno == ENOENT)
            return 0;
        return si_errnoprintf(err, errno, "cannot read %s: %s", path, strerror(errno));
    }
    size_t klen = strlen(key);
    int found = 0;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, key, klen) != 0 || line[klen] != '=')
            continue;
        line[strcspn(line, "\n")] = '\0';
        snprintf(buf, size, "%s", line + klen + 1);
        found = 1;
    }
    fclose(f);
    return found;
}

int jobrec_remove(const char *run_dir, const char *job, si_error_t *err)
{
    char path[4096];
    if (record_path(run_dir, job, path, sizeof(path), err) < 0)
        return -1;
    if (unlink(path) < 0 && errno != ENOENT)
        return si_errnoprintf(err, errno, "cannot remove %s: %s", path, strerror(errno));
    return 0;
}
