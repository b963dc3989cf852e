/* The push context: the catalog connection, recovery after a restart, the
 * status of a push, metrics, and the aggregator thread. */
#include "config.h"
#include "daemon/push/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "daemon/cache/cache.h"
#include "common/array.h"
#include "common/clock.h"
#include "common/fileio.h"
#include "common/thread.h"

/* ---- life cycle ------------------------------------------------------------------ */

static void set_identity(push_t *p, const char *munge_socket, bool peercred)
{
    snprintf(p->munge_socket, sizeof(p->munge_socket), "%s", munge_socket ? munge_socket : "");
    p->peercred = peercred;
}

push_t *push_open(const push_opts_t *opts, si_error_t *err)
{
    if (!opts->cache || !opts->cache_dir || !opts->catalog) {
        si_errnoprintf(err, EINVAL, "push: a catalog, a cache and its directory are needed");
        return NULL;
    }
    if (opts->instance && opts->instance[0] &&
        (strlen(opts->instance) >= sizeof(((push_t *)0)->instance) || !(opts->lease_s > 0))) {
        si_errnoprintf(err, EINVAL, "push: instance '%.80s' needs a name of at most 64"
                       " characters and a lease time above 0 s", opts->instance);
        return NULL;
    }
    if (opts->conf.copies < 1 || opts->conf.copies > 4) {
        si_errnoprintf(err, EINVAL, "push.copies must be 1 to 4, not %d", opts->conf.copies);
        return NULL;
    }
    push_t *p = calloc(1, sizeof(*p));
    if (!p) {
        si_errnoprintf(err, ENOMEM, "out of memory");
        return NULL;
    }
    if (!(p->cat = catalog_open_opts(opts->catalog, err)) || push_db_open(p, err) < 0) {
        si_errprefix(err, "push: catalog");
        push_db_close(p);
        catalog_close(p->cat);
        free(p);
        errno = EIO;
        return NULL;
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->wake, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&p->begin_mu, NULL); /* receive.c's recorder */
    pthread_cond_init(&p->begin_cv, NULL);
    p->conf = opts->conf;
    p->cache = opts->cache;
    snprintf(p->cache_dir, sizeof(p->cache_dir), "%s", opts->cache_dir);
    p->backend = opts->backend;
    p->log = opts->log;
    set_identity(p, opts->munge_socket, opts->peercred);
    if (opts->instance)
        snprintf(p->instance, sizeof(p->instance), "%s", opts->instance);
    p->lease_s = opts->lease_s;
    if (push_volume_claims_start(p, opts->volume_holds, err) < 0) {
        push_close(p);
        return NULL;
    }
    return p;
}

void push_reconfigure(push_t *p, const push_conf_t *conf, const char *munge_socket,
                      bool peercred)
{
    pthread_mutex_lock(&p->lock);
    /* the bucket names objects already pushed: it changes only at restart */
    char bucket[sizeof(p->conf.bucket)];
    memcpy(bucket, p->conf.bucket, sizeof(bucket));
    p->conf = *conf;
    memcpy(p->conf.bucket, bucket, sizeof(bucket));
    set_identity(p, munge_socket, peercred);
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
}

