/* Start-up recovery: the directory is made to agree with the catalog. Temp
 * files are leftovers of writes that never finished; a row without its file
 * (or with a file of the wrong size) is dropped; a file without a row (a
 * crash between rename and commit, or after an eviction's commit) is
 * removed; anything else under objects/ is not ours and is removed too.
 * Checksums are re-verified as configured. */
#include "config.h"
#include "daemon/cache/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/array.h"
#include "common/checksum.h"
#include "common/clock.h"
#include "common/text.h"

#define TREE_DEPTH_MAX 16
#define HASH_BUFFER (4u << 20)

typedef struct {
    int64_t object_id;
    uint64_t size;
    bool verified;
    bool dropped;
} row_t;

typedef struct {
    row_t *rows;
    size_t n, cap;
} rows_t;

/* Removes name under parent, a directory tree included, never following
 * symbolic links. Counts what it removed. */
static int remove_tree(int parent, const char *name, int depth, uint64_t *files,
                       uint64_t *bytes)
{
    struct stat st;
    if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode)) {
        if (unlinkat(parent, name, 0) < 0 && errno != ENOENT)
            return -1;
        (*files)++;
        *bytes += S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
        return 0;
    }
    if (depth >= TREE_DEPTH_MAX)
        return errno = ELOOP, -1;
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, ".."))
            rc = remove_tree(dirfd(d), e->d_name, depth + 1, files, bytes);
    closedir(d);
    if (rc == 0 && unlinkat(parent, name, AT_REMOVEDIR) < 0)
        rc = -1;
    return rc;
}

/* Every entry of the directory at fd (a duplicate is read, fd stays open). */
typedef int (*entry_fn)(int dir_fd, const char *name, void *arg);

static int each_entry(int fd, entry_fn fn, void *arg)
{
    int dup_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!d) {
        if (dup_fd >= 0)
            close(dup_fd);
        return -1;
    }
    /* names first, then the work: removing while reading a directory
     * stream may skip or repeat entries */
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (si_array_grow((void **)&names, &cap, n + 1, sizeof(*names)) < 0) {
            rc = -1;
            break;
        }
        if (!(names[n] = strdup(e->d_name))) {
            rc = -1;
            break;
        }
        n++;
    }
    closedir(d);
    for (size_t i = 0; i < n; i++) {
        if (rc == 0)
            rc = fn(fd, names[i], arg);
        free(names[i]);
    }
    free(names);
    return rc;
}

static bool is_hex_name(const char *name, size_t len)
{
    return strlen(name) == len && si_is_lower_hex(name, len);
}

/* An object file without its row younger than this (ctime: its rename) is
 * left alone while another instance lives: its batch may be committing. */
#define SHARED_RENAME_GRACE 120.0

typedef struct {
    cache_t *c;
    cache_recovery_t *report;
    si_error_t *err;
    const char *d0; /* while walking objects/<d0>/<d1> */
    const char *d1;
    char (*live)[65]; /* shared: the other instances alive now */
    size_t nlive;
    double now;       /* wall clock, for the grace above */
} walk_t;

static bool is_live_other(const walk_t *w, const char *name)
{
    for (size_t i = 0; i < w->nlive; i++)
        if (strcmp(w->live[i], name) == 0)
            return true;
    return false;
}

static int temp_entry(int dir_fd, const char *name, void *arg)
{
    walk_t *w = arg;
    if (remove_tree(dir_fd, name, 0, &w->report->temp_files_removed,
                    &w->report->temp_bytes_removed) < 0)
        return si_errnoprintf(w->err, errno, "cache: cannot remove %s/tmp/%s: %s", w->c->conf.dir,
                          name, strerror(errno));
    return 0;
}

/* tmp/ of a shared directory: this instance's own folder was emptied
 * already; a live instance's folder is its writes in progress; anything
 * else (a dead or gone instance's folder, a file from a time alone) goes. */
