/* Receiving one pushed file: validated and recorded (RECEIVING) before the
 * first byte (push_upload_begin_async: with the other uploads beginning
 * meanwhile, in one transaction), streamed into a cache writer, then
 * checked, made durable in the cache and marked RECEIVED in the cache
 * batch's transaction: the acknowledgement. A small file joining a push
 * is only checked before its first byte, and its rows are made, RECEIVED,
 * by that batch's transaction (begin_unrecorded, record_new_rows).
 * Anything that fails on the way removes what was recorded. */
#include "config.h"
#include "daemon/push/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/cache/cache.h"
#include "common/text.h"
#include "common/uuid.h"
#include "common/clock.h"

struct push_upload {
    push_t *p;
    int64_t object_id;
    int64_t push_id;            /* its push's row */
    bool checksum_recorded;     /* the object's row took the client's checksum */
    cache_writer_t *writer;
    push_received_t info;
    push_upload_done_fn done;   /* push_upload_submit's */
    void *done_arg;
    /* its object and item rows made by its cache batch's transaction
     * (record_received), not before its first byte (record_upload) */
    bool unrecorded;
    int64_t mtime;              /* unrecorded: the client's, or -1 */
};

uint64_t push_upload_received(const push_upload_t *u)
{
    return u->writer ? cache_writer_received(u->writer) : 0;
}

static int check_file(const push_conf_t *conf, const push_file_t *f, char *object_key,
                      si_error_t *err)
{
    if (!f->dataset || !*f->dataset)
        return si_errnoprintf(err, EINVAL, "no dataset named (query argument 'dataset')");
    if (si_dataset_check(f->dataset, err) < 0)
        return errno = EINVAL, -1;
    if (!f->key || !*f->key)
        return si_errnoprintf(err, EINVAL, "no key named (query argument 'key': the file's path"
                                      " inside the dataset)");
    if (si_key_check(f->key, strlen(f->key), err) < 0) {
        si_errprefix(err, "key");
        errno = EINVAL;
        return -1;
    }
    int n = snprintf(object_key, SI_KEY_MAX + 1, "%s/%s", f->dataset, f->key);
    if (n < 0 || n > SI_KEY_MAX)
        return si_errnoprintf(err, EINVAL, "dataset name and key together are longer than %d bytes",
                         SI_KEY_MAX);
    if (f->checksum && (strncmp(f->checksum, "sha256:", 7) != 0 ||
                        !si_checksum_text_valid(f->checksum)))
        return si_errnoprintf(err, EINVAL, "checksum '%.80s' is not sha256:<64 lower-case hex>",
                         f->checksum);
    if (f->size > conf->max_file_size)
        return si_errnoprintf(err, EFBIG, "a file of %" PRIu64 " bytes is larger than the push limit"
                                     " of %" PRIu64 " bytes (push.max_file_size)",
                         f->size, conf->max_file_size);
    if (f->mode < -1 || f->mode > 0777)
        return si_errnoprintf(err, EINVAL, "mode %o is not a permission mode (0 to 0777)",
                         (unsigned)f->mode);
    return 0;
}

/* The dataset to push into, found: 0 (the caller must own it, unless it
 * is shared), 1 when there is none, -1 (err set). */
static int dataset_find(push_t *p, const push_file_t *f, int64_t *id, si_error_t *err)
{
    db_stmt_t *s = push_stmt(p, PUSH_SQL_DATASET_BY_NAME);
    db_bind_text(s, 1, f->dataset, -1);
    int rc = db_step(s);
    if (rc == DB_ROW) {
        *id = db_column_int64(s, 0);
        uid_t owner = (uid_t)db_column_int64(s, 1);
        db_reset(s);
        if (f->uid != 0 && owner != f->uid && !f->shared)
            return si_errnoprintf(err, EACCES, "dataset '%s' belongs to uid %u: only its owner may"
                                          " push into it (caller uid %u)",
                             f->dataset, (unsigned)owner, (unsigned)f->uid);
        return 0;
    }
    db_reset(s);
    return rc == DB_DONE ? 1 : push_db_error(p, err, "looking up a dataset");
}

