/* The `hsm` archive backend: an archive file system whose files live on tape
 * behind an HSM (ScoutFS/ScoutAM, Lustre HSM, GPFS/Spectrum Archive). An
 * object bucket/key is the file <root>/<bucket>/<key>.
 *
 * Recall: workers take batches of up to batch_size items in the order of
 * order.h (volume by volume in position order where the catalog knows
 * positions) and run the site's stage command on the batch's paths (the HSM
 * then recalls them, ordering its own drives). The staged files join a
 * ready queue that every worker drains before it takes another batch, so
 * one batch's copies into the cache (copy_file_range; the writer verifies
 * size and checksum) run on all the workers at once, not one after another
 * on the worker that staged them. A command that fails is run again on
 * each path alone, so that one bad file fails only itself; one that
 * outlives stage_timeout is killed and fails its batch. With no stage
 * command, files are read through (the HSM recalls on open), one item per
 * take, so the workers copy `concurrency` files at once in order.h's
 * order. Files are opened beneath the root (openat2 RESOLVE_BENEATH): no
 * symlink leads out of it.
 *
 * Push: each member is written under the root (a temp name, fsync, rename,
 * fsync of the directory), read back against its checksum, then the
 * optional archive command runs on the aggregate's paths; the write is
 * acknowledged only after all of that succeeded.
 *
 * Locks: mu guards the queue, the live table and the counters; it is never
 * held while a command runs or bytes move, nor while a callback runs. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/array.h"
#include "common/checksum.h"
#include "common/fileio.h"
#include "common/text.h"
#include "daemon/archive/backend.h"
#include "daemon/archive/command.h"
#include "daemon/archive/internal.h"
#include "daemon/archive/order.h"

#define HSM_DEFAULT_BATCH 256
#define HSM_DEFAULT_CONCURRENCY 4
#define HSM_DEFAULT_TIMEOUT_S 3600.0
#define HSM_COPY_CHUNK (64u << 20) /* progress is reported per chunk */
#define HSM_VERIFY_BUF (1u << 20)

const si_conf_key_t archive_hsm_conf_keys[] = {
    {"archive.hsm", SI_CONF_GROUP, 0, 0, NULL},
    {"archive.hsm.root", SI_CONF_STRING, 0, 0, NULL},
    {"archive.hsm.stage_command", SI_CONF_STRING, 0, 0, NULL},
    {"archive.hsm.stage_timeout", SI_CONF_FLOAT, 0.1, 604800, NULL},
    {"archive.hsm.archive_command", SI_CONF_STRING, 0, 0, NULL},
    {"archive.hsm.archive_timeout", SI_CONF_FLOAT, 0.1, 604800, NULL},
    {"archive.hsm.batch_size", SI_CONF_INT, 1, 10000, NULL},
    {"archive.hsm.concurrency", SI_CONF_INT, 1, 256, NULL},
    {"archive.hsm.volume", SI_CONF_STRING, 0, 0, NULL},
    SI_CONF_KEYS_END,
};

typedef struct hsm_recall {
    archive_item_t *item;            /* owns bucket/key */
    char *path;                      /* <root>/<bucket>/<key>, for the command */
    const char *rel;                 /* <bucket>/<key>, beneath the root */
    archive_order_entry_t *entry;    /* while queued */
    struct hsm_recall *next_ready;   /* staged, waiting for a worker to copy it */
    bool queued, cancelled;
} hsm_recall_t;

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    archive_recall_cb_t cb;
    si_log_t *log;
    char root[PATH_MAX];
    int root_fd;
    char *stage_command, *archive_command;  /* NULL: none */
    double stage_timeout, archive_timeout;
    size_t batch_size;
    int concurrency;
    int checksum_retries;
    char volume[ARCHIVE_LABEL_MAX + 1];
    atomic_bool stop;

    /* under mu */
    archive_queue_t q;               /* queued, being staged, ready or being copied */
    hsm_recall_t *ready_head, **ready_tail; /* staged, in order, not yet copied */
    archive_counts_t counts;
    uint64_t commands, commands_failed;
    uint64_t write_seq;

    pthread_t *workers;
    int nworkers;
} hsm_t;

/* ---- files beneath the root --------------------------------------------- */