static int shared_temp_entry(int dir_fd, const char *name, void *arg)
{
    walk_t *w = arg;
    struct stat st;
    if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return 0;
    if (S_ISDIR(st.st_mode) &&
        (strcmp(name, w->c->conf.instance) == 0 || is_live_other(w, name)))
        return 0;
    return temp_entry(dir_fd, name, arg);
}

static int stray(walk_t *w, int dir_fd, const char *name)
{
    uint64_t files = 0, bytes = 0;
    if (remove_tree(dir_fd, name, 0, &files, &bytes) < 0)
        return si_errnoprintf(w->err, errno, "cache: cannot remove stray %s under %s/objects: %s",
                          name, w->c->conf.dir, strerror(errno));
    w->report->stray_entries_removed++;
    return 0;
}

static int file_entry(int dir_fd, const char *name, void *arg)
{
    walk_t *w = arg;
    struct stat st;
    if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return 0;
    /* only a regular file whose name is an id filed under its own directories */
    if (!S_ISREG(st.st_mode) || !is_hex_name(name, CACHE_NAME_HEX) ||
        memcmp(name + 10, w->d0, 2) != 0 || memcmp(name + 12, w->d1, 2) != 0)
        return stray(w, dir_fd, name);
    uint64_t id = strtoull(name, NULL, 16);
    if (id < 1 || id > INT64_MAX)
        return stray(w, dir_fd, name);
    cache_t *c = w->c;
    pthread_mutex_lock(&c->lock);
    db_stmt_t *s = cache_stmt(c, SQL_ROW_GET);
    db_bind_int64(s, 1, (int64_t)id);
    int step = db_step(s);
    db_reset(s);
    pthread_mutex_unlock(&c->lock);
    if (step == DB_ROW)
        return 0;
    if (step != DB_DONE)
        return cache_db_error(c, w->err, "looking up a cached object");
    if (w->nlive && (double)st.st_ctime > w->now - SHARED_RENAME_GRACE)
        return 0; /* perhaps another instance's batch, between rename and commit */
    if (unlinkat(dir_fd, name, 0) < 0 && errno != ENOENT)
        return si_errnoprintf(w->err, errno, "cache: cannot remove objects/%s/%s/%s: %s", w->d0,
                          w->d1, name, strerror(errno));
    w->report->files_without_row++;
    return 0;
}

/* A directory level of objects/ (two hex digits, d0 then d1): its entries
 * walked with fn, the name kept in *level meanwhile; anything else is a stray. */
static int hex_dir_entry(walk_t *w, int dir_fd, const char *name, const char **level,
                         entry_fn fn)
{
    struct stat st;
    if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return 0;
    if (!S_ISDIR(st.st_mode) || !is_hex_name(name, 2))
        return stray(w, dir_fd, name);
    int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (level == &w->d1)
            return si_errnoprintf(w->err, errno, "cache: cannot open %s/objects/%s/%s: %s",
                                  w->c->conf.dir, w->d0, name, strerror(errno));
        return si_errnoprintf(w->err, errno, "cache: cannot open %s/objects/%s: %s",
                              w->c->conf.dir, name, strerror(errno));
    }
    *level = name;
    int rc = each_entry(fd, fn, w);
    close(fd);
    return rc;
}

static int level1_entry(int dir_fd, const char *name, void *arg)
{
    walk_t *w = arg;
    return hex_dir_entry(w, dir_fd, name, &w->d1, file_entry);
}

static int level0_entry(int dir_fd, const char *name, void *arg)
{
    walk_t *w = arg;
    return hex_dir_entry(w, dir_fd, name, &w->d0, level1_entry);
}

/* ---- rows ------------------------------------------------------------------------- */

