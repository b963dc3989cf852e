/* Start-up recovery: the directory is made to agree with the catalog. Temp
 * files are leftovers of writes that never finished; a row without its file
 * (or with a file of the wrong size, or a segment too short for it) is
 * dropped; a file without a row (a crash between rename and commit, or
 * after an eviction's commit) is removed; anything else under objects/ and
 * segments/ is not ours and is removed too. Segments: this instance's (and
 * dead ones') left open are sealed; a segment without objects is removed;
 * in one of this instance's, the ranges no row covers (a batch the crash
 * cut short, evictions whose blocks were not freed yet) are freed. Checksums
 * are re-verified as configured. */
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
#include "common/fileio.h"
#include "common/text.h"

#define TREE_DEPTH_MAX 16
#define HASH_BUFFER (4u << 20)

typedef struct {
    int64_t object_id;
    cache_place_t place;
    bool verified;
    bool dropped;
} row_t;

/* A segment's row, and what recovery found of it. */
typedef struct {
    int64_t id;
    bool mine;        /* this instance's or a dead one's: its ranges are ours to free */
    bool sealed;
    bool has_file;
    uint64_t file_size;
} seg_t;

typedef struct {
    seg_t *segs;      /* by id */
    size_t n, cap;
} segs_t;

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
    const char *d0; /* while walking objects/<d0>/<d1> (or segments/) */
    const char *d1;
    const char *top;  /* "objects" or "segments" */
    entry_fn leaf;    /* what a file under <d0>/<d1> is checked with */
    segs_t *segs;
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
        return si_errnoprintf(w->err, errno, "cache: cannot remove stray %s under %s/%s: %s",
                          name, w->c->conf.dir, w->top, strerror(errno));
    w->report->stray_entries_removed++;
    return 0;
}

/* The id in a file's name under objects/ or segments/: 0 (after removing it
 * as stray) unless it is a regular file whose hex name files it under the
 * directories it is in. */
static int entry_id(walk_t *w, int dir_fd, const char *name, struct stat *st, uint64_t *id)
{
    *id = 0;
    if (fstatat(dir_fd, name, st, AT_SYMLINK_NOFOLLOW) < 0)
        return 0;
    if (S_ISREG(st->st_mode) && is_hex_name(name, CACHE_NAME_HEX) &&
        memcmp(name + 10, w->d0, 2) == 0 && memcmp(name + 12, w->d1, 2) == 0) {
        uint64_t v = strtoull(name, NULL, 16);
        if (v >= 1 && v <= INT64_MAX) {
            *id = v;
            return 0;
        }
    }
    return stray(w, dir_fd, name);
}

/* Removes a file no row claims, unless another live instance may have just
 * made it (its row follows in that instance's transaction). */
static int remove_unclaimed(walk_t *w, int dir_fd, const char *name, const struct stat *st,
                            const char *top, uint64_t *counter)
{
    if (w->nlive && (double)st->st_ctime > w->now - SHARED_RENAME_GRACE)
        return 0;
    if (unlinkat(dir_fd, name, 0) < 0 && errno != ENOENT)
        return si_errnoprintf(w->err, errno, "cache: cannot remove %s/%s/%s/%s: %s", top, w->d0,
                              w->d1, name, strerror(errno));
    (*counter)++;
    return 0;
}

static int file_entry(int dir_fd, const char *name, void *arg)
{
    walk_t *w = arg;
    struct stat st;
    uint64_t id;
    int rc = entry_id(w, dir_fd, name, &st, &id);
    if (rc < 0 || id == 0)
        return rc;
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
    return remove_unclaimed(w, dir_fd, name, &st, "objects", &w->report->files_without_row);
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
            return si_errnoprintf(w->err, errno, "cache: cannot open %s/%s/%s/%s: %s",
                                  w->c->conf.dir, w->top, w->d0, name, strerror(errno));
        return si_errnoprintf(w->err, errno, "cache: cannot open %s/%s/%s: %s",
                              w->c->conf.dir, w->top, name, strerror(errno));
    }
    *level = name;
    int rc = each_entry(fd, fn, w);
    close(fd);
    return rc;
}

