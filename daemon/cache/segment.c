/* Segment files: the small objects of a batch written together into one
 * shared file, each at a 4 KiB-aligned offset, instead of a file each.
 *
 * A memory writer (writer.c) holds an object's bytes in an aligned buffer
 * of whole blocks. The committer appends the batch's buffers to its open
 * segment with one pwritev (O_DIRECT where the file system takes it: no
 * copy into the page cache, no inode, no name per object), flushes the
 * segment once (fdatasync; the directory too when the segment is new), and
 * records each object's row naming the segment and its offset in the
 * batch's transaction. A segment's catalog row is made before its file, so
 * that a file without a row is a leftover; its id is never reused.
 *
 * A segment takes objects until it holds cache.segment_bytes, then it is
 * sealed (its writer appends no more) and closed. An object that loses its
 * row (eviction, removal) gives its blocks back to the file system
 * CACHE_PUNCH_DELAY_S later (a hole punched: a reader that found the row
 * just before may still be sending its bytes); a sealed segment whose last
 * object went is removed at once (an open descriptor keeps reading it). */
#include "config.h"
#include "daemon/cache/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/array.h"
#include "common/clock.h"

/* ---- the committer's open segment ------------------------------------------------ */

/* Writes iov[0..n) at off, whole; a file system that refuses direct I/O
 * for it gets the same bytes through the page cache. */
static int write_vector(cache_t *c, struct iovec *iov, int n, uint64_t off, si_error_t *err)
{
    while (n > 0) {
        ssize_t got = pwritev(c->seg.fd, iov, n, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && errno == EINVAL) {
            int flags = fcntl(c->seg.fd, F_GETFL);
            if (flags >= 0 && (flags & O_DIRECT) &&
                fcntl(c->seg.fd, F_SETFL, flags & ~O_DIRECT) == 0)
                continue;
        }
        if (got < 0) {
            int saved = errno;
            char rel[CACHE_OBJECT_PATH_MAX];
            cache_segment_name(c->seg.id, rel, sizeof(rel));
            return si_errnoprintf(err, saved, "cache: writing segment %s/segments/%s: %s",
                                  c->conf.dir, rel, strerror(saved));
        }
        off += (uint64_t)got;
        while (n > 0 && (size_t)got >= iov->iov_len) {
            got -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + got;
            iov->iov_len -= (size_t)got;
        }
    }
    return 0;
}

/* A new segment: its row, then its file under segments/<b2>/<b1>/. */
static int segment_new(cache_t *c, si_error_t *err)
{
    pthread_mutex_lock(&c->lock);
    db_stmt_t *s = cache_stmt(c, SQL_SEG_NEW);
    db_bind_text(s, 1, c->conf.instance, -1);
    db_bind_double(s, 2, si_wall_now());
    int64_t id = db_step(s) == DB_ROW ? db_column_int64(s, 0) : 0;
    if (id <= 0)
        cache_db_error(c, err, "recording a new segment file");
    db_reset(s);
    pthread_mutex_unlock(&c->lock);
    if (id <= 0)
        return -1;
    char d0[3], d1[3], name[CACHE_NAME_HEX + 1];
    cache_object_parts(id, d0, d1, name);
    int dir0 = cache_object_dir(c, c->segments_fd, d0, err);
    int dir1 = dir0 < 0 ? -1 : cache_object_dir(c, dir0, d1, err);
    if (dir0 >= 0)
        close(dir0);
    if (dir1 < 0)
        return -1;
    /* the row is new, so a file of that name is a leftover of nothing */
    int flags = O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC;
    int fd = openat(dir1, name, flags | O_DIRECT, 0640);
    if (fd < 0 && errno == EINVAL) /* a file system without direct I/O (tmpfs) */
        fd = openat(dir1, name, flags, 0640);
    int saved = errno;
    close(dir1);
    if (fd < 0)
        return si_errnoprintf(err, saved, "cache: cannot create segment %s/segments/%s/%s/%s: %s",
                              c->conf.dir, d0, d1, name, strerror(saved));
    pthread_mutex_lock(&c->lock);
    c->seg = (cache_segment_t){.id = id, .fd = fd, .end = 0, .fresh = true};
    pthread_mutex_unlock(&c->lock);
    /* the first block says what the file is, for whoever finds it; no
     * object starts at 0, so an offset of 0 always means a file of its own */
    unsigned char *head = NULL;
    if (posix_memalign((void **)&head, CACHE_BLOCK, CACHE_BLOCK) != 0)
        return si_errnoprintf(err, ENOMEM, "cache: out of memory");
    memset(head, 0, CACHE_BLOCK);
    snprintf((char *)head, CACHE_BLOCK, CACHE_SEGMENT_MAGIC "\nsegment %" PRId64 "\n"
             "instance %s\ncreated %.3f\n", id, c->conf.instance, si_wall_now());
    struct iovec iov = {head, CACHE_BLOCK};
    int rc = write_vector(c, &iov, 1, 0, err);
    free(head);
    if (rc < 0) {
        c->seg.failed = true;
        return -1;
    }
    c->seg.end = CACHE_BLOCK;
    return 0;
}