/* The dataset to push into: found or created. */
static int dataset_for(push_t *p, const push_file_t *f, const char *push_uuid, int64_t *id,
                       si_error_t *err)
{
    int rc = dataset_find(p, f, id, err);
    if (rc <= 0)
        return rc;
    db_stmt_t *s = push_stmt(p, PUSH_SQL_DATASET_INSERT);
    db_bind_text(s, 1, f->dataset, -1);
    db_bind_int64(s, 2, f->uid);
    db_bind_int64(s, 3, f->gid);
    db_bind_int(s, 4, f->mode >= 0 ? f->mode : (int)p->conf.dataset_mode);
    db_bind_text(s, 5, push_uuid, -1);
    db_bind_int64(s, 6, (int64_t)time(NULL));
    rc = db_step(s);
    db_reset(s);
    if (rc != DB_DONE)
        return push_db_error(p, err, "creating a dataset");
    *id = db_last_insert_id(p->db);
    return 0;
}

/* The push to add to (the caller's, for the same dataset) or a new one. */
static int push_for(push_t *p, const push_file_t *f, int64_t dataset_id, char *uuid,
                    int64_t *id, si_error_t *err)
{
    db_stmt_t *s;
    if (f->push_uuid) {
        s = push_stmt(p, PUSH_SQL_PUSH_FOR_UPLOAD);
        db_bind_text(s, 1, f->push_uuid, -1);
        int rc = db_step(s);
        if (rc != DB_ROW) {
            db_reset(s);
            return rc == DB_DONE ? si_errnoprintf(err, ENOENT, "no push '%.64s'", f->push_uuid)
                                     : push_db_error(p, err, "looking up a push");
        }
        *id = db_column_int64(s, 0);
        uid_t owner = (uid_t)db_column_int64(s, 1);
        int64_t ds = db_column_int64(s, 2);
        char name[160];
        snprintf(name, sizeof(name), "%s", db_column_text(s, 3));
        db_reset(s);
        if (f->uid != 0 && owner != f->uid)
            return si_errnoprintf(err, EACCES, "push %s belongs to uid %u, not to uid %u",
                             f->push_uuid, (unsigned)owner, (unsigned)f->uid);
        if (ds != dataset_id)
            return si_errnoprintf(err, EINVAL, "push %s is into dataset '%s', not '%s'",
                             f->push_uuid, name, f->dataset);
        snprintf(uuid, PUSH_UUID_LEN + 1, "%s", f->push_uuid);
        return 0;
    }
    s = push_stmt(p, PUSH_SQL_PUSH_INSERT);
    db_bind_text(s, 1, uuid, -1);
    db_bind_int64(s, 2, f->uid);
    db_bind_int64(s, 3, f->gid);
    db_bind_int64(s, 4, dataset_id);
    db_bind_double(s, 5, si_wall_now());
    int rc = db_step(s);
    db_reset(s);
    if (rc != DB_DONE)
        return push_db_error(p, err, "creating a push");
    *id = db_last_insert_id(p->db);
    return 0;
}

/* Dataset, push, object and item (RECEIVING) in one transaction; lock held. */

/* The modification time of an object received without one: when it was
 * committed, rounded up to the whole second the catalog keeps, so that a
 * source file written before its upload ended is never newer than the copy
 * (`aws s3 sync` re-uploads files newer than their LastModified). */
static int64_t received_mtime(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (int64_t)now.tv_sec + (now.tv_nsec > 0);
}

/* Dataset, push, object and item (RECEIVING) of one upload, inside the
 * caller's transaction; lock held. */
/* The dataset and push a group's last upload was recorded into, in the
 * group's transaction: the next upload to the same push by the same caller
 * takes them without looking them up again. */
typedef struct {
    const push_file_t *file;    /* the upload that looked them up; NULL: none yet */
    int64_t dataset_id, push_id;
} push_rows_memo_t;

