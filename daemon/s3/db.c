/* The S3 server's catalog connections and queries. */
#include "config.h"
#include "daemon/s3/db.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "catalog/catalog.h"
#include "catalog/db.h"
#include "catalog/requests.h"
#include "common/groups.h"
#include "common/strbuf.h"

/* May `who` read object o? Root and public buckets: yes. Otherwise, like a
 * stage request: a readable dataset holding it; its writer (the pusher:
 * in a shared archive bucket every user's objects stay readable to them
 * whatever the bucket's mode); or no dataset holds it and it is no pushed
 * file still on its way to tape.
 * :all is an integer (PostgreSQL takes no integer as a condition).
 * A CASE, not ORs: SQLite evaluates both sides of an OR in a result column,
 * and each side here is a subquery; CASE stops at the first that decides. */
#define READABLE_SQL                                                                     \
    "(CASE WHEN :all <> 0 THEN 1"                                                             \
    " WHEN EXISTS (SELECT 1 FROM dataset_members m JOIN datasets d"                      \
    "   ON d.id = m.dataset_id WHERE m.object_id = o.id AND "                            \
    CATALOG_DATASET_READABLE_SQL ") THEN 1"                                              \
    " WHEN EXISTS (SELECT 1 FROM push_items pi JOIN pushes p ON p.id = pi.push_id"       \
    "   WHERE pi.object_id = o.id AND p.uid = :uid) THEN 1"                              \
    " WHEN EXISTS (SELECT 1 FROM dataset_members m WHERE m.object_id = o.id) THEN 0"     \
    " WHEN NOT EXISTS (SELECT 1 FROM push_items pi WHERE pi.object_id = o.id) THEN 1"    \
    " ELSE 0 END)"

/* An upload still arriving (or being removed) is no object yet. */
#define VISIBLE_SQL                                                                      \
    "NOT EXISTS (SELECT 1 FROM push_items pi WHERE pi.object_id = o.id"                  \
    "            AND pi.state IN ('RECEIVING', 'DISCARDED'))"

/* Objects in the cache are listed as STANDARD: they read like any S3 object. */
#define CACHED_SQL "EXISTS (SELECT 1 FROM cache c WHERE c.object_id = o.id)"

static const char sql_object[] =
    "SELECT o.id, o.size, o.checksum, o.mtime, o.etag, o.storage_class, " READABLE_SQL
    ", c.size, m.headers, m.storage_class, m.part_sizes IS NOT NULL,"
    " (SELECT p.uid FROM push_items pi JOIN pushes p ON p.id = pi.push_id"
    "  WHERE pi.object_id = o.id), c.segment, c.file_offset"
    " FROM objects o LEFT JOIN object_meta m ON m.object_id = o.id"
    " LEFT JOIN cache c ON c.object_id = o.id"
    " WHERE o.bucket = :bucket AND o.key = :key AND " VISIBLE_SQL;

/* Rows per run of a listing statement: PostgreSQL's engine fetches a
 * statement's whole result at once, so a listing of a large bucket goes in
 * batches, each run again from the last key. */
#define LIST_BATCH 1000
#define LIST_BATCH_TEXT "1000"

static const char sql_list_from[] =
    "SELECT o.key, o.size, o.mtime, o.etag, o.checksum, o.storage_class, o.id, " CACHED_SQL
    ", (SELECT m.storage_class FROM object_meta m WHERE m.object_id = o.id)"
    " FROM objects o WHERE o.bucket = :bucket AND o.key >= :from AND " VISIBLE_SQL
    " AND " READABLE_SQL " <> 0 ORDER BY o.key LIMIT " LIST_BATCH_TEXT;

static const char sql_list_after[] =
    "SELECT o.key, o.size, o.mtime, o.etag, o.checksum, o.storage_class, o.id, " CACHED_SQL
    ", (SELECT m.storage_class FROM object_meta m WHERE m.object_id = o.id)"
    " FROM objects o WHERE o.bucket = :bucket AND o.key > :from AND " VISIBLE_SQL
    " AND " READABLE_SQL " <> 0 ORDER BY o.key LIMIT " LIST_BATCH_TEXT;