static int load_rows(cache_t *c, rows_t *rows, si_error_t *err)
{
    db_stmt_t *s = cache_stmt(c, SQL_LIST);
    int step;
    while ((step = db_step(s)) == DB_ROW) {
        if (si_array_grow((void **)&rows->rows, &rows->cap, rows->n + 1, sizeof(*rows->rows)) < 0) {
            db_reset(s);
            return si_errnoprintf(err, ENOMEM, "cache: out of memory listing the cache");
        }
        rows->rows[rows->n++] = (row_t){db_column_int64(s, 0),
                                        (uint64_t)db_column_int64(s, 1),
                                        db_column_int(s, 4) != 0, false};
    }
    db_reset(s);
    if (step != DB_DONE)
        return cache_db_error(c, err, "listing the cache");
    return 0;
}

static int note_dropped(cache_recovery_t *r, int64_t object_id, si_error_t *err)
{
    if (si_array_grow((void **)&r->dropped, &r->cap_dropped, r->ndropped + 1,
                      sizeof(*r->dropped)) < 0)
        return si_errnoprintf(err, ENOMEM, "cache: out of memory");
    r->dropped[r->ndropped++] = object_id;
    return 0;
}

/* Deletes the rows marked dropped in one transaction, then their files. */
static int drop_rows(cache_t *c, rows_t *rows, size_t from, si_error_t *err)
{
    if (cache_begin(c, err) < 0)
        return -1;
    for (size_t i = from; i < rows->n; i++) {
        if (!rows->rows[i].dropped)
            continue;
        db_stmt_t *s = cache_stmt(c, SQL_ROW_DELETE);
        db_bind_int64(s, 1, rows->rows[i].object_id);
        if (db_step(s) != DB_DONE) {
            cache_db_error(c, err, "dropping a cache row");
            cache_rollback(c);
            return -1;
        }
    }
    if (cache_commit(c, err) < 0)
        return -1;
    for (size_t i = from; i < rows->n; i++)
        if (rows->rows[i].dropped)
            cache_unlink_object(c, rows->rows[i].object_id);
    return 0;
}

/* Rows whose file is missing, not a regular file, or of another size. */
static int check_files(cache_t *c, rows_t *rows, cache_recovery_t *r, si_error_t *err)
{
    bool any = false;
    for (size_t i = 0; i < rows->n; i++) {
        row_t *row = &rows->rows[i];
        char rel[CACHE_OBJECT_PATH_MAX];
        cache_object_path(row->object_id, rel, sizeof(rel), NULL);
        struct stat st;
        if (fstatat(c->objects_fd, rel + strlen("objects/"), &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno != ENOENT && errno != ENOTDIR)
                return si_errnoprintf(err, errno, "cache: stat %s/%s: %s", c->conf.dir, rel,
                                  strerror(errno));
            r->rows_without_file++;
        } else if (!S_ISREG(st.st_mode)) {
            r->rows_without_file++;
            r->stray_entries_removed++;
        } else if ((uint64_t)st.st_size != row->size) {
            r->size_mismatches++;
        } else {
            continue;
        }
        row->dropped = any = true;
        if (note_dropped(r, row->object_id, err) < 0)
            return -1;
    }
    if (!any)
        return 0;
    /* a non-regular entry under an object's name is removed with the row;
     * unlinkat cannot remove a directory, so remove_tree does */
    for (size_t i = 0; i < rows->n; i++) {
        if (!rows->rows[i].dropped)
            continue;
        char rel[CACHE_OBJECT_PATH_MAX];
        cache_object_path(rows->rows[i].object_id, rel, sizeof(rel), NULL);
        uint64_t files = 0, bytes = 0;
        remove_tree(c->objects_fd, rel + strlen("objects/"), 0, &files, &bytes);
    }
    return drop_rows(c, rows, 0, err);
}