static bool memo_fits(const push_rows_memo_t *m, const push_file_t *f)
{
    const push_file_t *g = m ? m->file : NULL;
    return g && f->push_uuid && g->push_uuid && strcmp(f->push_uuid, g->push_uuid) == 0 &&
           strcmp(f->dataset, g->dataset) == 0 && f->uid == g->uid && f->shared == g->shared;
}

/* A push item's instance: this one's when instances share the catalog (a
 * dead instance's uploads are found by it, push.c), else NULL. */
static void bind_instance(const push_t *p, db_stmt_t *s, int i)
{
    if (push_shared(p))
        db_bind_text(s, i, p->instance, -1);
    else
        db_bind_null(s, i);
}

static int exists_already(const push_upload_t *u, si_error_t *err)
{
    return si_errnoprintf(err, EEXIST, "object %s/%s exists already (pushed files are"
                          " immutable: push under another key)", u->info.bucket,
                          u->info.object_key);
}

static int record_rows(push_t *p, const push_file_t *f, push_upload_t *u,
                       const push_rows_memo_t *memo, int64_t *dataset_out, si_error_t *err)
{
    int64_t dataset_id = 0, push_id = 0;
    if (!f->push_uuid)
        si_uuid4(u->info.uuid);
    if (memo_fits(memo, f)) {
        dataset_id = memo->dataset_id;
        push_id = memo->push_id;
        snprintf(u->info.uuid, sizeof(u->info.uuid), "%s", f->push_uuid);
    } else if (dataset_for(p, f, f->push_uuid ? f->push_uuid : u->info.uuid, &dataset_id,
                           err) < 0 ||
               push_for(p, f, dataset_id, u->info.uuid, &push_id, err) < 0) {
        return -1;
    }
    if (dataset_out)
        *dataset_out = dataset_id;
    db_stmt_t *s = push_stmt(p, PUSH_SQL_OBJECT_INSERT);
    db_bind_text(s, 1, u->info.bucket, -1);
    db_bind_text(s, 2, u->info.object_key, -1);
    db_bind_int64(s, 3, (int64_t)f->size);
    if (f->checksum)
        db_bind_text(s, 4, f->checksum, -1);
    db_bind_int64(s, 5, f->mtime >= 0 ? f->mtime : received_mtime());
    int rc = db_step(s);
    db_reset(s);
    if (rc != DB_DONE) {
        if (db_errclass(p->db) == DB_ERR_UNIQUE)
            return exists_already(u, err);
        return push_db_error(p, err, "recording a pushed object");
    }
    u->object_id = db_last_insert_id(p->db);
    u->push_id = push_id;
    u->checksum_recorded = f->checksum != NULL;
    s = push_stmt(p, PUSH_SQL_ITEM_INSERT);
    db_bind_int64(s, 1, u->object_id);
    db_bind_int64(s, 2, push_id);
    db_bind_double(s, 3, si_wall_now());
    bind_instance(p, s, 4);
    rc = db_step(s);
    db_reset(s);
    if (rc != DB_DONE) {
        u->object_id = 0;
        return push_db_error(p, err, "recording a push item");
    }
    return 0;
}

/* One upload's rows in a transaction of its own; lock held. Not synced:
 * RECEIVING rows answer for nothing (recovery discards them), and the
 * batch commit that acknowledges the upload syncs them with its own (64
 * KiB pushes 7 % faster without this sync, BENCHMARKS.md). */
static int record_upload(push_t *p, const push_file_t *f, push_upload_t *u, si_error_t *err)
{
    if (catalog_begin_unsynced(p->cat, err) < 0)
        return errno = push_db_errno(p), -1;
    if (record_rows(p, f, u, NULL, NULL, err) < 0 || catalog_commit(p->cat, err) < 0) {
        int saved = errno;
        catalog_rollback(p->cat);
        u->object_id = 0;
        return errno = saved, -1;
    }
    return 0;
}

/* Everything of a failed upload removed, errno kept: -1. */
static int upload_failed(push_upload_t *u)
{
    int saved = errno;
    push_upload_abort(u);
    errno = saved;
    return -1;
}

