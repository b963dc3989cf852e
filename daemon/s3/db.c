/* The S3 server's catalog connections and queries. */
#include "config.h"
#include "daemon/s3/db.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "catalog/catalog.h"
#include "catalog/requests.h"
#include "common/groups.h"
#include "common/strbuf.h"

/* May `who` read object o? Root and public buckets: yes. Otherwise, like a
 * stage request: a readable dataset holding it; its writer (the pusher:
 * in a shared archive bucket every user's objects stay readable to them
 * whatever the bucket's mode); or no dataset holds it and it is no pushed
 * file still on its way to tape.
 * A CASE, not ORs: SQLite evaluates both sides of an OR in a result column,
 * and each side here is a subquery; CASE stops at the first that decides. */
#define READABLE_SQL                                                                     \
    "(CASE WHEN :all THEN 1"                                                             \
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
    ", (SELECT c.size FROM cache c WHERE c.object_id = o.id),"
    " m.headers, m.storage_class, m.part_sizes IS NOT NULL,"
    " (SELECT p.uid FROM push_items pi JOIN pushes p ON p.id = pi.push_id"
    "  WHERE pi.object_id = o.id)"
    " FROM objects o LEFT JOIN object_meta m ON m.object_id = o.id WHERE o.bucket = :bucket AND o.key = :key AND " VISIBLE_SQL;

static const char sql_list_from[] =
    "SELECT o.key, o.size, o.mtime, o.etag, o.checksum, o.storage_class, o.id, " CACHED_SQL
    ", (SELECT m.storage_class FROM object_meta m WHERE m.object_id = o.id)"
    " FROM objects o WHERE o.bucket = :bucket AND o.key >= :from AND " VISIBLE_SQL
    " AND " READABLE_SQL " ORDER BY o.key";

static const char sql_list_after[] =
    "SELECT o.key, o.size, o.mtime, o.etag, o.checksum, o.storage_class, o.id, " CACHED_SQL
    ", (SELECT m.storage_class FROM object_meta m WHERE m.object_id = o.id)"
    " FROM objects o WHERE o.bucket = :bucket AND o.key > :from AND " VISIBLE_SQL
    " AND " READABLE_SQL " ORDER BY o.key";

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

enum { ST_OBJECT, ST_LIST_FROM, ST_LIST_AFTER, ST_HAS_OBJECTS, ST_ONGOING, ST_PINNED, ST_N };

struct s3_db {
    catalog_t *cat;
    requests_t *requests;
    sqlite3_stmt *st[ST_N];
    s3_db_t *next_free;
};

struct s3_dbpool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    s3_db_t *all;
    size_t count;
    s3_db_t *free_list;
};

static int db_error(s3_db_t *db, si_error_t *err, const char *what)
{
    catalog_sqlerr(db->cat, err, what);
    errno = EIO;
    return -1;
}

static void db_close(s3_db_t *db)
{
    for (int i = 0; i < ST_N; i++)
        sqlite3_finalize(db->st[i]);
    requests_close(db->requests);
    catalog_close(db->cat);
}

static int db_open(s3_db_t *db, const char *path, si_error_t *err)
{
    static const char *const sql[ST_N] = {sql_object, sql_list_from, sql_list_after,
                                          sql_bucket_has_objects, sql_ongoing, sql_pinned_until};
    memset(db, 0, sizeof(*db));
    if (!(db->cat = catalog_open(path, 0, err)))
        return -1;
    if (!(db->requests = requests_open(db->cat, err)))
        goto error;
    for (int i = 0; i < ST_N; i++)
        if (sqlite3_prepare_v3(catalog_db(db->cat), sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                               &db->st[i], NULL) != SQLITE_OK) {
            db_error(db, err, "preparing the S3 server's queries");
            goto error;
        }
    return 0;
error:
    db_close(db);
    return -1;
}

s3_dbpool_t *s3_dbpool_open(const char *catalog_path, size_t connections, si_error_t *err)
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
        if (db_open(&p->all[i], catalog_path, err) < 0) {
            si_errprefix(err, "s3: catalog %s", catalog_path);
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
        db_close(&p->all[i]);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->all);
    free(p);
}

