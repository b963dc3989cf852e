/* The aggregator's step: received files batched into one archive file (up
 * to push.aggregate_bytes, or whatever waits once the oldest waited
 * push.aggregate_window), marked ARCHIVING, written through the archive
 * backend with push.copies copies, and only after the write returned, in one
 * catalog transaction: the volumes' used bytes, each file's tape copies, its
 * dataset membership and its DURABLE state. A crash before that commit
 * leaves an archive file on a volume that nothing references. */
#include "config.h"
#include "daemon/push/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/archive/backend.h"
#include "daemon/cache/cache.h"
#include "common/array.h"
#include "common/clock.h"

/* Commits of a written aggregate tried when the engine reports a conflict
 * (a deadlock it broke): each retry waits a little longer. */
#define COMMIT_TRIES 5

/* pick_batch's step result when an allocation failed */
enum { NO_MEMORY = -2 };

typedef struct {
    int64_t object_id;
    int64_t dataset_id;
    int64_t push_id;
    char uuid[PUSH_UUID_LEN + 1];   /* the push's: its lease's name */
    char *bucket, *key, *path;
    uint64_t offset;               /* of its bytes in path (> 0: a cache segment) */
    char *headers, *storage_class; /* object_meta: kept on tape for an import */
    char checksum[SI_CHECKSUM_TEXT_MAX];
    uint64_t size;
    int64_t mtime;
    int attempts;
} batch_item_t;

typedef struct {
    batch_item_t *items;
    size_t n, cap;
    uint64_t bytes;
    int64_t *pushes, *datasets;     /* distinct, ascending (batch_index) */
    size_t npushes, ndatasets;
} batch_t;

static void batch_free(batch_t *b)
{
    for (size_t i = 0; i < b->n; i++) {
        free(b->items[i].bucket);
        free(b->items[i].key);
        free(b->items[i].path);
        free(b->items[i].headers);
        free(b->items[i].storage_class);
    }
    free(b->items);
    free(b->pushes);
    free(b->datasets);
    memset(b, 0, sizeof(*b));
}

static int cmp_id(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, c = *(const int64_t *)y;
    return (a > c) - (a < c);
}

/* ids sorted and made distinct in place; returns how many are left. */
static size_t distinct(int64_t *ids, size_t n)
{
    qsort(ids, n, sizeof(*ids), cmp_id);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || ids[i] != ids[k - 1])
            ids[k++] = ids[i];
    return k;
}

/* The aggregate's pushes and datasets, each once in id order. */
static int batch_index(batch_t *b, si_error_t *err)
{
    if (!(b->pushes = malloc(b->n * sizeof(int64_t))) ||
        !(b->datasets = malloc(b->n * sizeof(int64_t))))
        return si_errnoprintf(err, ENOMEM, "out of memory");
    for (size_t i = 0; i < b->n; i++) {
        b->pushes[i] = b->items[i].push_id;
        b->datasets[i] = b->items[i].dataset_id;
    }
    b->npushes = distinct(b->pushes, b->n);
    b->ndatasets = distinct(b->datasets, b->n);
    return 0;
}

/* Picks the files of the next aggregate, oldest first, and marks them
 * ARCHIVING; lock held. 0 with b->n == 0 when nothing is due, *next_due
 * then when the oldest waiting is (0: none waits). */
