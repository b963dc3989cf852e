/* Group commit: sealed objects wait in a queue; the committer thread takes
 * them in batches and makes each batch durable at once.
 *
 * Per batch: every named temp file renamed into objects/ (unnamed ones were
 * linked there when submitted), then one syncfs of the
 * cache's file system (the data of all the batch's files, their new names
 * and directories, in one journal commit instead of two fsyncs per object;
 * a batch of one or two objects, or of large ones, is flushed file by file
 * instead), then one
 * catalog transaction for all the rows and pins. Only after that
 * transaction is an object visible to readers (they look for its row) and
 * is its submitter told. A crash before it leaves files without rows, which
 * cache_recover removes. A failed flush or transaction fails the whole
 * batch: its files are removed, nothing is recorded, every submitter is
 * told why.
 *
 * A batch takes what is queued when the committer is free, up to
 * commit_bytes or commit_objects: while one batch is flushed the next one
 * gathers, so that the batches grow with the load and the flush time and a
 * lone upload is not held back. With commit_delay > 0 a batch also waits up
 * to that long for more objects while other writers are open (measured:
 * with the default 0 the flush itself gathers enough; a wait only delayed
 * concurrent uploads). */
#include "config.h"
#include "daemon/cache/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "common/clock.h"
#include "common/thread.h"

/* Batches of up to this many objects, or of objects of this size on
 * average, are flushed file by file (fdatasync of each, fsync of its
 * directory) rather than by one syncfs: syncfs flushes everything dirty on
 * the file system, other programs' data too (measured on a shared file
 * system: large objects committed by syncfs went 25-30 % slower than by
 * fsync), while the two journal commits per object that it saves matter
 * only for small objects. */
#define FILE_FLUSH_MAX 2
#define FILE_FLUSH_AVERAGE (4u << 20)

int cache_writer_submit(cache_writer_t *w, int64_t pin_request, cache_committed_fn done,
                        void *done_arg, si_error_t *err)
{
    cache_t *c = w->c;
    if (cache_writer_seal(w, err) < 0 || (w->unnamed && cache_writer_link(w, err) < 0))
        return -1;
    /* the descriptor is not needed any more: the batch's flush finds the
     * file by its name (a queue of thousands of small objects holds no
     * fds), and its write-back is the committer's, not the reading
     * thread's (a memory writer has none: its batch writes its buffer) */
    if (w->fd >= 0 && close(w->fd) < 0) {
        int saved = errno;
        w->fd = -1;
        w->failed = true;
        return si_errnoprintf(err, saved, "object %" PRId64 ": closing %s/tmp/%s: %s",
                              w->object_id, c->conf.dir, w->temp_name, strerror(saved));
    }
    w->fd = -1;
    if (!w->memory) {
        si_bufpool_put(&c->buffers, w->buf, w->buf_size);
        w->buf = NULL;
    }
    si_checksum_free(w->sum);
    w->sum = NULL;
    w->pin_request = pin_request;
    w->done = done;
    w->done_arg = done_arg;
    w->next = NULL;
    pthread_mutex_lock(&c->wlock);
    w->submitted = true;
    c->unsubmitted--;
    if (!c->queue_head)
        c->queued_since = si_mono_now();
    *c->queue_tail = w;
    c->queue_tail = &w->next;
    c->queued++;
    c->queued_bytes += w->expected_size;
    pthread_cond_signal(&c->commit_cv);
    pthread_mutex_unlock(&c->wlock);
    return 0;
}

void cache_writer_on_record(cache_writer_t *w, cache_record_fn fn, void *arg)
{
    w->record = fn;
    w->record_arg = arg;
}

uint64_t cache_commit_generation(cache_t *c)
{
    pthread_mutex_lock(&c->wlock);
    uint64_t g = c->commit_generation;
    pthread_mutex_unlock(&c->wlock);
    return g;
}