static const char sql_bucket_has_objects[] =
    "SELECT 1 FROM objects WHERE bucket = ?1 LIMIT 1";

/* Distinct buckets by skipping through the (bucket, key) index: one probe
 * per bucket, not a scan of every object. */
static const char sql_buckets[] =
    "WITH RECURSIVE b(name) AS (SELECT min(bucket) FROM objects"
    " UNION ALL SELECT (SELECT min(bucket) FROM objects WHERE bucket > b.name)"
    " FROM b WHERE b.name IS NOT NULL) SELECT name FROM b WHERE name IS NOT NULL";

static const char sql_ongoing[] =
    "SELECT EXISTS (SELECT 1 FROM request_items WHERE object_id = ?1"
    " AND state IN ('SUBMITTED', 'STARTED'))";

static const char sql_pinned_until[] =
    "SELECT max(p.since + r.pin_lifetime) FROM cache_pins p"
    " JOIN requests r ON r.id = p.request_id WHERE p.object_id = ?1"
    " AND r.job_id = '" S3_JOB_RESTORE "'";

static const char sql_archive_buckets[] =
    "SELECT name, owner_uid FROM datasets WHERE description = '" S3_ARCHIVE_BUCKET_MARK "'"
    " ORDER BY name";

static const char sql_dataset_owner[] = "SELECT owner_uid FROM datasets WHERE name = ?1";

static const char sql_create_archive_bucket[] =
    "INSERT INTO datasets(name, owner_uid, owner_gid, mode, description, created)"
    " VALUES (?1, ?2, ?3, 384, '" S3_ARCHIVE_BUCKET_MARK "', ?4)";

/* Taken over only when S3 or push made it. */
static const char sql_share_archive_bucket[] =
    "INSERT INTO datasets(name, owner_uid, owner_gid, mode, description, created)"
    " VALUES (?1, 0, ?2, ?3, '" S3_SHARED_BUCKET_MARK "', ?4)"
    " ON CONFLICT(name) DO UPDATE SET owner_uid = 0, owner_gid = excluded.owner_gid,"
    " mode = excluded.mode, description = excluded.description"
    " WHERE datasets.description = excluded.description"
    " OR datasets.description LIKE 'created by push %'";

static const char sql_delete_archive_bucket[] =
    "DELETE FROM datasets WHERE name = ?1 AND description = '" S3_ARCHIVE_BUCKET_MARK "'"
    " AND NOT EXISTS (SELECT 1 FROM dataset_members m WHERE m.dataset_id = datasets.id)"
    " AND NOT EXISTS (SELECT 1 FROM pushes p WHERE p.dataset_id = datasets.id)";

static const char sql_set_etag[] = "UPDATE objects SET etag = ?2 WHERE id = ?1";

/* An upsert, not INSERT OR REPLACE: one spelling for both engines. */
static const char sql_put_meta[] =
    "INSERT INTO object_meta(object_id, headers, storage_class, part_sizes)"
    " VALUES (?1, ?2, ?3, ?4) ON CONFLICT(object_id) DO UPDATE SET"
    " headers = excluded.headers, storage_class = excluded.storage_class,"
    " part_sizes = excluded.part_sizes";

static const char sql_drop_meta[] = "DELETE FROM object_meta WHERE object_id = ?1";

static const char sql_part_sizes[] =
    "SELECT part_sizes FROM object_meta WHERE object_id = ?1 AND part_sizes IS NOT NULL";

static const char sql_delete_lookup[] =
    "SELECT o.id, (SELECT state FROM push_items p WHERE p.object_id = o.id)"
    " FROM objects o WHERE o.bucket = ?1 AND o.key = ?2";

/* What holds an object besides its cache row, dropped by _begin. */
static const char sql_drop_push_item[] = "DELETE FROM push_items WHERE object_id = ?1";
static const char sql_drop_pins[] = "DELETE FROM cache_pins WHERE object_id = ?1";
static const char sql_drop_items[] = "DELETE FROM request_items WHERE object_id = ?1";
static const char sql_drop_object[] = "DELETE FROM objects WHERE id = ?1";

struct s3_db {
    catalog_t *cat;
    db_t *conn;                       /* the catalog's driver connection */
    requests_t *requests;
    s3_db_t *next_free;
};