static int pick_batch(push_t *p, bool force, batch_t *b, double *next_due, si_error_t *err)
{
    *next_due = 0;
    db_stmt_t *s = push_stmt(p, PUSH_SQL_RECEIVED_OLDEST_FIRST);
    double oldest = 0;
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        uint64_t size = (uint64_t)db_column_int64(s, 4);
        if (b->n > 0 && (b->bytes + size > p->conf.aggregate_bytes ||
                         b->n == p->conf.aggregate_files))
            break; /* the aggregate is full: it is due whatever its age */
        /* several instances: only the files of pushes this one holds */
        int mine = push_claim(p, db_column_int64(s, 12), db_column_text(s, 11), err);
        if (mine < 0) {
            db_reset(s);
            batch_free(b);
            return -1;
        }
        if (!mine)
            continue;
        if (si_array_grow((void **)&b->items, &b->cap, b->n + 1, sizeof(*b->items)) < 0) {
            rc = NO_MEMORY;
            break;
        }
        batch_item_t *it = &b->items[b->n++];
        memset(it, 0, sizeof(*it));
        it->object_id = db_column_int64(s, 0);
        it->dataset_id = db_column_int64(s, 1);
        it->push_id = db_column_int64(s, 12);
        snprintf(it->uuid, sizeof(it->uuid), "%s", db_column_text(s, 11));
        it->bucket = strdup(db_column_text(s, 2));
        it->key = strdup(db_column_text(s, 3));
        it->size = size;
        if (db_column_text(s, 5))
            snprintf(it->checksum, sizeof(it->checksum), "%s", db_column_text(s, 5));
        it->mtime = db_column_int64(s, 6);
        it->attempts = db_column_int(s, 8);
        for (int c = 9; c <= 10; c++) {
            const char *v = db_column_text(s, c);
            char **dst = c == 9 ? &it->headers : &it->storage_class;
            if (v && *v && !(*dst = strdup(v)))
                rc = NO_MEMORY;
        }
        if (rc == NO_MEMORY)
            break;
        if (b->n == 1)
            oldest = db_column_double(s, 7);
        b->bytes += size;
        /* where the cache holds it (no row: its own file's name, whose
         * absence the archive write then reports) */
        cache_place_t place = {size, (uint64_t)db_column_int64(s, 14),
                               db_column_type(s, 13) == DB_NULL ? 0 : db_column_int64(s, 13)};
        char rel[64];
        cache_place_path(it->object_id, &place, rel, sizeof(rel), NULL);
        it->offset = place.offset;
        size_t len = strlen(p->cache_dir) + strlen(rel) + 2;
        if ((it->path = malloc(len)))
            snprintf(it->path, len, "%s/%s", p->cache_dir, rel);
        if (!it->bucket || !it->key || !it->path) {
            rc = NO_MEMORY;
            break;
        }
    }
    bool full = rc == DB_ROW; /* stopped early: more waits than one aggregate */
    db_reset(s);
    if (rc == NO_MEMORY)
        return si_errnoprintf(err, ENOMEM, "out of memory");
    if (rc != DB_ROW && rc != DB_DONE)
        return push_db_error(p, err, "listing received files");
    bool due = b->n > 0 && (force || full || b->bytes >= p->conf.aggregate_bytes ||
                            si_wall_now() - oldest >= p->conf.aggregate_window);
    /* what the scan saw (an upload's push_note_received waits for the lock) */
    p->waiting_bytes = due ? 0 : b->bytes;
    p->waiting_files = due ? 0 : b->n;
    if (!due) {
        if (b->n > 0)
            *next_due = oldest + p->conf.aggregate_window;
        batch_free(b);
        return 0;
    }
    if (catalog_begin(p->cat, err) < 0)
        goto error;
    s = push_stmt(p, PUSH_SQL_MARK_ARCHIVING);
    size_t kept = 0;
    for (size_t i = 0; i < b->n; i++) {
        db_reset(s);
        db_bind_int64(s, 1, b->items[i].object_id);
        if (db_step(s) != DB_DONE) {
            db_reset(s);
            push_db_error(p, err, "marking files ARCHIVING");
            goto error;
        }
        if (db_changes(p->db) != 1) { /* no longer RECEIVED: not this aggregate's */
            b->bytes -= b->items[i].size;
            free(b->items[i].bucket);
            free(b->items[i].key);
            free(b->items[i].path);
            free(b->items[i].headers);
            free(b->items[i].storage_class);
            continue;
        }
        b->items[kept++] = b->items[i];
    }
    b->n = kept;
    db_reset(s);
    if (catalog_commit(p->cat, err) < 0)
        goto error;
    if (b->n == 0)
        batch_free(b);
    else if (batch_index(b, err) < 0) {
        batch_free(b);
        p->archiving_orphaned = true; /* ARCHIVING till the next pass queues them again */
        return -1;
    }
    return 0;
