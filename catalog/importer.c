/* The import machinery every reader shares (CSV, JSON lines, LTFS indexes,
 * bucket listings): one transaction per import, the first bad line rolls it
 * all back and is named; volumes resolved once; positions written in
 * batches. The format readers call it; it calls none of them. */
#include "config.h"
#include "catalog/internal.h"
#include "catalog/import.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/checksum.h"
#include "common/text.h"

/* PostgreSQL: a batch goes first as two COPYs (batch_copy: new objects with
 * new copies, the common case); when some record is not new, as arrays:
 * objects and copies inserted in one statement that reports what it did. The batch stands when every object
 * and every copy was new (an import of new tape positions); otherwise it is
 * undone and its records go one at a time, which decide each case (same
 * object again, a different one, a duplicate copy) and name the line. */
static const char batch_sql_pg[] =
    "WITH r AS (SELECT * FROM unnest(?1::text[], ?2::text[], ?3::bigint[], ?4::text[],"
    "   ?5::bigint[], ?6::text[], ?7::bigint[], ?8::bigint[], ?9::bigint[], ?10::bigint[])"
    "   AS r(bucket, key, size, checksum, mtime, etag, volume_id, copy, file_seq, position)),"
    " o AS (INSERT INTO objects(bucket, key, size, checksum, mtime, etag)"
    "   SELECT bucket, key, size, checksum, mtime, etag FROM r"
    "   ON CONFLICT DO NOTHING RETURNING id, bucket, key),"
    " c AS (INSERT INTO tape_copies(object_id, copy, volume_id, file_seq, position, length)"
    "   SELECT o.id, r.copy, r.volume_id, r.file_seq, r.position, r.size"
    "   FROM r JOIN o ON o.bucket = r.bucket AND o.key = r.key"
    "   ON CONFLICT DO NOTHING RETURNING 1)"
    " SELECT (SELECT count(*) FROM o), (SELECT count(DISTINCT (bucket, key)) FROM r),"
    "  (SELECT count(*) FROM c),"
    "  (SELECT count(DISTINCT (bucket, key, size, coalesce(checksum, ''))) FROM r)";

static int batch_flush(import_t *im, bool leave_in_flight, si_error_t *err);
static void prepared_free(struct import_prepared *p);
static void batch_free(struct import_row *rows, size_t *n);