/* A new upload of file, checked (not recorded); NULL with err. */
static push_upload_t *upload_new(push_t *p, const push_file_t *file, si_error_t *err)
{
    push_upload_t *u = calloc(1, sizeof(*u));
    if (!u) {
        si_errnoprintf(err, ENOMEM, "out of memory");
        return NULL;
    }
    u->p = p;
    pthread_mutex_lock(&p->lock);
    push_conf_t conf = p->conf;
    pthread_mutex_unlock(&p->lock);
    snprintf(u->info.bucket, sizeof(u->info.bucket), "%s", conf.bucket);
    if (check_file(&conf, file, u->info.object_key, err) < 0) {
        int saved = errno;
        free(u);
        errno = saved;
        return NULL;
    }
    return u;
}

/* The recorded upload's cache writer; -1 (err set, u still the caller's)
 * when the cache refuses it. */
static int writer_open(push_t *p, push_upload_t *u, const push_file_t *file, si_error_t *err)
{
    u->info.object_id = u->object_id;
    u->info.size = file->size;
    if (file->checksum)
        snprintf(u->info.checksum, sizeof(u->info.checksum), "%s", file->checksum);
    if ((u->unrecorded ? cache_writer_open_unrecorded(p->cache, file->size, file->checksum,
                                                      &u->writer, err)
                       : cache_writer_open(p->cache, u->object_id, file->size, file->checksum,
                                           &u->writer, err)) < 0) {
        if (errno == EAGAIN)
            si_errprefix(err, "the cache has no room for the file now");
        return -1;
    }
    /* read again only when archived, later: the page cache's copy is
     * work for nothing */
    if (file->size >= CACHE_DIRECT_MIN_SIZE)
        cache_writer_direct(u->writer);
    return 0;
}

int push_upload_begin(push_t *p, const push_file_t *file, push_upload_t **out,
                      si_error_t *err)
{
    push_upload_t *u = upload_new(p, file, err);
    if (!u)
        return -1;
    pthread_mutex_lock(&p->lock);
    int rc = record_upload(p, file, u, err);
    pthread_mutex_unlock(&p->lock);
    if (rc < 0) {
        int saved = errno;
        free(u);
        errno = saved;
        return -1;
    }
    if (writer_open(p, u, file, err) < 0)
        return upload_failed(u);
    *out = u;
    return 0;
}

/* ---- uploads beginning together: one transaction for their rows -------------------- */

/* Why: a transaction per upload's start cost each upload the write lock
 * (shared with the cache's batch commits) and held a control-API thread
 * while it waited; now the uploads that begin while one group is recorded
 * form the next, each in a savepoint of its own so that one refused (a key
 * that exists, another user's dataset) leaves the others recorded. Nothing
 * is acknowledged before its RECEIVED state commits with its cache batch,
 * so a crash here leaves only RECEIVING rows, which recovery discards. */
typedef struct push_begin {
    push_upload_t *u;
    push_file_t file;           /* the caller's strings, valid until begun */
    push_upload_begun_fn begun;
    void *arg;
    int rc, errnum;
    si_error_t err;
    struct push_begin *next;          /* in the queue, then in the group */
    struct push_begin *recorded_next; /* the group's uploads recorded now */
} push_begin_t;

/* Every upload of the group not refused on its own fails with err
 * (errnum: EAGAIN when the catalog was unreachable, else EIO). */
static void group_failed(push_begin_t *group, const si_error_t *err, int errnum)
{
    for (push_begin_t *b = group; b; b = b->recorded_next)
        if (b->rc == 0) {
            b->rc = -1;
            b->errnum = errnum;
            b->err = *err;
            b->u->object_id = 0;
        }
}

/* A savepoint statement, prepared once on push's connection. */
static int savepoint(push_t *p, const char *sql, si_error_t *err)
{
    db_stmt_t *s = db_cached(p->db, sql, err);
    if (!s)
        return errno = EIO, -1;
    int rc = db_step(s);
    db_reset(s);
    return rc == DB_DONE ? 0 : push_db_error(p, err, "a savepoint of uploads beginning");
}