void push_close(push_t *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    bool running = p->running;
    p->stopping = true;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    if (running)
        pthread_join(p->thread, NULL);
    /* receive.c's recorder records what is queued, then ends */
    pthread_mutex_lock(&p->begin_mu);
    bool recording = p->recorder_running;
    p->recorder_stopping = true;
    pthread_cond_signal(&p->begin_cv);
    pthread_mutex_unlock(&p->begin_mu);
    if (recording)
        pthread_join(p->recorder, NULL);
    pthread_cond_destroy(&p->begin_cv);
    pthread_mutex_destroy(&p->begin_mu);
    push_db_close(p);
    catalog_close(p->cat);
    push_claims_free(p);
    push_volume_claims_stop(p);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* ---- removing an upload never acknowledged ------------------------------------------ */

int push_discard_object(push_t *p, int64_t object_id, si_error_t *err)
{
    /* 1. the item lets go of its cache pin (trigger), so the cache may drop it */
    pthread_mutex_lock(&p->lock);
    db_stmt_t *s = push_stmt(p, PUSH_SQL_DISCARD_MARK);
    db_bind_int64(s, 1, object_id);
    int rc = db_step(s) == DB_DONE ? 0 : push_db_error(p, err, "discarding an upload");
    db_reset(s);
    pthread_mutex_unlock(&p->lock);
    if (rc < 0)
        return -1;

    /* 2. its cache file, if the upload got that far */
    si_error_t cerr;
    if (cache_remove(p->cache, object_id, &cerr) < 0 && errno != ENOENT)
        return si_errnoprintf(err, errno, "discarding object %" PRId64 ": %s", object_id, cerr.text);

    /* 3. item, object, and the push and dataset made for it alone, together */
    static const int steps[] = {PUSH_SQL_DISCARD_ITEM, PUSH_SQL_DISCARD_OBJECT,
                                PUSH_SQL_DISCARD_PUSH, PUSH_SQL_DISCARD_DATASET};
    pthread_mutex_lock(&p->lock);
    db_stmt_t *q = NULL;
    if (catalog_begin(p->cat, err) < 0)
        goto error;
    q = push_stmt(p, PUSH_SQL_DISCARD_FIND_PUSH);
    db_bind_int64(q, 1, object_id);
    int step = db_step(q);
    if (step != DB_ROW) {
        if (step != DB_DONE) {
            push_db_error(p, err, "finding an upload's push");
            goto error;
        }
        db_reset(q);
        q = NULL;
        catalog_rollback(p->cat);
        pthread_mutex_unlock(&p->lock);
        return 0; /* already gone */
    }
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        db_stmt_t *d = push_stmt(p, steps[i]);
        db_bind_int64(d, 1, object_id);
        db_bind_int64(d, 2, db_column_int64(q, 0));
        db_bind_int64(d, 3, db_column_int64(q, 1));
        db_bind_text_copy(d, 4, db_column_text(q, 2));
        int drc = db_step(d);
        db_reset(d);
        if (drc != DB_DONE) {
            push_db_error(p, err, "removing an upload");
            goto error;
        }
    }
    db_reset(q);
    q = NULL;
    if (catalog_commit(p->cat, err) < 0)
        goto error;
    pthread_mutex_unlock(&p->lock);
    return 0;
error:
    db_reset(q);
    catalog_rollback(p->cat);
    pthread_mutex_unlock(&p->lock);
    errno = EIO;
    return -1;
}

/* ---- recovery -------------------------------------------------------------------------- */

/* Object ids of the items that statement `which` lists (lock held). */
static int ids_in_state(push_t *p, int which, int64_t **ids, size_t *n, si_error_t *err)
{
    db_stmt_t *s = push_stmt(p, which);
    *ids = NULL;
    *n = 0;
    size_t cap = 0;
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        if (si_array_grow((void **)ids, &cap, *n + 1, sizeof(**ids)) < 0) {
            db_reset(s);
            return si_errnoprintf(err, ENOMEM, "out of memory");
        }
        (*ids)[(*n)++] = db_column_int64(s, 0);
    }
    db_reset(s);
    if (rc != DB_DONE) {
        free(*ids);
        *ids = NULL;
        return push_db_error(p, err, "listing push items");
    }
    return 0;
}

static int set_item_failed(push_t *p, int64_t object_id, const char *why, si_error_t *err)
{
    db_stmt_t *s = push_stmt(p, PUSH_SQL_ITEM_FAILED);
    db_bind_int64(s, 1, object_id);
    db_bind_text_copy(s, 2, why);
    db_bind_double(s, 3, si_wall_now());
    int rc = db_step(s);
    db_reset(s);
    if (rc != DB_DONE)
        return push_db_error(p, err, "failing a push item");
    catalog_event(p->cat, "push.failed", NULL, why);
    return 0;
}