static int hash_file(cache_t *c, int64_t object_id, const char *algorithm,
                     char out[SI_CHECKSUM_TEXT_MAX], unsigned char *buf, si_error_t *err)
{
    char rel[CACHE_OBJECT_PATH_MAX];
    cache_object_path(object_id, rel, sizeof(rel), NULL);
    int fd = openat(c->objects_fd, rel + strlen("objects/"), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return si_errnoprintf(err, errno, "cache: cannot open %s/%s: %s", c->conf.dir, rel,
                          strerror(errno));
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    si_checksum_t *sum = si_checksum_new(algorithm, err);
    if (!sum) {
        close(fd);
        return -1;
    }
    ssize_t n;
    while ((n = read(fd, buf, HASH_BUFFER)) > 0 || (n < 0 && errno == EINTR))
        if (n > 0)
            si_checksum_update(sum, buf, (size_t)n);
    int saved = errno;
    close(fd);
    si_checksum_final(sum, out);
    si_checksum_free(sum);
    if (n < 0)
        return si_errnoprintf(err, saved, "cache: reading %s/%s: %s", c->conf.dir, rel,
                          strerror(saved));
    return 0;
}

/* The catalog's checksum of an object into out ("" when it has none). */
static int catalog_checksum(cache_t *c, int64_t object_id, char out[SI_CHECKSUM_TEXT_MAX],
                            si_error_t *err)
{
    db_stmt_t *s = cache_stmt(c, SQL_CHECKSUM);
    db_bind_int64(s, 1, object_id);
    int step = db_step(s);
    out[0] = '\0';
    if (step == DB_ROW && db_column_type(s, 0) == DB_TEXT)
        snprintf(out, SI_CHECKSUM_TEXT_MAX, "%s", db_column_text(s, 0));
    db_reset(s);
    if (step != DB_ROW && step != DB_DONE)
        return cache_db_error(c, err, "reading an object's checksum");
    return 0;
}

static int verify(cache_t *c, rows_t *rows, cache_recovery_t *r, si_error_t *err)
{
    if (c->conf.verify_on_start == CACHE_VERIFY_NONE)
        return 0;
    unsigned char *buf = malloc(HASH_BUFFER);
    if (!buf)
        return si_errnoprintf(err, ENOMEM, "cache: out of memory for verification");
    size_t first_new_drop = rows->n;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < rows->n; i++) {
        row_t *row = &rows->rows[i];
        if (row->dropped || (row->verified && c->conf.verify_on_start != CACHE_VERIFY_ALL))
            continue;
        char expected[SI_CHECKSUM_TEXT_MAX], actual[SI_CHECKSUM_TEXT_MAX];
        if ((rc = catalog_checksum(c, row->object_id, expected, err)) < 0)
            break;
        if (!si_checksum_text_valid(expected)) {
            r->unverifiable++;
            continue;
        }
        char algorithm[8];
        size_t alen = (size_t)(strchr(expected, ':') - expected);
        memcpy(algorithm, expected, alen);
        algorithm[alen] = '\0';
        if ((rc = hash_file(c, row->object_id, algorithm, actual, buf, err)) < 0) {
            if (cache_shared(c) && errno == ENOENT) {
                rc = 0; /* evicted by another instance meanwhile */
                continue;
            }
            break;
        }
        if (strcmp(actual, expected) == 0) {
            r->verified++;
            if (!row->verified) {
                db_stmt_t *s = cache_stmt(c, SQL_SET_VERIFIED);
                db_bind_int64(s, 1, row->object_id);
                db_bind_int(s, 2, 1);
                if (db_step(s) != DB_DONE)
                    rc = cache_db_error(c, err, "marking an object verified");
                db_reset(s);
            }
            continue;
        }
        r->verify_failed++;
        row->dropped = true;
        if (first_new_drop == rows->n)
            first_new_drop = i;
        rc = note_dropped(r, row->object_id, err);
    }
    free(buf);
    if (rc == 0 && first_new_drop < rows->n)
        rc = drop_rows(c, rows, first_new_drop, err);
    return rc;
}