error:
    catalog_rollback(p->cat);
    batch_free(b);
    p->archiving_orphaned = true; /* a commit lost with the connection may have been made */
    errno = EIO;
    return -1;
}

static int mark_dataset_stale(push_t *p, int64_t dataset_id, si_error_t *err)
{
    db_stmt_t *s = push_stmt(p, PUSH_SQL_DATASET_STALE);
    db_bind_int64(s, 1, dataset_id);
    int rc = db_step(s);
    db_reset(s);
    return rc == DB_DONE ? 0 : push_db_error(p, err, "marking dataset totals stale");
}

/* The pushes' last change, each in a statement of its own after the
 * commit: a push's row is also locked by the batches that receive its
 * files, and holding it across the aggregate's transaction deadlocked
 * with them (two pushes touched in opposite orders). */
static void touch_pushes(push_t *p, const batch_t *b, double now)
{
    db_stmt_t *s = push_stmt(p, PUSH_SQL_PUSH_TOUCH);
    for (size_t i = 0; i < b->npushes; i++) {
        db_reset(s);
        db_bind_int64(s, 1, b->pushes[i]);
        db_bind_double(s, 2, now);
        if (db_step(s) != DB_DONE)
            si_log(p->log, SI_LOG_WARNING, "push: noting a push's last change: %s",
                   db_errmsg(p->db));
    }
    db_reset(s);
}

/* The one transaction that makes an aggregate DURABLE; lock held. */
static int commit_durable(push_t *p, const batch_t *b, int ncopies,
                          const archive_placement_t *pl, si_error_t *err)
{
    db_stmt_t *member = NULL, *item = NULL;
    if (catalog_begin(p->cat, err) < 0)
        return errno = EIO, -1;
    /* first, so that a take-over of any of its pushes waits for this commit
     * or has already made it fail */
    for (size_t i = 0; i < b->n; i++) {
        if (i > 0 && b->items[i].push_id == b->items[i - 1].push_id)
            continue;
        int mine = push_fence(p, b->items[i].push_id, b->items[i].uuid, err);
        if (mine < 0)
            goto error;
        if (!mine) {
            si_errnoprintf(err, ESTALE, "push %s was taken over by another instance during"
                           " the archive write: this write is dropped", b->items[i].uuid);
            goto error;
        }
    }
    /* the aggregate's datasets' rows next, each once in id order: other
     * instances' aggregates lock them too (each tape copy marks its
     * object's datasets stale, in object order), and one order for all
     * keeps them from deadlocking */
    for (size_t i = 0; i < b->ndatasets; i++)
        if (mark_dataset_stale(p, b->datasets[i], err) < 0)
            goto error;
    /* each copy's volume with its end of data after the write */
    for (int c = 0; c < ncopies; c++) {
        const archive_placement_t *last = &pl[(b->n - 1) * (size_t)ncopies + (size_t)c];
        catalog_volume_t v = {.label = last->volume};
        if (catalog_volume_ensure(p->cat, &v, NULL, err) < 0 ||
            catalog_volume_set_used(p->cat, last->volume, last->volume_used, err) < 0)
            goto error;
    }
    member = push_stmt(p, PUSH_SQL_DATASET_MEMBER);
    item = push_stmt(p, PUSH_SQL_MARK_DURABLE);
    double now = si_wall_now();
    for (size_t i = 0; i < b->n; i++) {
        const batch_item_t *it = &b->items[i];
        db_stmt_t *each[] = {member, item};
        for (size_t k = 0; k < 2; k++) {
            db_reset(each[k]);
            db_bind_int64(each[k], 1, k == 0 ? it->dataset_id : it->object_id);
            if (k == 0)
                db_bind_int64(each[k], 2, it->object_id);
            else
                db_bind_double(each[k], 2, now);
            if (db_step(each[k]) != DB_DONE) {
                push_db_error(p, err, "recording a durable file");
                goto error;
            }
            if (k == 1 && db_changes(p->db) != 1) {
                /* another instance took its push over and finished it */
                si_errnoprintf(err, ESTALE, "object %" PRId64 " is no longer being archived"
                               " by this instance: this write is dropped", it->object_id);
                goto error;
            }
        }
        /* after its DURABLE state, which tells a take-over first */
        for (int c = 0; c < ncopies; c++) {
            const archive_placement_t *where = &pl[i * (size_t)ncopies + (size_t)c];
            catalog_copy_t copy = {.object_id = it->object_id, .copy = where->copy,
                                   .volume = where->volume, .file_seq = where->file_seq,
                                   .position = where->position, .length = where->length};
            if (catalog_copy_put(p->cat, &copy, err) < 0)
                goto error;
        }
    }
    /* their totals, on the rows already held: no other dataset's row */
    for (size_t i = 0; i < b->ndatasets; i++)
        if (catalog_refresh_dataset_stats_of(p->cat, b->datasets[i], err) < 0)
            goto error;
    char detail[160];
    snprintf(detail, sizeof(detail), "%zu files, %" PRIu64 " bytes, %d copies, first on %s"
                                     " file %" PRId64, b->n, b->bytes, ncopies, pl[0].volume,
             pl[0].file_seq);
    if (catalog_event(p->cat, "push.durable", NULL, detail) < 0) {
        push_db_error(p, err, "logging an archive write");
        goto error;
    }
    db_reset(member);
    db_reset(item);
    member = item = NULL;
    if (catalog_commit(p->cat, err) < 0)
        return errno = EIO, -1;
    touch_pushes(p, b, now);
    return 0;
error:;
    /* EAGAIN: the engine chose this transaction to break a deadlock, or
     * found it in conflict; the write is on tape, the commit can be tried
     * again */
    int saved = errno == ESTALE ? ESTALE : db_errclass(p->db) == DB_ERR_BUSY ? EAGAIN : EIO;
    db_reset(member);
    db_reset(item);
    catalog_rollback(p->cat);
    if (saved == ESTALE)
        p->commits_fenced++;
    errno = saved;
    return -1;
}

