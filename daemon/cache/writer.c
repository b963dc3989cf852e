/* Writing one object: a small one into memory (its batch writes it into a
 * segment file, segment.c), a larger one into a temp file in tmp/ (unnamed
 * where O_TMPFILE works); hashed as it arrives, checked against the
 * catalog's size and checksum, then (a file) linked (unnamed) or renamed
 * (named, by the batch) into objects/; the batch commit (commit.c) makes it
 * durable and records it. */
#include "config.h"
#include "daemon/cache/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/checksum.h"
#include "common/clock.h"
#include "common/fileio.h"
#include "common/thread.h"

/* Start write-back every this many bytes, and of the rest when an object
 * larger than this is sealed, so that the disk writes while the bytes still arrive and the
 * batch's flush waits for little (a stream written this way made durable
 * at 1.5-1.8 GB/s here, against 0.9-1.3 GB/s every 64 MiB and 0.4-1.1
 * GB/s with one fsync at the end). */
#define WRITEBACK_CHUNK (8u << 20)

uint64_t cache_writer_received(const cache_writer_t *w)
{
    return w->received;
}

void cache_writer_release(cache_writer_t *w)
{
    cache_t *c = w->c;
    pthread_mutex_lock(&c->lock);
    cache_reservation_drop(c, w->reserved_as);
    pthread_mutex_lock(&c->wlock);
    c->writers--;
    if (w->memory)
        c->memory_held -= w->buf_size;
    if (!w->submitted) {
        c->unsubmitted--;
        pthread_cond_signal(&c->commit_cv); /* a batch may wait for this writer */
    }
    pthread_mutex_unlock(&c->wlock);
    cache_changed_locked(c);
    pthread_mutex_unlock(&c->lock);
}

/* wlock held, the reservation r found: the writer claims it (counted, held
 * in memory when small and within the budget); its sequence number. */
static uint64_t claim_locked(cache_t *c, cache_writer_t *w, cache_reservation_t *r,
                             uint64_t blocks)
{
    r->writing = true;
    c->writers++;
    c->unsubmitted++;
    w->memory = w->expected_size < c->conf.segment_object_max &&
                c->memory_held + blocks <= c->conf.segment_memory;
    if (w->memory) {
        w->buf_size = (size_t)blocks;
        c->memory_held += blocks;
    }
    return ++c->temp_seq;
}

static void behind_end(cache_writer_t *w);

void cache_writer_free(cache_writer_t *w)
{
    behind_end(w);
    if (w->fd >= 0)
        close(w->fd);
    si_checksum_free(w->sum);
    si_bufpool_put(&w->c->buffers, w->buf, w->buf_size);
    free(w);
}

/* A small object finding the memory budget full waits a while for a batch
 * to commit (and give its memory back) rather than take a file of its own:
 * the file cost its drive's thread an inode's allocation and the batch a
 * flush of one more file, and with the committer behind, one object in ten
 * went that way; waiting gave 4 drives of 64 KiB objects about 12 % more
 * rate for 16 % less CPU per GB (BENCHMARKS.md). Bounded, so that a writer left
 * open elsewhere cannot hold this one up; then it takes a file. */
#define MEMORY_WAIT_S 0.25

static void wait_for_memory_locked(cache_t *c, uint64_t size, uint64_t blocks)
{
    if (size >= c->conf.segment_object_max || blocks > c->conf.segment_memory)
        return;
    struct timespec until = si_mono_deadline(MEMORY_WAIT_S); /* committed_cv's clock */
    while (c->memory_held + blocks > c->conf.segment_memory &&
           pthread_cond_timedwait(&c->committed_cv, &c->wlock, &until) == 0)
        ;
}

static int open_writer(cache_t *c, int64_t object_id, uint64_t size, const char *checksum,
                       cache_writer_t **out, si_error_t *err);

int cache_writer_open(cache_t *c, int64_t object_id, uint64_t size, const char *checksum,
                      cache_writer_t **out, si_error_t *err)
{
    if (object_id < 1)
        return si_errnoprintf(err, EINVAL, "object id %" PRId64 " is not a catalog object id",
                          object_id);
    return open_writer(c, object_id, size, checksum, out, err);
}

bool cache_takes_unrecorded(cache_t *c, uint64_t size)
{
    return !cache_shared(c) && size < c->conf.segment_object_max;
}