struct s3_dbpool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    s3_db_t *all;
    size_t count;
    s3_db_t *free_list;
};

static int fail(s3_db_t *db, si_error_t *err, const char *what)
{
    catalog_sqlerr(db->cat, err, what);
    errno = EIO;
    return -1;
}

/* A statement prepared once per connection, or NULL with err set. */
static db_stmt_t *stmt(s3_db_t *db, const char *sql, si_error_t *err, const char *what)
{
    db_stmt_t *s = db_cached(db->conn, sql, err);
    if (!s) {
        si_errprefix(err, "%s", what);
        errno = EIO;
    }
    return s;
}

static void conn_close(s3_db_t *db)
{
    requests_close(db->requests);
    catalog_close(db->cat);
}

static int conn_open(s3_db_t *db, const catalog_open_opts_t *catalog, si_error_t *err)
{
    /* the hot statements, prepared now: a catalog they do not fit fails here */
    static const char *const hot[] = {sql_object, sql_list_from, sql_list_after,
                                      sql_bucket_has_objects, sql_ongoing, sql_pinned_until};
    memset(db, 0, sizeof(*db));
    if (!(db->cat = catalog_open_opts(catalog, err)))
        return -1;
    db->conn = catalog_driver(db->cat);
    if (!(db->requests = requests_open(db->cat, err)))
        goto error;
    for (size_t i = 0; i < sizeof(hot) / sizeof(hot[0]); i++)
        if (!stmt(db, hot[i], err, "preparing the S3 server's queries"))
            goto error;
    return 0;
error:
    conn_close(db);
    return -1;
}

s3_dbpool_t *s3_dbpool_open(const catalog_open_opts_t *catalog, size_t connections, si_error_t *err)
{
    s3_dbpool_t *p = calloc(1, sizeof(*p));
    if (!p || !(p->all = calloc(connections, sizeof(*p->all)))) {
        free(p);
        si_errprintf(err, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    for (size_t i = 0; i < connections; i++) {
        if (conn_open(&p->all[i], catalog, err) < 0) {
            si_errprefix(err, "s3: catalog %s", catalog->target);
            s3_dbpool_close(p);
            return NULL;
        }
        p->count++;
        p->all[i].next_free = p->free_list;
        p->free_list = &p->all[i];
    }
    return p;
}

s3_db_t *s3_dbpool_get(s3_dbpool_t *p)
{
    pthread_mutex_lock(&p->mu);
    while (!p->free_list)
        pthread_cond_wait(&p->cv, &p->mu);
    s3_db_t *db = p->free_list;
    p->free_list = db->next_free;
    pthread_mutex_unlock(&p->mu);
    return db;
}

void s3_dbpool_put(s3_dbpool_t *p, s3_db_t *db)
{
    if (!db)
        return;
    pthread_mutex_lock(&p->mu);
    db->next_free = p->free_list;
    p->free_list = db;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void s3_dbpool_close(s3_dbpool_t *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->count; i++)
        conn_close(&p->all[i]);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->all);
    free(p);
}

bool s3_dbpool_generation(s3_dbpool_t *p, uint64_t *out)
{
    /* one load from shared memory: no connection needs taking from the pool */
    return p->count > 0 && db_generation(p->all[0].conn, out);
}

static void bind_named_text(db_stmt_t *s, const char *name, const char *text)
{
    db_bind_text(s, db_bind_index(s, name), text, -1);
}

static void bind_who(db_stmt_t *s, const s3_who_t *who)
{
    char groups[S3_WHO_GROUPS_MAX * 11 + 2];
    si_groups_format(who->groups, who->ngroups, groups, sizeof(groups));
    db_bind_int(s, db_bind_index(s, ":all"), who->all);
    db_bind_int64(s, db_bind_index(s, ":uid"), who->uid);
    db_bind_int64(s, db_bind_index(s, ":gid"), who->gid);
    db_bind_text_copy(s, db_bind_index(s, ":groups"), groups);
}

static void copy_text(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src ? src : "");
}