static int level1_entry(int dir_fd, const char *name, void *arg)
{
    walk_t *w = arg;
    return hex_dir_entry(w, dir_fd, name, &w->d1, w->leaf);
}

static int level0_entry(int dir_fd, const char *name, void *arg)
{
    walk_t *w = arg;
    return hex_dir_entry(w, dir_fd, name, &w->d0, level1_entry);
}

/* ---- segments ---------------------------------------------------------------------- */

static int cmp_seg_id(const void *key, const void *elem)
{
    int64_t id = *(const int64_t *)key, other = ((const seg_t *)elem)->id;
    return id < other ? -1 : id > other;
}

static seg_t *seg_find(const segs_t *ss, int64_t id)
{
    return ss->n ? bsearch(&id, ss->segs, ss->n, sizeof(*ss->segs), cmp_seg_id) : NULL;
}

/* Every segment's row, with its file's size; this instance's (and dead
 * ones') left open are sealed: no writer appends to them any more. Read
 * before the rows, so that a segment sealed by the time it is read has all
 * its rows in what load_rows reads (a batch's rows commit before its
 * segment is sealed). A dead instance's segment is only one made a lease
 * time before the live instances were listed: one made later is an
 * instance's that came back meanwhile. */
static int load_segments(cache_t *c, const walk_t *w, segs_t *ss, si_error_t *err)
{
    db_stmt_t *s = cache_stmt(c, SQL_SEG_LIST);
    int step;
    while ((step = db_step(s)) == DB_ROW) {
        if (si_array_grow((void **)&ss->segs, &ss->cap, ss->n + 1, sizeof(*ss->segs)) < 0) {
            db_reset(s);
            return si_errnoprintf(err, ENOMEM, "cache: out of memory listing segments");
        }
        const char *owner = db_column_text(s, 1);
        bool mine = !cache_shared(c) || !owner || strcmp(owner, c->conf.instance) == 0 ||
                    (!is_live_other(w, owner) &&
                     db_column_double(s, 3) < w->now - c->conf.lease_s);
        ss->segs[ss->n++] = (seg_t){.id = db_column_int64(s, 0), .mine = mine,
                                    .sealed = db_column_int(s, 2) != 0};
    }
    db_reset(s);
    if (step != DB_DONE)
        return cache_db_error(c, err, "listing the segments");
    for (size_t i = 0; i < ss->n; i++) {
        seg_t *seg = &ss->segs[i];
        char rel[CACHE_OBJECT_PATH_MAX];
        cache_segment_name(seg->id, rel, sizeof(rel));
        struct stat st;
        if (fstatat(c->segments_fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
            seg->has_file = true;
            seg->file_size = (uint64_t)st.st_size;
        }
        if (seg->sealed || !seg->mine)
            continue;
        s = cache_stmt(c, SQL_SEG_SEAL);
        db_bind_int64(s, 1, seg->id);
        step = db_step(s);
        db_reset(s);
        if (step != DB_DONE)
            return cache_db_error(c, err, "sealing a segment");
        seg->sealed = true;
    }
    return 0;
}

/* A file under segments/: a segment's, or a leftover (its row gone). */
static int segment_file_entry(int dir_fd, const char *name, void *arg)
{
    walk_t *w = arg;
    struct stat st;
    uint64_t id;
    int rc = entry_id(w, dir_fd, name, &st, &id);
    if (rc < 0 || id == 0 || seg_find(w->segs, (int64_t)id))
        return rc;
    /* a live instance makes a segment's row just before its file */
    return remove_unclaimed(w, dir_fd, name, &st, "segments", &w->report->segments_removed);
}

static int cmp_place(const void *a, const void *b)
{
    const cache_place_t *x = *(cache_place_t *const *)a, *y = *(cache_place_t *const *)b;
    if (x->segment != y->segment)
        return x->segment < y->segment ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Frees what no row of a sealed segment of ours covers: the gaps between
 * its objects (punched) and what follows the last (cut off). */
static void free_gaps(cache_t *c, const seg_t *seg, cache_place_t **p, size_t n,
                      cache_recovery_t *r)
{
    char rel[CACHE_OBJECT_PATH_MAX];
    cache_segment_name(seg->id, rel, sizeof(rel));
    int fd = openat(c->segments_fd, rel, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    uint64_t end = CACHE_BLOCK; /* after the header */
    for (size_t i = 0; i < n; i++) {
        /* a gap that still holds data (a hole punched before is none) */
        off_t data = p[i]->offset > end ? lseek(fd, (off_t)end, SEEK_DATA) : -1;
        if (data >= 0 && (uint64_t)data < p[i]->offset) {
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, data,
                      (off_t)(p[i]->offset - (uint64_t)data));
            r->orphan_ranges++;
        }
        uint64_t until = p[i]->offset + (p[i]->size + CACHE_BLOCK - 1) / CACHE_BLOCK * CACHE_BLOCK;
        end = until > end ? until : end;
    }
    if (seg->file_size > end && ftruncate(fd, (off_t)end) == 0)
        r->orphan_ranges++;
    close(fd);
}

/* Segments without objects are removed (their rows too); the gaps of ours
 * are freed. After the rows were checked and verified. */
static int finish_segments(cache_t *c, const rows_t *rows, const segs_t *ss,
                           cache_recovery_t *r, si_error_t *err)
{
    cache_place_t **live = NULL;
    size_t n = 0;
    for (size_t i = 0; i < rows->n; i++)
        n += rows->rows[i].place.segment && !rows->rows[i].dropped;
    if (n && !(live = malloc(n * sizeof(*live))))
        return si_errnoprintf(err, ENOMEM, "cache: out of memory");
    n = 0;
    for (size_t i = 0; i < rows->n; i++)
        if (rows->rows[i].place.segment && !rows->rows[i].dropped)
            live[n++] = &rows->rows[i].place;
    if (n)
        qsort(live, n, sizeof(*live), cmp_place);
    size_t at = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < ss->n; i++) {
        const seg_t *seg = &ss->segs[i];
        while (at < n && live[at]->segment < seg->id)
            at++;
        size_t from = at;
        while (at < n && live[at]->segment == seg->id)
            at++;
        if (at > from) {
            if (seg->mine && seg->sealed && seg->has_file)
                free_gaps(c, seg, live + from, at - from, r);
            continue;
        }
        if (!seg->sealed)
            continue; /* a live instance's, being written */
        db_stmt_t *s = cache_stmt(c, SQL_SEG_DELETE);
        db_bind_int64(s, 1, seg->id);
        if (db_step(s) != DB_DONE)
            rc = cache_db_error(c, err, "removing an empty segment");
        db_reset(s);
        char rel[CACHE_OBJECT_PATH_MAX];
        cache_segment_name(seg->id, rel, sizeof(rel));
        if (rc == 0 && unlinkat(c->segments_fd, rel, 0) < 0 && errno != ENOENT)
            rc = si_errnoprintf(err, errno, "cache: cannot remove %s/segments/%s: %s",
                                c->conf.dir, rel, strerror(errno));
        cache_segment_forget(c, seg->id);
        r->segments_removed += rc == 0 && seg->has_file;
    }
    free(live);
    return rc;
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
        int64_t segment = db_column_type(s, 5) == DB_NULL ? 0 : db_column_int64(s, 5);
        rows->rows[rows->n++] =
            (row_t){db_column_int64(s, 0),
                    {(uint64_t)db_column_int64(s, 1), (uint64_t)db_column_int64(s, 6), segment},
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
    /* a segment's range without its row is freed with the segment's gaps */
    for (size_t i = from; i < rows->n; i++)
        if (rows->rows[i].dropped && !rows->rows[i].place.segment)
            cache_unlink_object(c, rows->rows[i].object_id);
    return 0;
}

/* Rows whose file is missing, not a regular file, or of another size; in a
 * segment, whose segment is missing or too short for them. */
static int check_files(cache_t *c, rows_t *rows, const segs_t *segs, cache_recovery_t *r,
                       si_error_t *err)
{
    bool any = false;
    int64_t last_listed = segs->n ? segs->segs[segs->n - 1].id : 0;
    for (size_t i = 0; i < rows->n; i++) {
        row_t *row = &rows->rows[i];
        if (row->place.segment) {
            const seg_t *seg = seg_find(segs, row->place.segment);
            /* a live instance's open segment, or one made since the list:
             * its batches' rows may have committed after the list's sizes
             * were read (bytes first, then rows); it is its instance's to
             * judge. Ours and the dead's were sealed before the rows were
             * read, so their sizes hold every row. */
            if ((seg && !seg->sealed) || (!seg && row->place.segment > last_listed))
                continue;
            if (!seg || !seg->has_file)
                r->rows_without_file++;
            else if (seg->file_size < row->place.offset + row->place.size)
                r->size_mismatches++;
            else
                continue;
            row->dropped = any = true;
            if (note_dropped(r, row->object_id, err) < 0)
                return -1;
            continue;
        }
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
        } else if ((uint64_t)st.st_size != row->place.size) {
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
        if (!rows->rows[i].dropped || rows->rows[i].place.segment)
            continue;
        char rel[CACHE_OBJECT_PATH_MAX];
        cache_object_path(rows->rows[i].object_id, rel, sizeof(rel), NULL);
        uint64_t files = 0, bytes = 0;
        remove_tree(c->objects_fd, rel + strlen("objects/"), 0, &files, &bytes);
    }
    return drop_rows(c, rows, 0, err);
}

static int hash_place(cache_t *c, int64_t object_id, const cache_place_t *place,
                      const char *algorithm, char out[SI_CHECKSUM_TEXT_MAX], unsigned char *buf,
                      si_error_t *err)
{
    char rel[CACHE_OBJECT_PATH_MAX + 16];
    cache_place_path(object_id, place, rel, sizeof(rel), NULL);
    int fd = place->segment ? cache_segment_open(c, place->segment)
                            : openat(c->objects_fd, rel + strlen("objects/"),
                                     O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return si_errnoprintf(err, errno, "cache: cannot open %s/%s: %s", c->conf.dir, rel,
                          strerror(errno));
    posix_fadvise(fd, (off_t)place->offset, (off_t)place->size, POSIX_FADV_SEQUENTIAL);
    si_checksum_t *sum = si_checksum_new(algorithm, err);
    if (!sum) {
        close(fd);
        return -1;
    }
    int64_t got = si_checksum_fd(sum, fd, place->offset, place->size, buf, HASH_BUFFER, err);
    int saved = errno;
    close(fd);
    si_checksum_final(sum, out);
    si_checksum_free(sum);
    if (got < 0)
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
        if ((rc = hash_place(c, row->object_id, &row->place, algorithm, actual, buf, err)) < 0) {
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
    segs_t segs = {0};
    walk_t w = {.c = c, .report = &r, .err = err};
    if (err)
        err->text[0] = '\0'; /* so a failure without text is told apart below */
    pthread_mutex_lock(&c->wlock);
    size_t writers = c->writers;
    pthread_mutex_unlock(&c->wlock);
    if (writers)
        return si_errnoprintf(err, EBUSY, "cache: recovery with %zu writers open", writers);
    pthread_mutex_lock(&c->lock);
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
    if (load_segments(c, &w, &segs, err) < 0 || load_rows(c, &rows, err) < 0 ||
        check_files(c, &rows, &segs, &r, err) < 0)
        goto error;
    w.segs = &segs;
    w.top = "objects";
    w.leaf = file_entry;
    if (each_entry(c->objects_fd, level0_entry, &w) < 0) {
        if (!err || !err->text[0])
            si_errnoprintf(err, errno, "cache: walking %s/objects: %s", c->conf.dir,
                       strerror(errno));
        goto error;
    }
    w.top = "segments";
    w.leaf = segment_file_entry;
    if (each_entry(c->segments_fd, level0_entry, &w) < 0) {
        if (!err || !err->text[0])
            si_errnoprintf(err, errno, "cache: walking %s/segments: %s", c->conf.dir,
                       strerror(errno));
        goto error;
    }
    if (verify(c, &rows, &r, err) < 0 || finish_segments(c, &rows, &segs, &r, err) < 0)
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
    free(segs.segs);
    free(w.live);
    *report = r;
    return 0;
error:;
    int saved = errno;
    free(rows.rows);
    free(segs.segs);
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
    pthread_mutex_lock(&c->wlock);
    cache_reservation_t *r = cache_reservation_find(c, object_id);
    bool own = (r && r->writing);
    pthread_mutex_unlock(&c->wlock);
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