int cache_writer_open_unrecorded(cache_t *c, uint64_t size, const char *checksum,
                                 cache_writer_t **out, si_error_t *err)
{
    if (!cache_takes_unrecorded(c, size))
        return si_errnoprintf(err, ENOTSUP, "cache: an object of %" PRIu64 " bytes%s needs its"
                              " catalog row first", size,
                              cache_shared(c) ? " in a shared cache" : "");
    pthread_mutex_lock(&c->wlock);
    int64_t id = --c->provisional_seq;
    pthread_mutex_unlock(&c->wlock);
    cache_writer_t *w;
    if (open_writer(c, id, size, checksum, &w, err) < 0)
        return -1;
    if (!w->memory) { /* the memory budget is spent: it would take a file named by its id */
        cache_writer_abort(w);
        return si_errnoprintf(err, ENOTSUP, "cache: no memory now for an object whose catalog"
                              " row is not made yet");
    }
    w->unrecorded = true;
    *out = w;
    return 0;
}

static int open_writer(cache_t *c, int64_t object_id, uint64_t size, const char *checksum,
                       cache_writer_t **out, si_error_t *err)
{
    if (checksum && !si_checksum_text_valid(checksum))
        return si_errnoprintf(err, EINVAL,
                          "object %" PRId64 ": expected checksum '%.80s' is not"
                          " sha256:<64 hex> or md5:<32 hex>", object_id, checksum);
    cache_writer_t *w = calloc(1, sizeof(*w));
    if (!w)
        return si_errnoprintf(err, ENOMEM, "cache: out of memory");
    w->c = c;
    w->object_id = w->reserved_as = object_id;
    w->expected_size = size;
    w->fd = -1;
    char algorithm[8] = "sha256";
    if (checksum) {
        snprintf(w->expected_sum, sizeof(w->expected_sum), "%s", checksum);
        size_t n = (size_t)(strchr(checksum, ':') - checksum);
        memcpy(algorithm, checksum, n);
        algorithm[n] = '\0';
    }
    /* hashed even without an expected checksum: the cost is the same and
     * the code path is one */
    if (!(w->sum = si_checksum_new(algorithm, err))) {
        cache_writer_free(w);
        errno = ENOMEM;
        return -1;
    }
    uint64_t blocks = (size + CACHE_BLOCK - 1) / CACHE_BLOCK * CACHE_BLOCK;

    /* claim the object: its reservation, made before the recall (a drive's
     * thread takes only wlock here), or made now */
    bool reserved_here = false;
    uint64_t seq = 0;
    pthread_mutex_lock(&c->wlock);
    wait_for_memory_locked(c, size, blocks);
    cache_reservation_t *r = cache_reservation_find(c, object_id);
    bool fast = r && !r->writing && r->size == size;
    if (fast)
        seq = claim_locked(c, w, r, blocks);
    pthread_mutex_unlock(&c->wlock);
    if (!fast) {
        pthread_mutex_lock(&c->lock);
        pthread_mutex_lock(&c->wlock);
        reserved_here = !cache_reservation_find(c, object_id);
        pthread_mutex_unlock(&c->wlock);
        cache_block_t block;
        int rc = cache_reserve_locked(c, object_id, size, &block, err);
        if (rc == CACHE_PRESENT)
            rc = si_errnoprintf(err, EEXIST, "object %" PRId64 " is already in the cache",
                                object_id);
        else if (rc == CACHE_WOULD_BLOCK)
            rc = si_errnoprintf(err, EAGAIN, "object %" PRId64 ": %s", object_id, block.reason);
        if (rc == CACHE_RESERVED) {
            pthread_mutex_lock(&c->wlock);
            r = cache_reservation_find(c, object_id);
            if (!r || r->writing)
                rc = si_errnoprintf(err, EBUSY, "object %" PRId64 " is being written by"
                                    " another writer", object_id);
            else
                seq = claim_locked(c, w, r, blocks);
            pthread_mutex_unlock(&c->wlock);
        }
        pthread_mutex_unlock(&c->lock);
        if (rc < 0) {
            int saved = errno;
            cache_writer_free(w);
            errno = saved;
            return -1;
        }
    }

    if (w->memory) {
        snprintf(w->temp_name, sizeof(w->temp_name), "(in memory, object %016" PRIx64 ")",
                 (uint64_t)object_id);
        if (blocks && !(w->buf = si_bufpool_get(&c->buffers, w->buf_size))) {
            si_errnoprintf(err, ENOMEM, "object %" PRId64 ": out of memory for its %zu bytes",
                           object_id, w->buf_size);
            goto error;
        }
        if (blocks > size) /* the padding to the block goes to the disk too */
            memset(w->buf + size, 0, (size_t)(blocks - size));
        *out = w;
        return 0;
    }
    /* no larger than the object (in whole pages): small objects are common */
    w->buf_size = blocks < c->conf.write_buffer ? (blocks ? (size_t)blocks : CACHE_BLOCK)
                                                : c->conf.write_buffer;
    if (!(w->buf = si_bufpool_get(&c->buffers, w->buf_size))) {
        si_errnoprintf(err, ENOMEM, "cache: out of memory for a %zu byte write buffer",
                       w->buf_size);
        goto error;
    }
    /* read-write: cache_writer_copy_fd hashes what the kernel copied */
    if (c->unnamed_temps) {
        /* no name in tmp/: no lookup and entry in one large directory per
         * object (measured: 12 % of a drive's thread for 64 KiB objects),
         * no rename out of it; a crash leaves nothing to remove */
        w->unnamed = true;
        snprintf(w->temp_name, sizeof(w->temp_name), "(unnamed, object %016" PRIx64 ")",
                 (uint64_t)object_id);
        w->fd = openat(c->tmp_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0640);
    } else {
        snprintf(w->temp_name, sizeof(w->temp_name), "%016" PRIx64 ".%ld.%" PRIu64,
                 (uint64_t)object_id, (long)getpid(), seq);
        w->fd = openat(c->tmp_fd, w->temp_name,
                       O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
    }
    if (w->fd < 0) {
        int saved = errno;
        si_errnoprintf(err, saved, "object %" PRId64 ": cannot create %s/tmp/%s: %s", object_id,
                   c->conf.dir, w->temp_name, strerror(saved));
        goto error;
    }
    /* allocate the blocks at once: less fragmentation, and a full file
     * system is found now rather than halfway through a tape read (not
     * for an object of one write: its write allocates as soon, and the
     * unwritten extent cost a conversion per small object) */
    if (size > w->buf_size && fallocate(w->fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)size) < 0 &&
        errno != EOPNOTSUPP && errno != ENOSYS) {
        int saved = errno;
        si_errnoprintf(err, saved, "object %" PRId64 ": cannot allocate %" PRIu64 " bytes in %s: %s",
                   object_id, size, c->conf.dir, strerror(saved));
        if (!w->unnamed)
            unlinkat(c->tmp_fd, w->temp_name, 0);
        goto error;
    }
    *out = w;
    return 0;
error:;
    int saved = errno;
    pthread_mutex_lock(&c->lock);
    if (reserved_here)
        cache_reservation_drop(c, object_id);
    pthread_mutex_lock(&c->wlock);
    if (!reserved_here && (r = cache_reservation_find(c, object_id)))
        r->writing = false;
    c->writers--;
    c->unsubmitted--;
    if (w->memory)
        c->memory_held -= w->buf_size;
    pthread_mutex_unlock(&c->wlock);
    pthread_mutex_unlock(&c->lock);
    cache_writer_free(w);
    errno = saved;
    return -1;
}