/* Re-hashes the cached copy of an acknowledged file against the catalog.
 * 1: matches; 0: missing or wrong (why says which); -1: error. */
static int verify_cached(push_t *p, int64_t object_id, char *why, size_t why_size,
                         si_error_t *err)
{
    db_stmt_t *s = push_stmt(p, PUSH_SQL_OBJECT);
    db_bind_int64(s, 1, object_id);
    if (db_step(s) != DB_ROW) {
        db_reset(s);
        return push_db_error(p, err, "reading a pushed object");
    }
    char name[SI_KEY_MAX + SI_BUCKET_MAX + 2], expected[SI_CHECKSUM_TEXT_MAX] = "";
    snprintf(name, sizeof(name), "%s/%s", db_column_text(s, 0), db_column_text(s, 1));
    uint64_t size = (uint64_t)db_column_int64(s, 2);
    if (db_column_text(s, 3))
        snprintf(expected, sizeof(expected), "%s", db_column_text(s, 3));
    db_reset(s);

    int fd;
    cache_place_t place;
    si_error_t cerr;
    if (cache_open_object(p->cache, object_id, &fd, &place, &cerr) < 0) {
        if (errno != ENOENT)
            return si_errnoprintf(err, errno, "%s", cerr.text);
        snprintf(why, why_size, "%s: its cached copy was lost before it was archived", name);
        return 0;
    }
    si_checksum_t *sum = si_checksum_new("sha256", err);
    unsigned char *buf = malloc(1u << 20);
    int rc = -1;
    if (!sum || !buf) {
        si_errnoprintf(err, ENOMEM, "out of memory");
        goto out;
    }
    bool readable = place.size != size ||
                    si_checksum_fd(sum, fd, place.offset, size, buf, 1u << 20, &cerr) == 0;
    char actual[SI_CHECKSUM_TEXT_MAX];
    si_checksum_final(sum, actual);
    if (!readable) /* ended early, or a read error */
        snprintf(why, why_size, "%s: its cached copy cannot be read: %s", name, cerr.text);
    else if (place.size != size)
        snprintf(why, why_size, "%s: its cached copy has %" PRIu64 " bytes, not %" PRIu64, name,
                 place.size, size);
    else if (expected[0] && strcmp(actual, expected) != 0)
        snprintf(why, why_size, "%s: its cached copy is corrupt (%s, expected %s)", name,
                 actual, expected);
    else
        why[0] = '\0';
    rc = why[0] ? 0 : 1;
out:
    close(fd);
    free(buf);
    si_checksum_free(sum);
    return rc;
}

