/* The cache context: directory and lock, catalog statements, pins, readers. */
#include "config.h"
#include "daemon/cache/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "common/array.h"

/* The inserts both engines spell alike up to how the values come: each
 * written once (ROW_INSERT: internal.h), its PostgreSQL tail below (sql_pg). */
#define PIN_INSERT "INSERT OR IGNORE INTO cache_pins(object_id, request_id, since)"
#define RES_INSERT "INSERT OR IGNORE INTO cache_reservations(instance, object_id, bytes, created)"

static const char *const sql_text[SQL_COUNT] = {
    [SQL_ROW_GET] = "SELECT size, pins, last_access, verified, segment, file_offset FROM cache"
                    " WHERE object_id = ?1",
    [SQL_ROW_INSERT] = ROW_INSERT " VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6, ?7)",
    /* which of a list of objects are cached */
    [SQL_ROWS_PRESENT] = "SELECT object_id FROM cache WHERE object_id IN (SELECT value FROM json_each(?1))",
    [SQL_ROW_DELETE] = "DELETE FROM cache WHERE object_id = ?1",
    [SQL_ROW_DELETE_UNPINNED] = "DELETE FROM cache WHERE object_id = ?1 AND pins = 0",
    [SQL_TOUCH] = "UPDATE cache SET last_access = max(last_access, ?2) WHERE object_id = ?1",
    /* served by the cache_by_access index (pins, last_access) */
    [SQL_LRU] = "SELECT object_id, size, segment, file_offset FROM cache WHERE pins = 0"
                " ORDER BY last_access, object_id LIMIT ?1",
    [SQL_TOTALS] = "SELECT " CATALOG_CACHE_USAGE_COLUMNS ", d.changes" CATALOG_CACHE_USAGE_FROM,
    [SQL_PINNED] = "SELECT " CATALOG_CACHE_PINNED_COLUMNS CATALOG_CACHE_USAGE_FROM,
    [SQL_PIN_REQUESTS] = "SELECT count(DISTINCT request_id) FROM cache_pins",
    [SQL_PIN] = PIN_INSERT " VALUES (?1, ?2, ?3)",
    /* SQLite: as SQL_PIN (why: sql_pg) */
    /* one statement for the batch, so one temporary table, not one per row */
    [SQL_PINS_IF_REQUEST] = PIN_INSERT " SELECT value, ?2, ?3 FROM json_each(?1)"
                                       " WHERE EXISTS (SELECT 1 FROM requests WHERE id = ?2)",
    [SQL_UNPIN] = "DELETE FROM cache_pins WHERE object_id = ?1 AND request_id = ?2",
    [SQL_UNPIN_REQUEST] = "DELETE FROM cache_pins WHERE request_id = ?1",
    [SQL_LIST] = "SELECT object_id, size, pins, last_access, verified, segment, file_offset"
                 " FROM cache ORDER BY object_id",
    [SQL_CHECKSUM] = "SELECT checksum FROM objects WHERE id = ?1",
    [SQL_SET_VERIFIED] = "UPDATE cache SET verified = ?2 WHERE object_id = ?1",
    /* one snapshot: a batch moves an object from its reservation to its
     * row in one transaction, so it is counted once, never zero times */
    [SQL_SHARED_TOTALS] = "SELECT " CATALOG_CACHE_USAGE_COLUMNS ", d.changes,"
                          " (SELECT coalesce(sum(r.bytes), 0) FROM cache_reservations r"
                          "  JOIN instances i ON i.name = r.instance"
                          "  WHERE r.instance <> ?1 AND i.heartbeat >= ?2)"
                          CATALOG_CACHE_USAGE_FROM,
    /* ?2 the objects, ?3 their sizes (db_bind_int64_list), paired by
     * position: a join of the two json_each would compare every pair */
    [SQL_RES_INSERT] = RES_INSERT " SELECT ?1, o.value, json_extract(?3, '$[' || o.key || ']'), ?4"
                                  " FROM json_each(?2) AS o",
    [SQL_RES_DELETE] = "DELETE FROM cache_reservations WHERE instance = ?1"
                       " AND object_id IN (SELECT value FROM json_each(?2))",
    [SQL_RES_DROP_STALE] = "DELETE FROM cache_reservations WHERE (?3 <> 0 AND instance = ?1)"
                           " OR instance NOT IN (SELECT name FROM instances WHERE heartbeat >= ?2)",
    [SQL_SEG_NEW] = "INSERT INTO cache_segments(instance, created) VALUES (?1, ?2) RETURNING id",
    [SQL_SEG_SEAL] = "UPDATE cache_segments SET sealed = 1 WHERE id = ?1",
    /* served by the cache_by_segment index */
    [SQL_SEG_DROP_EMPTY] = "DELETE FROM cache_segments WHERE id = ?1 AND sealed <> 0"
                           " AND NOT EXISTS (SELECT 1 FROM cache WHERE segment = ?1)",
    [SQL_SEG_LIST] = "SELECT id, instance, sealed, created FROM cache_segments ORDER BY id",
    [SQL_SEG_DELETE] = "DELETE FROM cache_segments WHERE id = ?1",
};
/* Where PostgreSQL's spelling differs. Its max() is only the aggregate.
 * A failed statement aborts its whole transaction, so inside a batch an
 * object or request deleted meanwhile makes no row (db_changes 0) instead
 * of a foreign-key error; SQLite goes on after the error, and its INSERT ...
 * SELECT would fill a temporary table per row (+55 % instructions per
 * committed object, measured): a batch's rows and pins take one statement
 * per batch (commit.c). */