int s3_db_object(s3_db_t *db, const char *bucket, const char *key, const s3_who_t *who,
                 s3_object_t *out, si_error_t *err)
{
    db_stmt_t *s = stmt(db, sql_object, err, "looking up an object");
    if (!s)
        return -1;
    bind_named_text(s, ":bucket", bucket);
    bind_named_text(s, ":key", key);
    bind_who(s, who);
    int rc = db_step(s);
    if (rc == DB_ROW) {
        out->id = db_column_int64(s, 0);
        out->size = (uint64_t)db_column_int64(s, 1);
        out->mtime = db_column_int64(s, 3);
        s3_etag_of(db_column_text(s, 4), db_column_text(s, 2), out->id, out->size, out->etag);
        copy_text(out->storage_class, sizeof(out->storage_class), db_column_text(s, 5));
        out->readable = db_column_int(s, 6) != 0;
        out->cached = db_column_type(s, 7) != DB_NULL;
        out->cached_at = (cache_place_t){0};
        if (out->cached)
            out->cached_at = (cache_place_t){
                (uint64_t)db_column_int64(s, 7), (uint64_t)db_column_int64(s, 13),
                db_column_type(s, 12) == DB_NULL ? 0 : db_column_int64(s, 12)};
        copy_text(out->headers, sizeof(out->headers), db_column_text(s, 8));
        copy_text(out->asked_class, sizeof(out->asked_class), db_column_text(s, 9));
        out->multipart = db_column_int(s, 10) != 0;
        out->pushed = db_column_type(s, 11) != DB_NULL;
        out->writer = out->pushed ? (uid_t)db_column_int64(s, 11) : 0;
    }
    if (rc == DB_ERROR)
        fail(db, err, "looking up an object");
    db_reset(s);
    return rc == DB_ERROR ? -1 : rc == DB_ROW;
}

int s3_db_bucket_has_objects(s3_db_t *db, const char *bucket, si_error_t *err)
{
    db_stmt_t *s = stmt(db, sql_bucket_has_objects, err, "looking up a bucket");
    if (!s)
        return -1;
    db_bind_text(s, 1, bucket, -1);
    int rc = db_step(s);
    if (rc == DB_ERROR)
        fail(db, err, "looking up a bucket");
    db_reset(s);
    return rc == DB_ERROR ? -1 : rc == DB_ROW;
}

/* Rows of a statement with no parameters, each to fn (non-zero stops). */
static int each_row(s3_db_t *db, const char *sql, int (*fn)(db_stmt_t *s, void *arg), void *arg,
                    const char *what, si_error_t *err)
{
    db_stmt_t *s = stmt(db, sql, err, what);
    if (!s)
        return -1;
    int rc;
    while ((rc = db_step(s)) == DB_ROW)
        if (fn(s, arg) != 0) {
            rc = DB_DONE;
            break;
        }
    if (rc == DB_ERROR)
        fail(db, err, what);
    db_reset(s);
    return rc == DB_ERROR ? -1 : 0;
}

typedef struct {
    int (*bucket_fn)(const char *bucket, void *arg);
    int (*archive_fn)(const char *name, uid_t owner, void *arg);
    void *arg;
} row_fn_t;

static int bucket_row(db_stmt_t *s, void *arg)
{
    row_fn_t *f = arg;
    return f->bucket_fn(db_column_text(s, 0), f->arg);
}

int s3_db_buckets(s3_db_t *db, int (*fn)(const char *bucket, void *arg), void *arg,
                  si_error_t *err)
{
    row_fn_t f = {.bucket_fn = fn, .arg = arg};
    return each_row(db, sql_buckets, bucket_row, &f, "listing buckets", err);
}

void s3_db_cursor_end(s3_db_cursor_t *c)
{
    if (c->stmt) {
        db_reset(c->stmt);
        c->stmt = NULL;
    }
}