/* The files stay ARCHIVING: alone, the next pass queues them again (with
 * several instances, the sweep). */
static void put_back_in_vain(push_t *p, const char *why)
{
    p->archiving_orphaned = true;
    si_log(p->log, SI_LOG_ERROR, "push: putting an aggregate's files back: %s (they are"
                                 " queued again once the catalog answers)", why);
}

/* After a failed write: back to RECEIVED, or FAILED once out of attempts.
 * Only a write that failed counts as an attempt: one its instance never
 * finished (stopped, killed, taken over) says nothing about the files. */
static size_t put_back(push_t *p, const batch_t *b, const char *why)
{
    size_t failed = 0;
    si_error_t err;
    db_stmt_t *s = push_stmt(p, PUSH_SQL_PUT_BACK);
    if (catalog_begin(p->cat, &err) < 0) {
        db_reset(s);
        put_back_in_vain(p, err.text);
        return 0;
    }
    int mine = 1;
    bool complete = true;
    for (size_t i = 0; i < b->n; i++) {
        /* a push taken over meanwhile is its new instance's to put back */
        if (i == 0 || b->items[i].push_id != b->items[i - 1].push_id)
            mine = push_fence(p, b->items[i].push_id, b->items[i].uuid, &err);
        if (mine < 0) {
            complete = false;
            break;
        }
        if (!mine)
            continue;
        int attempt = b->items[i].attempts + 1;
        bool give_up = attempt >= p->conf.max_attempts;
        char text[700];
        snprintf(text, sizeof(text), "archive write failed%s (attempt %d of %d): %s",
                 give_up ? ", giving up" : "", attempt, p->conf.max_attempts, why);
        db_reset(s);
        db_bind_int64(s, 1, b->items[i].object_id);
        db_bind_int(s, 2, give_up);
        db_bind_text_copy(s, 3, text);
        db_bind_double(s, 4, si_wall_now());
        if (db_step(s) != DB_DONE) {
            push_db_error(p, &err, "putting files back");
            complete = false;
            break;
        }
        failed += give_up;
    }
    db_reset(s);
    if (!complete) {
        catalog_rollback(p->cat);
        put_back_in_vain(p, err.text);
        return 0;
    }
    if (catalog_commit(p->cat, &err) < 0) {
        put_back_in_vain(p, err.text);
        return 0;
    }
    return failed;
}

