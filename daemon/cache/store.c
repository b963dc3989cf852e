/* The cache's shared layer: its catalog statements and transactions, the
 * object files' names and directories, the totals and the access times. The
 * rest of the cache (cache.c, space.c, writer.c, commit.c, recover.c) calls
 * it; it calls nothing of theirs. */
#include "config.h"
#include "daemon/cache/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "catalog/instances.h"
#include "common/clock.h"

db_stmt_t *cache_stmt(cache_t *c, cache_sql_t id)
{
    db_reset(c->stmt[id]);
    db_clear_bindings(c->stmt[id]);
    return c->stmt[id];
}

int cache_db_error(cache_t *c, si_error_t *err, const char *what)
{
    return si_errnoprintf(err, EIO, "cache: %s: %s", what, db_errmsg(c->db));
}

int cache_begin(cache_t *c, si_error_t *err)
{
    if (catalog_begin(c->cat, err) < 0) {
        errno = EIO;
        return -1;
    }
    return 0;
}

int cache_commit(cache_t *c, si_error_t *err)
{
    for (int i = 0; i < SQL_COUNT; i++)
        db_reset(c->stmt[i]);
    if (catalog_commit(c->cat, err) < 0) {
        errno = EIO;
        return -1;
    }
    return 0;
}

void cache_rollback(cache_t *c)
{
    for (int i = 0; i < SQL_COUNT; i++)
        db_reset(c->stmt[i]);
    catalog_rollback(c->cat);
}

double cache_now(const cache_t *c)
{
    return c->conf.clock(c->conf.clock_arg);
}

void cache_object_parts(int64_t object_id, char dir0[3], char dir1[3],
                        char name[CACHE_NAME_HEX + 1])
{
    snprintf(name, CACHE_NAME_HEX + 1, "%016" PRIx64, (uint64_t)object_id);
    /* bits 16-23, then 8-15: 256 consecutive ids share a directory (few
     * directories to create and fsync while a batch is recalled), and up to
     * 2^24 ids no directory holds more than 256 files */
    memcpy(dir0, name + 10, 2);
    dir0[2] = '\0';
    memcpy(dir1, name + 12, 2);
    dir1[2] = '\0';
}

int cache_object_path(int64_t object_id, char *buf, size_t size, si_error_t *err)
{
    if (object_id < 1)
        return si_errnoprintf(err, EINVAL, "object id %" PRId64 " is not a catalog object id",
                          object_id);
    char d0[3], d1[3], name[CACHE_NAME_HEX + 1];
    cache_object_parts(object_id, d0, d1, name);
    if ((size_t)snprintf(buf, size, "objects/%s/%s/%s", d0, d1, name) >= size)
        return si_errnoprintf(err, EINVAL, "object path buffer too small");
    return 0;
}

void cache_segment_name(int64_t segment, char *buf, size_t size)
{
    char d0[3], d1[3], name[CACHE_NAME_HEX + 1];
    cache_object_parts(segment, d0, d1, name);
    snprintf(buf, size, "%s/%s/%s", d0, d1, name);
}