/* Fails every memory writer of the batch: the segment's state is unknown
 * after a failed write, so it takes nothing more (cache_segment_detach). */
static void fail_memory_writers(cache_t *c, cache_writer_t **ws, size_t n, const si_error_t *err)
{
    int errnum = errno ? errno : EIO;
    c->seg.failed = true;
    for (size_t i = 0; i < n; i++) {
        cache_writer_t *w = ws[i];
        if (!w->memory || w->rc < 0)
            continue;
        w->rc = -1;
        w->errnum = errnum;
        snprintf(w->why, sizeof(w->why), "object %" PRId64 ": %s", w->object_id, err->text);
    }
}

void cache_segment_append(cache_t *c, cache_writer_t **ws, size_t n)
{
    enum { IOV = 256 };
    struct iovec iov[IOV];
    si_error_t err = {{0}};
    size_t i = 0;
    while (i < n) {
        if (!c->seg.id && segment_new(c, &err) < 0) {
            fail_memory_writers(c, ws, n, &err);
            return;
        }
        /* IOV objects a call; the segment is sealed after the batch that
         * fills it (a batch is not split: what it wrote is flushed at once) */
        int k = 0;
        uint64_t start = c->seg.end, end = start;
        for (; i < n && k < IOV; i++) {
            cache_writer_t *w = ws[i];
            if (!w->memory || w->rc < 0)
                continue;
            w->place = (cache_place_t){w->expected_size, end, c->seg.id};
            if (w->buf_size) /* an empty object takes no block */
                iov[k++] = (struct iovec){w->buf, w->buf_size};
            end += w->buf_size;
        }
        if (k && write_vector(c, iov, k, start, &err) < 0) {
            fail_memory_writers(c, ws, n, &err);
            return;
        }
        c->seg.end = end;
    }
}