/* The leases of the aggregate's pushes with nothing left to archive. */
static void release_done_pushes(push_t *p, const batch_t *b)
{
    for (size_t i = 0; i < b->n; i++)
        if (i == 0 || b->items[i].push_id != b->items[i - 1].push_id)
            push_release_if_done(p, b->items[i].push_id, b->items[i].uuid);
}

int push_archive_once(push_t *p, bool force, push_archived_t *out, si_error_t *err)
{
    push_archived_t done = {0};
    batch_t b = {0};
    if (out)
        *out = done;
    if (!p->backend)
        return si_errnoprintf(err, EINVAL, "push: no archive backend to write to");
    pthread_mutex_lock(&p->lock);
    int ncopies = p->conf.copies;
    int rc = push_sweep(p, force, err);
    if (rc == 0)
        rc = pick_batch(p, force, &b, &done.next_due, err);
    pthread_mutex_unlock(&p->lock);
    if (rc < 0)
        return -1;
    if (b.n == 0) {
        if (out)
            *out = done;
        return 0;
    }

    archive_member_t *members = calloc(b.n, sizeof(*members));
    archive_placement_t *pl = calloc(b.n * (size_t)ncopies, sizeof(*pl));
    if (!members || !pl) {
        rc = si_errnoprintf(err, ENOMEM, "out of memory");
        goto put_back;
    }
    for (size_t i = 0; i < b.n; i++)
        members[i] = (archive_member_t){
            .bucket = b.items[i].bucket, .key = b.items[i].key, .path = b.items[i].path,
            .offset = b.items[i].offset, .size = b.items[i].size, .mtime = b.items[i].mtime,
            .checksum = b.items[i].checksum[0] ? b.items[i].checksum : NULL,
            .headers = b.items[i].headers, .storage_class = b.items[i].storage_class};
    /* the long part, with no lock: the files are pinned and ARCHIVING;
     * with several instances it holds the volume lease of each volume it
     * writes (claims.c), until it is done */
    rc = archive_write(p->backend, members, b.n, ncopies, pl, err);
    push_volume_claims_done(p);
    if (rc < 0)
        goto put_back;
    pthread_mutex_lock(&p->lock);
    for (int tries = 1;; tries++) {
        rc = commit_durable(p, &b, ncopies, pl, err);
        if (rc == 0 || errno != EAGAIN || tries == COMMIT_TRIES)
            break;
        si_log(p->log, SI_LOG_WARNING, "push: committing an archive write of %zu files"
               " (try %d of %d, again): %s", b.n, tries, COMMIT_TRIES, err->text);
        pthread_mutex_unlock(&p->lock);
        si_sleep(0.02 * tries);
        pthread_mutex_lock(&p->lock);
    }
    if (rc == 0) {
        p->archive_files_written += (uint64_t)ncopies;
        release_done_pushes(p, &b);
    }
    pthread_mutex_unlock(&p->lock);
    if (rc < 0)
        goto put_back;
    done.files = b.n;
    done.bytes = b.bytes;
    si_log(p->log, SI_LOG_NOTICE, "push: %zu files, %" PRIu64 " bytes durable in %d cop%s"
                                  " (%s file %" PRId64 "%s)", b.n, b.bytes, ncopies,
           ncopies == 1 ? "y" : "ies", pl[0].volume, pl[0].file_seq, ncopies > 1 ? ", ..." : "");
    free(members);
    free(pl);
    batch_free(&b);
    if (out)
        *out = done;
    return 1;

put_back:;
    int saved = errno;
    si_log(p->log, SI_LOG_ERROR, "push: archive write of %zu files, %" PRIu64 " bytes: %s",
           b.n, b.bytes, err->text);
    pthread_mutex_lock(&p->lock);
    done.failed = put_back(p, &b, err->text);
    release_done_pushes(p, &b);
    pthread_mutex_unlock(&p->lock);
    free(members);
    free(pl);
    batch_free(&b);
    if (out)
        *out = done;
    errno = saved;
    return -1;
}