/* Too many bytes for the object: counted and refused (EBADMSG). */
static int refuse_oversize(cache_writer_t *w, uint64_t len, si_error_t *err)
{
    w->failed = true;
    pthread_mutex_lock(&w->c->lock);
    w->c->counters.size_failures++;
    pthread_mutex_unlock(&w->c->lock);
    return si_errnoprintf(err, EBADMSG,
                          "object %" PRId64 ": size mismatch: expected %" PRIu64
                          " bytes, received at least %" PRIu64, w->object_id,
                          w->expected_size, w->received + len);
}

/* Direct I/O moves whole blocks of this size from an address aligned to it. */
#define DIRECT_ALIGN 4096u

/* Back to the page cache (a tail, a file system without O_DIRECT). */
static void direct_off(cache_writer_t *w)
{
    int flags = fcntl(w->fd, F_GETFL);
    if (flags >= 0)
        fcntl(w->fd, F_SETFL, flags & ~O_DIRECT);
    w->direct = false;
}

void cache_writer_direct(cache_writer_t *w)
{
    if (w->memory || w->direct || w->written || w->buffered || w->fd < 0 || w->buf_size % DIRECT_ALIGN)
        return;
    int flags = fcntl(w->fd, F_GETFL);
    w->direct = flags >= 0 && fcntl(w->fd, F_SETFL, flags | O_DIRECT) == 0;
}

