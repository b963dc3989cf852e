#include "config.h"
#include "common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BOUNCE_BYTES (1u << 20)

static int64_t copy_by_reading(int in_fd, uint64_t in_off, int out_fd, uint64_t out_off,
                               uint64_t len, si_error_t *err)
{
    unsigned char *buf = malloc(BOUNCE_BYTES);
    if (!buf)
        return si_errnoprintf(err, ENOMEM, "out of memory");
    uint64_t done = 0;
    while (done < len) {
        size_t want = len - done < BOUNCE_BYTES ? (size_t)(len - done) : BOUNCE_BYTES;
        ssize_t n = pread(in_fd, buf, want, (off_t)(in_off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int saved = errno;
            free(buf);
            return si_errnoprintf(err, saved, "read: %s", strerror(saved));
        }
        if (n == 0)
            break;
        for (ssize_t put = 0; put < n;) {
            ssize_t w = pwrite(out_fd, buf + put, (size_t)(n - put),
                               (off_t)(out_off + done + (uint64_t)put));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                int saved = errno;
                free(buf);
                return si_errnoprintf(err, saved, "write: %s", strerror(saved));
            }
            put += w;
        }
        done += (uint64_t)n;
    }
    free(buf);
    return (int64_t)done;
}

int64_t si_copy_range(int in_fd, uint64_t in_off, int out_fd, uint64_t out_off, uint64_t len,
                      si_error_t *err)
{
    loff_t in = (loff_t)in_off, out = (loff_t)out_off;
    uint64_t done = 0;
    while (done < len) {
        ssize_t n = copy_file_range(in_fd, &in, out_fd, &out, len - done, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS ||
                      errno == EOPNOTSUPP || errno == EBADF)) {
            /* the kernel will not copy between these two: do it here */
            int64_t rest = copy_by_reading(in_fd, in_off + done, out_fd, out_off + done,
                                           len - done, err);
            return rest < 0 ? -1 : (int64_t)done + rest;
        }
        if (n < 0)
            return si_errnoprintf(err, errno, "copy_file_range: %s", strerror(errno));
        if (n == 0)
            break; /* the input ended */
        done += (uint64_t)n;
    }
    return (int64_t)done;
}

int si_checksum_fd(si_checksum_t *c, int fd, uint64_t off, uint64_t len, void *buf,
                   size_t bufsize, si_error_t *err)
{
    while (len > 0) {
        size_t want = len < bufsize ? (size_t)len : bufsize;
        ssize_t n = pread(fd, buf, want, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return si_errnoprintf(err, errno, "read: %s", strerror(errno));
        if (n == 0)
            return si_errnoprintf(err, EIO, "read: the file ended %llu bytes early",
                                  (unsigned long long)len);
        si_checksum_update(c, buf, (size_t)n);
        off += (uint64_t)n;
        len -= (uint64_t)n;
    }
    return 0;
}

int si_open_range(const char *path, uint64_t offset, uint64_t size, si_error_t *err)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0) {
        int saved = errno;
        if (fd >= 0)
            close(fd);
        return si_errnoprintf(err, saved, "%s: %s", path, strerror(saved));
    }
    if (S_ISREG(st.st_mode) && (offset ? (uint64_t)st.st_size < offset + size
                                       : (uint64_t)st.st_size != size)) {
        if (offset)
            si_errnoprintf(err, EIO, "%s holds %jd bytes, too few for %" PRIu64 " from offset %"
                           PRIu64, path, (intmax_t)st.st_size, size, offset);
        else
            si_errnoprintf(err, EIO, "%s holds %jd bytes, not %" PRIu64, path,
                           (intmax_t)st.st_size, size);
        close(fd);
        return -1;
    }
    if (offset && lseek(fd, (off_t)offset, SEEK_SET) < 0) {
        int saved = errno;
        close(fd);
        return si_errnoprintf(err, saved, "%s: seeking to %" PRIu64 ": %s", path, offset,
                              strerror(saved));
    }
    return fd;
}

int si_check_private(int fd, const char *path, const char *what, si_error_t *err)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return si_errprintf(err, "%s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return si_errprintf(err, "%s: %s is not a regular file", path, what);
    if (st.st_mode & 077)
        return si_errprintf(err, "%s: mode %04o lets group or others at %s; it must be 0600 or "
                            "stricter (chmod 600 %s)", path, (unsigned)(st.st_mode & 07777), what,
                            path);
    return 0;
}

char *si_read_file(const char *path, size_t max, bool secret, size_t *len, si_error_t *err)
{
    struct stat st;
    char *buf = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        si_errprintf(err, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (secret && si_check_private(fd, path, "a secret", err) < 0)
        goto out;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        si_errprintf(err, "%s: not a regular file", path);
        goto out;
    }
    if ((uint64_t)st.st_size > max) {
        si_errprintf(err, "%s: %jd bytes, more than the %zu expected", path,
                     (intmax_t)st.st_size, max);
        goto out;
    }
    buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        si_errprintf(err, "%s: out of memory", path);
        goto out;
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            si_errprintf(err, "%s: %s", path, n < 0 ? strerror(errno) : "shorter than it was");
            free(buf);
            buf = NULL;
            goto out;
        }
        got += (size_t)n;
    }
    buf[got] = '\0';
    *len = got;
out:
    close(fd);
    return buf;
}

/* off < 0: write(2) at the file's offset, else pwrite(2) at off. */
static int write_fully(int fd, const char *p, size_t len, int64_t off)
{
    while (len) {
        ssize_t n = off < 0 ? write(fd, p, len) : pwrite(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        p += n;
        len -= (size_t)n;
        if (off >= 0)
            off += n;
    }
    return 0;
}

int si_write_all(int fd, const void *data, size_t len)
{
    return write_fully(fd, data, len, -1);
}

int si_pwrite_all(int fd, const void *data, size_t len, uint64_t off)
{
    if (off > INT64_MAX) {
        errno = EINVAL;
        return -1;
    }
    return write_fully(fd, data, len, (int64_t)off);
}