int push_recover(push_t *p, push_recovery_t *out, si_error_t *err)
{
    push_recovery_t rec = {0};
    int64_t *ids = NULL;
    size_t n = 0;

    /* uploads that were never acknowledged; with several instances, those
     * no live instance writes (another's may be in progress) */
    if (push_shared(p)) {
        if (push_sweep_uploads(p, true, &rec.discarded, err) < 0)
            return -1;
    }
    pthread_mutex_lock(&p->lock);
    int rc = push_shared(p) ? 0 : ids_in_state(p, PUSH_SQL_IDS_UNACKNOWLEDGED, &ids, &n, err);
    pthread_mutex_unlock(&p->lock);
    if (rc < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (push_discard_object(p, ids[i], err) < 0) {
            free(ids);
            return -1;
        }
        rec.discarded++;
    }
    free(ids);
    ids = NULL;

    pthread_mutex_lock(&p->lock);
    /* an archive write that a crash interrupted: its files are archived
     * again; whatever it left on a volume is referenced by nothing. With
     * several instances the aggregator's sweep does it, push by push, for
     * the pushes no live instance holds (this one's earlier life's leases
     * went when it registered again). */
    if (push_shared(p)) {
        rec.requeued = 0;
    } else if (push_requeue_archiving(p, &rec.requeued, err) < 0) {
        goto error;
    }
    if (ids_in_state(p, PUSH_SQL_IDS_RECEIVED, &ids, &n, err) < 0)
        goto error;
    for (size_t i = 0; i < n; i++) {
        char why[600];
        int ok = verify_cached(p, ids[i], why, sizeof(why), err);
        if (ok < 0)
            goto error;
        if (ok) {
            rec.verified++;
            rec.pending++;
            continue;
        }
        if (set_item_failed(p, ids[i], why, err) < 0)
            goto error;
        si_log(p->log, SI_LOG_ERROR, "push: %s", why);
        rec.failed++;
        pthread_mutex_unlock(&p->lock);
        si_error_t cerr;
        cache_remove(p->cache, ids[i], &cerr); /* a bad copy; absent is fine */
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    free(ids);
    if (out)
        *out = rec;
    return 0;
error:
    pthread_mutex_unlock(&p->lock);
    free(ids);
    return -1;
}

int push_sweep_uploads(push_t *p, bool now, uint64_t *removed, si_error_t *err)
{
    if (removed)
        *removed = 0;
    if (!push_shared(p) || (!now && si_mono_now() < p->next_upload_sweep))
        return 0;
    double every = p->lease_s / 2;
    p->next_upload_sweep = si_mono_now() + (every < 1 ? 1 : every);
    int64_t *ids = NULL;
    size_t n = 0, cap = 0;
    pthread_mutex_lock(&p->lock);
    /* a live other instance's uploads are its own to finish (their rows
     * name it); this one's and dead ones' are candidates */
    db_stmt_t *s = push_stmt(p, PUSH_SQL_UNACKNOWLEDGED_BEFORE);
    db_bind_double(s, 1, si_wall_now() - p->lease_s);
    db_bind_text(s, 2, p->instance, -1);
    db_bind_double(s, 3, si_wall_now() - p->lease_s);
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        if (si_array_grow((void **)&ids, &cap, n + 1, sizeof(*ids)) < 0) {
            rc = DB_ERROR;
            break;
        }
        ids[n++] = db_column_int64(s, 0);
    }
    db_reset(s);
    if (rc != DB_DONE) {
        push_db_error(p, err, "listing unacknowledged uploads");
        pthread_mutex_unlock(&p->lock);
        free(ids);
        return -1;
    }
    pthread_mutex_unlock(&p->lock);
    for (size_t i = 0; i < n; i++) {
        /* a rename just before its batch's commit: at most a lease time */
        int busy = cache_write_in_progress(p->cache, ids[i], p->lease_s, err);
        if (busy < 0 || (!busy && push_discard_object(p, ids[i], err) < 0)) {
            free(ids);
            return -1;
        }
        if (!busy && removed)
            (*removed)++;
    }
    free(ids);
    return 0;
}

/* ---- status ------------------------------------------------------------------------------ */

void push_status_free(push_status_t *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->nitems; i++) {
        free(st->items[i].bucket);
        free(st->items[i].object_key);
        free(st->items[i].error);
        free(st->items[i].copies);
    }
    free(st->items);
    free(st->dataset);
    free(st);
}

static char *column_dup(db_stmt_t *s, int col)
{
    const char *t = db_column_text(s, col);
    return strdup(t ? t : "");
}

static int load_copies(push_t *p, push_item_t *it, si_error_t *err)
{
    db_stmt_t *s = push_stmt(p, PUSH_SQL_COPIES);
    db_bind_int64(s, 1, it->object_id);
    size_t cap = it->ncopies; /* at most the size of the block it->copies has */
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        if (si_array_grow((void **)&it->copies, &cap, it->ncopies + 1, sizeof(*it->copies)) < 0) {
            db_reset(s);
            return si_errnoprintf(err, ENOMEM, "out of memory");
        }
        push_copy_t *c = &it->copies[it->ncopies++];
        c->copy = db_column_int(s, 0);
        snprintf(c->volume, sizeof(c->volume), "%s", db_column_text(s, 1));
        c->file_seq = db_column_int64(s, 2);
        c->position = (uint64_t)db_column_int64(s, 3);
    }
    db_reset(s);
    return rc == DB_DONE ? 0 : push_db_error(p, err, "reading tape copies");
}