/* The bytes of p that can go direct: whole blocks from an aligned address
 * at an aligned offset; 0 when none (or the writer is buffered). */
static size_t direct_part(const cache_writer_t *w, const unsigned char *p, size_t len)
{
    if (!w->direct || (uintptr_t)p % DIRECT_ALIGN || w->written % DIRECT_ALIGN)
        return 0;
    return len - len % DIRECT_ALIGN;
}

static int write_failed(cache_writer_t *w, int errnum, si_error_t *err)
{
    w->failed = true;
    return si_errnoprintf(err, errnum, "object %" PRId64 ": writing %s/tmp/%s: %s",
                          w->object_id, w->c->conf.dir, w->temp_name, strerror(errnum));
}

/* At the writer's offset (pwrite: a write behind, below, may be in flight
 * at the offset before). */
static int write_all(cache_writer_t *w, const unsigned char *p, size_t len, si_error_t *err)
{
    while (len > 0) {
        size_t whole = direct_part(w, p, len);
        if (!whole && w->direct)
            direct_off(w); /* the tail, after which nothing is aligned */
        ssize_t n = pwrite(w->fd, p, whole ? whole : len, (off_t)w->written);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EINVAL && w->direct) { /* the file system's alignment */
            direct_off(w);
            continue;
        }
        if (n < 0)
            return write_failed(w, errno, err);
        p += n;
        len -= (size_t)n;
        w->written += (uint64_t)n;
    }
    if (w->direct) /* nothing of it waits in the page cache */
        w->writeback_from = w->written;
    if (w->written - w->writeback_from >= WRITEBACK_CHUNK) {
        sync_file_range(w->fd, (off_t)w->writeback_from,
                        (off_t)(w->written - w->writeback_from), SYNC_FILE_RANGE_WRITE);
        w->writeback_from = w->written;
    }
    return 0;
}

/* A direct writer of an object larger than its buffer writes each full
 * buffer from a thread of its own while the caller fills a second one.
 * Before, the caller received and hashed, then waited for the disk, in
 * turn, for every buffer (an upload's thread of a 1 GiB push: BENCHMARKS.md).
 * One write in flight per writer: the caller waits for it before the next
 * hand-off, before writing its own buffer, and when it seals the object.
 * A large feed written straight from the caller's memory need not wait:
 * every write is a pwrite at its own offset. */
struct cache_write_behind {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fd;
    unsigned char *buf; /* being written while pending, else the caller's next */
    size_t len;
    uint64_t off;
    bool pending, stop;
    int errnum;         /* of the last write; 0 */
};