static const char *const sql_pg[SQL_COUNT] = {
    [SQL_TOUCH] = "UPDATE cache SET last_access = greatest(last_access, ?2) WHERE object_id = ?1",
    [SQL_ROW_INSERT] = ROW_INSERT " SELECT ?1, ?2, ?3, 0, ?4, ?5, ?6, ?7 WHERE EXISTS"
                                  " (SELECT 1 FROM objects WHERE id = ?1)",
    [SQL_RES_INSERT] = RES_INSERT " SELECT ?1, o, b, ?4 FROM unnest(CAST(?2 AS bigint[]),"
                                  " CAST(?3 AS bigint[])) AS u(o, b)",
};

static double wall_clock(void *arg)
{
    (void)arg;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- open / close ------------------------------------------------------------ */

static int subdir(cache_t *c, const char *name, si_error_t *err)
{
    if (mkdirat(c->dir_fd, name, 0700) < 0 && errno != EEXIST)
        return si_errnoprintf(err, errno, "cache: cannot create %s/%s: %s", c->conf.dir, name,
                          strerror(errno));
    int fd = openat(c->dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return si_errnoprintf(err, errno, "cache: cannot open %s/%s: %s", c->conf.dir, name,
                          strerror(errno));
    return fd;
}

static int check_conf(const cache_conf_t *conf, si_error_t *err)
{
    if (!conf->dir[0])
        return si_errnoprintf(err, EINVAL, "cache: no directory configured");
    if (conf->instance[0] && (strchr(conf->instance, '/') || conf->instance[0] == '.'))
        return si_errnoprintf(err, EINVAL, "cache: instance name '%s' cannot name a directory",
                              conf->instance);
    if (!(conf->low_watermark >= 0 && conf->low_watermark < conf->high_watermark &&
          conf->high_watermark <= 1.0))
        return si_errnoprintf(err, EINVAL,
                          "cache: watermarks must satisfy 0 <= low (%.2f) < high (%.2f) <= 1",
                          conf->low_watermark, conf->high_watermark);
    if (conf->write_buffer < 4096)
        return si_errnoprintf(err, EINVAL, "cache: write buffer of %zu bytes is below 4096",
                          conf->write_buffer);
    return 0;
}

cache_t *cache_open(const cache_conf_t *conf, catalog_t *cat, si_error_t *err)
{
    if (check_conf(conf, err) < 0)
        return NULL;
    cache_t *c = calloc(1, sizeof(*c));
    if (!c) {
        si_errnoprintf(err, ENOMEM, "cache: out of memory");
        return NULL;
    }
    c->conf = *conf;
    if (!c->conf.clock)
        c->conf.clock = wall_clock;
    c->cat = cat;
    c->db = catalog_driver(cat);
    c->dir_fd = c->objects_fd = c->segments_fd = c->tmp_fd = c->tmp_root_fd = c->lock_fd = -1;
    c->seg.fd = -1;
    for (size_t i = 0; i < CACHE_KEPT_SEGMENTS; i++)
        c->kept[i].fd = -1;
    pthread_mutex_init(&c->kept_lock, NULL);
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->wlock, NULL);
    si_bufpool_init(&c->buffers, (size_t)(c->conf.segment_memory / 2));
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->changed, &ca);
    pthread_cond_init(&c->commit_cv, &ca);
    pthread_cond_init(&c->committed_cv, &ca);
    pthread_cond_init(&c->record_cv, &ca);
    pthread_condattr_destroy(&ca);
    c->queue_tail = &c->queue_head;

    if (mkdir(conf->dir, 0700) < 0 && errno != EEXIST) {
        si_errnoprintf(err, errno, "cache: cannot create %s: %s", conf->dir, strerror(errno));
        goto error;
    }
    if ((c->dir_fd = open(conf->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        si_errnoprintf(err, errno, "cache: cannot open %s: %s", conf->dir, strerror(errno));
        goto error;
    }
    c->lock_fd = openat(c->dir_fd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0640);
    if (c->lock_fd < 0) {
        si_errnoprintf(err, errno, "cache: cannot open %s/lock: %s", conf->dir, strerror(errno));
        goto error;
    }
    /* alone: exclusive; instances of a site: shared, so that a process
     * without an instance name cannot join them (nor they it) */
    if (flock(c->lock_fd, (cache_shared(c) ? LOCK_SH : LOCK_EX) | LOCK_NB) < 0) {
        si_errnoprintf(err, EBUSY, cache_shared(c)
                           ? "cache: %s is in use by a stageind without an instance name"
                             " (%s/lock is locked)"
                           : "cache: %s is in use by another process (%s/lock is locked)",
                       conf->dir, conf->dir);
        goto error;
    }
    if ((c->objects_fd = subdir(c, "objects", err)) < 0 ||
        (c->segments_fd = subdir(c, "segments", err)) < 0 ||
        (c->tmp_root_fd = subdir(c, "tmp", err)) < 0)
        goto error;
    if (!cache_shared(c)) {
        c->tmp_fd = dup(c->tmp_root_fd);
    } else {
        char own[80];
        snprintf(own, sizeof(own), "tmp/%s", conf->instance);
        c->tmp_fd = subdir(c, own, err);
    }
    if (c->tmp_fd < 0) {
        if (!cache_shared(c))
            si_errnoprintf(err, errno, "cache: dup: %s", strerror(errno));
        goto error;
    }
    struct stat so, st;
    if (fstat(c->objects_fd, &so) < 0 || fstat(c->tmp_fd, &st) < 0 || so.st_dev != st.st_dev) {
        si_errnoprintf(err, EXDEV, "cache: %s/objects and %s/tmp must be on one file system"
                               " (objects are renamed from one to the other)",
                   conf->dir, conf->dir);
        goto error;
    }

    c->unnamed_temps = !cache_shared(c) && cache_unnamed_temps_work(c);

    c->capacity = conf->capacity;
    if (!c->capacity) {
        struct statvfs vfs;
        if (fstatvfs(c->dir_fd, &vfs) < 0) {
            si_errnoprintf(err, errno, "cache: statvfs %s: %s", conf->dir, strerror(errno));
            goto error;
        }
        c->capacity = (uint64_t)vfs.f_blocks * vfs.f_frsize / 2;
    }
    c->high_bytes = (uint64_t)((double)c->capacity * conf->high_watermark);
    c->low_bytes = (uint64_t)((double)c->capacity * conf->low_watermark);

    for (int i = 0; i < SQL_COUNT; i++) {
        const char *sql = sql_pg[i] ? db_sql(c->db, sql_text[i], sql_pg[i]) : sql_text[i];
        if (!(c->stmt[i] = db_prepare(c->db, sql, NULL))) {
            cache_db_error(c, err, "preparing statements");
            goto error;
        }
    }
    if ((cache_shared(c) && cache_reservations_drop_stale(c, true, err) < 0) ||
        cache_load_totals(c, err) < 0 || cache_committer_start(c, err) < 0)
        goto error;
    return c;
error:;
    int saved = errno;
    cache_close(c);
    errno = saved;
    return NULL;
}

void cache_close(cache_t *c)
{
    if (!c)
        return;
    cache_committer_stop(c); /* what is queued is committed first */
    if (c->stmt[SQL_SEG_SEAL])
        cache_segment_close(c);
    if (c->stmt[SQL_TOUCH])
        cache_flush_access(c, NULL);
    for (int i = 0; i < SQL_COUNT; i++)
        db_finalize(c->stmt[i]);
    for (int i = 0; i <= CACHE_ROWS_CHUNK; i++)
        db_finalize(c->rows_stmt[i]);
    cache_kept_sweep(c, true);
    /* ranges still waiting to be freed are found again at the next start */
    int fds[] = {c->tmp_fd, c->tmp_root_fd, c->objects_fd, c->segments_fd, c->lock_fd, c->dir_fd};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        if (fds[i] >= 0)
            close(fds[i]); /* closing lock_fd releases the flock */
    pthread_cond_destroy(&c->changed);
    pthread_cond_destroy(&c->commit_cv);
    pthread_cond_destroy(&c->committed_cv);
    pthread_cond_destroy(&c->record_cv);
    si_bufpool_destroy(&c->buffers);
    pthread_mutex_destroy(&c->wlock);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->kept_lock);
    free(c->res);
    free(c->access);
    free(c->punches);
    free(c);
}

int cache_flush_access(cache_t *c, si_error_t *err)
{
    pthread_mutex_lock(&c->lock);
    int rc = cache_flush_access_locked(c, err);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

/* Remembers an access; written with the next batch. */
static void note_access(cache_t *c, int64_t object_id)
{
    double now = cache_now(c);
    enum { BATCH = 1024 };
    if (si_array_grow((void **)&c->access, &c->access_cap, c->naccess + 1, sizeof(*c->access)) < 0)
        return; /* LRU order is advice; losing one access time is harmless */
    if (!c->naccess)
        c->access_oldest = now;
    c->access[c->naccess++] = (cache_access_t){object_id, now};
    if (c->naccess >= BATCH || now - c->access_oldest >= c->conf.access_flush_interval)
        cache_flush_access_locked(c, NULL); /* kept for the next try on failure */
}

/* ---- rows ------------------------------------------------------------------------- */

/* 1 and *out (and *place, when not NULL) when the object has a row, 0 when
 * not; lock held. */
static int row_get(cache_t *c, int64_t object_id, cache_entry_t *out, cache_place_t *place,
                   si_error_t *err)
{
    db_stmt_t *s = cache_stmt(c, SQL_ROW_GET);
    db_bind_int64(s, 1, object_id);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return 0;
    if (rc != DB_ROW)
        return cache_db_error(c, err, "looking up a cached object");
    out->object_id = object_id;
    out->size = (uint64_t)db_column_int64(s, 0);
    out->pins = (uint64_t)db_column_int64(s, 1);
    out->last_access = db_column_double(s, 2);
    out->verified = db_column_int(s, 3) != 0;
    if (place)
        *place = (cache_place_t){out->size, (uint64_t)db_column_int64(s, 5),
                                 db_column_type(s, 4) == DB_NULL ? 0 : db_column_int64(s, 4)};
    db_reset(s);
    return 1;
}

/* row_get for an object that must be cached: 1, or -1 (ENOENT when it is not). */
static int row_require(cache_t *c, int64_t object_id, cache_entry_t *out, cache_place_t *place,
                       si_error_t *err)
{
    int rc = row_get(c, object_id, out, place, err);
    if (rc == 0)
        return si_errnoprintf(err, ENOENT, "object %" PRId64 " is not in the cache", object_id);
    return rc;
}

static int check_id(int64_t object_id, si_error_t *err)
{
    if (object_id < 1)
        return si_errnoprintf(err, EINVAL, "object id %" PRId64 " is not a catalog object id",
                          object_id);
    return 0;
}

int cache_stat(cache_t *c, int64_t object_id, cache_entry_t *out, si_error_t *err)
{
    if (check_id(object_id, err) < 0)
        return -1;
    pthread_mutex_lock(&c->lock);
    cache_entry_t e;
    int rc = cache_flush_access_locked(c, err);
    if (rc == 0)
        rc = row_get(c, object_id, &e, NULL, err);
    pthread_mutex_unlock(&c->lock);
    if (rc == 1 && out)
        *out = e;
    return rc;
}

int cache_stat_many(cache_t *c, const int64_t *ids, size_t n, signed char *cached,
                    si_error_t *err)
{
    for (size_t i = 0; i < n; i++)
        if (check_id(ids[i], err) < 0)
            return -1;
    int64_t *present = malloc((n < CACHE_LOOKUP_CHUNK ? n : CACHE_LOOKUP_CHUNK) * sizeof(*present) + 1);
    if (!present)
        return si_errnoprintf(err, ENOMEM, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i += CACHE_LOOKUP_CHUNK) {
        size_t end = i + CACHE_LOOKUP_CHUNK < n ? i + CACHE_LOOKUP_CHUNK : n, npresent = 0;
        pthread_mutex_lock(&c->lock);
        rc = cache_flush_access_locked(c, err);
        if (rc == 0)
            rc = cache_rows_present_locked(c, ids + i, end - i, present, &npresent, err);
        pthread_mutex_unlock(&c->lock);
        for (size_t k = i; rc == 0 && k < end; k++)
            cached[k] = db_ids_find(present, npresent, ids[k]) != NULL;
    }
    free(present);
    return rc;
}

int cache_list(cache_t *c, cache_list_fn fn, void *arg, si_error_t *err)
{
    pthread_mutex_lock(&c->lock);
    int rc = cache_flush_access_locked(c, err);
    db_stmt_t *s = cache_stmt(c, SQL_LIST);
    while (rc == 0) {
        int step = db_step(s);
        if (step == DB_DONE)
            break;
        if (step != DB_ROW) {
            rc = cache_db_error(c, err, "listing the cache");
            break;
        }
        cache_entry_t e = {
            .object_id = db_column_int64(s, 0),
            .size = (uint64_t)db_column_int64(s, 1),
            .pins = (uint64_t)db_column_int64(s, 2),
            .last_access = db_column_double(s, 3),
            .verified = db_column_int(s, 4) != 0,
        };
        if (fn(&e, arg))
            break;
    }
    db_reset(s);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

/* Opens the file of an object's place read-only and checks that it is a
 * regular file holding its bytes (of exactly its size when it is its own).
 * A missing file is ENOENT when missing_is_enoent, else EIO (the catalog
 * row says it is there). */
static int open_place(cache_t *c, int64_t object_id, const cache_place_t *place,
                      bool missing_is_enoent, int *fd, si_error_t *err)
{
    char rel[CACHE_OBJECT_PATH_MAX + 16];
    cache_place_path(object_id, place, rel, sizeof(rel), NULL);
    struct stat st;
    int f = place->segment ? cache_segment_open_read(c, place->segment, &st)
                           : openat(c->objects_fd, rel + strlen("objects/"),
                                    O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (f < 0) {
        if (errno == ENOENT && missing_is_enoent)
            return si_errnoprintf(err, ENOENT, "object %" PRId64 " is not in the cache",
                                  object_id);
        return si_errnoprintf(err, errno == ENOENT ? EIO : errno,
                              "object %" PRId64 ": cannot open %s/%s: %s", object_id,
                              c->conf.dir, rel, strerror(errno));
    }
    bool fits = (place->segment || fstat(f, &st) == 0) && S_ISREG(st.st_mode) &&
                (place->segment ? (uint64_t)st.st_size >= place->offset + place->size
                                : (uint64_t)st.st_size == place->size);
    if (!fits) {
        si_errnoprintf(err, EIO, "object %" PRId64 ": %s/%s has %lld bytes, the catalog says %"
                       PRIu64 " from offset %" PRIu64, object_id, c->conf.dir, rel,
                       (long long)st.st_size, place->size, place->offset);
        close(f);
        return -1;
    }
    *fd = f;
    return 0;
}

int cache_open_object(cache_t *c, int64_t object_id, int *fd, cache_place_t *place,
                      si_error_t *err)
{
    if (check_id(object_id, err) < 0)
        return -1;
    cache_entry_t e;
    cache_place_t p;
    pthread_mutex_lock(&c->lock);
    int rc = row_require(c, object_id, &e, &p, err);
    if (rc == 1 && (rc = open_place(c, object_id, &p, false, fd, err)) == 0)
        note_access(c, object_id);
    int saved = errno;
    pthread_mutex_unlock(&c->lock);
    errno = saved;
    if (rc < 0)
        return -1;
    *place = p;
    return 0;
}

int cache_open_cached(cache_t *c, int64_t object_id, const cache_place_t *place, int *fd,
                      si_error_t *err)
{
    if (check_id(object_id, err) < 0)
        return -1;
    /* the lock only for the access time: opening needs no catalog statement */
    if (open_place(c, object_id, place, true, fd, err) < 0)
        return -1;
    pthread_mutex_lock(&c->lock);
    note_access(c, object_id);
    pthread_mutex_unlock(&c->lock);
    return 0;
}

int cache_remove(cache_t *c, int64_t object_id, si_error_t *err)
{
    if (check_id(object_id, err) < 0)
        return -1;
    cache_entry_t e;
    cache_place_t p;
    pthread_mutex_lock(&c->lock);
    int rc = row_require(c, object_id, &e, &p, err);
    if (rc == 1 && e.pins > 0)
        rc = si_errnoprintf(err, EBUSY, "object %" PRId64 " is pinned (%" PRIu64 " pins)",
                        object_id, e.pins);
    else if (rc == 1) {
        db_stmt_t *s = cache_stmt(c, SQL_ROW_DELETE_UNPINNED);
        db_bind_int64(s, 1, object_id);
        if (db_step(s) != DB_DONE)
            rc = cache_db_error(c, err, "removing a cached object");
        else if (db_changes(c->db) == 0)
            rc = si_errnoprintf(err, EBUSY, "object %" PRId64 " was pinned meanwhile", object_id);
        else {
            db_reset(s);
            /* the row is gone, so a leftover file is only space: recovery removes it */
            if (p.segment)
                cache_segment_released_locked(c, &p);
            else
                cache_unlink_object(c, object_id);
            cache_punch_due_locked(c, false);
            c->used -= e.size;
            c->objects--;
            cache_usage_changed(c, 1);
            cache_changed_locked(c);
            rc = 0;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return rc < 0 ? -1 : 0;
}

/* ---- pins --------------------------------------------------------------------------- */

int cache_pin(cache_t *c, int64_t object_id, int64_t request_id, si_error_t *err)
{
    if (check_id(object_id, err) < 0)
        return -1;
    if (request_id < 1)
        return si_errnoprintf(err, EINVAL, "request id %" PRId64 " is not a catalog request id",
                          request_id);
    cache_entry_t e;
    pthread_mutex_lock(&c->lock);
    int rc = row_get(c, object_id, &e, NULL, err);
    if (rc == 0)
        rc = si_errnoprintf(err, ENOENT, "cannot pin object %" PRId64 ": it is not in the cache",
                        object_id);
    else if (rc == 1) {
        db_stmt_t *s = cache_stmt(c, SQL_PIN);
        db_bind_int64(s, 1, object_id);
        db_bind_int64(s, 2, request_id);
        db_bind_double(s, 3, cache_now(c));
        int step = db_step(s);
        if (step == DB_DONE)
            rc = db_changes(c->db) > 0 ? 1 : 0;
        else if (db_errclass(c->db) == DB_ERR_CONSTRAINT)
            rc = si_errnoprintf(err, ENOENT, "cannot pin object %" PRId64 ": no request %" PRId64,
                            object_id, request_id);
        else
            rc = cache_db_error(c, err, "pinning");
        db_reset(s);
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int cache_unpin(cache_t *c, int64_t object_id, int64_t request_id, si_error_t *err)
{
    if (check_id(object_id, err) < 0)
        return -1;
    pthread_mutex_lock(&c->lock);
    db_stmt_t *s = cache_stmt(c, SQL_UNPIN);
    db_bind_int64(s, 1, object_id);
    db_bind_int64(s, 2, request_id);
    int rc = db_step(s) == DB_DONE ? (db_changes(c->db) > 0)
                                            : cache_db_error(c, err, "unpinning");
    db_reset(s);
    if (rc == 1)
        cache_changed_locked(c);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int cache_unpin_request(cache_t *c, int64_t request_id, uint64_t *count, si_error_t *err)
{
    pthread_mutex_lock(&c->lock);
    db_stmt_t *s = cache_stmt(c, SQL_UNPIN_REQUEST);
    db_bind_int64(s, 1, request_id);
    int rc = 0;
    uint64_t n = 0;
    if (db_step(s) != DB_DONE)
        rc = cache_db_error(c, err, "unpinning a request");
    else
        n = (uint64_t)db_changes(c->db);
    db_reset(s);
    if (n)
        cache_changed_locked(c);
    pthread_mutex_unlock(&c->lock);
    if (count && rc == 0)
        *count = n;
    return rc;
}