int import_fail(import_t *im, si_error_t *err, const char *fmt, ...)
{
    char reason[sizeof(err->text)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    return si_errprintf(err, "%s:%llu: %s", im->name, (unsigned long long)im->line, reason);
}

/* Reads one line into im->buf without its newline. Returns its length, -1 at
 * EOF, -2 on error (err set). Lines are bounded so input cannot exhaust memory. */
int import_begin(import_t *im, catalog_t *cat, const char *name,
                        catalog_import_stats_t *stats, si_error_t *err)
{
    memset(im, 0, sizeof(*im));
    im->cat = cat;
    im->name = name;
    im->stats = stats ? stats : &im->scratch; /* callers may not want the counts */
    memset(im->stats, 0, sizeof(*im->stats));
    im->buf = malloc(IMPORT_LINE_MAX + 2);
    if (!im->buf)
        return si_errprintf(err, "out of memory");
    if (catalog_begin(cat, err) < 0) {
        free(im->buf);
        return -1;
    }
    db_stmt_t *s = catalog_prepare(cat, "SELECT COALESCE(MAX(id), 0) FROM objects", err);
    if (!s || db_step(s) != DB_ROW) {
        db_finalize(s);
        catalog_rollback(cat);
        free(im->buf);
        return -1;
    }
    im->first_new_object = db_column_int64(s, 0) + 1;
    db_finalize(s);
    im->batch_sql = db_sql(cat->db, NULL, batch_sql_pg);
    return 0;
}

/* The planner's statistics of the tables the import changed, and of those
 * only: a manifest's members need no new sample of objects (tens of ms a
 * table on a large catalog, db_analyze). */
static int analyze_changed(import_t *im, si_error_t *err)
{
    const catalog_import_stats_t *st = im->stats;
    char tables[128] = "";
    size_t n = 0;
    /* cache with the first objects: never analyzed, an empty table is
     * planned as 800 rows */
    const struct {
        uint64_t changed;
        const char *names;
    } by[] = {{st->objects, "objects, cache"}, {st->copies, "tape_copies"},
              {st->volumes || st->copies, "volumes"}, {st->members, "dataset_members, datasets"}};
    for (size_t i = 0; i < sizeof(by) / sizeof(by[0]); i++)
        if (by[i].changed)
            n += (size_t)snprintf(tables + n, sizeof(tables) - n, "%s%s", n ? ", " : "",
                                  by[i].names);
    return db_analyze(im->cat->db, tables, err);
}

int import_end(import_t *im, int rc, const char *kind, si_error_t *err)
{
    if (rc == 0) {
        rc = batch_flush(im, false, err);
    } else if ((im->nbatch || im->npending) && !im->broken) {
        /* Records before the failing line come first: their error, if any,
         * is the one to report, as when records go one at a time. */
        si_error_t earlier;
        uint64_t line = im->line;
        if (batch_flush(im, false, &earlier) < 0)
            *err = earlier;
        im->line = line;
    }
    batch_free(im->batch, &im->nbatch);
    batch_free(im->pending, &im->npending);
    free(im->batch);
    free(im->pending);
    prepared_free(&im->prepared);
    free(im->ids);
    free(im->buf);
    free(im->volumes);
    if (rc < 0) {
        catalog_rollback(im->cat);
        memset(im->stats, 0, sizeof(*im->stats));
        return -1;
    }
    char detail[200];
    snprintf(detail, sizeof(detail), "lines=%llu objects=%llu copies=%llu volumes=%llu members=%llu",
             (unsigned long long)im->stats->lines, (unsigned long long)im->stats->objects,
             (unsigned long long)im->stats->copies, (unsigned long long)im->stats->volumes,
             (unsigned long long)im->stats->members);
    catalog_event(im->cat, kind, im->name, detail);
    /* a volume is used at least up to the end of its last catalogued copy */
    static const char used_sql[] =
        "UPDATE volumes SET used_bytes = MAX(used_bytes, COALESCE((SELECT position + length"
        " FROM tape_copies c WHERE c.volume_id = volumes.id ORDER BY position DESC LIMIT 1), 0))";
    if ((im->stats->copies && catalog_exec(im->cat, used_sql, err) < 0) ||
        catalog_refresh_dataset_stats(im->cat, err) < 0 ||
        analyze_changed(im, err) < 0) {
        catalog_rollback(im->cat);
        memset(im->stats, 0, sizeof(*im->stats));
        return -1;
    }
    return catalog_commit(im->cat, err);
}

static uint64_t label_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* Volume ids by label, remembered for the import: a positions file names a
 * few hundred volumes over millions of lines. Past half full the table stops
 * remembering and new labels are looked up in the catalog each time. */
static int import_volume_id(import_t *im, const char *label, int64_t *id, si_error_t *err)
{
    si_error_t why;
    catalog_volume_t v = {.label = label};
    if (!im->volumes) {
        im->volumes_cap = 1024;
        im->volumes = calloc(im->volumes_cap, sizeof(*im->volumes));
        if (!im->volumes)
            return si_errprintf(err, "out of memory");
    }
    struct import_volume *slot = NULL;
    if (strlen(label) < sizeof(im->volumes[0].label)) {
        size_t mask = im->volumes_cap - 1;
        for (size_t i = label_hash(label) & mask;; i = (i + 1) & mask) {
            if (!im->volumes[i].label[0]) {
                slot = &im->volumes[i];
                break;
            }
            if (strcmp(im->volumes[i].label, label) == 0) {
                *id = im->volumes[i].id;
                return 0;
            }
        }
    }
    if (import_settle(im, err) < 0)
        return -1;
    int created = catalog_volume_ensure(im->cat, &v, id, &why);
    if (created < 0)
        return import_fail(im, err, "%s", why.text);
    im->stats->volumes += (uint64_t)created;
    if (slot && im->volumes_used < im->volumes_cap / 2) {
        snprintf(slot->label, sizeof(slot->label), "%s", label);
        slot->id = *id;
        im->volumes_used++;
    }
    return 0;
}

static int put_position_now(import_t *im, const position_rec_t *r, si_error_t *err)
{
    si_error_t why;
    int64_t object_id;
    catalog_object_t o = {.bucket = r->bucket, .key = r->key, .size = r->size,
                          .checksum = r->checksum, .mtime = r->mtime, .etag = r->etag};
    int created = catalog_object_put(im->cat, &o, &object_id, &why);
    if (created < 0)
        return import_fail(im, err, "%s", why.text);
    im->stats->objects += (uint64_t)created;

    int64_t volume_id;
    if (import_volume_id(im, r->volume, &volume_id, err) < 0)
        return -1;
    catalog_copy_t c = {.object_id = object_id, .copy = r->copy, .file_seq = r->file_seq,
                        .position = r->position, .length = r->size};
    bool created_here = object_id >= im->first_new_object;
    int new_copy = catalog_copy_put_on(im->cat, &c, volume_id, !created_here, &why);
    if (new_copy < 0)
        return import_fail(im, err, "%s/%s: %s", r->bucket, r->key, why.text);
    if (new_copy == 0 && created_here)
        return import_fail(im, err, "duplicate entry for %s/%s copy %d", r->bucket, r->key,
                           r->copy);
    im->stats->copies += (uint64_t)new_copy;
    return 0;
}

/* ---- batches ------------------------------------------------------------ */

typedef struct import_row {
    char *bucket, *key, *checksum, *etag;
    uint64_t size, position, line;
    int copy;
    int64_t file_seq, mtime, volume_id;
    char volume[40];
} import_row_t;

#define BATCH_ROWS 5000

static void batch_free(import_row_t *rows, size_t *n)
{
    for (size_t i = 0; i < *n; i++) {
        free(rows[i].bucket);
        free(rows[i].key);
        free(rows[i].checksum);
        free(rows[i].etag);
    }
    *n = 0;
}

/* Appends one array element: NULL, a number, or a quoted string. */
static void array_text(FILE *f, size_t i, const char *v)
{
    fputc(i ? ',' : '{', f);
    if (!v) {
        fputs("NULL", f);
        return;
    }
    fputc('"', f);
    for (; *v; v++) {
        if (*v == '"' || *v == '\\')
            fputc('\\', f);
        fputc(*v, f);
    }
    fputc('"', f);
}

static void array_int(FILE *f, size_t i, bool null, int64_t v)
{
    fputc(i ? ',' : '{', f);
    if (null)
        fputs("NULL", f);
    else
        fprintf(f, "%lld", (long long)v);
}

#define BATCH_COLUMNS 10

/* The batch's savepoint undone (a record not new: the statement path or
 * one record at a time decides). 0, or -1 with err. */
static int batch_undo(import_t *im, si_error_t *err)
{
    return catalog_exec(im->cat, "ROLLBACK TO SAVEPOINT import_batch;"
                                 "RELEASE SAVEPOINT import_batch", err);
}

/* Runs the batch as one statement: 1 when it stands, 0 when it was undone
 * (some record is not a new object with new copies), -1 on error. */
static int batch_try(import_t *im, const import_row_t *rows, size_t n, si_error_t *err)
{
    char *text[BATCH_COLUMNS] = {0};
    size_t len[BATCH_COLUMNS];
    int rc = -1;
    for (int c = 0; c < BATCH_COLUMNS; c++) {
        FILE *f = open_memstream(&text[c], &len[c]);
        if (!f) {
            si_errprintf(err, "out of memory");
            goto done;
        }
        for (size_t i = 0; i < n; i++) {
            const import_row_t *r = &rows[i];
            switch (c) {
            case 0: array_text(f, i, r->bucket); break;
            case 1: array_text(f, i, r->key); break;
            case 2: array_int(f, i, false, (int64_t)r->size); break;
            case 3: array_text(f, i, r->checksum); break;
            case 4: array_int(f, i, r->mtime == 0, r->mtime); break;
            case 5: array_text(f, i, r->etag); break;
            case 6: array_int(f, i, false, r->volume_id); break;
            case 7: array_int(f, i, false, r->copy); break;
            case 8: array_int(f, i, r->file_seq < 0, r->file_seq); break;
            default: array_int(f, i, false, (int64_t)r->position); break;
            }
        }
        fputc('}', f);
        if (fclose(f) != 0) {
            si_errprintf(err, "out of memory");
            goto done;
        }
    }
    if (catalog_exec(im->cat, "SAVEPOINT import_batch", err) < 0)
        goto done;
    db_stmt_t *s = db_cached(im->cat->db, im->batch_sql, err);
    if (!s)
        goto done;
    for (int c = 0; c < BATCH_COLUMNS; c++)
        db_bind_text(s, c + 1, text[c], (int)len[c]);
    if (db_step(s) != DB_ROW) {
        catalog_sqlerr(im->cat, err, "importing a batch of positions");
        db_reset(s);
        goto done;
    }
    int64_t objects = db_column_int64(s, 0), keys = db_column_int64(s, 1),
            copies = db_column_int64(s, 2), variants = db_column_int64(s, 3);
    db_reset(s);
    if (objects == keys && variants == keys && copies == (int64_t)n) {
        im->stats->objects += (uint64_t)objects;
        im->stats->copies += (uint64_t)copies;
        rc = catalog_exec(im->cat, "RELEASE SAVEPOINT import_batch", err) < 0 ? -1 : 1;
    } else {
        rc = batch_undo(im, err) < 0 ? -1 : 0;
    }
done:
    for (int c = 0; c < BATCH_COLUMNS; c++)
        free(text[c]);
    return rc;
}

/* ---- batches by COPY: new objects with new copies ---------------------- */

static uint64_t key_hash(const char *bucket, const char *key)
{
    uint64_t h = label_hash(bucket);
    h = (h ^ '/') * 1099511628211ULL;
    for (const char *s = key; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static void copy_int(FILE *f, bool null, int64_t v)
{
    if (null)
        fputs("\t\\N", f);
    else
        fprintf(f, "\t%lld", (long long)v);
}

static const char copy_objects_sql[] =
    "COPY objects(id, bucket, key, size, checksum, mtime, etag) FROM STDIN";
static const char copy_copies_sql[] =
    "COPY tape_copies(object_id, copy, volume_id, file_seq, position, length) FROM STDIN";
/* The sequence is named once (OFFSET 0 keeps the subquery from being pulled
 * up): called per row, pg_get_serial_sequence and its text-to-regclass cast
 * cost 5 us per id, more than nextval itself. */
static const char object_ids_sql[] =
    "SELECT nextval(seq) FROM (SELECT pg_get_serial_sequence('objects', 'id')::regclass AS seq"
    " OFFSET 0) s, generate_series(1, ?1)";

/* The batch's distinct objects: first[i] is the record that brings record
 * i's object (i itself for the first one); -1 when two records of one
 * object disagree (size, checksum): the batch is for the statement path. */
static ssize_t batch_objects(import_t *im, size_t *first)
{
    size_t cap = 1;
    while (cap < 2 * im->nbatch)
        cap <<= 1;
    size_t *slots = malloc(cap * sizeof(*slots));
    if (!slots)
        return -2;
    for (size_t i = 0; i < cap; i++)
        slots[i] = SIZE_MAX;
    ssize_t distinct = 0;
    for (size_t i = 0; i < im->nbatch; i++) {
        const import_row_t *r = &im->batch[i];
        for (size_t j = key_hash(r->bucket, r->key) & (cap - 1);; j = (j + 1) & (cap - 1)) {
            if (slots[j] == SIZE_MAX) {
                slots[j] = i;
                first[i] = i;
                distinct++;
                break;
            }
            const import_row_t *o = &im->batch[slots[j]];
            if (strcmp(o->bucket, r->bucket) == 0 && strcmp(o->key, r->key) == 0) {
                if (o->size != r->size ||
                    strcmp(o->checksum ? o->checksum : "", r->checksum ? r->checksum : "") != 0)
                    distinct = -1;
                first[i] = slots[j];
                break;
            }
        }
        if (distinct < 0)
            break;
    }
    free(slots);
    return distinct;
}

/* Ids the reserve keeps for the next batch after taking this one's: a
 * batch's distinct objects are at most BATCH_ROWS. */
#define IDS_AHEAD BATCH_ROWS

/* Tops the id reserve up to want ids, in one statement (a round trip and the
 * sequence's nextval per id). 0, or -1 with err. */
static int ids_take(import_t *im, size_t want, si_error_t *err)
{
    if (im->ids_count >= want)
        return 0;
    if (im->ids_first) {
        memmove(im->ids, im->ids + im->ids_first, im->ids_count * sizeof(*im->ids));
        im->ids_first = 0;
    }
    int64_t *ids = realloc(im->ids, want * sizeof(*ids));
    if (!ids)
        return si_errprintf(err, "out of memory");
    im->ids = ids;
    db_stmt_t *s = db_cached(im->cat->db, object_ids_sql, err);
    if (!s)
        return -1;
    size_t more = want - im->ids_count, got = 0;
    db_bind_int64(s, 1, (int64_t)more);
    int step;
    while ((step = db_step(s)) == DB_ROW && got < more)
        ids[im->ids_count + got++] = db_column_int64(s, 0);
    db_reset(s);
    if (step == DB_ERROR || got != more)
        return catalog_sqlerr(im->cat, err, "taking object ids");
    im->ids_count += got;
    return 0;
}

static void prepared_free(struct import_prepared *p)
{
    free(p->objects);
    free(p->copies);
    *p = (struct import_prepared){0};
}

/* Writes the batch's two COPY texts, objects with ids from the reserve,
 * then their tape copies: 1 when written, 0 when the batch cannot go by
 * COPY (two records of one object disagree: p->by_statement, the statement
 * path) or the reserve holds too few ids and may_take_ids is false (a COPY
 * in flight: nothing written), -1 with err. */
static int batch_prepare(import_t *im, bool may_take_ids, si_error_t *err)
{
    struct import_prepared *p = &im->prepared;
    prepared_free(p);
    size_t *first = malloc(im->nbatch * sizeof(*first));
    int64_t *object_id = malloc(im->nbatch * sizeof(*object_id)); /* each record's */
    int rc = -1;
    if (!first || !object_id) {
        si_errprintf(err, "out of memory");
        goto done;
    }
    ssize_t distinct = batch_objects(im, first);
    if (distinct == -2) {
        si_errprintf(err, "out of memory");
        goto done;
    }
    if (distinct < 0 || ((size_t)distinct > im->ids_count && !may_take_ids)) {
        p->by_statement = distinct < 0;
        rc = 0;
        goto done;
    }
    /* too few ids only when taking is allowed (the first batch) */
    if ((size_t)distinct > im->ids_count && ids_take(im, (size_t)distinct + IDS_AHEAD, err) < 0)
        goto done;
    const int64_t *ids = im->ids + im->ids_first;
    size_t got = 0;
    FILE *fo = open_memstream(&p->objects, &p->objects_len);
    for (size_t i = 0; fo && i < im->nbatch; i++) {
        const import_row_t *r = &im->batch[i];
        if (first[i] != i)
            continue;
        object_id[i] = ids[got++];
        fprintf(fo, "%lld", (long long)object_id[i]);
        db_copy_field(fo, false, r->bucket);
        db_copy_field(fo, false, r->key);
        copy_int(fo, false, (int64_t)r->size);
        db_copy_field(fo, false, r->checksum);
        copy_int(fo, r->mtime == 0, r->mtime);
        db_copy_field(fo, false, r->etag);
        fputc('\n', fo);
    }
    FILE *fc = fo ? open_memstream(&p->copies, &p->copies_len) : NULL;
    for (size_t i = 0; fc && i < im->nbatch; i++) {
        const import_row_t *r = &im->batch[i];
        fprintf(fc, "%lld", (long long)object_id[first[i]]);
        copy_int(fc, false, r->copy);
        copy_int(fc, false, r->volume_id);
        copy_int(fc, r->file_seq < 0, r->file_seq);
        copy_int(fc, false, (int64_t)r->position);
        copy_int(fc, false, (int64_t)r->size);
        fputc('\n', fc);
    }
    bool written = fo && fclose(fo) == 0;
    if (!fc || fclose(fc) != 0 || !written) {
        prepared_free(p);
        si_errprintf(err, "out of memory");
        goto done;
    }
    /* the ids are the batch's now: an undone batch leaves a gap, as any
     * rolled-back nextval does */
    im->ids_first += (size_t)distinct;
    im->ids_count -= (size_t)distinct;
    p->objects_count = (uint64_t)distinct;
    p->ready = true;
    rc = 1;
done:
    free(object_id);
    free(first);
    return rc;
}

/* The batch as two COPYs, objects then their tape copies, from its
 * prepared text (written here when the reserve had too few ids): 1 when the
 * copies' COPY is in flight (import_settle takes its outcome), 0 when the
 * batch was undone (an object already there: the statement path decides
 * each record) or cannot go by COPY, -1 on error. COPY inserts rows in
 * bulk, without ON CONFLICT's speculative insertion. The server inserts the
 * objects while this waits, and the copies while the reader parses the
 * next batch and writes its text. */
static int batch_copy(import_t *im, si_error_t *err)
{
    struct import_prepared *p = &im->prepared;
    db_t *db = im->cat->db;
    int rc = p->by_statement ? 0 : p->ready ? 1 : batch_prepare(im, true, err);
    if (rc <= 0)
        goto done;
    rc = -1;
    /* the next batch's ids, while the server waits anyway */
    if (ids_take(im, IDS_AHEAD, err) < 0 ||
        catalog_exec(im->cat, "SAVEPOINT import_batch", err) < 0 ||
        db_copy_send(db, copy_objects_sql, p->objects, p->objects_len, err) < 0)
        goto done;
    if (db_copy_wait(db, err) < 0) {
        if (db_errclass(db) == DB_ERR_UNIQUE)
            rc = batch_undo(im, err) < 0 ? -1 : 0;
        goto done;
    }
    if (db_copy_send(db, copy_copies_sql, p->copies, p->copies_len, err) < 0)
        goto done;
    im->pending_objects = p->objects_count;
    rc = 1;
done:
    prepared_free(p);
    return rc;
}

/* Records the statement path decides: the batch as one statement when it
 * stands, else one record at a time (naming the first bad line). */
static int batch_by_statement(import_t *im, import_row_t *rows, size_t n, si_error_t *err)
{
    int rc = batch_try(im, rows, n, err);
    uint64_t line = im->line;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const import_row_t *r = &rows[i];
        position_rec_t rec = {.bucket = r->bucket, .key = r->key, .volume = r->volume,
                              .checksum = r->checksum, .etag = r->etag, .size = r->size,
                              .position = r->position, .copy = r->copy,
                              .file_seq = r->file_seq, .mtime = r->mtime};
        im->line = r->line;
        if (put_position_now(im, &rec, err) < 0)
            rc = -1;
    }
    if (rc >= 0)
        im->line = line;
    return rc < 0 ? -1 : 0;
}

int import_settle(import_t *im, si_error_t *err)
{
    if (!im->npending)
        return 0;
    db_t *db = im->cat->db;
    int rc;
    if (db_copy_wait(db, err) == 0) {
        im->stats->objects += im->pending_objects;
        im->stats->copies += im->npending;
        rc = catalog_exec(im->cat, "RELEASE SAVEPOINT import_batch", err);
    } else if (db_errclass(db) == DB_ERR_UNIQUE) { /* a copy already there */
        rc = batch_undo(im, err);
        if (rc == 0)
            rc = batch_by_statement(im, im->pending, im->npending, err);
    } else {
        rc = -1;
    }
    batch_free(im->pending, &im->npending);
    if (rc < 0)
        im->broken = true;
    return rc;
}

/* Writes the batch after the one in flight; leave_in_flight: its copies'
 * COPY may still be running on return (import_settle ends it). */
static int batch_flush(import_t *im, bool leave_in_flight, si_error_t *err)
{
    bool by_copy = im->nbatch && db_can_copy(im->cat->db);
    /* its text written while the batch in flight is inserted */
    if (by_copy && im->npending && batch_prepare(im, false, err) < 0) {
        batch_free(im->batch, &im->nbatch);
        return -1;
    }
    if (import_settle(im, err) < 0) {
        batch_free(im->batch, &im->nbatch);
        return -1;
    }
    if (!im->nbatch)
        return 0;
    int rc = by_copy ? batch_copy(im, err) : 0;
    if (rc == 1) {
        import_row_t *rows = im->pending;
        im->pending = im->batch;
        im->npending = im->nbatch;
        im->batch = rows; /* allocated when next needed */
        im->nbatch = 0;
        return leave_in_flight ? 0 : import_settle(im, err);
    }
    if (rc == 0)
        rc = batch_by_statement(im, im->batch, im->nbatch, err);
    batch_free(im->batch, &im->nbatch);
    return rc;
}

static char *dup_or_null(const char *s, bool *oom)
{
    char *d = s ? strdup(s) : NULL;
    if (s && !d)
        *oom = true;
    return d;
}

int put_position(import_t *im, const position_rec_t *r, si_error_t *err)
{
    if (!im->batch_sql)
        return put_position_now(im, r, err);
    si_error_t why;
    catalog_object_t o = {.bucket = r->bucket, .key = r->key, .size = r->size,
                          .checksum = r->checksum, .mtime = r->mtime, .etag = r->etag};
    catalog_copy_t c = {.copy = r->copy, .position = r->position, .length = r->size};
    int64_t volume_id;
    if (catalog_object_check(&o, &why) < 0 || catalog_copy_check(&c, &why) < 0 ||
        strlen(r->volume) >= sizeof(im->batch[0].volume)) {
        /* the records before it first, then this one alone */
        if (batch_flush(im, false, err) < 0)
            return -1;
        return put_position_now(im, r, err);
    }
    if (import_volume_id(im, r->volume, &volume_id, err) < 0) {
        if (im->broken) /* the batch in flight failed: its error comes first */
            return -1;
        si_error_t mine = *err;
        if (batch_flush(im, false, err) < 0)
            return -1;
        *err = mine;
        return -1;
    }
    if (!im->batch && !(im->batch = calloc(BATCH_ROWS, sizeof(*im->batch))))
        return si_errprintf(err, "out of memory");
    import_row_t *row = &im->batch[im->nbatch];
    bool oom = false;
    *row = (import_row_t){.bucket = dup_or_null(r->bucket, &oom), .key = dup_or_null(r->key, &oom),
                          .checksum = dup_or_null(r->checksum, &oom),
                          .etag = dup_or_null(r->etag, &oom), .size = r->size,
                          .position = r->position, .line = im->line, .copy = r->copy,
                          .file_seq = r->file_seq, .mtime = r->mtime, .volume_id = volume_id};
    snprintf(row->volume, sizeof(row->volume), "%s", r->volume);
    im->nbatch++;
    if (oom)
        return si_errprintf(err, "out of memory");
    return im->nbatch == BATCH_ROWS ? batch_flush(im, true, err) : 0;
}