static void *behind_main(void *arg)
{
    struct cache_write_behind *b = arg;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (!b->pending && !b->stop)
            pthread_cond_wait(&b->cv, &b->mu);
        if (!b->pending)
            break;
        pthread_mutex_unlock(&b->mu);
        int errnum = si_pwrite_all(b->fd, b->buf, b->len, b->off) < 0 ? errno : 0;
        pthread_mutex_lock(&b->mu);
        b->errnum = errnum;
        b->pending = false;
        pthread_cond_broadcast(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

/* The second buffer and its thread; false when either cannot be had (the
 * writer then writes as before). */
static bool behind_start(cache_writer_t *w)
{
    struct cache_write_behind *b = calloc(1, sizeof(*b));
    if (!b)
        return false;
    b->fd = w->fd;
    if (!(b->buf = si_bufpool_get(&w->c->buffers, w->buf_size))) {
        free(b);
        return false;
    }
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    if (pthread_create(&b->thread, NULL, behind_main, b) != 0) {
        pthread_cond_destroy(&b->cv);
        pthread_mutex_destroy(&b->mu);
        si_bufpool_put(&w->c->buffers, b->buf, w->buf_size);
        free(b);
        return false;
    }
    w->behind = b;
    return true;
}

/* The write in flight done: 0, or -1 with the writer failed. */
static int behind_wait(cache_writer_t *w, si_error_t *err)
{
    struct cache_write_behind *b = w->behind;
    if (!b)
        return 0;
    pthread_mutex_lock(&b->mu);
    while (b->pending)
        pthread_cond_wait(&b->cv, &b->mu);
    int errnum = b->errnum;
    b->errnum = 0;
    pthread_mutex_unlock(&b->mu);
    if (errnum == EINVAL && w->direct) { /* the file system's alignment: the page cache's way */
        direct_off(w);
        errnum = si_pwrite_all(w->fd, b->buf, b->len, b->off) < 0 ? errno : 0;
    }
    return errnum ? write_failed(w, errnum, err) : 0;
}

/* The thread stopped (after its write) and the second buffer given back. */
static void behind_end(cache_writer_t *w)
{
    struct cache_write_behind *b = w->behind;
    if (!b)
        return;
    si_thread_stop(b->thread, &b->mu, &b->cv, &b->stop);
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    si_bufpool_put(&w->c->buffers, b->buf, w->buf_size);
    free(b);
    w->behind = NULL;
}

static int flush_buffer(cache_writer_t *w, si_error_t *err)
{
    if (!w->buffered)
        return 0;
    size_t n = w->buffered;
    w->buffered = 0;
    if (behind_wait(w, err) < 0)
        return -1;
    bool more = w->received < w->expected_size;
    if (!more || n != w->buf_size || direct_part(w, w->buf, n) != n ||
        (!w->behind && !behind_start(w)))
        return write_all(w, w->buf, n, err);
    struct cache_write_behind *b = w->behind;
    unsigned char *full = w->buf;
    pthread_mutex_lock(&b->mu);
    w->buf = b->buf;
    b->buf = full;
    b->len = n;
    b->off = w->written;
    b->pending = true;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
    w->written += n;
    w->writeback_from = w->written;
    return 0;
}

/* Whether len more bytes may come (0), or why not (-1, err set). */
static int writable(cache_writer_t *w, uint64_t len, si_error_t *err)
{
    if (w->failed)
        return si_errnoprintf(err, EINVAL, "object %" PRId64 ": the writer already failed;"
                                       " abort it", w->object_id);
    if (len > w->expected_size - w->received)
        return refuse_oversize(w, len, err);
    return 0;
}

void *cache_writer_room(cache_writer_t *w, size_t *len)
{
    if (!w->memory || w->failed) {
        *len = 0;
        return NULL;
    }
    *len = (size_t)(w->expected_size - w->received);
    return w->buf + w->received;
}

/* len bytes, checked writable, put at the memory writer's room: hashed there. */
static void take_landed(cache_writer_t *w, size_t len)
{
    si_checksum_update(w->sum, w->buf + w->received, len);
    w->received += len;
}

int cache_writer_landed(cache_writer_t *w, size_t len, si_error_t *err)
{
    if (!w->memory)
        return si_errnoprintf(err, EINVAL, "object %" PRId64 ": the writer has no room in"
                              " memory", w->object_id);
    if (writable(w, len, err) < 0)
        return -1;
    take_landed(w, len);
    return 0;
}

int cache_writer_write(cache_writer_t *w, const void *data, size_t len, si_error_t *err)
{
    if (writable(w, len, err) < 0)
        return -1;
    const unsigned char *p = data;
    if (w->memory) {
        memcpy(w->buf + w->received, p, len);
        take_landed(w, len);
        return 0;
    }
    si_checksum_update(w->sum, p, len);
    w->received += len;
    while (len > 0) {
        /* large feeds skip the copy (direct: only from an aligned address) */
        if (!w->buffered && len >= w->buf_size &&
            (!w->direct || (uintptr_t)p % DIRECT_ALIGN == 0)) {
            size_t n = len - len % w->buf_size;
            if (write_all(w, p, n, err) < 0)
                return -1;
            p += n;
            len -= n;
            continue;
        }
        size_t n = w->buf_size - w->buffered < len ? w->buf_size - w->buffered : len;
        memcpy(w->buf + w->buffered, p, n);
        w->buffered += n;
        p += n;
        len -= n;
        if (w->buffered == w->buf_size && flush_buffer(w, err) < 0)
            return -1;
    }
    return 0;
}

/* len bytes of the source at off into p; the writer fails when it cannot. */
static int read_source(cache_writer_t *w, int fd, uint64_t off, unsigned char *p, size_t len,
                       si_error_t *err)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = pread(fd, p + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int saved = n < 0 ? errno : EBADMSG;
            w->failed = true;
            if (n == 0)
                return si_errnoprintf(err, EBADMSG, "object %" PRId64 ": the source file"
                                      " ended %zu bytes early", w->object_id, len - done);
            return si_errnoprintf(err, saved, "object %" PRId64 ": reading its source: %s",
                                  w->object_id, strerror(saved));
        }
        done += (size_t)n;
    }
    return 0;
}