static const char SQL_SAVEPOINT[] = "SAVEPOINT push_upload";
static const char SQL_RELEASE[] = "RELEASE SAVEPOINT push_upload";
static const char SQL_ROLLBACK_TO[] = "ROLLBACK TO SAVEPOINT push_upload";

/* The rows of a group's uploads to record now (linked by recorded_next)
 * in one transaction, not synced (as record_upload); lock held. */
static void record_group(push_t *p, push_begin_t *group)
{
    si_error_t err;
    if (!group->recorded_next) { /* alone: its own transaction is the group's */
        if (record_upload(p, &group->file, group->u, &group->err) < 0)
            group->rc = -1, group->errnum = errno;
        return;
    }
    if (catalog_begin_unsynced(p->cat, &err) < 0) {
        group_failed(group, &err, push_db_errno(p));
        return;
    }
    push_rows_memo_t memo = {0};
    for (push_begin_t *b = group; b; b = b->recorded_next) {
        if (savepoint(p, SQL_SAVEPOINT, &err) < 0)
            goto broken;
        int64_t dataset_id;
        if (record_rows(p, &b->file, b->u, &memo, &dataset_id, &b->err) == 0) {
            if (savepoint(p, SQL_RELEASE, &err) < 0)
                goto broken;
            /* only rows that stay: a rolled-back upload's new dataset is gone */
            memo = (push_rows_memo_t){&b->file, dataset_id, b->u->push_id};
            continue;
        }
        b->rc = -1;
        b->errnum = errno;
        if (savepoint(p, SQL_ROLLBACK_TO, &err) < 0 || savepoint(p, SQL_RELEASE, &err) < 0)
            goto broken;
    }
    if (catalog_commit(p->cat, &err) == 0)
        return;
broken:;
    int errnum = push_db_errno(p);
    catalog_rollback(p->cat);
    group_failed(group, &err, errnum);
}

/* Lock held: whether b takes the unrecorded path: a small file joining a
 * push that exists, checked by reads alone (the push, its dataset, the key
 * still free); its rows come with its cache batch (record_received), so
 * that no transaction of its own stands before its first byte. A file
 * refused by these checks is taken too, b->rc set. memo: the push checked
 * last in this group. */
static bool begin_unrecorded(push_t *p, push_begin_t *b, push_rows_memo_t *memo)
{
    const push_file_t *f = &b->file;
    push_upload_t *u = b->u;
    if (!f->push_uuid || !cache_takes_unrecorded(p->cache, f->size))
        return false;
    int64_t dataset_id = 0, push_id = 0;
    if (memo_fits(memo, f)) {
        dataset_id = memo->dataset_id;
        push_id = memo->push_id;
    } else {
        int found = dataset_find(p, f, &dataset_id, &b->err);
        if (found == 1) /* none: the push named is refused the usual way */
            return false;
        if (found < 0 || push_for(p, f, dataset_id, u->info.uuid, &push_id, &b->err) < 0)
            goto refused;
        *memo = (push_rows_memo_t){f, dataset_id, push_id};
    }
    db_stmt_t *s = push_stmt(p, PUSH_SQL_OBJECT_EXISTS);
    db_bind_text(s, 1, u->info.bucket, -1);
    db_bind_text(s, 2, u->info.object_key, -1);
    int rc = db_step(s);
    db_reset(s);
    if (rc == DB_ROW) {
        exists_already(u, &b->err);
        goto refused;
    }
    if (rc != DB_DONE) {
        push_db_error(p, &b->err, "looking up a pushed object");
        goto refused;
    }
    snprintf(u->info.uuid, sizeof(u->info.uuid), "%s", f->push_uuid);
    u->push_id = push_id;
    u->mtime = f->mtime;
    u->unrecorded = true;
    return true;
refused:
    b->rc = -1;
    b->errnum = errno;
    return true;
}

/* A begun upload's cache writer; the answer to its submitter. An
 * unrecorded one for which the cache has no memory now (ENOTSUP) records
 * its rows first after all. */