static void bind_who(sqlite3_stmt *s, const s3_who_t *who)
{
    char groups[S3_WHO_GROUPS_MAX * 11 + 2];
    si_groups_format(who->groups, who->ngroups, groups, sizeof(groups));
    sqlite3_bind_int(s, sqlite3_bind_parameter_index(s, ":all"), who->all);
    sqlite3_bind_int64(s, sqlite3_bind_parameter_index(s, ":uid"), who->uid);
    sqlite3_bind_int64(s, sqlite3_bind_parameter_index(s, ":gid"), who->gid);
    sqlite3_bind_text(s, sqlite3_bind_parameter_index(s, ":groups"), groups, -1,
                      SQLITE_TRANSIENT);
}

static void copy_text(char *dst, size_t size, const unsigned char *src)
{
    snprintf(dst, size, "%s", src ? (const char *)src : "");
}

int s3_db_object(s3_db_t *db, const char *bucket, const char *key, const s3_who_t *who,
                 s3_object_t *out, si_error_t *err)
{
    sqlite3_stmt *s = db->st[ST_OBJECT];
    sqlite3_bind_text(s, sqlite3_bind_parameter_index(s, ":bucket"), bucket, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, sqlite3_bind_parameter_index(s, ":key"), key, -1, SQLITE_STATIC);
    bind_who(s, who);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        out->id = sqlite3_column_int64(s, 0);
        out->size = (uint64_t)sqlite3_column_int64(s, 1);
        out->mtime = sqlite3_column_int64(s, 3);
        s3_etag_of((const char *)sqlite3_column_text(s, 4),
                   (const char *)sqlite3_column_text(s, 2), out->id, out->size, out->etag);
        copy_text(out->storage_class, sizeof(out->storage_class), sqlite3_column_text(s, 5));
        out->readable = sqlite3_column_int(s, 6) != 0;
        out->cached = sqlite3_column_type(s, 7) != SQLITE_NULL;
        out->cached_size = out->cached ? (uint64_t)sqlite3_column_int64(s, 7) : 0;
        copy_text(out->headers, sizeof(out->headers), sqlite3_column_text(s, 8));
        copy_text(out->asked_class, sizeof(out->asked_class), sqlite3_column_text(s, 9));
        out->multipart = sqlite3_column_int(s, 10) != 0;
        out->pushed = sqlite3_column_type(s, 11) != SQLITE_NULL;
        out->writer = out->pushed ? (uid_t)sqlite3_column_int64(s, 11) : 0;
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE)
        return 0;
    return db_error(db, err, "looking up an object");
}

int s3_db_bucket_has_objects(s3_db_t *db, const char *bucket, si_error_t *err)
{
    sqlite3_stmt *s = db->st[ST_HAS_OBJECTS];
    sqlite3_bind_text(s, 1, bucket, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE)
        return 0;
    return db_error(db, err, "looking up a bucket");
}

int s3_db_buckets(s3_db_t *db, int (*fn)(const char *bucket, void *arg), void *arg,
                  si_error_t *err)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(catalog_db(db->cat), sql_buckets, -1, &s, NULL) != SQLITE_OK)
        return db_error(db, err, "listing buckets");
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        if (fn((const char *)sqlite3_column_text(s, 0), arg) != 0) {
            rc = SQLITE_DONE;
            break;
        }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return db_error(db, err, "listing buckets");
    return 0;
}

void s3_db_cursor_end(s3_db_cursor_t *c)
{
    if (c->running) {
        sqlite3_reset(c->db->st[ST_LIST_FROM]);
        sqlite3_reset(c->db->st[ST_LIST_AFTER]);
        c->running = false;
    }
}