int cache_segment_open(cache_t *c, int64_t segment)
{
    char rel[CACHE_OBJECT_PATH_MAX];
    cache_segment_name(segment, rel, sizeof(rel));
    return openat(c->segments_fd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
}

static cache_kept_segment_t *kept_find(cache_t *c, int64_t segment)
{
    for (size_t i = 0; i < CACHE_KEPT_SEGMENTS; i++)
        if (c->kept[i].segment == segment)
            return &c->kept[i];
    return NULL;
}

static void kept_close(cache_kept_segment_t *k)
{
    close(k->fd);
    *k = (cache_kept_segment_t){.segment = 0, .fd = -1};
}

/* kept_lock held: those unused for CACHE_KEPT_IDLE_S closed (all: every one). */
static void kept_sweep_locked(cache_t *c, double now, bool all)
{
    for (size_t i = 0; i < CACHE_KEPT_SEGMENTS; i++)
        if (c->kept[i].segment && (all || now - c->kept[i].used >= CACHE_KEPT_IDLE_S))
            kept_close(&c->kept[i]);
}

/* kept_lock held: fd kept for segment, in a free slot or the least recently
 * used one's; closes fd when another reader kept the segment first. */
static void kept_add(cache_t *c, int64_t segment, int fd, double now)
{
    if (kept_find(c, segment)) {
        close(fd);
        return;
    }
    cache_kept_segment_t *slot = &c->kept[0];
    for (size_t i = 0; i < CACHE_KEPT_SEGMENTS && slot->segment; i++)
        if (!c->kept[i].segment || c->kept[i].used < slot->used)
            slot = &c->kept[i];
    if (slot->segment)
        kept_close(slot);
    *slot = (cache_kept_segment_t){segment, fd, now};
}

int cache_segment_open_read(cache_t *c, int64_t segment, struct stat *st)
{
    double now = cache_now(c);
    pthread_mutex_lock(&c->kept_lock);
    cache_kept_segment_t *k = kept_find(c, segment);
    int fd = k ? fcntl(k->fd, F_DUPFD_CLOEXEC, 0) : -1;
    if (k)
        k->used = now;
    pthread_mutex_unlock(&c->kept_lock);
    if (fd >= 0) {
        if (fstat(fd, st) == 0 && st->st_nlink > 0)
            return fd;
        close(fd);
        cache_segment_forget(c, segment); /* removed: the path says what is there now */
    }
    fd = cache_segment_open(c, segment);
    if (fd < 0)
        return -1;
    if (fstat(fd, st) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    int keep = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (keep >= 0) { /* none kept (out of descriptors) only costs the next reader a path walk */
        pthread_mutex_lock(&c->kept_lock);
        kept_sweep_locked(c, now, false);
        kept_add(c, segment, keep, now);
        pthread_mutex_unlock(&c->kept_lock);
    }
    return fd;
}

void cache_segment_forget(cache_t *c, int64_t segment)
{
    pthread_mutex_lock(&c->kept_lock);
    cache_kept_segment_t *k = kept_find(c, segment);
    if (k)
        kept_close(k);
    pthread_mutex_unlock(&c->kept_lock);
}

void cache_kept_sweep(cache_t *c, bool all)
{
    double now = cache_now(c);
    pthread_mutex_lock(&c->kept_lock);
    kept_sweep_locked(c, now, all);
    pthread_mutex_unlock(&c->kept_lock);
}

int cache_place_path(int64_t object_id, const cache_place_t *place, char *buf, size_t size,
                     si_error_t *err)
{
    if (!place->segment)
        return cache_object_path(object_id, buf, size, err);
    char rel[CACHE_OBJECT_PATH_MAX];
    cache_segment_name(place->segment, rel, sizeof(rel));
    if ((size_t)snprintf(buf, size, "segments/%s", rel) >= size)
        return si_errnoprintf(err, EINVAL, "segment path buffer too small");
    return 0;
}

int cache_unlink_object(cache_t *c, int64_t object_id)
{
    char d0[3], d1[3], name[CACHE_NAME_HEX + 1], rel[CACHE_OBJECT_PATH_MAX];
    cache_object_parts(object_id, d0, d1, name);
    snprintf(rel, sizeof(rel), "%s/%s/%s", d0, d1, name);
    if (unlinkat(c->objects_fd, rel, 0) < 0 && errno != ENOENT)
        return -1;
    return 0;
}

void cache_changed_locked(cache_t *c)
{
    c->generation++;
    pthread_cond_broadcast(&c->changed);
}

/* PostgreSQL: a reader or writer folds the usage's changes into its row once
 * this many are waiting; reading 4,096 changes is well under a millisecond. */
#define USAGE_FOLD_AT 4096

static void fold_usage(cache_t *c)
{
    si_error_t ignored;
    if (catalog_fold_totals(c->cat, &ignored) == 0)
        c->usage_unfolded = 0;
}

void cache_usage_changed(cache_t *c, size_t rows)
{
    c->usage_unfolded += rows;
    if (c->usage_unfolded >= USAGE_FOLD_AT)
        fold_usage(c);
}

int cache_load_totals(cache_t *c, si_error_t *err)
{
    bool shared = cache_shared(c);
    db_stmt_t *s = cache_stmt(c, shared ? SQL_SHARED_TOTALS : SQL_TOTALS);
    if (shared) {
        db_bind_text(s, 1, c->conf.instance, -1);
        db_bind_double(s, 2, si_wall_now() - c->conf.lease_s);
    }
    if (db_step(s) != DB_ROW)
        return cache_db_error(c, err, "reading the cache usage");
    c->objects = (uint64_t)db_column_int64(s, 0);
    c->used = (uint64_t)db_column_int64(s, 1);
    int64_t unfolded = db_column_int64(s, 2);
    c->others_reserved = shared ? (uint64_t)db_column_int64(s, 3) : 0;
    db_reset(s);
    c->totals_loaded = si_mono_now();
    if (unfolded >= USAGE_FOLD_AT)
        fold_usage(c);
    return 0;
}

bool cache_shared(const cache_t *c)
{
    return c->conf.instance[0] != '\0';
}

int cache_refresh_totals(cache_t *c, double max_age, si_error_t *err)
{
    if (!cache_shared(c) || si_mono_now() - c->totals_loaded < max_age)
        return 0;
    return cache_load_totals(c, err);
}

int cache_live_others(cache_t *c, char (**names)[65], size_t *n, si_error_t *err)
{
    instance_info_t *all = NULL, *dead = NULL;
    size_t nall = 0, ndead = 0;
    double now = si_wall_now();
    *names = NULL;
    *n = 0;
    if (instance_list(c->cat, now, c->conf.lease_s, false, &all, &nall, err) < 0 ||
        instance_list(c->cat, now, c->conf.lease_s, true, &dead, &ndead, err) < 0) {
        free(all);
        return -1;
    }
    char (*live)[65] = calloc(nall ? nall : 1, sizeof(*live));
    if (!live) {
        free(all);
        free(dead);
        return si_errnoprintf(err, ENOMEM, "cache: out of memory");
    }
    for (size_t i = 0; i < nall; i++) {
        bool is_dead = strcmp(all[i].name, c->conf.instance) == 0;
        for (size_t j = 0; j < ndead && !is_dead; j++)
            is_dead = strcmp(all[i].name, dead[j].name) == 0;
        if (!is_dead)
            snprintf(live[(*n)++], sizeof(live[0]), "%s", all[i].name);
    }
    free(all);
    free(dead);
    *names = live;
    return 0;
}

/* ---- access times, batched ------------------------------------------------------ */

static int cmp_access(const void *a, const void *b)
{
    const cache_access_t *x = a, *y = b;
    if (x->object_id != y->object_id)
        return x->object_id < y->object_id ? -1 : 1;
    return x->when < y->when ? -1 : x->when > y->when;
}

int cache_flush_access_locked(cache_t *c, si_error_t *err)
{
    if (!c->naccess)
        return 0;
    /* one UPDATE per object, with its latest access: hot objects are read
     * many times per batch, and each UPDATE also moves its index entry */
    qsort(c->access, c->naccess, sizeof(*c->access), cmp_access);
    if (cache_begin(c, err) < 0)
        return -1;
    /* access times alone: lookups remembered at the catalog generation stay
     * exact (a flush per 1024 GETs would otherwise drop them all) */
    db_generation_unseen(c->db, true);
    for (size_t i = 0; i < c->naccess; i++) {
        if (i + 1 < c->naccess && c->access[i + 1].object_id == c->access[i].object_id)
            continue;
        db_stmt_t *s = cache_stmt(c, SQL_TOUCH);
        db_bind_int64(s, 1, c->access[i].object_id);
        db_bind_double(s, 2, c->access[i].when);
        if (db_step(s) != DB_DONE) {
            cache_db_error(c, err, "recording access times");
            cache_rollback(c);
            db_generation_unseen(c->db, false);
            return -1;
        }
    }
    int rc = cache_commit(c, err);
    db_generation_unseen(c->db, false);
    if (rc < 0)
        return -1;
    c->naccess = 0;
    return 0;
}

/* Opens a directory of the layout, made (and its parent fsync'd) when new;
 * the usual case, an existing one, costs one openat. Returns its fd. */
int cache_object_dir(cache_t *c, int parent, const char *name, si_error_t *err)
{
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        if (mkdirat(parent, name, 0750) == 0) {
            if (fsync(parent) < 0)
                return si_errnoprintf(err, errno, "cache: fsync of a directory in %s: %s",
                                  c->conf.dir, strerror(errno));
        } else if (errno != EEXIST) { /* EEXIST: another writer made it just now */
            return si_errnoprintf(err, errno, "cache: cannot create directory %s in %s: %s",
                              name, c->conf.dir, strerror(errno));
        }
        fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0)
        return si_errnoprintf(err, errno, "cache: cannot open directory %s in %s: %s",
                          name, c->conf.dir, strerror(errno));
    return fd;
}

int cache_rows_present_locked(cache_t *c, const int64_t *ids, size_t n, int64_t *present,
                              size_t *npresent, si_error_t *err)
{
    db_stmt_t *s = cache_stmt(c, SQL_ROWS_PRESENT);
    int rc = 0;
    *npresent = 0;
    if (db_bind_int64_list(s, 1, ids, n) < 0)
        rc = si_errnoprintf(err, ENOMEM, "out of memory");
    else if (db_step_ids(s, present, n, npresent) != DB_DONE)
        rc = cache_db_error(c, err, "looking up cached objects");
    db_reset(s);
    return rc;
}