static int load_status(push_t *p, const char *uuid, uid_t caller, push_status_t *st,
                       si_error_t *err)
{
    if (!uuid || strlen(uuid) != PUSH_UUID_LEN)
        return si_errnoprintf(err, ENOENT, "no push '%.64s' (a push id is a 36-character uuid)",
                         uuid ? uuid : "");
    db_stmt_t *s = push_stmt(p, PUSH_SQL_PUSH_BY_UUID);
    db_bind_text(s, 1, uuid, -1);
    int rc = db_step(s);
    if (rc != DB_ROW) {
        db_reset(s);
        return rc == DB_DONE ? si_errnoprintf(err, ENOENT, "no push %s", uuid)
                                 : push_db_error(p, err, "reading a push");
    }
    int64_t id = db_column_int64(s, 0);
    snprintf(st->uuid, sizeof(st->uuid), "%s", uuid);
    st->uid = (uid_t)db_column_int64(s, 1);
    st->gid = (gid_t)db_column_int64(s, 2);
    st->dataset = column_dup(s, 3);
    st->created = db_column_double(s, 4);
    st->updated = db_column_double(s, 5);
    db_reset(s);
    if (!st->dataset)
        return si_errnoprintf(err, ENOMEM, "out of memory");
    if (caller != (uid_t)-1 && caller != 0 && caller != st->uid)
        return si_errnoprintf(err, EACCES, "push %s belongs to uid %u, not to uid %u", uuid,
                         (unsigned)st->uid, (unsigned)caller);

    /* uploads still arriving are not part of the push until acknowledged */
    s = push_stmt(p, PUSH_SQL_PUSH_ITEMS);
    db_bind_int64(s, 1, id);
    size_t cap = 0;
    bool pending = false, archiving = false;
    while ((rc = db_step(s)) == DB_ROW) {
        if (si_array_grow((void **)&st->items, &cap, st->nitems + 1, sizeof(*st->items)) < 0) {
            db_reset(s);
            return si_errnoprintf(err, ENOMEM, "out of memory");
        }
        push_item_t *it = &st->items[st->nitems++];
        memset(it, 0, sizeof(*it));
        it->object_id = db_column_int64(s, 0);
        it->bucket = column_dup(s, 1);
        it->object_key = column_dup(s, 2);
        it->size = (uint64_t)db_column_int64(s, 3);
        if (db_column_text(s, 4))
            snprintf(it->checksum, sizeof(it->checksum), "%s", db_column_text(s, 4));
        snprintf(it->state, sizeof(it->state), "%s", db_column_text(s, 5));
        if (db_column_text(s, 6))
            it->error = column_dup(s, 6);
        if (!it->bucket || !it->object_key) {
            db_reset(s);
            return si_errnoprintf(err, ENOMEM, "out of memory");
        }
        size_t dlen = strlen(st->dataset);
        it->key = strncmp(it->object_key, st->dataset, dlen) == 0 && it->object_key[dlen] == '/'
                      ? it->object_key + dlen + 1 : it->object_key;
        st->files_total++;
        st->bytes_total += it->size;
        if (strcmp(it->state, "DURABLE") == 0)
            st->files_durable++;
        else if (strcmp(it->state, "FAILED") == 0)
            st->files_failed++;
        else
            pending = true;
        archiving = archiving || strcmp(it->state, "ARCHIVING") == 0;
    }
    db_reset(s);
    if (rc != DB_DONE)
        return push_db_error(p, err, "reading push items");
    if (st->nitems == 0)
        return si_errnoprintf(err, ENOENT, "no push %s (nothing of it was received yet)", uuid);
    for (size_t i = 0; i < st->nitems; i++)
        if (load_copies(p, &st->items[i], err) < 0)
            return -1;
    const char *state = archiving                              ? "ARCHIVING"
                        : pending                              ? "RECEIVED"
                        : st->files_failed                     ? "FAILED"
                                                               : "DURABLE";
    snprintf(st->state, sizeof(st->state), "%s", state);
    return 0;
}