static void begin_done(push_t *p, push_begin_t *b)
{
    push_upload_t *u = b->u;
    bool open = false;
    if (b->rc == 0 && u->unrecorded) {
        open = writer_open(p, u, &b->file, &b->err) == 0;
        if (!open && errno == ENOTSUP) {
            u->unrecorded = false;
            pthread_mutex_lock(&p->lock);
            if (record_upload(p, &b->file, u, &b->err) < 0)
                b->rc = -1, b->errnum = errno;
            pthread_mutex_unlock(&p->lock);
        } else if (!open) {
            b->rc = -1;
            b->errnum = errno;
        }
    }
    if (b->rc == 0 && !open && writer_open(p, u, &b->file, &b->err) < 0) {
        b->rc = -1;
        b->errnum = errno;
        upload_failed(u); /* its rows removed, u freed */
        u = NULL;
    } else if (b->rc < 0) {
        free(u);
        u = NULL;
    }
    b->begun(b->arg, u, b->rc, b->errnum, b->rc < 0 ? &b->err : NULL);
    free(b);
}

static void *recorder_main(void *arg)
{
    push_t *p = arg;
    pthread_mutex_lock(&p->begin_mu);
    for (;;) {
        while (!p->begin_head && !p->recorder_stopping)
            pthread_cond_wait(&p->begin_cv, &p->begin_mu);
        push_begin_t *group = p->begin_head;
        if (!group)
            break;
        p->begin_head = p->begin_tail = NULL;
        pthread_mutex_unlock(&p->begin_mu);
        pthread_mutex_lock(&p->lock);
        /* the unrecorded ones out of the group's transaction, in order */
        push_rows_memo_t memo = {0};
        push_begin_t *recorded = NULL, **tail = &recorded;
        for (push_begin_t *b = group; b; b = b->next)
            if (!begin_unrecorded(p, b, &memo)) {
                *tail = b;
                tail = &b->recorded_next;
            }
        *tail = NULL;
        if (recorded)
            record_group(p, recorded);
        pthread_mutex_unlock(&p->lock);
        while (group) {
            push_begin_t *next = group->next;
            begin_done(p, group);
            group = next;
        }
        pthread_mutex_lock(&p->begin_mu);
    }
    pthread_mutex_unlock(&p->begin_mu);
    return NULL;
}

int push_upload_begin_async(push_t *p, const push_file_t *file, push_upload_begun_fn begun,
                            void *arg, si_error_t *err)
{
    push_upload_t *u = upload_new(p, file, err);
    if (!u)
        return -1;
    push_begin_t *b = calloc(1, sizeof(*b));
    if (!b) {
        free(u);
        return si_errnoprintf(err, ENOMEM, "out of memory");
    }
    *b = (push_begin_t){.u = u, .file = *file, .begun = begun, .arg = arg};
    pthread_mutex_lock(&p->begin_mu);
    if (!p->recorder_running && !p->recorder_stopping &&
        pthread_create(&p->recorder, NULL, recorder_main, p) == 0)
        p->recorder_running = true;
    bool queued = p->recorder_running && !p->recorder_stopping;
    if (queued) {
        if (p->begin_tail)
            p->begin_tail->next = b;
        else
            p->begin_head = b;
        p->begin_tail = b;
        pthread_cond_signal(&p->begin_cv);
    }
    pthread_mutex_unlock(&p->begin_mu);
    if (queued)
        return 0;
    free(b);
    free(u);
    return si_errnoprintf(err, EAGAIN, "push: uploads are not taken now (stageind is stopping)");
}

int push_upload_write(push_upload_t *u, const void *data, size_t len, si_error_t *err)
{
    return cache_writer_write(u->writer, data, len, err);
}

int push_upload_expect(push_upload_t *u, const char *checksum, si_error_t *err)
{
    if (strncmp(checksum, "sha256:", 7) != 0 || !si_checksum_text_valid(checksum))
        return si_errnoprintf(err, EINVAL, "checksum '%.80s' is not sha256:<64 lower-case hex>",
                              checksum);
    if (u->info.checksum[0] && strcmp(u->info.checksum, checksum) != 0)
        return si_errnoprintf(err, EINVAL, "the checksum after the body (%s) differs from the"
                              " one before it (%s)", checksum, u->info.checksum);
    if (cache_writer_expect(u->writer, checksum, err) < 0)
        return -1;
    snprintf(u->info.checksum, sizeof(u->info.checksum), "%s", checksum);
    return 0;
}