int s3_db_list_next(void *cursor, const char *from, bool inclusive, s3_list_entry_t *out,
                    si_error_t *err)
{
    s3_db_cursor_t *c = cursor;
    s3_db_t *db = c->db;
    size_t plen = strlen(c->key_prefix);
    sqlite3_stmt *s;
    /* the running statement already stands just past `from`: step on */
    if (c->running && !inclusive && strcmp(from, c->last) == 0) {
        s = sqlite3_stmt_busy(db->st[ST_LIST_FROM]) ? db->st[ST_LIST_FROM]
                                                   : db->st[ST_LIST_AFTER];
    } else {
        s3_db_cursor_end(c);
        s = db->st[inclusive ? ST_LIST_FROM : ST_LIST_AFTER];
        char *full = malloc(plen + strlen(from) + 1);
        if (!full)
            return si_errprintf(err, "out of memory");
        memcpy(full, c->key_prefix, plen);
        strcpy(full + plen, from);
        sqlite3_bind_text(s, sqlite3_bind_parameter_index(s, ":bucket"), c->bucket, -1,
                          SQLITE_STATIC);
        sqlite3_bind_text(s, sqlite3_bind_parameter_index(s, ":from"), full, -1, SQLITE_TRANSIENT);
        free(full);
        bind_who(s, &c->who);
        c->running = true;
    }
    int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        s3_db_cursor_end(c);
        return 0;
    }
    if (rc != SQLITE_ROW) {
        s3_db_cursor_end(c);
        return db_error(db, err, "listing objects");
    }
    const char *key = (const char *)sqlite3_column_text(s, 0);
    if (strncmp(key, c->key_prefix, plen) != 0) { /* past the archive bucket's keys */
        s3_db_cursor_end(c);
        return 0;
    }
    snprintf(out->key, sizeof(out->key), "%s", key + plen);
    snprintf(c->last, sizeof(c->last), "%s", out->key);
    out->size = (uint64_t)sqlite3_column_int64(s, 1);
    out->mtime = sqlite3_column_int64(s, 2);
    s3_etag_of((const char *)sqlite3_column_text(s, 3), (const char *)sqlite3_column_text(s, 4),
               sqlite3_column_int64(s, 6), out->size, out->etag);
    /* the class asked for at upload; else a cached object reads as STANDARD */
    if (sqlite3_column_type(s, 8) != SQLITE_NULL)
        copy_text(out->storage_class, sizeof(out->storage_class), sqlite3_column_text(s, 8));
    else if (sqlite3_column_int(s, 7))
        snprintf(out->storage_class, sizeof(out->storage_class), "STANDARD");
    else
        copy_text(out->storage_class, sizeof(out->storage_class), sqlite3_column_text(s, 5));
    return 1;
}

int s3_db_restore_state(s3_db_t *db, int64_t object_id, s3_restore_state_t *out,
                        si_error_t *err)
{
    sqlite3_stmt *s = db->st[ST_ONGOING];
    sqlite3_bind_int64(s, 1, object_id);
    int rc = sqlite3_step(s);
    out->ongoing = rc == SQLITE_ROW && sqlite3_column_int(s, 0) != 0;
    sqlite3_reset(s);
    if (rc != SQLITE_ROW)
        return db_error(db, err, "looking up restores");
    s = db->st[ST_PINNED];
    sqlite3_bind_int64(s, 1, object_id);
    rc = sqlite3_step(s);
    out->pinned_until = rc == SQLITE_ROW ? (int64_t)sqlite3_column_double(s, 0) : 0;
    sqlite3_reset(s);
    if (rc != SQLITE_ROW)
        return db_error(db, err, "looking up pins");
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

int s3_db_archive_buckets(s3_db_t *db, int (*fn)(const char *name, uid_t owner, void *arg),
                          void *arg, si_error_t *err)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(catalog_db(db->cat), sql_archive_buckets, -1, &s, NULL) != SQLITE_OK)
        return db_error(db, err, "listing archive buckets");
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        if (fn((const char *)sqlite3_column_text(s, 0), (uid_t)sqlite3_column_int64(s, 1),
               arg) != 0) {
            rc = SQLITE_DONE;
            break;
        }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return db_error(db, err, "listing archive buckets");
    return 0;
}

int s3_db_create_archive_bucket(s3_db_t *db, const char *name, const s3_who_t *who,
                                uid_t *owner, si_error_t *err)
{
    sqlite3_stmt *s;
    sqlite3 *h = catalog_db(db->cat);
    if (sqlite3_prepare_v2(h, "SELECT owner_uid FROM datasets WHERE name = ?1", -1, &s,
                           NULL) != SQLITE_OK)
        return db_error(db, err, "looking up a dataset");
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *owner = (uid_t)sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    if (rc == SQLITE_ROW)
        return si_errnoprintf(err, EEXIST, "a dataset named '%s' exists", name);
    if (rc != SQLITE_DONE)
        return db_error(db, err, "looking up a dataset");
    if (sqlite3_prepare_v2(h, "INSERT INTO datasets(name, owner_uid, owner_gid, mode,"
                              " description, created) VALUES (?1, ?2, ?3, 384, '"
                              S3_ARCHIVE_BUCKET_MARK "', ?4)", -1, &s, NULL) != SQLITE_OK)
        return db_error(db, err, "creating a bucket");
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, who->uid);
    sqlite3_bind_int64(s, 3, who->gid);
    sqlite3_bind_int64(s, 4, (int64_t)time(NULL));
    rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return db_error(db, err, "creating a bucket");
    *owner = who->uid;
    return 0;
}