int s3_db_list_next(void *cursor, const char *from, bool inclusive, s3_list_entry_t *out,
                    si_error_t *err)
{
    s3_db_cursor_t *c = cursor;
    s3_db_t *db = c->db;
    size_t plen = strlen(c->key_prefix);
    /* the running statement already stands just past `from`: step on */
    bool step_on = c->stmt && !inclusive && strcmp(from, c->last) == 0;
    for (;;) {
        if (!step_on) {
            s3_db_cursor_end(c);
            db_stmt_t *s = stmt(db, inclusive ? sql_list_from : sql_list_after, err,
                                "listing objects");
            if (!s)
                return -1;
            size_t n = plen + strlen(from) + 1;
            char *full = malloc(n);
            if (!full)
                return si_errprintf(err, "out of memory");
            snprintf(full, n, "%s%s", c->key_prefix, from);
            bind_named_text(s, ":bucket", c->bucket);
            db_bind_text_copy(s, db_bind_index(s, ":from"), full);
            free(full);
            bind_who(s, &c->who);
            c->stmt = s;
            c->rows = 0;
        }
        int rc = db_step(c->stmt);
        if (rc == DB_ROW)
            break;
        bool batch_full = rc == DB_DONE && c->rows == LIST_BATCH;
        if (rc != DB_DONE)
            fail(db, err, "listing objects");
        s3_db_cursor_end(c);
        if (rc != DB_DONE)
            return -1;
        if (!batch_full)
            return 0;
        /* the batch ran out, the bucket may not have: the next from the last key */
        from = c->last;
        inclusive = false;
        step_on = false;
    }
    db_stmt_t *s = c->stmt;
    c->rows++;
    const char *key = db_column_text(s, 0);
    if (strncmp(key, c->key_prefix, plen) != 0) { /* past the archive bucket's keys */
        s3_db_cursor_end(c);
        return 0;
    }
    snprintf(out->key, sizeof(out->key), "%s", key + plen);
    snprintf(c->last, sizeof(c->last), "%s", out->key);
    out->size = (uint64_t)db_column_int64(s, 1);
    out->mtime = db_column_int64(s, 2);
    s3_etag_of(db_column_text(s, 3), db_column_text(s, 4), db_column_int64(s, 6), out->size,
               out->etag);
    /* the class asked for at upload; else a cached object reads as STANDARD */
    if (db_column_type(s, 8) != DB_NULL)
        copy_text(out->storage_class, sizeof(out->storage_class), db_column_text(s, 8));
    else if (db_column_int(s, 7))
        snprintf(out->storage_class, sizeof(out->storage_class), "STANDARD");
    else
        copy_text(out->storage_class, sizeof(out->storage_class), db_column_text(s, 5));
    return 1;
}

/* The first column of a one-row query bound to an object id, as a double
 * (NULL: 0); -1 on error. */
static int query_id(s3_db_t *db, const char *sql, int64_t id, double *out, const char *what,
                    si_error_t *err)
{
    db_stmt_t *s = stmt(db, sql, err, what);
    if (!s)
        return -1;
    db_bind_int64(s, 1, id);
    int rc = db_step(s);
    *out = rc == DB_ROW ? db_column_double(s, 0) : 0;
    if (rc != DB_ROW)
        fail(db, err, what);
    db_reset(s);
    return rc == DB_ROW ? 0 : -1;
}

int s3_db_restore_state(s3_db_t *db, int64_t object_id, s3_restore_state_t *out,
                        si_error_t *err)
{
    double ongoing, until;
    if (query_id(db, sql_ongoing, object_id, &ongoing, "looking up restores", err) < 0 ||
        query_id(db, sql_pinned_until, object_id, &until, "looking up pins", err) < 0)
        return -1;
    out->ongoing = ongoing != 0;
    out->pinned_until = (int64_t)until;
    return 0;
}

int s3_db_stage(s3_db_t *db, const s3_who_t *who, const char *bucket, const char *key,
                const char *job, int priority, int64_t pin_lifetime, char *uuid,
                si_error_t *err)
{
    size_t n = strlen(bucket) + strlen(key) + 2;
    char *file = malloc(n);
    if (!file)
        return si_errprintf(err, "out of memory");
    snprintf(file, n, "%s/%s", bucket, key);
    const char *files[1] = {file};
    requests_spec_t spec = {.uid = who->all ? 0 : who->uid, .gid = who->all ? 0 : who->gid,
                            .job_id = job, .priority = priority, .pin_lifetime = pin_lifetime,
                            .files = files, .nfiles = 1, .groups = who->groups,
                            .ngroups = who->all ? 0 : who->ngroups};
    requests_created_t made;
    int rc = requests_create(db->requests, &spec, &made, err);
    free(file);
    if (rc < 0)
        return -1;
    snprintf(uuid, REQUESTS_UUID_LEN + 1, "%s", made.uuid);
    return 0;
}