int push_get(push_t *p, const char *uuid, uid_t caller_uid, push_status_t **out,
             si_error_t *err)
{
    push_status_t *st = calloc(1, sizeof(*st));
    if (!st)
        return si_errnoprintf(err, ENOMEM, "out of memory");
    pthread_mutex_lock(&p->lock);
    int rc = load_status(p, uuid, caller_uid, st, err);
    pthread_mutex_unlock(&p->lock);
    if (rc < 0) {
        int saved = errno;
        push_status_free(st);
        errno = saved;
        return -1;
    }
    *out = st;
    return 0;
}

int push_metrics(push_t *p, push_metrics_t *out, si_error_t *err)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&p->lock);
    db_stmt_t *s = push_stmt(p, PUSH_SQL_COUNT_BY_STATE);
    int step = db_step(s);
    int64_t unfolded = 0;
    if (step == DB_ROW) {
        out->received_files = (uint64_t)db_column_int64(s, 0);
        out->received_bytes = (uint64_t)db_column_int64(s, 1);
        out->archiving_files = (uint64_t)db_column_int64(s, 2);
        out->durable_files = (uint64_t)db_column_int64(s, 3);
        out->failed_files = (uint64_t)db_column_int64(s, 4);
        unfolded = db_column_int64(s, 5);
        step = db_step(s);
    }
    db_reset(s);
    int rc = step == DB_DONE ? 0 : push_db_error(p, err, "counting push items");
    if (rc == 0 && unfolded >= CATALOG_FOLD_AT) {
        si_error_t ignored; /* the changes stay counted until folded */
        (void)catalog_fold_totals(p->cat, &ignored);
    }
    out->archive_files_written = p->archive_files_written;
    out->pushes_taken_over = p->pushes_taken_over;
    out->commits_fenced = p->commits_fenced;
    pthread_mutex_unlock(&p->lock);
    return rc;
}

void push_metrics_text(FILE *out, void *push)
{
    push_metrics_t m;
    si_error_t err;
    if (!push || push_metrics(push, &m, &err) < 0)
        return; /* the scrape goes on without them; the catalog's own figures say why */
    fprintf(out,
            "# HELP stagein_push_files Files of pushes by state.\n"
            "# TYPE stagein_push_files gauge\n"
            "stagein_push_files{state=\"received\"} %" PRIu64 "\n"
            "stagein_push_files{state=\"archiving\"} %" PRIu64 "\n"
            "stagein_push_files{state=\"durable\"} %" PRIu64 "\n"
            "stagein_push_files{state=\"failed\"} %" PRIu64 "\n"
            "# HELP stagein_push_received_bytes Bytes received, waiting to be archived.\n"
            "# TYPE stagein_push_received_bytes gauge\n"
            "stagein_push_received_bytes %" PRIu64 "\n"
            "# HELP stagein_push_archive_files_written_total Archive files written (each copy).\n"
            "# TYPE stagein_push_archive_files_written_total counter\n"
            "stagein_push_archive_files_written_total %" PRIu64 "\n"
            "# HELP stagein_push_taken_over_total Pushes taken over from dead instances.\n"
            "# TYPE stagein_push_taken_over_total counter\n"
            "stagein_push_taken_over_total %" PRIu64 "\n"
            "# HELP stagein_push_commits_fenced_total Archive writes dropped: their push was taken over meanwhile.\n"
            "# TYPE stagein_push_commits_fenced_total counter\n"
            "stagein_push_commits_fenced_total %" PRIu64 "\n",
            m.received_files, m.archiving_files, m.durable_files, m.failed_files, m.received_bytes,
            m.archive_files_written, m.pushes_taken_over, m.commits_fenced);
}

/* ---- the aggregator thread ------------------------------------------------------------------ */

/* Seconds between passes: after a failed one; at most (the sweeps of
 * several instances come every lease_s / 2 and are bounded by it too); at
 * least, with none waiting (a window of 0 writes each file at once). */