int s3_db_share_archive_bucket(s3_db_t *db, const char *name, unsigned mode, gid_t gid,
                               si_error_t *err)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(catalog_db(db->cat),
                           "INSERT INTO datasets(name, owner_uid, owner_gid, mode, description,"
                           " created) VALUES (?1, 0, ?2, ?3, '" S3_SHARED_BUCKET_MARK "', ?4)"
                           " ON CONFLICT(name) DO UPDATE SET owner_uid = 0,"
                           " owner_gid = excluded.owner_gid, mode = excluded.mode,"
                           " description = excluded.description"
                           " WHERE datasets.description = excluded.description"
                           " OR datasets.description LIKE 'created by push %'", -1, &s,
                           NULL) != SQLITE_OK)
        return db_error(db, err, "sharing an archive bucket");
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, gid);
    sqlite3_bind_int(s, 3, (int)mode);
    sqlite3_bind_int64(s, 4, (int64_t)time(NULL));
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return db_error(db, err, "sharing an archive bucket");
    if (sqlite3_changes(catalog_db(db->cat)) == 0)
        return si_errnoprintf(err, EEXIST, "s3.archive_buckets: '%s' names a dataset that"
                              " neither S3 nor push made (a bucket made by CreateBucket, or one"
                              " defined in the catalog): its owner keeps it; name another"
                              " bucket", name);
    return 0;
}

int s3_db_delete_archive_bucket(s3_db_t *db, const char *name, si_error_t *err)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(catalog_db(db->cat),
                           "DELETE FROM datasets WHERE name = ?1 AND description = '"
                           S3_ARCHIVE_BUCKET_MARK "' AND NOT EXISTS (SELECT 1 FROM"
                           " dataset_members m WHERE m.dataset_id = datasets.id) AND NOT EXISTS"
                           " (SELECT 1 FROM pushes p WHERE p.dataset_id = datasets.id)",
                           -1, &s, NULL) != SQLITE_OK)
        return db_error(db, err, "deleting a bucket");
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return db_error(db, err, "deleting a bucket");
    if (sqlite3_changes(catalog_db(db->cat)) == 0)
        return si_errnoprintf(err, ENOTEMPTY, "bucket '%s' is not empty", name);
    return 0;
}

static void bind_text_or_null(sqlite3_stmt *s, int i, const char *text)
{
    if (text && *text)
        sqlite3_bind_text(s, i, text, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, i);
}

int s3_db_record_object(s3_db_t *db, int64_t object_id, const char *etag, const s3_meta_t *meta,
                        si_error_t *err)
{
    sqlite3 *h = catalog_db(db->cat);
    sqlite3_stmt *s = NULL;
    if (catalog_begin(db->cat, err) < 0)
        return -1;
    if (etag) {
        if (sqlite3_prepare_v2(h, "UPDATE objects SET etag = ?2 WHERE id = ?1", -1, &s,
                               NULL) != SQLITE_OK)
            goto db_fail;
        sqlite3_bind_int64(s, 1, object_id);
        sqlite3_bind_text(s, 2, etag, -1, SQLITE_STATIC);
        if (sqlite3_step(s) != SQLITE_DONE)
            goto db_fail;
        sqlite3_finalize(s);
    }
    bool any = meta && ((meta->headers && *meta->headers) ||
                        (meta->storage_class && *meta->storage_class) ||
                        (meta->part_sizes && *meta->part_sizes));
    if (any)
        sqlite3_prepare_v2(h, "INSERT OR REPLACE INTO object_meta(object_id, headers,"
                           " storage_class, part_sizes) VALUES (?1, ?2, ?3, ?4)", -1, &s, NULL);
    else
        sqlite3_prepare_v2(h, "DELETE FROM object_meta WHERE object_id = ?1", -1, &s, NULL);
    if (!s)
        goto db_fail;
    sqlite3_bind_int64(s, 1, object_id);
    if (any) {
        bind_text_or_null(s, 2, meta->headers);
        bind_text_or_null(s, 3, meta->storage_class);
        bind_text_or_null(s, 4, meta->part_sizes);
    }
    if (sqlite3_step(s) != SQLITE_DONE)
        goto db_fail;
    sqlite3_finalize(s);
    return catalog_commit(db->cat, err);
db_fail:
    db_error(db, err, "recording an object's ETag and metadata");
    sqlite3_finalize(s);
    catalog_rollback(db->cat);
    return -1;
}