bool cache_wait_commit(cache_t *c, uint64_t generation, int timeout_ms)
{
    struct timespec until = si_mono_deadline(timeout_ms / 1000.0);
    pthread_mutex_lock(&c->wlock);
    while (c->commit_generation == generation &&
           pthread_cond_timedwait(&c->committed_cv, &c->wlock, &until) == 0)
        ;
    bool ended = c->commit_generation != generation;
    pthread_mutex_unlock(&c->wlock);
    return ended;
}

void cache_commit_drain(cache_t *c)
{
    pthread_mutex_lock(&c->wlock);
    while (c->queue_head || c->in_batch)
        pthread_cond_wait(&c->committed_cv, &c->wlock);
    pthread_mutex_unlock(&c->wlock);
}

/* ---- one batch ---------------------------------------------------------------- */

static void fail(cache_writer_t *w, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(cache_writer_t *w, int errnum, const char *fmt, ...)
{
    if (w->rc < 0)
        return; /* the first reason stays */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->why, sizeof(w->why), fmt, ap);
    va_end(ap);
    w->rc = -1;
    w->errnum = errnum ? errnum : EIO;
}

/* Renames each file into place; the directory pair of the previous object
 * is kept open (ids of one batch mostly share it). */
static void place_all(cache_t *c, cache_writer_t **ws, size_t n)
{
    char d0[3], d1[3], name[CACHE_NAME_HEX + 1], open0[3] = "", open1[3] = "";
    int dir0 = -1, dir1 = -1;
    for (size_t i = 0; i < n; i++) {
        cache_writer_t *w = ws[i];
        si_error_t err = {{0}};
        if (w->placed || w->memory)
            continue; /* linked when submitted, or written into a segment */
        cache_object_parts(w->object_id, d0, d1, name);
        if (dir0 < 0 || strcmp(d0, open0) != 0) {
            if (dir1 >= 0)
                close(dir1);
            if (dir0 >= 0)
                close(dir0);
            dir1 = -1;
            open1[0] = '\0';
            if ((dir0 = cache_object_dir(c, c->objects_fd, d0, &err)) < 0) {
                fail(w, errno, "object %" PRId64 ": %s", w->object_id, err.text);
                continue;
            }
            memcpy(open0, d0, sizeof(open0));
        }
        if (dir1 < 0 || strcmp(d1, open1) != 0) {
            if (dir1 >= 0)
                close(dir1);
            if ((dir1 = cache_object_dir(c, dir0, d1, &err)) < 0) {
                fail(w, errno, "object %" PRId64 ": %s", w->object_id, err.text);
                continue;
            }
            memcpy(open1, d1, sizeof(open1));
        }
        if (renameat(c->tmp_fd, w->temp_name, dir1, name) < 0) {
            fail(w, errno, "object %" PRId64 ": cannot rename %s/tmp/%s into place: %s",
                 w->object_id, c->conf.dir, w->temp_name, strerror(errno));
            continue;
        }
        w->placed = true;
    }
    if (dir1 >= 0)
        close(dir1);
    if (dir0 >= 0)
        close(dir0);
}