#define FAILED_PASS_S 2.0
#define MAX_PASS_S 60.0
#define MIN_IDLE_PASS_S 0.25

/* When nothing was due: the next pass when the oldest waiting file's window
 * passes (a scan of the waiting files each 250 ms cost 12 % of a 64 KiB
 * push's CPU), else when a file received now would be due; a kick (an
 * aggregate's worth received) comes sooner. Lock held. */
static double next_pass_s(const push_t *p, const push_archived_t *done)
{
    double most = MAX_PASS_S;
    if (push_shared(p) && p->lease_s / 2 < most)
        most = p->lease_s / 2;
    double s = done->next_due > 0 ? done->next_due - si_wall_now() : p->conf.aggregate_window;
    if (done->next_due <= 0 && s < MIN_IDLE_PASS_S)
        s = MIN_IDLE_PASS_S;
    if (s < 0.01)
        s = 0.01;
    return s < most ? s : most;
}

static void *aggregator(void *arg)
{
    push_t *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->stopping) {
        p->kicked = false;
        pthread_mutex_unlock(&p->lock);
        push_archived_t done;
        si_error_t err;
        uint64_t removed;
        if (push_sweep_uploads(p, false, &removed, &err) < 0)
            si_log(p->log, SI_LOG_ERROR, "push: removing dead instances' uploads: %s", err.text);
        else if (removed)
            si_log(p->log, SI_LOG_NOTICE, "push: %" PRIu64 " uploads of dead instances, never"
                                          " acknowledged, removed", removed);
        int rc = push_archive_once(p, false, &done, &err);
        if (rc < 0)
            si_log(p->log, SI_LOG_ERROR, "push: archiving: %s", err.text);
        pthread_mutex_lock(&p->lock);
        if (rc == 1 || p->kicked)
            continue; /* more may be due */
        struct timespec until = si_mono_deadline(rc < 0 ? FAILED_PASS_S : next_pass_s(p, &done));
        if (!p->stopping && !p->kicked)
            pthread_cond_timedwait(&p->wake, &p->lock, &until);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int push_start(push_t *p, si_error_t *err)
{
    if (!p->backend)
        return si_errnoprintf(err, EINVAL, "push: no archive backend to write to");
    pthread_mutex_lock(&p->lock);
    int rc = 0;
    if (!p->running) {
        int e = pthread_create(&p->thread, NULL, aggregator, p);
        if (e)
            rc = si_errnoprintf(err, e, "push: cannot start the aggregator: %s", strerror(e));
        else
            p->running = true;
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

void push_note_received(push_t *p, uint64_t size)
{
    pthread_mutex_lock(&p->lock);
    p->waiting_bytes += size;
    p->waiting_files++;
    if (p->waiting_bytes >= p->conf.aggregate_bytes ||
        p->waiting_files >= p->conf.aggregate_files) {
        p->kicked = true;
        pthread_cond_signal(&p->wake);
    }
    pthread_mutex_unlock(&p->lock);
}

void push_kick(push_t *p)
{
    si_flag_raise(&p->lock, &p->wake, &p->kicked);
}

push_t *push_service_start(const si_conf_t *conf, const push_opts_t *opts, si_error_t *err)
{
    push_opts_t o = *opts;
    push_recovery_t rec;
    if (push_conf_from(conf, &o.conf, err) < 0)
        return NULL;
    push_t *p = push_open(&o, err);
    if (!p)
        return NULL;
    if (push_recover(p, &rec, err) < 0 || push_start(p, err) < 0) {
        si_errprefix(err, "push");
        push_close(p);
        return NULL;
    }
    si_log(p->log, SI_LOG_NOTICE, "push: %" PRIu64 " files waiting to be archived (%" PRIu64
                                  " verified in the cache, %" PRIu64 " interrupted archive"
                                  " writes to redo), %" PRIu64 " failed, %" PRIu64
                                  " unacknowledged uploads removed",
           rec.pending, rec.verified, rec.requeued, rec.failed, rec.discarded);
    return p;
}