static int archive_row(db_stmt_t *s, void *arg)
{
    row_fn_t *f = arg;
    return f->archive_fn(db_column_text(s, 0), (uid_t)db_column_int64(s, 1), f->arg);
}

int s3_db_archive_buckets(s3_db_t *db, int (*fn)(const char *name, uid_t owner, void *arg),
                          void *arg, si_error_t *err)
{
    row_fn_t f = {.archive_fn = fn, .arg = arg};
    return each_row(db, sql_archive_buckets, archive_row, &f, "listing archive buckets", err);
}

/* Runs a statement that returns no rows (bound by the caller); -1 with err
 * on failure. */
static int run(s3_db_t *db, db_stmt_t *s, const char *what, si_error_t *err)
{
    int rc = db_step(s);
    if (rc != DB_DONE)
        fail(db, err, what);
    db_reset(s);
    return rc == DB_DONE ? 0 : -1;
}

int s3_db_create_archive_bucket(s3_db_t *db, const char *name, const s3_who_t *who,
                                uid_t *owner, si_error_t *err)
{
    db_stmt_t *s = stmt(db, sql_dataset_owner, err, "looking up a dataset");
    if (!s)
        return -1;
    db_bind_text(s, 1, name, -1);
    int rc = db_step(s);
    if (rc == DB_ROW)
        *owner = (uid_t)db_column_int64(s, 0);
    else if (rc == DB_ERROR)
        fail(db, err, "looking up a dataset");
    db_reset(s);
    if (rc == DB_ROW)
        return si_errnoprintf(err, EEXIST, "a dataset named '%s' exists", name);
    if (rc == DB_ERROR)
        return -1;
    if (!(s = stmt(db, sql_create_archive_bucket, err, "creating a bucket")))
        return -1;
    db_bind_text(s, 1, name, -1);
    db_bind_int64(s, 2, who->uid);
    db_bind_int64(s, 3, who->gid);
    db_bind_int64(s, 4, (int64_t)time(NULL));
    if (run(db, s, "creating a bucket", err) < 0)
        return -1;
    *owner = who->uid;
    return 0;
}

int s3_db_share_archive_bucket(s3_db_t *db, const char *name, unsigned mode, gid_t gid,
                               si_error_t *err)
{
    db_stmt_t *s = stmt(db, sql_share_archive_bucket, err, "sharing an archive bucket");
    if (!s)
        return -1;
    db_bind_text(s, 1, name, -1);
    db_bind_int64(s, 2, gid);
    db_bind_int(s, 3, (int)mode);
    db_bind_int64(s, 4, (int64_t)time(NULL));
    if (run(db, s, "sharing an archive bucket", err) < 0)
        return -1;
    if (db_changes(db->conn) == 0)
        return si_errnoprintf(err, EEXIST, "s3.archive_buckets: '%s' names a dataset that"
                              " neither S3 nor push made (a bucket made by CreateBucket, or one"
                              " defined in the catalog): its owner keeps it; name another"
                              " bucket", name);
    return 0;
}

int s3_db_delete_archive_bucket(s3_db_t *db, const char *name, si_error_t *err)
{
    db_stmt_t *s = stmt(db, sql_delete_archive_bucket, err, "deleting a bucket");
    if (!s)
        return -1;
    db_bind_text(s, 1, name, -1);
    if (run(db, s, "deleting a bucket", err) < 0)
        return -1;
    if (db_changes(db->conn) == 0)
        return si_errnoprintf(err, ENOTEMPTY, "bucket '%s' is not empty", name);
    return 0;
}

static void bind_text_or_null(db_stmt_t *s, int i, const char *text)
{
    if (text && *text)
        db_bind_text(s, i, text, -1);
    else
        db_bind_null(s, i);
}