/* cache_writer_copy_fd of a direct writer: read into its aligned buffer,
 * hashed there and written from it past the page cache. The kernel's copy
 * and the read-back for the hash would dirty, then read, a page-cache copy
 * of every byte (measured with the hsm backend: 1 GiB objects at 2.9 CPU
 * s/GB that way, the page cache's reclaim included). */
static int read_into_direct(cache_writer_t *w, int fd, uint64_t off, uint64_t len,
                            si_error_t *err)
{
    for (uint64_t done = 0; done < len;) {
        size_t n = len - done < w->buf_size ? (size_t)(len - done) : w->buf_size;
        if (read_source(w, fd, off + done, w->buf, n, err) < 0)
            return -1;
        si_checksum_update(w->sum, w->buf, n);
        w->received += n;
        w->buffered = n;
        if (flush_buffer(w, err) < 0)
            return -1;
        done += n;
    }
    return 0;
}

int cache_writer_copy_fd(cache_writer_t *w, int fd, uint64_t off, uint64_t len, si_error_t *err)
{
    if (writable(w, len, err) < 0)
        return -1;
    if (w->memory) { /* read into its buffer, hashed there */
        if (read_source(w, fd, off, w->buf + w->received, (size_t)len, err) < 0)
            return -1;
        take_landed(w, (size_t)len);
        return 0;
    }
    if (flush_buffer(w, err) < 0)
        return -1;
    if (w->direct)
        return read_into_direct(w, fd, off, len, err);
    uint64_t start = w->written;
    int64_t n = si_copy_range(fd, off, w->fd, start, len, err);
    if (n >= 0 && (uint64_t)n < len)
        n = si_errnoprintf(err, EBADMSG, "the source file ended %" PRIu64 " bytes early",
                           len - (uint64_t)n);
    if (n < 0) {
        w->failed = true;
        return si_errprefix(err, "object %" PRId64 ": copying into %s/tmp/%s", w->object_id,
                            w->c->conf.dir, w->temp_name);
    }
    w->written += len;
    if (si_checksum_fd(w->sum, w->fd, start, len, w->buf, w->buf_size, err) < 0) {
        int saved = errno;
        w->failed = true;
        return si_errnoprintf(err, saved, "object %" PRId64 ": reading back %s/tmp/%s: %s",
                              w->object_id, w->c->conf.dir, w->temp_name, strerror(saved));
    }
    w->received += len;
    if (w->written - w->writeback_from >= WRITEBACK_CHUNK) {
        sync_file_range(w->fd, (off_t)w->writeback_from,
                        (off_t)(w->written - w->writeback_from), SYNC_FILE_RANGE_WRITE);
        w->writeback_from = w->written;
    }
    return 0;
}

/* Size and checksum against the catalog's; the writer fails on a mismatch. */
static int seal(cache_writer_t *w, si_error_t *err)
{
    cache_t *c = w->c;
    if (w->sealed)
        return 0;
    if (w->failed)
        return si_errnoprintf(err, EINVAL, "object %" PRId64 ": the writer already failed",
                              w->object_id);
    if (flush_buffer(w, err) < 0 || behind_wait(w, err) < 0)
        return -1;
    behind_end(w);
    /* the tail of a large object; a small one is left to the batch's flush
     * (one I/O submission per small object cost its drive 6-7 % in
     * `perf` of the 64 KiB recall, where syncfs merges them) */
    if (w->writeback_from > 0 && w->written > w->writeback_from) {
        sync_file_range(w->fd, (off_t)w->writeback_from, (off_t)(w->written - w->writeback_from),
                        SYNC_FILE_RANGE_WRITE);
        w->writeback_from = w->written;
    }
    if (w->received != w->expected_size) {
        pthread_mutex_lock(&c->lock);
        c->counters.size_failures++;
        pthread_mutex_unlock(&c->lock);
        w->failed = true;
        return si_errnoprintf(err, EBADMSG, "object %" PRId64 ": size mismatch: expected %"
                              PRIu64 " bytes, received %" PRIu64,
                              w->object_id, w->expected_size, w->received);
    }
    char *actual = w->actual_sum;
    si_checksum_final(w->sum, actual);
    if (w->expected_sum[0] && strcmp(actual, w->expected_sum) != 0) {
        pthread_mutex_lock(&c->lock);
        c->counters.checksum_failures++;
        pthread_mutex_unlock(&c->lock);
        w->failed = true;
        return si_errnoprintf(err, EBADMSG, "object %" PRId64 ": checksum mismatch: expected "
                              "%s, got %s", w->object_id, w->expected_sum, actual);
    }
    w->sealed = true;
    return 0;
}