int cache_recover(cache_t *c, cache_recovery_t *report, si_error_t *err)
{
    cache_recovery_t r;
    memset(&r, 0, sizeof(r));
    rows_t rows = {0};
    walk_t w = {.c = c, .report = &r, .err = err};
    if (err)
        err->text[0] = '\0'; /* so a failure without text is told apart below */
    pthread_mutex_lock(&c->lock);
    if (c->writers) {
        pthread_mutex_unlock(&c->lock);
        return si_errnoprintf(err, EBUSY, "cache: recovery with %zu writers open", c->writers);
    }
    int rc = cache_flush_access_locked(c, err);
    pthread_mutex_unlock(&c->lock);
    if (rc < 0)
        return -1;
    /* the context is used by this thread alone now (see cache.h), so the
     * steps below take no lock while they read files */
    w.now = si_wall_now();
    if (cache_shared(c) && cache_live_others(c, &w.live, &w.nlive, err) < 0)
        goto error;
    if (each_entry(c->tmp_fd, temp_entry, &w) < 0 ||
        (cache_shared(c) && each_entry(c->tmp_root_fd, shared_temp_entry, &w) < 0)) {
        if (!err || !err->text[0] || errno == ENOMEM)
            si_errnoprintf(err, errno, "cache: cleaning %s/tmp: %s", c->conf.dir, strerror(errno));
        goto error;
    }
    if (load_rows(c, &rows, err) < 0 || check_files(c, &rows, &r, err) < 0)
        goto error;
    if (each_entry(c->objects_fd, level0_entry, &w) < 0) {
        if (!err || !err->text[0])
            si_errnoprintf(err, errno, "cache: walking %s/objects: %s", c->conf.dir,
                       strerror(errno));
        goto error;
    }
    if (verify(c, &rows, &r, err) < 0)
        goto error;
    pthread_mutex_lock(&c->lock);
    rc = cache_load_totals(c, err);
    r.objects = c->objects;
    r.bytes = c->used;
    if (r.ndropped)
        cache_changed_locked(c);
    pthread_mutex_unlock(&c->lock);
    if (rc < 0)
        goto error;
    free(rows.rows);
    free(w.live);
    *report = r;
    return 0;
error:;
    int saved = errno;
    free(rows.rows);
    free(w.live);
    free(r.dropped);
    errno = saved;
    return -1;
}

void cache_recovery_free(cache_recovery_t *report)
{
    if (!report)
        return;
    free(report->dropped);
    report->dropped = NULL;
    report->ndropped = 0;
    report->cap_dropped = 0;
}

/* ---- an upload in progress, or a leftover (push recovery asks) ---------------------- */

/* Whether dir (under tmp/) holds a temp file of object_id ("<id>.<pid>.<n>"). */
static int temp_file_of(cache_t *c, const char *dir, int64_t object_id)
{
    int fd = openat(c->tmp_root_fd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    char prefix[CACHE_NAME_HEX + 2];
    snprintf(prefix, sizeof(prefix), "%016" PRIx64 ".", (uint64_t)object_id);
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d)))
        found = strncmp(e->d_name, prefix, CACHE_NAME_HEX + 1) == 0;
    closedir(d);
    return found;
}

int cache_write_in_progress(cache_t *c, int64_t object_id, double grace, si_error_t *err)
{
    pthread_mutex_lock(&c->lock);
    cache_reservation_t *r = cache_reservation_find(c, object_id);
    bool own = (r && r->writing);
    pthread_mutex_unlock(&c->lock);
    if (own)
        return 1;
    if (!cache_shared(c))
        return 0;
    char rel[CACHE_OBJECT_PATH_MAX];
    struct stat st;
    cache_object_path(object_id, rel, sizeof(rel), NULL);
    if (fstatat(c->objects_fd, rel + strlen("objects/"), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        (double)st.st_ctime > si_wall_now() - grace)
        return 1;
    char (*live)[65];
    size_t n;
    pthread_mutex_lock(&c->lock); /* the registry is read on the cache's connection */
    int rc = cache_live_others(c, &live, &n, err);
    pthread_mutex_unlock(&c->lock);
    if (rc < 0)
        return -1;
    int found = 0;
    for (size_t i = 0; i < n && !found; i++)
        found = temp_file_of(c, live[i], object_id);
    free(live);
    return found;
}