/* openat2 with RESOLVE_BENEATH: path may not leave dirfd (no "..", no
 * absolute symlink, no symlink whose target is outside). */
static int open_beneath(int dirfd, const char *path, int flags, mode_t mode)
{
    struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC), .mode = mode,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

static const char *open_error(int e)
{
    switch (e) {
    case ENOENT:
        return "no such file in the archive";
    case EXDEV:
        return "a symlink on its path leads out of the archive root";
    case ELOOP:
        return "too many symlinks on its path";
    default:
        return strerror(e);
    }
}

/* ---- recall -------------------------------------------------------------- */

static void recall_free(hsm_recall_t *r)
{
    if (r) {
        free(r->item);
        free(r->path);
        free(r);
    }
}

/* Reports r (once) and frees it. */
static void finish(hsm_t *h, hsm_recall_t *r, bool ok, const char *why)
{
    pthread_mutex_lock(&h->mu);
    archive_queue_forget(&h->q, r, r->item->size);
    bool cancelled = r->cancelled;
    if (ok)
        h->counts.reads++;
    else if (!cancelled)
        h->counts.read_failures++;
    pthread_mutex_unlock(&h->mu);
    if (h->cb.done)
        h->cb.done(h->cb.arg, r->item->object_id, ok && !cancelled,
                   ok && !cancelled ? NULL : cancelled ? "cancelled" : why);
    recall_free(r);
}

static bool is_cancelled(hsm_t *h, hsm_recall_t *r)
{
    pthread_mutex_lock(&h->mu);
    bool c = r->cancelled;
    pthread_mutex_unlock(&h->mu);
    return c;
}

/* One attempt's bytes from the open file into the sink. */
static int feed(hsm_t *h, hsm_recall_t *r, int fd, void *session, void *buf, si_error_t *err)
{
    uint64_t size = r->item->size;
    for (uint64_t at = 0; at < size;) {
        uint64_t len = size - at < HSM_COPY_CHUNK ? size - at : HSM_COPY_CHUNK;
        if (h->cb.write_fd) {
            if (h->cb.write_fd(h->cb.arg, session, fd, at, len, err) < 0)
                return -1;
        } else {
            for (uint64_t done = 0; done < len;) {
                size_t want = len - done < HSM_VERIFY_BUF ? (size_t)(len - done) : HSM_VERIFY_BUF;
                ssize_t n = pread(fd, buf, want, (off_t)(at + done));
                if (n < 0 && errno == EINTR)
                    continue;
                if (n <= 0)
                    return si_errnoprintf(err, n < 0 ? errno : EBADMSG, "reading %s: %s",
                                          r->path, n < 0 ? strerror(errno) : "file ended early");
                if (h->cb.write(h->cb.arg, session, buf, (size_t)n, err) < 0)
                    return -1;
                done += (uint64_t)n;
            }
        }
        at += len;
        pthread_mutex_lock(&h->mu);
        h->counts.bytes_read += len;
        pthread_mutex_unlock(&h->mu);
        if (h->cb.progress)
            h->cb.progress(h->cb.arg, r->item->object_id, at);
        if (is_cancelled(h, r))
            return si_errprintf(err, "cancelled");
    }
    return 0;
}

/* Copies one staged file into the cache; re-reads it when the bytes did
 * not match (checksum_retries times). Reports the item. */