/* fdatasync of a placed object's file and fsync of its directory. */
static int flush_one(cache_t *c, const cache_writer_t *w, si_error_t *err)
{
    char rel[CACHE_OBJECT_PATH_MAX];
    cache_object_path(w->object_id, rel, sizeof(rel), NULL);
    const char *inside = rel + strlen("objects/");
    char *slash = strrchr(rel, '/');
    int fd = openat(c->objects_fd, inside, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    int rc = fd < 0 ? -1 : fdatasync(fd);
    int saved = errno;
    if (fd >= 0)
        close(fd);
    if (rc == 0) {
        *slash = '\0'; /* its directory, objects/<b2>/<b1> */
        fd = openat(c->objects_fd, inside, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        rc = fd < 0 ? -1 : fsync(fd);
        saved = errno;
        if (fd >= 0)
            close(fd);
        *slash = '/';
    }
    if (rc < 0)
        return si_errnoprintf(err, saved, "flushing the cache (%s): fsync of %s: %s",
                              c->conf.dir, rel, strerror(saved));
    return 0;
}

/* One flush for the whole batch: the data, the renames, the directories. */
static int flush_all(cache_t *c, cache_writer_t **ws, size_t n, si_error_t *err)
{
    pthread_mutex_lock(&c->lock);
    int fault = 0;
    if (c->fault_count > 0) {
        c->fault_count--;
        fault = c->fault_errno;
    }
    pthread_mutex_unlock(&c->lock);
    if (fault) {
        c->seg.failed = true; /* as after a real failed flush: unknown state */
        return si_errnoprintf(err, fault, "flushing the cache (%s): %s"
                              " (injected by STAGEIN_TEST_CACHE_FLUSH_FAULT)", c->conf.dir,
                              strerror(fault));
    }
    /* the segment's objects by one fdatasync; the files by theirs */
    uint64_t bytes = 0;
    size_t files = 0, in_segment = 0;
    for (size_t i = 0; i < n; i++) {
        if (ws[i]->memory) {
            in_segment += ws[i]->rc == 0;
            continue;
        }
        bytes += ws[i]->expected_size;
        files++;
    }
    if (in_segment && cache_segment_flush(c, err) < 0)
        return -1;
    if (!files)
        return 0;
    if (files <= FILE_FLUSH_MAX || bytes / files >= FILE_FLUSH_AVERAGE) {
        for (size_t i = 0; i < n; i++)
            if (ws[i]->placed && flush_one(c, ws[i], err) < 0)
                return -1;
        return 0;
    }
    if (syncfs(c->objects_fd) < 0)
        return si_errnoprintf(err, errno, "flushing the cache (%s): syncfs of its file system:"
                              " %s", c->conf.dir, strerror(errno));
    return 0;
}

/* A cache row's values, from parameter at + 1 on (ROW_VALUES). */
#define ROW_PARAMS 7
static void bind_row(db_stmt_t *s, int at, const cache_writer_t *w, double now)
{
    char rel[CACHE_OBJECT_PATH_MAX + 16];
    cache_place_path(w->object_id, &w->place, rel, sizeof(rel), NULL);
    db_bind_int64(s, at + 1, w->object_id);
    db_bind_text_copy(s, at + 2, rel);
    db_bind_int64(s, at + 3, (int64_t)w->expected_size);
    db_bind_double(s, at + 4, now);
    db_bind_int(s, at + 5, w->expected_sum[0] != '\0');
    if (w->place.segment) {
        db_bind_int64(s, at + 6, w->place.segment);
        db_bind_int64(s, at + 7, (int64_t)w->place.offset);
    } else {
        db_bind_null(s, at + 6);
        db_bind_int64(s, at + 7, 0);
    }
}

/* One writer's row: 1 inserted, 0 refused (its object is not in the
 * catalog any more: a foreign-key error on SQLite, no row on PostgreSQL),
 * -1 on another error. */
static int row_insert_one(cache_t *c, const cache_writer_t *w, double now)
{
    db_stmt_t *s = cache_stmt(c, SQL_ROW_INSERT);
    bind_row(s, 0, w, now);
    int step = db_step(s);
    if (step != DB_DONE && db_errclass(c->db) != DB_ERR_CONSTRAINT)
        return -1;
    return step == DB_DONE && db_changes(c->db) > 0;
}

/* The statement inserting k rows (prepared at its first use). SQLite
 * takes the values as they are (a missing object fails the statement);
 * PostgreSQL, whose failed statement would abort the transaction, inserts
 * only the rows whose object exists, and needs the values' types. Both
 * return the rows inserted. */
static db_stmt_t *rows_stmt(cache_t *c, size_t k, si_error_t *err)
{
    if (c->rows_stmt[k]) {
        db_reset(c->rows_stmt[k]);
        db_clear_bindings(c->rows_stmt[k]);
        return c->rows_stmt[k];
    }
    bool pg = db_engine(c->db) == DB_POSTGRES;
    const char *row = pg ? "(CAST(? AS bigint), CAST(? AS text), CAST(? AS bigint), 0,"
                           " CAST(? AS double precision), CAST(? AS bigint), CAST(? AS bigint),"
                           " CAST(? AS bigint))"
                         : "(?, ?, ?, 0, ?, ?, ?, ?)";
    size_t cap = 512 + k * (strlen(row) + 2), len = 0;
    char *sql = malloc(cap);
    if (!sql) {
        si_errnoprintf(err, ENOMEM, "out of memory");
        return NULL;
    }
    len += (size_t)snprintf(sql + len, cap - len, "%s%s", ROW_INSERT,
                            pg ? " SELECT * FROM (VALUES " : " VALUES ");
    for (size_t r = 0; r < k; r++)
        len += (size_t)snprintf(sql + len, cap - len, "%s%s", r ? ", " : "", row);
    snprintf(sql + len, cap - len, "%s RETURNING object_id",
             pg ? ") AS v(object_id, path, size, pins, last_access, verified, segment,"
                  " file_offset) WHERE EXISTS (SELECT 1 FROM objects o WHERE o.id = v.object_id)"
                : "");
    c->rows_stmt[k] = db_prepare(c->db, sql, NULL);
    free(sql);
    if (!c->rows_stmt[k])
        cache_db_error(c, err, "preparing the insert of a batch's rows");
    return c->rows_stmt[k];
}

/* The rows of ws[at[0..k)] in one statement; inserted[j] says whether
 * ws[at[j]]'s went in. 0; 1 when SQLite refused the statement for a
 * missing object (then nothing went in: the caller goes row by row); -1
 * on error. */
static int rows_insert(cache_t *c, cache_writer_t **ws, const size_t *at, size_t k, double now,
                       bool *inserted, si_error_t *err)
{
    db_stmt_t *s = rows_stmt(c, k, err);
    if (!s)
        return -1;
    for (size_t j = 0; j < k; j++)
        bind_row(s, (int)j * ROW_PARAMS, ws[at[j]], now);
    int64_t in[CACHE_ROWS_CHUNK];
    size_t nin;
    if (db_step_ids(s, in, k, &nin) == DB_DONE) {
        for (size_t j = 0; j < k; j++)
            inserted[j] = db_ids_find(in, nin, ws[at[j]]->object_id) != NULL;
        return 0;
    }
    if (db_errclass(c->db) == DB_ERR_CONSTRAINT && db_engine(c->db) == DB_SQLITE)
        return 1;
    cache_db_error(c, err, "recording a batch of cached objects");
    return -1;
}

/* The pins of the batch's objects for their requests, one statement per
 * run of one request's objects. A request gone meanwhile leaves its
 * objects unpinned: they are cached all the same. */
static int pins_insert(cache_t *c, cache_writer_t **ws, size_t n, double now, si_error_t *err)
{
    int64_t *ids = malloc((n ? n : 1) * sizeof(*ids));
    if (!ids)
        return si_errnoprintf(err, ENOMEM, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0;) {
        if (ws[i]->rc < 0 || !ws[i]->pin_request) {
            i++;
            continue;
        }
        int64_t request = ws[i]->pin_request;
        size_t k = 0;
        for (; i < n && (ws[i]->rc < 0 || ws[i]->pin_request == request); i++)
            if (ws[i]->rc >= 0)
                ids[k++] = ws[i]->object_id;
        db_stmt_t *s = cache_stmt(c, SQL_PINS_IF_REQUEST);
        if (db_bind_int64_list(s, 1, ids, k) < 0)
            rc = si_errnoprintf(err, ENOMEM, "out of memory");
        db_bind_int64(s, 2, request);
        db_bind_double(s, 3, now);
        if (rc == 0 && db_step(s) != DB_DONE && db_errclass(c->db) != DB_ERR_CONSTRAINT)
            rc = cache_db_error(c, err, "pinning a batch of cached objects");
    }
    free(ids);
    return rc;
}

static int unpublish_recorded(cache_t *c, cache_writer_t **ws, size_t n, si_error_t *err)
{
    int64_t *ids = malloc((n ? n : 1) * sizeof(*ids));
    if (!ids)
        return si_errnoprintf(err, ENOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (ws[i]->rc >= 0)
            ids[k++] = ws[i]->object_id;
    int rc = cache_reservations_unpublish(c, ids, k, err);
    free(ids);
    return rc;
}

/* The rows and pins of the batch's objects in one transaction, a few
 * statements for the batch rather than several per object; lock held. An
 * object the catalog refuses (deleted meanwhile) fails alone; any other
 * failure fails the batch. */
static int record_all(cache_t *c, cache_writer_t **ws, size_t n, si_error_t *err)
{
    if (cache_begin(c, err) < 0)
        return -1;
    double now = cache_now(c);
    /* an unrecorded writer's rows first: they give it its id */
    for (size_t i = 0; i < n; i++) {
        cache_writer_t *w = ws[i];
        if (w->rc < 0 || !w->unrecorded)
            continue;
        int recorded = w->record(w->record_arg, c->cat, &w->object_id, err);
        if (recorded == CACHE_RECORD_REFUSED) {
            fail(w, errno ? errno : EINVAL, "%s", err->text);
            continue;
        }
        if (recorded < 0 || w->object_id < 1) {
            if (recorded == 0)
                si_errprintf(err, "cache: the record of a new object gave it no id");
            goto failed;
        }
    }
    size_t at[CACHE_ROWS_CHUNK];
    bool inserted[CACHE_ROWS_CHUNK];
    for (size_t i = 0; i < n;) {
        size_t k = 0;
        for (; i < n && k < CACHE_ROWS_CHUNK; i++)
            if (ws[i]->rc >= 0)
                at[k++] = i;
        if (!k)
            break;
        int rc = rows_insert(c, ws, at, k, now, inserted, err);
        for (size_t j = 0; j < k && rc >= 0; j++) {
            cache_writer_t *w = ws[at[j]];
            if (rc == 1) { /* row by row, then */
                int one = row_insert_one(c, w, now);
                if (one < 0) {
                    cache_db_error(c, err, "recording a batch of cached objects");
                    goto failed;
                }
                inserted[j] = one;
            }
            if (inserted[j])
                continue;
            if (w->unrecorded) { /* its rows were just made: the batch is broken */
                si_errprintf(err, "cache: object %" PRId64 " vanished from the catalog while"
                             " it was recorded", w->object_id);
                goto failed;
            }
            fail(w, ENOENT, "object %" PRId64 " is not in the catalog", w->object_id);
        }
        if (rc < 0)
            goto failed;
    }
    /* shared: the reservations' rows go with the objects', so that the
     * others count their bytes once (SQL_SHARED_TOTALS) */
    if (cache_shared(c) && unpublish_recorded(c, ws, n, err) < 0)
        goto failed;
    for (size_t i = 0; i < n; i++) {
        cache_writer_t *w = ws[i];
        if (w->rc < 0)
            continue;
        if (!w->unrecorded && w->record &&
            w->record(w->record_arg, c->cat, &w->object_id, err) != 0)
            goto failed;
    }
    if (pins_insert(c, ws, n, now, err) < 0)
        goto failed;
    return cache_commit(c, err);
failed:
    cache_rollback(c);
    return -1;
}

/* A batch on its way: written and flushed by the committer, then recorded
 * and answered by the recorder, so that one batch's transaction (and its
 * sync) overlaps the next one's writes and flush; before, uploads waiting
 * for their acknowledgement waited for both in turn (BENCHMARKS.md,
 * "The batch's transaction beside the next batch's flush"). Rows are
 * recorded in the batches' order; a crash between the two stages leaves
 * flushed bytes without rows, which recovery frees. */
typedef struct cache_batch {
    cache_writer_t **ws;
    size_t n;
    cache_segment_t sealing; /* the segment it filled, sealed after its rows */
} cache_batch_t;

/* Committer: the batch's bytes in place and durable. */
static void write_batch(cache_t *c, cache_batch_t *b)
{
    si_error_t err = {{0}};
    cache_writer_t **ws = b->ws;
    size_t n = b->n;
    bool memory = false;
    for (size_t i = 0; i < n && !memory; i++)
        memory = ws[i]->memory;
    if (memory)
        cache_segment_append(c, ws, n);
    place_all(c, ws, n);
    if (flush_all(c, ws, n, &err) < 0)
        for (size_t i = 0; i < n; i++)
            fail(ws[i], errno, "object %" PRId64 ": %s", ws[i]->object_id, err.text);
    cache_segment_detach(c, &b->sealing);
    if (!memory)
        return;
    /* the memory writers' bytes are in the segment: their buffers go back
     * to the budget now, not after the transaction, so that the readers
     * fill the next batch while this one is recorded */
    uint64_t released = 0;
    for (size_t i = 0; i < n; i++) {
        cache_writer_t *w = ws[i];
        if (!w->memory)
            continue;
        si_bufpool_put(&c->buffers, w->buf, w->buf_size);
        w->buf = NULL;
        released += w->buf_size;
    }
    pthread_mutex_lock(&c->wlock);
    c->memory_held -= released;
    pthread_cond_broadcast(&c->committed_cv); /* wait_for_memory_locked */
    pthread_mutex_unlock(&c->wlock);
}

/* Recorder: the rows of a flushed batch, the cache's accounting, the
 * answers. */
static void record_batch(cache_t *c, cache_batch_t *b)
{
    si_error_t err = {{0}};
    cache_writer_t **ws = b->ws;
    size_t n = b->n;
    if (c->pause_ms)
        usleep(c->pause_ms * 1000u);
    pthread_mutex_lock(&c->lock);
    size_t ok = 0;
    for (size_t i = 0; i < n; i++)
        ok += ws[i]->rc == 0;
    if (ok && record_all(c, ws, n, &err) < 0) {
        int saved = errno ? errno : EIO;
        for (size_t i = 0; i < n; i++)
            fail(ws[i], saved, "object %" PRId64 ": %s", ws[i]->object_id, err.text);
    }
    bool failures = false;
    size_t recorded = 0;
    for (size_t i = 0; i < n; i++) {
        cache_writer_t *w = ws[i];
        if (w->rc < 0) {
            failures = true;
            if (w->placed)
                cache_unlink_object(c, w->object_id);
            else if (!w->unnamed && !w->memory) /* a segment's range stays unused */
                unlinkat(c->tmp_fd, w->temp_name, 0);
            cache_reservation_drop(c, w->reserved_as);
        } else {
            recorded++;
            c->used += w->expected_size;
            c->objects++;
            c->counters.written_objects++;
            c->counters.written_bytes += w->expected_size;
        }
    }
    cache_usage_changed(c, recorded);
    pthread_mutex_lock(&c->wlock);
    for (size_t i = 0; i < n; i++) {
        cache_writer_t *w = ws[i];
        if (w->rc == 0)
            cache_reservation_forget(c, w->reserved_as); /* now counted in used */
        c->writers--; /* a memory writer's buffer went back in write_batch */
    }
    c->commit_generation++;
    pthread_cond_broadcast(&c->committed_cv);
    pthread_mutex_unlock(&c->wlock);
    cache_segment_seal_locked(c, &b->sealing);
    cache_punch_due_locked(c, false);
    c->counters.commit_batches++;
    if (failures) {
        c->counters.commit_failures++;
        cache_changed_locked(c);
    }
    pthread_mutex_unlock(&c->lock);
    for (size_t i = 0; i < n; i++) {
        cache_writer_t *w = ws[i];
        if (w->done)
            w->done(w->done_arg, w->object_id, w->rc, w->errnum, w->rc < 0 ? w->why : NULL);
        cache_writer_free(w);
    }
}

/* ---- the committer and recorder threads ---------------------------------------------- */

/* wlock held: whether the queued objects make a batch now. */
static bool batch_ready(const cache_t *c)
{
    return c->committer_stop || c->conf.commit_delay <= 0 ||
           c->queued >= c->conf.commit_objects || c->queued_bytes >= c->conf.commit_bytes ||
           c->unsubmitted == 0 || si_mono_now() - c->queued_since >= c->conf.commit_delay;
}

/* wlock held: the next batch off the queue into b (up to cap objects),
 * counted in flight (in_batch) until the recorder has ended it. */
static void take_batch_locked(cache_t *c, cache_batch_t *b, size_t cap)
{
    size_t n = 0;
    uint64_t bytes = 0;
    while (c->queue_head && (n == 0 || (n < cap && bytes < c->conf.commit_bytes))) {
        cache_writer_t *w = c->queue_head;
        c->queue_head = w->next;
        c->queued--;
        c->queued_bytes -= w->expected_size;
        bytes += w->expected_size;
        b->ws[n++] = w;
    }
    b->n = n;
    if (!c->queue_head)
        c->queue_tail = &c->queue_head;
    else
        c->queued_since = si_mono_now();
    c->in_batch++;
}

static void *committer_main(void *arg)
{
    cache_t *c = arg;
    size_t cap = c->conf.commit_objects < 65536 ? c->conf.commit_objects : 65536;
    /* two batches: one being written while the recorder has the other */
    cache_writer_t *one[2];
    cache_batch_t batches[2] = {{.ws = malloc(cap * sizeof(cache_writer_t *))},
                                {.ws = malloc(cap * sizeof(cache_writer_t *))}};
    if (!batches[0].ws || !batches[1].ws) { /* no memory for a batch: one object at a time */
        free(batches[0].ws);
        free(batches[1].ws);
        batches[0].ws = &one[0];
        batches[1].ws = &one[1];
        cap = 1;
    }
    unsigned k = 0;
    pthread_mutex_lock(&c->wlock);
    for (;;) {
        while (!c->queue_head && !c->committer_stop)
            pthread_cond_wait(&c->commit_cv, &c->wlock);
        if (!c->queue_head)
            break;
        while (!batch_ready(c)) {
            struct timespec until =
                si_mono_deadline(c->queued_since + c->conf.commit_delay - si_mono_now());
            pthread_cond_timedwait(&c->commit_cv, &c->wlock, &until);
        }
        cache_batch_t *b = &batches[k];
        take_batch_locked(c, b, cap);
        pthread_mutex_unlock(&c->wlock);
        write_batch(c, b);
        pthread_mutex_lock(&c->wlock);
        while (c->recording) /* the previous batch, in the other array */
            pthread_cond_wait(&c->record_cv, &c->wlock);
        c->recording = b;
        pthread_cond_broadcast(&c->record_cv);
        k ^= 1;
    }
    while (c->recording)
        pthread_cond_wait(&c->record_cv, &c->wlock);
    pthread_mutex_unlock(&c->wlock);
    if (batches[0].ws != &one[0]) {
        free(batches[0].ws);
        free(batches[1].ws);
    }
    return NULL;
}

static void *recorder_main(void *arg)
{
    cache_t *c = arg;
    pthread_mutex_lock(&c->wlock);
    for (;;) {
        while (!c->recording && !c->recorder_stop)
            pthread_cond_wait(&c->record_cv, &c->wlock);
        cache_batch_t *b = c->recording;
        if (!b)
            break;
        pthread_mutex_unlock(&c->wlock);
        record_batch(c, b);
        pthread_mutex_lock(&c->wlock);
        c->recording = NULL;
        c->in_batch--;
        pthread_cond_broadcast(&c->record_cv);
        pthread_cond_broadcast(&c->committed_cv); /* cache_commit_drain */
    }
    pthread_mutex_unlock(&c->wlock);
    return NULL;
}

int cache_committer_start(cache_t *c, si_error_t *err)
{
    c->queue_tail = &c->queue_head;
    const char *fault = getenv("STAGEIN_TEST_CACHE_FLUSH_FAULT");
    if (fault && *fault) {
        /* "ERRNO:COUNT": the next COUNT batch flushes fail (tests) */
        char name[16] = "";
        unsigned count = 1;
        sscanf(fault, "%15[A-Z]:%u", name, &count);
        c->fault_errno = strcmp(name, "ENOSPC") == 0 ? ENOSPC : EIO;
        c->fault_count = count;
    }
    /* a window as long as asked between the flush and the transaction, so
     * that a test's kill -9 lands inside batch commits */
    const char *pause = getenv("STAGEIN_TEST_CACHE_COMMIT_PAUSE_MS");
    if (pause && *pause)
        c->pause_ms = (unsigned)strtoul(pause, NULL, 10) % 10000;
    if (pthread_create(&c->recorder, NULL, recorder_main, c) != 0)
        return si_errnoprintf(err, EAGAIN, "cache: cannot start its recorder thread");
    c->recorder_running = true;
    if (pthread_create(&c->committer, NULL, committer_main, c) != 0) {
        cache_committer_stop(c);
        return si_errnoprintf(err, EAGAIN, "cache: cannot start its committer thread");
    }
    c->committer_running = true;
    return 0;
}

void cache_committer_stop(cache_t *c)
{
    if (c->committer_running) /* what is queued is written, and recorded */
        si_thread_stop(c->committer, &c->wlock, &c->commit_cv, &c->committer_stop);
    c->committer_running = false;
    if (c->recorder_running)
        si_thread_stop(c->recorder, &c->wlock, &c->record_cv, &c->recorder_stop);
    c->recorder_running = false;
}

/* cache_writer_finish waits here for its batch. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool ended;
    int rc, errnum;
    char why[sizeof(((si_error_t *)0)->text)];
} finish_wait_t;

static void finish_ended(void *arg, int64_t object_id, int rc, int errnum, const char *why)
{
    finish_wait_t *fw = arg;
    (void)object_id;
    pthread_mutex_lock(&fw->mu);
    fw->rc = rc;
    fw->errnum = errnum;
    snprintf(fw->why, sizeof(fw->why), "%s", why ? why : "");
    fw->ended = true;
    pthread_cond_signal(&fw->cv);
    pthread_mutex_unlock(&fw->mu);
}

int cache_writer_finish(cache_writer_t *w, int64_t pin_request, si_error_t *err)
{
    finish_wait_t fw = {.rc = -1};
    pthread_mutex_init(&fw.mu, NULL);
    pthread_cond_init(&fw.cv, NULL);
    if (cache_writer_submit(w, pin_request, finish_ended, &fw, err) < 0) {
        int saved = errno;
        cache_writer_abort(w);
        pthread_cond_destroy(&fw.cv);
        pthread_mutex_destroy(&fw.mu);
        errno = saved;
        return -1;
    }
    pthread_mutex_lock(&fw.mu);
    while (!fw.ended)
        pthread_cond_wait(&fw.cv, &fw.mu);
    pthread_mutex_unlock(&fw.mu);
    pthread_cond_destroy(&fw.cv);
    pthread_mutex_destroy(&fw.mu);
    if (fw.rc < 0)
        return si_errnoprintf(err, fw.errnum, "%s", fw.why);
    return 0;
}