int cache_writer_expect(cache_writer_t *w, const char *checksum, si_error_t *err)
{
    const char *colon = checksum ? strchr(checksum, ':') : NULL;
    const char *algorithm = w->expected_sum[0] ? w->expected_sum : "sha256:";
    if (!checksum || !si_checksum_text_valid(checksum) || w->sealed ||
        strncmp(checksum, algorithm, (size_t)(colon - checksum) + 1) != 0)
        return si_errnoprintf(err, EINVAL, "object %" PRId64 ": checksum '%.80s' is not one of"
                              " the bytes being hashed (%.*s)", w->object_id,
                              checksum ? checksum : "", (int)strcspn(algorithm, ":"), algorithm);
    snprintf(w->expected_sum, sizeof(w->expected_sum), "%s", checksum);
    return 0;
}

int cache_writer_seal(cache_writer_t *w, si_error_t *err)
{
    return seal(w, err);
}

const char *cache_writer_checksum(const cache_writer_t *w)
{
    return w->sealed ? w->actual_sum : "";
}

void cache_writer_abort(cache_writer_t *w)
{
    if (!w)
        return;
    if (w->placed)
        cache_unlink_object(w->c, w->object_id);
    else if (!w->unnamed && !w->memory) /* an unnamed one goes with its descriptor */
        unlinkat(w->c->tmp_fd, w->temp_name, 0);
    cache_writer_release(w);
    cache_writer_free(w);
}

/* linkat of an open file through /proc/self/fd: AT_EMPTY_PATH would need
 * CAP_DAC_READ_SEARCH */
static int link_fd(int fd, int dir_fd, const char *name)
{
    char proc[40];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, proc, dir_fd, name, AT_SYMLINK_FOLLOW);
}

bool cache_unnamed_temps_work(const cache_t *c)
{
    int fd = openat(c->tmp_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0640);
    if (fd < 0)
        return false; /* EOPNOTSUPP, EISDIR: a file system or kernel without it */
    char probe[64];
    snprintf(probe, sizeof(probe), "link-probe.%ld", (long)getpid());
    unlinkat(c->tmp_fd, probe, 0);
    bool works = link_fd(fd, c->tmp_fd, probe) == 0;
    if (works)
        unlinkat(c->tmp_fd, probe, 0);
    close(fd);
    return works;
}

int cache_writer_link(cache_writer_t *w, si_error_t *err)
{
    cache_t *c = w->c;
    char d0[3], d1[3], name[CACHE_NAME_HEX + 1], rel[CACHE_OBJECT_PATH_MAX];
    cache_object_parts(w->object_id, d0, d1, name);
    snprintf(rel, sizeof(rel), "%s/%s/%s", d0, d1, name);
    int rc = link_fd(w->fd, c->objects_fd, rel);
    if (rc < 0 && errno == ENOENT) { /* the object's directories are new */
        int dir0 = cache_object_dir(c, c->objects_fd, d0, err);
        int dir1 = dir0 < 0 ? -1 : cache_object_dir(c, dir0, d1, err);
        if (dir0 >= 0)
            close(dir0);
        if (dir1 < 0) {
            w->failed = true;
            return si_errprefix(err, "object %" PRId64, w->object_id);
        }
        close(dir1);
        rc = link_fd(w->fd, c->objects_fd, rel);
    }
    if (rc < 0 && errno == EEXIST) { /* a file without a row: replaced, as a rename would */
        unlinkat(c->objects_fd, rel, 0);
        rc = link_fd(w->fd, c->objects_fd, rel);
    }
    if (rc < 0) {
        int saved = errno;
        w->failed = true;
        return si_errnoprintf(err, saved, "object %" PRId64 ": cannot link its temp file into"
                              " %s/objects/%s: %s", w->object_id, c->conf.dir, rel,
                              strerror(saved));
    }
    w->placed = true;
    return 0;
}