int s3_db_record_object(s3_db_t *db, int64_t object_id, const char *etag, const s3_meta_t *meta,
                        si_error_t *err)
{
    static const char what[] = "recording an object's ETag and metadata";
    db_stmt_t *s;
    if (catalog_begin(db->cat, err) < 0)
        return -1;
    if (etag) {
        if (!(s = stmt(db, sql_set_etag, err, what)))
            goto error;
        db_bind_int64(s, 1, object_id);
        db_bind_text(s, 2, etag, -1);
        if (run(db, s, what, err) < 0)
            goto error;
    }
    bool any = meta && ((meta->headers && *meta->headers) ||
                        (meta->storage_class && *meta->storage_class) ||
                        (meta->part_sizes && *meta->part_sizes));
    if (!(s = stmt(db, any ? sql_put_meta : sql_drop_meta, err, what)))
        goto error;
    db_bind_int64(s, 1, object_id);
    if (any) {
        bind_text_or_null(s, 2, meta->headers);
        bind_text_or_null(s, 3, meta->storage_class);
        bind_text_or_null(s, 4, meta->part_sizes);
    }
    if (run(db, s, what, err) < 0)
        goto error;
    return catalog_commit(db->cat, err);
error:
    catalog_rollback(db->cat);
    return -1;
}

int s3_db_part_sizes(s3_db_t *db, int64_t object_id, si_strbuf_t *out, si_error_t *err)
{
    db_stmt_t *s = stmt(db, sql_part_sizes, err, "looking up part sizes");
    if (!s)
        return -1;
    db_bind_int64(s, 1, object_id);
    int rc = db_step(s);
    if (rc == DB_ROW)
        si_strbuf_puts(out, db_column_text(s, 0));
    else if (rc == DB_ERROR)
        fail(db, err, "looking up part sizes");
    db_reset(s);
    if (rc == DB_ROW)
        return out->failed ? si_errprintf(err, "part sizes: out of memory") : 1;
    return rc == DB_ERROR ? -1 : 0;
}

/* One statement of the delete, bound to the object id. */
static int exec_id(s3_db_t *db, const char *sql, int64_t id, si_error_t *err)
{
    db_stmt_t *s = stmt(db, sql, err, "deleting an object");
    if (!s)
        return -1;
    db_bind_int64(s, 1, id);
    return run(db, s, "deleting an object", err);
}

int s3_db_delete_object_begin(s3_db_t *db, const char *bucket, const char *key,
                              int64_t *object_id, si_error_t *err)
{
    int found = 0;
    if (catalog_begin(db->cat, err) < 0)
        return -1;
    db_stmt_t *s = stmt(db, sql_delete_lookup, err, "deleting an object");
    if (!s)
        goto error;
    db_bind_text(s, 1, bucket, -1);
    db_bind_text(s, 2, key, -1);
    int rc = db_step(s);
    if (rc == DB_ERROR) {
        fail(db, err, "deleting an object");
        db_reset(s);
        goto error;
    }
    if (rc == DB_ROW) {
        *object_id = db_column_int64(s, 0);
        const char *state = db_column_text(s, 1);
        if (state && (strcmp(state, "ARCHIVING") == 0 || strcmp(state, "RECEIVING") == 0)) {
            si_errnoprintf(err, EBUSY, "'%s/%s' is %s", bucket, key,
                           strcmp(state, "ARCHIVING") == 0 ? "being written to tape"
                                                           : "still arriving");
            db_reset(s);
            errno = EBUSY; /* the caller tells a busy object by it */
            goto error;
        }
        found = 1;
    }
    db_reset(s);
    /* the push item (its trigger takes its cache pin off), the requests'
     * pins and items: then only the cache row holds the object */
    if (found && (exec_id(db, sql_drop_push_item, *object_id, err) < 0 ||
                  exec_id(db, sql_drop_pins, *object_id, err) < 0 ||
                  exec_id(db, sql_drop_items, *object_id, err) < 0))
        goto error;
    if (catalog_commit(db->cat, err) < 0)
        goto error;
    return found;
error: {
    int e = errno;
    catalog_rollback(db->cat);
    errno = e;
}
    return -1;
}

int s3_db_delete_object_finish(s3_db_t *db, int64_t object_id, si_error_t *err)
{
    return exec_id(db, sql_drop_object, object_id, err);
}