/* An unrecorded upload's object and item (RECEIVED), made on db in its
 * batch's transaction: CACHE_RECORD_REFUSED when the key was taken since
 * the upload began. */
static int record_new_rows(push_upload_t *u, db_t *db, double now, si_error_t *err)
{
    db_stmt_t *s = db_cached(db, push_sql(PUSH_SQL_OBJECT_INSERT_NEW), err);
    if (!s)
        return errno = EIO, -1;
    db_bind_text(s, 1, u->info.bucket, -1);
    db_bind_text(s, 2, u->info.object_key, -1);
    db_bind_int64(s, 3, (int64_t)u->info.size);
    db_bind_text(s, 4, u->info.checksum, -1);
    db_bind_int64(s, 5, u->mtime >= 0 ? u->mtime : received_mtime());
    int rc = db_step(s);
    int64_t id = rc == DB_ROW ? db_column_int64(s, 0) : 0;
    db_reset(s);
    if (rc == DB_DONE) {
        exists_already(u, err);
        return CACHE_RECORD_REFUSED;
    }
    if (rc != DB_ROW) {
        db_error(db, err, "catalog: recording a pushed object");
        return errno = EIO, -1;
    }
    if (!(s = db_cached(db, push_sql(PUSH_SQL_ITEM_INSERT_RECEIVED), err)))
        return errno = EIO, -1;
    db_bind_int64(s, 1, id);
    db_bind_int64(s, 2, u->push_id);
    db_bind_double(s, 3, now);
    bind_instance(u->p, s, 4);
    rc = db_step(s);
    db_reset(s);
    if (rc != DB_DONE) {
        db_error(db, err, "catalog: recording a push item");
        return errno = EIO, -1;
    }
    u->object_id = u->info.object_id = id;
    return 0;
}

/* RECEIVED (an unrecorded upload: its rows made, record_new_rows), with
 * the checksum we computed when the client sent none: run
 * by the cache in its batch's transaction (cat: the cache's connection, its
 * lock held), so that the file's state and its cache row become durable
 * together and an acknowledgement costs no transaction of its own. */
static int record_received(void *arg, catalog_t *cat, int64_t *object_id, si_error_t *err)
{
    push_upload_t *u = arg;
    push_t *p = u->p;
    /* the checksum only when the client did not send it first; the push's
     * time of last activity once per push and batch (this runs on the
     * cache's committer thread, one batch at a time) */
    uint64_t batch = cache_commit_generation(p->cache);
    bool touch = p->touched_push != u->push_id || p->touched_batch != batch;
    int steps[3], nsteps = 0;
    db_t *db = catalog_driver(cat);
    double now = si_wall_now();
    if (u->unrecorded) {
        int rc = record_new_rows(u, db, now, err);
        if (rc != 0)
            return rc;
        *object_id = u->object_id;
    } else {
        if (!u->checksum_recorded)
            steps[nsteps++] = PUSH_SQL_RECEIVED_CHECKSUM;
        steps[nsteps++] = PUSH_SQL_MARK_RECEIVED;
    }
    if (touch)
        steps[nsteps++] = PUSH_SQL_RECEIVED_TOUCH;
    for (int i = 0; i < nsteps; i++) {
        db_stmt_t *s = db_cached(db, push_sql(steps[i]), err);
        if (!s)
            return errno = EIO, -1;
        /* each binds what it uses: PostgreSQL types every parameter */
        db_bind_int64(s, 1, steps[i] == PUSH_SQL_RECEIVED_TOUCH ? u->push_id : *object_id);
        if (steps[i] == PUSH_SQL_RECEIVED_CHECKSUM)
            db_bind_text(s, 2, u->info.checksum, -1);
        else
            db_bind_double(s, 2, now);
        int rc = db_step(s);
        db_reset(s);
        if (rc != DB_DONE) {
            db_error(db, err, "catalog: recording a received file");
            return errno = EIO, -1;
        }
    }
    if (touch) {
        p->touched_push = u->push_id;
        p->touched_batch = batch;
    }
    char detail[SI_KEY_MAX + 128];
    snprintf(detail, sizeof(detail), "%s/%s %" PRIu64 " bytes", u->info.bucket,
             u->info.object_key, u->info.size);
    if (catalog_event(cat, "push.received", u->info.uuid, detail) < 0) {
        db_error(db, err, "catalog: logging a received file");
        return errno = EIO, -1;
    }
    return 0;
}