int cache_segment_flush(cache_t *c, si_error_t *err)
{
    if (!c->seg.id)
        return 0;
    char rel[CACHE_OBJECT_PATH_MAX];
    cache_segment_name(c->seg.id, rel, sizeof(rel));
    if (fdatasync(c->seg.fd) < 0) {
        c->seg.failed = true;
        return si_errnoprintf(err, errno, "flushing the cache (%s): fdatasync of segments/%s: %s",
                              c->conf.dir, rel, strerror(errno));
    }
    if (c->seg.fresh) { /* its name: the directory was made durable when it was new */
        char *slash = strrchr(rel, '/');
        *slash = '\0';
        int fd = openat(c->segments_fd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int rc = fd < 0 ? -1 : fsync(fd);
        int saved = errno;
        if (fd >= 0)
            close(fd);
        if (rc < 0) {
            c->seg.failed = true;
            return si_errnoprintf(err, saved, "flushing the cache (%s): fsync of segments/%s: %s",
                                  c->conf.dir, rel, strerror(saved));
        }
        c->seg.fresh = false;
    }
    return 0;
}

/* Lock held: the segment removed when it is sealed and holds no object;
 * true when it was. */
static bool drop_if_empty_locked(cache_t *c, int64_t segment)
{
    db_stmt_t *s = cache_stmt(c, SQL_SEG_DROP_EMPTY);
    db_bind_int64(s, 1, segment);
    bool gone = db_step(s) == DB_DONE && db_changes(c->db) > 0;
    db_reset(s);
    if (!gone)
        return false;
    char rel[CACHE_OBJECT_PATH_MAX];
    cache_segment_name(segment, rel, sizeof(rel));
    /* a failure leaves a file without a row, which recovery removes */
    unlinkat(c->segments_fd, rel, 0);
    cache_segment_forget(c, segment); /* its space is freed now, not at an idle sweep */
    /* its ranges waiting to be punched went with it */
    size_t kept = 0;
    for (size_t i = 0; i < c->npunches; i++)
        if (c->punches[i].segment != segment)
            c->punches[kept++] = c->punches[i];
    c->npunches = kept;
    return true;
}

void cache_segment_detach(cache_t *c, cache_segment_t *out)
{
    *out = (cache_segment_t){.id = 0, .fd = -1};
    if (!c->seg.id || (!c->seg.failed && c->seg.end < c->conf.segment_bytes))
        return;
    pthread_mutex_lock(&c->lock);
    *out = c->seg;
    c->seg = (cache_segment_t){.id = 0, .fd = -1};
    pthread_mutex_unlock(&c->lock);
}

void cache_segment_seal_locked(cache_t *c, cache_segment_t *seg)
{
    if (!seg->id)
        return;
    db_stmt_t *s = cache_stmt(c, SQL_SEG_SEAL);
    db_bind_int64(s, 1, seg->id);
    /* unsealed (a failed catalog), it stays until the next start seals it */
    bool sealed = db_step(s) == DB_DONE;
    db_reset(s);
    close(seg->fd);
    if (sealed)
        drop_if_empty_locked(c, seg->id); /* every object of it evicted already */
    *seg = (cache_segment_t){.id = 0, .fd = -1};
}

void cache_segment_close(cache_t *c)
{
    pthread_mutex_lock(&c->lock);
    cache_segment_t seg = c->seg; /* not to be appended to by another life */
    c->seg = (cache_segment_t){.id = 0, .fd = -1};
    cache_segment_seal_locked(c, &seg);
    pthread_mutex_unlock(&c->lock);
}

/* ---- objects leaving a segment --------------------------------------------------- */

void cache_segment_released_locked(cache_t *c, const cache_place_t *place)
{
    if (place->segment <= 0 ||
        (place->segment != c->seg.id && drop_if_empty_locked(c, place->segment)))
        return; /* gone with its segment: nothing to punch */
    uint64_t length = (place->size + CACHE_BLOCK - 1) / CACHE_BLOCK * CACHE_BLOCK;
    if (!length ||
        si_array_grow((void **)&c->punches, &c->punch_cap, c->npunches + 1, sizeof(*c->punches)) < 0)
        return; /* the space comes back with the segment, or at the next start */
    c->punches[c->npunches++] =
        (cache_punch_t){place->segment, place->offset, length, cache_now(c) + CACHE_PUNCH_DELAY_S};
}

void cache_punch_due_locked(cache_t *c, bool all)
{
    double now = cache_now(c);
    size_t done = 0;
    int fd = -1;
    int64_t open_id = 0;
    for (; done < c->npunches && (all || c->punches[done].due <= now); done++) {
        cache_punch_t *p = &c->punches[done];
        if (p->segment != open_id) {
            if (fd >= 0)
                close(fd);
            char rel[CACHE_OBJECT_PATH_MAX];
            cache_segment_name(p->segment, rel, sizeof(rel));
            fd = openat(c->segments_fd, rel, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
            open_id = p->segment;
        }
        /* a segment removed meanwhile has nothing left to free; a file
         * system without holes frees the space with the segment */
        if (fd >= 0)
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)p->offset,
                      (off_t)p->length);
    }
    if (fd >= 0)
        close(fd);
    if (done == 0)
        return;
    memmove(c->punches, c->punches + done, (c->npunches - done) * sizeof(*c->punches));
    c->npunches -= done;
}