int s3_db_part_sizes(s3_db_t *db, int64_t object_id, si_strbuf_t *out, si_error_t *err)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(catalog_db(db->cat), "SELECT part_sizes FROM object_meta WHERE"
                           " object_id = ?1 AND part_sizes IS NOT NULL", -1, &s, NULL) != SQLITE_OK)
        return db_error(db, err, "looking up part sizes");
    sqlite3_bind_int64(s, 1, object_id);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        si_strbuf_puts(out, (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    if (rc == SQLITE_ROW)
        return out->failed ? si_errprintf(err, "part sizes: out of memory") : 1;
    if (rc == SQLITE_DONE)
        return 0;
    return db_error(db, err, "looking up part sizes");
}

/* One statement of the delete, bound to the object id. */
static int exec_id(s3_db_t *db, const char *sql, int64_t id, si_error_t *err)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(catalog_db(db->cat), sql, -1, &s, NULL) != SQLITE_OK)
        return db_error(db, err, "deleting an object");
    sqlite3_bind_int64(s, 1, id);
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return db_error(db, err, "deleting an object");
    return 0;
}

int s3_db_delete_object_begin(s3_db_t *db, const char *bucket, const char *key,
                              int64_t *object_id, si_error_t *err)
{
    sqlite3 *h = catalog_db(db->cat);
    sqlite3_stmt *s = NULL;
    int found = 0;
    if (catalog_begin(db->cat, err) < 0)
        return -1;
    if (sqlite3_prepare_v2(h, "SELECT o.id, (SELECT state FROM push_items p WHERE"
                           " p.object_id = o.id) FROM objects o WHERE o.bucket = ?1 AND"
                           " o.key = ?2", -1, &s, NULL) != SQLITE_OK)
        goto db_fail;
    sqlite3_bind_text(s, 1, bucket, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        goto db_fail;
    if (rc == SQLITE_ROW) {
        *object_id = sqlite3_column_int64(s, 0);
        const char *state = (const char *)sqlite3_column_text(s, 1);
        if (state && (strcmp(state, "ARCHIVING") == 0 || strcmp(state, "RECEIVING") == 0)) {
            si_errnoprintf(err, EBUSY, "'%s/%s' is %s", bucket, key,
                           strcmp(state, "ARCHIVING") == 0 ? "being written to tape"
                                                           : "still arriving");
            goto error;
        }
        found = 1;
    }
    sqlite3_finalize(s);
    s = NULL;
    /* the push item (its trigger takes its cache pin off), the requests'
     * pins and items: then only the cache row holds the object */
    if (found && (exec_id(db, "DELETE FROM push_items WHERE object_id = ?1", *object_id, err) < 0 ||
                  exec_id(db, "DELETE FROM cache_pins WHERE object_id = ?1", *object_id, err) < 0 ||
                  exec_id(db, "DELETE FROM request_items WHERE object_id = ?1", *object_id,
                          err) < 0))
        goto error;
    if (catalog_commit(db->cat, err) < 0)
        goto error;
    return found;
db_fail:
    db_error(db, err, "deleting an object");
error:
    {
        int e = errno;
        sqlite3_finalize(s);
        catalog_rollback(db->cat);
        errno = e;
    }
    return -1;
}

int s3_db_delete_object_finish(s3_db_t *db, int64_t object_id, si_error_t *err)
{
    return exec_id(db, "DELETE FROM objects WHERE id = ?1", object_id, err);
}