/* The checksum to record, and RECEIVED in the batch's transaction. */
static int upload_prepare(push_upload_t *u, si_error_t *err)
{
    /* no checksum from the client: the one the cache writer computed */
    if (!u->info.checksum[0]) {
        if (cache_writer_seal(u->writer, err) < 0)
            return -1;
        snprintf(u->info.checksum, sizeof(u->info.checksum), "%s",
                 cache_writer_checksum(u->writer));
    }
    cache_writer_on_record(u->writer, record_received, u);
    return 0;
}

/* The file is durable and RECEIVED: logged, counted for the archiver. */
static void upload_received(push_upload_t *u)
{
    si_log(u->p->log, SI_LOG_INFO, "push %s: received %s/%s, %" PRIu64 " bytes, %s",
           u->info.uuid, u->info.bucket, u->info.object_key, u->info.size, u->info.checksum);
    push_note_received(u->p, u->info.size);
}

int push_upload_finish(push_upload_t *u, push_received_t *out, si_error_t *err)
{
    if (upload_prepare(u, err) < 0)
        goto error;
    cache_writer_t *w = u->writer;
    u->writer = NULL; /* freed by finish either way */
    if (cache_writer_finish(w, 0, err) < 0)
        goto error;
    if (out)
        *out = u->info;
    upload_received(u);
    free(u);
    return 0;
error:
    return upload_failed(u);
}

/* The batch holding u's file ended: on the cache's committer thread. A
 * failed file is discarded before its submitter hears, so that a retry
 * under the same key is not refused as a duplicate. */
static void upload_committed(void *arg, int64_t object_id, int rc, int errnum, const char *why)
{
    push_upload_t *u = arg;
    (void)object_id;
    push_upload_done_fn done = u->done;
    void *done_arg = u->done_arg;
    push_received_t info = u->info;
    if (rc == 0) {
        upload_received(u);
        free(u);
        done(done_arg, 0, 0, &info, NULL);
        return;
    }
    char reason[sizeof(((si_error_t *)0)->text)];
    snprintf(reason, sizeof(reason), "%s", why ? why : "the cache commit failed");
    if (u->unrecorded) /* its rows, if made, went with the batch's transaction */
        u->object_id = 0;
    push_upload_abort(u);
    done(done_arg, -1, errnum, &info, reason);
}

int push_upload_submit(push_upload_t *u, push_upload_done_fn done, void *done_arg,
                       si_error_t *err)
{
    u->done = done;
    u->done_arg = done_arg;
    if (upload_prepare(u, err) < 0)
        goto error;
    cache_writer_t *w = u->writer;
    u->writer = NULL; /* the cache's from a successful submit on, u upload_committed's */
    if (cache_writer_submit(w, 0, upload_committed, u, err) < 0) {
        int saved = errno;
        cache_writer_abort(w);
        errno = saved;
        goto error;
    }
    return 0;
error:
    return upload_failed(u);
}

void push_upload_abort(push_upload_t *u)
{
    if (!u)
        return;
    cache_writer_abort(u->writer);
    si_error_t err;
    if (u->object_id && push_discard_object(u->p, u->object_id, &err) < 0)
        si_log(u->p->log, SI_LOG_ERROR, "push: removing a refused upload (it is removed at the"
                                        " next start): %s", err.text);
    free(u);
}