static void copy_into_cache(hsm_t *h, hsm_recall_t *r)
{
    char why[600];
    si_error_t err;
    int fd = open_beneath(h->root_fd, r->rel, O_RDONLY, 0);
    if (fd < 0) {
        snprintf(why, sizeof(why), "%s: %s", r->path, open_error(errno));
        finish(h, r, false, why);
        return;
    }
    struct stat st;
    why[0] = '\0';
    if (fstat(fd, &st) < 0)
        snprintf(why, sizeof(why), "%s: %s", r->path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        snprintf(why, sizeof(why), "%s: not a regular file", r->path);
    else if ((uint64_t)st.st_size != r->item->size)
        snprintf(why, sizeof(why), "%s: %lld bytes in the archive, the catalog says %" PRIu64,
                 r->path, (long long)st.st_size, r->item->size);
    if (why[0]) {
        close(fd);
        finish(h, r, false, why);
        return;
    }
    void *buf = h->cb.write_fd ? NULL : malloc(HSM_VERIFY_BUF);
    if (!h->cb.write_fd && !buf) {
        close(fd);
        finish(h, r, false, "out of memory");
        return;
    }
    bool ok = false;
    for (int attempt = 0; attempt <= h->checksum_retries; attempt++) {
        void *session = NULL;
        if (h->cb.begin(h->cb.arg, r->item, &session, &err) < 0)
            break;
        if (feed(h, r, fd, session, buf, &err) < 0) {
            h->cb.abort(h->cb.arg, session);
            break;
        }
        if (h->cb.commit(h->cb.arg, session, &err) == 0) {
            ok = true;
            break;
        }
        if (errno != EBADMSG)
            break;
        /* a mismatch: the next attempt reads the file again */
    }
    free(buf);
    close(fd);
    if (!ok)
        snprintf(why, sizeof(why), "%s: %s", r->path, err.text);
    finish(h, r, ok, why);
}

static int run_stage(hsm_t *h, hsm_recall_t **batch, size_t n, char *why, size_t whysize)
{
    const char **paths = calloc(n, sizeof(*paths));
    if (!paths) {
        snprintf(why, whysize, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        paths[i] = batch[i]->path;
    archive_command_result_t res;
    si_error_t err;
    int rc = archive_command_run(h->stage_command, paths, n, h->stage_timeout, &h->stop, &res,
                                 &err);
    free(paths);
    pthread_mutex_lock(&h->mu);
    h->commands++;
    h->commands_failed += rc < 0 || res.status != 0;
    pthread_mutex_unlock(&h->mu);
    if (rc < 0) {
        snprintf(why, whysize, "stage command: %s", err.text);
        return -1;
    }
    if (res.status == 0 && !res.timed_out)
        return 0;
    char text[500];
    archive_command_describe(&res, h->stage_timeout, text, sizeof(text));
    snprintf(why, whysize, "stage command '%s' %s", h->stage_command, text);
    si_log(h->log, SI_LOG_WARNING, "hsm: stage command on %zu path%s (first %s) %s", n,
           n == 1 ? "" : "s", batch[0]->path, text);
    return res.timed_out ? -2 : -1;
}

static void stage_batch(hsm_t *h, hsm_recall_t **batch, size_t n)
{
    char why[700];
    size_t keep = 0;
    for (size_t i = 0; i < n; i++) {
        if (is_cancelled(h, batch[i]))
            finish(h, batch[i], false, "cancelled");
        else
            batch[keep++] = batch[i];
    }
    n = keep;
    if (n == 0)
        return;
    int rc = h->stage_command ? run_stage(h, batch, n, why, sizeof(why)) : 0;
    if (rc == -1 && n > 1) {
        /* which paths failed: each one alone */
        for (size_t i = 0; i < n && !atomic_load(&h->stop); i++)
            stage_batch(h, &batch[i], 1);
        return;
    }
    if (rc < 0) {
        for (size_t i = 0; i < n; i++)
            finish(h, batch[i], false, why);
        return;
    }
    /* staged: every worker copies them (cancellations are seen at the copy) */
    pthread_mutex_lock(&h->mu);
    for (size_t i = 0; i < n; i++) {
        batch[i]->next_ready = NULL;
        *h->ready_tail = batch[i];
        h->ready_tail = &batch[i]->next_ready;
    }
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

/* The first staged file waiting for its copy, or NULL; mu held. */
static hsm_recall_t *take_ready(hsm_t *h)
{
    hsm_recall_t *r = h->ready_head;
    if (r && !(h->ready_head = r->next_ready))
        h->ready_tail = &h->ready_head;
    return r;
}

static void *worker_main(void *arg)
{
    hsm_t *h = arg;
    hsm_recall_t **batch = calloc(h->batch_size, sizeof(*batch));
    if (!batch)
        return NULL;
    /* read-through: one file per take, so that the workers share a batch */
    size_t take = h->stage_command ? h->batch_size : 1;
    pthread_mutex_lock(&h->mu);
    while (!atomic_load(&h->stop)) {
        hsm_recall_t *ready = take_ready(h);
        if (ready) {
            pthread_mutex_unlock(&h->mu);
            if (is_cancelled(h, ready))
                finish(h, ready, false, "cancelled");
            else
                copy_into_cache(h, ready);
            pthread_mutex_lock(&h->mu);
            continue;
        }
        size_t n = archive_order_take(h->q.order, take, (void **)batch);
        if (n == 0) {
            pthread_cond_wait(&h->cv, &h->mu);
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            batch[i]->queued = false;
            batch[i]->entry = NULL;
        }
        pthread_mutex_unlock(&h->mu);
        stage_batch(h, batch, n);
        pthread_mutex_lock(&h->mu);
    }
    pthread_mutex_unlock(&h->mu);
    free(batch);
    return NULL;
}

static hsm_recall_t *make_recall(const hsm_t *h, const archive_item_t *item, si_error_t *err)
{
    hsm_recall_t *r = calloc(1, sizeof(*r));
    if (!r || !(r->item = archive_item_copy(item, err))) {
        if (!r)
            si_errprintf(err, "out of memory");
        free(r);
        return NULL;
    }
    size_t plen = strlen(h->root) + strlen(item->bucket) + strlen(item->key) + 3;
    if (!(r->path = malloc(plen))) {
        recall_free(r);
        return si_errprintf(err, "out of memory"), NULL;
    }
    snprintf(r->path, plen, "%s/%s/%s", h->root, item->bucket, item->key);
    r->rel = r->path + strlen(h->root) + 1;
    r->queued = true;
    return r;
}

static int hsm_recall(archive_backend_t *b, const archive_batch_t *batch,
                      const archive_item_t *items, size_t n, si_error_t *err)
{
    hsm_t *h = b->impl;
    hsm_recall_t **recs = calloc(n ? n : 1, sizeof(*recs));
    archive_order_entry_t **entries = calloc(n ? n : 1, sizeof(*entries));
    int rc = recs && entries ? 0 : si_errprintf(err, "out of memory");
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (!(recs[i] = make_recall(h, &items[i], err)))
            rc = -1;
    if (rc == 0) {
        pthread_mutex_lock(&h->mu);
        rc = archive_queue_add(&h->q, batch, items, (void **)recs, n, entries, err);
        for (size_t i = 0; rc == 0 && i < n; i++)
            recs[i]->entry = entries[i];
        pthread_cond_broadcast(&h->cv);
        pthread_mutex_unlock(&h->mu);
    }
    for (size_t i = 0; rc < 0 && recs && i < n; i++)
        recall_free(recs[i]); /* on success the queue owns them */
    free(recs);
    free(entries);
    return rc;
}

static int hsm_cancel(archive_backend_t *b, int64_t object_id)
{
    hsm_t *h = b->impl;
    hsm_recall_t *withdrawn = NULL;
    int found = 0;
    pthread_mutex_lock(&h->mu);
    for (size_t i = 0; i < h->q.nlive && !found; i++) {
        hsm_recall_t *r = h->q.live[i];
        if (r->item->object_id != object_id || r->cancelled)
            continue;
        r->cancelled = true;
        found = 1;
        if (r->queued && archive_order_remove(h->q.order, r->entry))
            withdrawn = r; /* no worker has it: reported here */
    }
    pthread_mutex_unlock(&h->mu);
    if (withdrawn)
        finish(h, withdrawn, false, "cancelled");
    return found;
}

/* ---- push ------------------------------------------------------------------ */

/* The directory of rel (made as needed), each step beneath the one before,
 * so no symlink leads out of the root. Returns its fd; *name: the last
 * component of rel. */
static int parent_dir(hsm_t *h, const char *rel, const char **name, si_error_t *err)
{
    char *copy = strdup(rel);
    if (!copy)
        return si_errnoprintf(err, ENOMEM, "out of memory");
    int dir = dup(h->root_fd);
    char *save = NULL, *comp = strtok_r(copy, "/", &save), *next;
    for (; comp && (next = strtok_r(NULL, "/", &save)); comp = next) {
        if (mkdirat(dir, comp, 0755) < 0 && errno != EEXIST) {
            si_errnoprintf(err, errno, "cannot create directory %s under %s: %s", comp, h->root,
                           strerror(errno));
            goto error;
        }
        int sub = open_beneath(dir, comp, O_RDONLY | O_DIRECTORY, 0);
        if (sub < 0) {
            si_errnoprintf(err, errno, "directory %s under %s: %s", comp, h->root,
                           open_error(errno));
            goto error;
        }
        close(dir);
        dir = sub;
    }
    *name = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
    free(copy);
    return dir;
error:
    close(dir);
    free(copy);
    return -1;
}

/* Compares the file's bytes with the expected "algo:hex". */
static int verify_file(int fd, uint64_t size, const char *expected, si_error_t *err)
{
    char algorithm[8] = "";
    const char *colon = strchr(expected, ':');
    if (!colon || colon - expected >= (long)sizeof(algorithm))
        return si_errprintf(err, "checksum '%s' has no algorithm", expected);
    memcpy(algorithm, expected, (size_t)(colon - expected));
    si_checksum_t *c = si_checksum_new(algorithm, err);
    void *buf = malloc(HSM_VERIFY_BUF);
    int rc = -1;
    if (c && buf && si_checksum_fd(c, fd, 0, size, buf, HSM_VERIFY_BUF, err) == 0) {
        char actual[SI_CHECKSUM_TEXT_MAX];
        si_checksum_final(c, actual);
        rc = strcmp(actual, expected) == 0 ? 0
             : si_errnoprintf(err, EBADMSG, "checksum mismatch after the copy: expected %s, "
                              "got %s", expected, actual);
    } else if (!buf) {
        si_errprintf(err, "out of memory");
    }
    si_checksum_free(c);
    free(buf);
    return rc;
}

/* One member into <root>/<bucket>/<key>: temp name, copy, verify, fsync,
 * rename, fsync of the directory. path_out: the final path. */
static int write_member(hsm_t *h, const archive_member_t *m, char *path_out, size_t size,
                        si_error_t *err)
{
    char rel[SI_BUCKET_MAX + SI_KEY_MAX + 2], temp[NAME_MAX + 1];
    const char *name = NULL;
    snprintf(rel, sizeof(rel), "%s/%s", m->bucket, m->key);
    snprintf(path_out, size, "%s/%s", h->root, rel);
    int src = si_open_range(m->path, m->offset, m->size, err);
    if (src < 0)
        return -1;
    int dir = parent_dir(h, rel, &name, err), out = -1;
    if (dir < 0) {
        close(src);
        return -1;
    }
    pthread_mutex_lock(&h->mu);
    uint64_t seq = ++h->write_seq;
    pthread_mutex_unlock(&h->mu);
    snprintf(temp, sizeof(temp), ".%.*s.stagein-tmp.%ld.%" PRIu64, NAME_MAX - 60, name,
             (long)getpid(), seq);
    out = openat(dir, temp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (out < 0) {
        si_errnoprintf(err, errno, "cannot create a temp file beside %s: %s", path_out,
                       strerror(errno));
        goto error;
    }
    int64_t copied = si_copy_range(src, m->offset, out, 0, m->size, err);
    if (copied >= 0 && (uint64_t)copied != m->size)
        copied = si_errprintf(err, "the cache file %s has %" PRId64 " bytes, expected %" PRIu64,
                              m->path, copied, m->size);
    if (copied < 0) {
        si_errprefix(err, "writing %s", path_out);
        goto error_unlink;
    }
    if (m->checksum && verify_file(out, m->size, m->checksum, err) < 0) {
        si_errprefix(err, "%s", path_out);
        goto error_unlink;
    }
    if (fsync(out) < 0) {
        si_errnoprintf(err, errno, "fsync of %s: %s", path_out, strerror(errno));
        goto error_unlink;
    }
    struct timespec times[2] = {{m->mtime, 0}, {m->mtime, 0}};
    if (m->mtime > 0)
        futimens(out, times);
    close(out);
    out = -1;
    if (renameat(dir, temp, dir, name) < 0) {
        si_errnoprintf(err, errno, "cannot rename into %s: %s", path_out, strerror(errno));
        goto error_unlink;
    }
    if (fsync(dir) < 0) {
        si_errnoprintf(err, errno, "fsync of the directory of %s: %s", path_out, strerror(errno));
        goto error;
    }
    close(dir);
    close(src);
    return 0;
error_unlink:
    unlinkat(dir, temp, 0);
error:
    if (out >= 0)
        close(out);
    close(dir);
    close(src);
    return -1;
}

static int hsm_archive(archive_backend_t *b, const archive_member_t *members, size_t n,
                       int ncopies, archive_placement_t *placements, si_error_t *err)
{
    hsm_t *h = b->impl;
    if (n == 0)
        return si_errprintf(err, "an archive write needs members");
    if (archive_single_copy_check("hsm", ncopies, err) < 0)
        return -1;
    char **paths = calloc(n, sizeof(*paths));
    if (!paths)
        return si_errprintf(err, "out of memory");
    int rc = -1;
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX + SI_KEY_MAX];
        if (write_member(h, &members[i], path, sizeof(path), err) < 0)
            goto out;
        if (!(paths[i] = strdup(path))) {
            si_errprintf(err, "out of memory");
            goto out;
        }
        bytes += members[i].size;
    }
    if (h->archive_command) {
        archive_command_result_t res;
        if (archive_command_run(h->archive_command, (const char *const *)paths, n,
                                h->archive_timeout, &h->stop, &res, err) < 0)
            goto out;
        if (res.status != 0 || res.timed_out) {
            char text[500];
            archive_command_describe(&res, h->archive_timeout, text, sizeof(text));
            si_errprintf(err, "archive command '%s' on %zu files (first %s) %s",
                         h->archive_command, n, paths[0], text);
            goto out;
        }
    }
    struct statvfs vfs;
    uint64_t used = 0;
    if (fstatvfs(h->root_fd, &vfs) == 0)
        used = (uint64_t)(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize;
    for (size_t i = 0; i < n; i++)
        archive_pseudo_placement(h->volume, members[i].size, used, &placements[i]);
    pthread_mutex_lock(&h->mu);
    h->counts.bytes_written += bytes;
    h->counts.files_written += n;
    pthread_mutex_unlock(&h->mu);
    rc = 0;
out:
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    return rc;
}

/* ---- status ------------------------------------------------------------------ */

static int hsm_status(archive_backend_t *b, archive_status_t *out, si_error_t *err)
{
    hsm_t *h = b->impl;
    (void)err;
    pthread_mutex_lock(&h->mu);
    archive_external_status("hsm", &h->counts, &h->q, out);
    pthread_mutex_unlock(&h->mu);
    return 0;
}

static void hsm_metrics(archive_backend_t *b, FILE *out)
{
    hsm_t *h = b->impl;
    archive_status_t st;
    hsm_status(b, &st, NULL);
    pthread_mutex_lock(&h->mu);
    uint64_t commands = h->commands, failed = h->commands_failed;
    pthread_mutex_unlock(&h->mu);
    fprintf(out,
            "# HELP stagein_hsm_recalls_total Objects copied from the archive file system.\n"
            "# TYPE stagein_hsm_recalls_total counter\nstagein_hsm_recalls_total %" PRIu64 "\n"
            "# HELP stagein_hsm_recall_failures_total Objects that could not be recalled.\n"
            "# TYPE stagein_hsm_recall_failures_total counter\n"
            "stagein_hsm_recall_failures_total %" PRIu64 "\n"
            "# HELP stagein_hsm_bytes_read_total Bytes copied into the cache.\n"
            "# TYPE stagein_hsm_bytes_read_total counter\n"
            "stagein_hsm_bytes_read_total %" PRIu64 "\n"
            "# HELP stagein_hsm_bytes_written_total Bytes pushed into the archive.\n"
            "# TYPE stagein_hsm_bytes_written_total counter\n"
            "stagein_hsm_bytes_written_total %" PRIu64 "\n"
            "# HELP stagein_hsm_stage_commands_total Stage commands run.\n"
            "# TYPE stagein_hsm_stage_commands_total counter\n"
            "stagein_hsm_stage_commands_total %" PRIu64 "\n"
            "# HELP stagein_hsm_stage_command_failures_total Stage commands that failed.\n"
            "# TYPE stagein_hsm_stage_command_failures_total counter\n"
            "stagein_hsm_stage_command_failures_total %" PRIu64 "\n"
            "# HELP stagein_archive_queued_items Recalls handed to the backend, not done.\n"
            "# TYPE stagein_archive_queued_items gauge\n"
            "stagein_archive_queued_items %" PRIu64 "\n",
            st.reads, st.read_failures, st.bytes_read, st.bytes_written, commands, failed,
            st.queued_items);
}

static void hsm_free(archive_backend_t *b)
{
    if (!b)
        return;
    hsm_t *h = b->impl;
    pthread_mutex_lock(&h->mu);
    atomic_store(&h->stop, true);
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    for (int i = 0; i < h->nworkers; i++)
        pthread_join(h->workers[i], NULL);
    for (size_t i = 0; i < h->q.nlive; i++)
        recall_free(h->q.live[i]);
    free(h->workers);
    archive_queue_free(&h->q);
    if (h->root_fd >= 0)
        close(h->root_fd);
    free(h->stage_command);
    free(h->archive_command);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h);
    free(b);
}

static const archive_backend_ops_t hsm_ops = {
    "hsm", hsm_recall, hsm_cancel, hsm_archive, hsm_status, hsm_metrics, hsm_free, true,
    NULL, /* an HSM does not tell when it will have staged a file */
};

/* ---- creation ------------------------------------------------------------------ */

static char *optional_command(const si_conf_t *conf, const char *path)
{
    const char *c = si_conf_string(conf, path, NULL);
    return c && *c ? strdup(c) : NULL;
}

archive_backend_t *archive_hsm_new(const archive_backend_opts_t *opts, si_error_t *err)
{
    const si_conf_t *conf = opts->conf;
    archive_backend_t *b = archive_backend_alloc(&hsm_ops, sizeof(hsm_t), err);
    if (!b)
        return NULL;
    hsm_t *h = b->impl;
    h->root_fd = -1;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    h->ready_tail = &h->ready_head;
    h->cb = opts->cb;
    h->log = opts->log;
    const char *root = si_conf_string(conf, "archive.hsm.root", NULL);
    if (!root || !*root) {
        si_conf_fail(conf, "archive.hsm.root", err, "is required by archive.backend = \"hsm\" "
                     "(the archive file system's directory)");
        goto error;
    }
    if (root[0] != '/' || strlen(root) >= sizeof(h->root) - 1) {
        si_conf_fail(conf, "archive.hsm.root", err, "= \"%.100s\" is not an absolute path", root);
        goto error;
    }
    snprintf(h->root, sizeof(h->root), "%s", root);
    size_t rl = strlen(h->root);
    while (rl > 1 && h->root[rl - 1] == '/')
        h->root[--rl] = '\0';
    if ((h->root_fd = open(h->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        si_conf_fail(conf, "archive.hsm.root", err, "= \"%s\": %s", h->root, strerror(errno));
        goto error;
    }
    h->stage_command = optional_command(conf, "archive.hsm.stage_command");
    h->archive_command = optional_command(conf, "archive.hsm.archive_command");
    h->stage_timeout = si_conf_float(conf, "archive.hsm.stage_timeout", HSM_DEFAULT_TIMEOUT_S);
    h->archive_timeout = si_conf_float(conf, "archive.hsm.archive_timeout",
                                       HSM_DEFAULT_TIMEOUT_S);
    h->batch_size = (size_t)si_conf_int(conf, "archive.hsm.batch_size", HSM_DEFAULT_BATCH);
    h->concurrency = (int)si_conf_int(conf, "archive.hsm.concurrency", HSM_DEFAULT_CONCURRENCY);
    h->checksum_retries = (int)si_conf_int(conf, "archive.checksum_retries", 1);
    if (archive_pseudo_volume(conf, "archive.hsm.volume", "HSM", h->volume, err) < 0 ||
        archive_single_copy_conf(conf, "hsm", err) < 0 ||
        archive_queue_init(&h->q, h->volume, err) < 0)
        goto error;
    if (!(h->workers = calloc((size_t)h->concurrency, sizeof(*h->workers)))) {
        si_errprintf(err, "out of memory");
        goto error;
    }
    for (; h->nworkers < h->concurrency; h->nworkers++)
        if (pthread_create(&h->workers[h->nworkers], NULL, worker_main, h) != 0) {
            si_errprintf(err, "hsm: cannot start its worker threads");
            goto error;
        }
    si_log(h->log, SI_LOG_NOTICE, "archive: hsm backend over %s (%s, batches of %zu, %d at a "
           "time)", h->root, h->stage_command ? "stage command" : "read-through",
           h->batch_size, h->concurrency);
    return b;
error:
    hsm_free(b);
    return NULL;
}
