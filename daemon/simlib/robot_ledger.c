/* The shared robots' booking file; see robot_ledger.h. Layout: an 8-byte
 * magic, the number of robots (uint32), then one int64 per robot: the
 * CLOCK_REALTIME nanoseconds at which its last booked move ends. Realtime,
 * not monotonic: the instances may run on different nodes. */
#include "config.h"
#include "daemon/simlib/robot_ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#define LEDGER_MAGIC "SIROBOT1"
#define LEDGER_HEADER 12 /* magic + robot count */

struct robot_ledger {
    int fd;
    int robots;
    char path[4096];
    int64_t *free_ns; /* scratch: the robots' entries as read */
};

static int64_t realtime_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int ledger_lock(robot_ledger_t *l, int op, si_error_t *err)
{
    while (flock(l->fd, op) < 0)
        if (errno != EINTR)
            return si_errnoprintf(err, errno, "%s: flock", l->path);
    return 0;
}

/* The header written, or checked against l->robots. Lock held. */
static int ledger_header(robot_ledger_t *l, si_error_t *err)
{
    unsigned char h[LEDGER_HEADER];
    ssize_t n = pread(l->fd, h, sizeof(h), 0);
    if (n < 0)
        return si_errnoprintf(err, errno, "%s: read", l->path);
    if (n == 0) { /* new: every robot free */
        uint32_t count = (uint32_t)l->robots;
        memcpy(h, LEDGER_MAGIC, 8);
        memcpy(h + 8, &count, 4);
        size_t len = LEDGER_HEADER + (size_t)l->robots * sizeof(int64_t);
        unsigned char *all = calloc(1, len);
        if (!all)
            return si_errprintf(err, "out of memory");
        memcpy(all, h, sizeof(h));
        ssize_t w = pwrite(l->fd, all, len, 0);
        free(all);
        if (w != (ssize_t)len)
            return si_errnoprintf(err, w < 0 ? errno : EIO, "%s: write", l->path);
        return 0;
    }
    uint32_t count;
    memcpy(&count, h + 8, 4);
    if (n != (ssize_t)sizeof(h) || memcmp(h, LEDGER_MAGIC, 8) != 0)
        return si_errprintf(err, "%s is not a robot booking file of a simulated library "
                            "(remove it while no stageind runs on this library)", l->path);
    if (count != (uint32_t)l->robots)
        return si_errprintf(err, "library.robots = %d, but the instances sharing this library "
                            "(%s) have %" PRIu32 " robots: every instance must set the same "
                            "library.robots", l->robots, l->path, count);
    return 0;
}

robot_ledger_t *robot_ledger_open(const char *path, int robots, si_error_t *err)
{
    robot_ledger_t *l = calloc(1, sizeof(*l));
    if (!l || !(l->free_ns = calloc((size_t)robots, sizeof(int64_t)))) {
        free(l);
        return si_errprintf(err, "out of memory"), NULL;
    }
    l->robots = robots;
    snprintf(l->path, sizeof(l->path), "%s", path);
    l->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (l->fd < 0) {
        si_errnoprintf(err, errno, "%s: open", path);
        free(l->free_ns);
        free(l);
        return NULL;
    }
    int rc = ledger_lock(l, LOCK_EX, err);
    if (rc == 0) {
        rc = ledger_header(l, err);
        flock(l->fd, LOCK_UN);
    }
    if (rc < 0) {
        robot_ledger_close(l);
        return NULL;
    }
    return l;
}

void robot_ledger_close(robot_ledger_t *l)
{
    if (!l)
        return;
    close(l->fd);
    free(l->free_ns);
    free(l);
}

int robot_ledger_book(robot_ledger_t *l, const bool *usable, double move_s, int *robot,
                      double *wait_s, si_error_t *err)
{
    size_t len = (size_t)l->robots * sizeof(int64_t);
    if (ledger_lock(l, LOCK_EX, err) < 0)
        return -1;
    ssize_t n = pread(l->fd, l->free_ns, len, LEDGER_HEADER);
    int rc = 0;
    if (n != (ssize_t)len) {
        rc = si_errnoprintf(err, n < 0 ? errno : EIO, "%s: read", l->path);
        goto out;
    }
    int best = -1;
    for (int r = 0; r < l->robots; r++)
        if (usable[r] && (best < 0 || l->free_ns[r] < l->free_ns[best]))
            best = r;
    if (best < 0) {
        rc = si_errprintf(err, "no working robot to book");
        goto out;
    }
    int64_t now = realtime_ns(), start = l->free_ns[best] > now ? l->free_ns[best] : now;
    int64_t end = start + (int64_t)(move_s * 1e9);
    if (pwrite(l->fd, &end, sizeof(end), LEDGER_HEADER + (off_t)best * 8) != sizeof(end)) {
        rc = si_errnoprintf(err, errno ? errno : EIO, "%s: write", l->path);
        goto out;
    }
    *robot = best;
    *wait_s = (double)(start - now) / 1e9;
out:
    flock(l->fd, LOCK_UN);
    return rc;
}
