/* The S3 server's catalog queries (daemon/s3/db.c) on both engines: object
 * lookups with the read rule, listings, restores, archive buckets, metadata
 * and deletes. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/catalog.h"
#include "catalog/test/testutil.h"
#include "common/strbuf.h"
#include "common/tap.h"
#include "daemon/s3/db.h"

static int64_t put_object(catalog_t *cat, const char *bucket, const char *key, uint64_t size)
{
    si_error_t err;
    int64_t id = -1;
    catalog_object_t o = {.bucket = bucket, .key = key, .size = size, .mtime = 1700000000};
    if (catalog_object_put(cat, &o, &id, &err) < 0)
        diag("%s", err.text);
    return id;
}

static void exec_ok(catalog_t *cat, const char *sql)
{
    if (test_exec(cat, sql) < 0)
        diag("failed: %s", sql);
}

/* Bucket bkt: a (dataset ds1, 0640 of uid 1000, cached), b (in no dataset),
 * c (ds2, 0600 of uid 2000), d (pushed by 1000, still arriving), e (pushed
 * by 1000 into ds2); bucket zzz: one object. */
static void fill(catalog_t *cat, int64_t id[5])
{
    static const char *const keys[5] = {"a", "b", "c", "d", "e"};
    for (int i = 0; i < 5; i++)
        id[i] = put_object(cat, "bkt", keys[i], 100 + (uint64_t)i);
    put_object(cat, "zzz", "only", 1);
    char sql[1024];
    /* no explicit ids: PostgreSQL's identity columns would collide later */
    snprintf(sql, sizeof(sql),
             "INSERT INTO datasets(name, owner_uid, owner_gid, mode, created)"
             " VALUES ('ds1', 1000, 1000, 416, 0);"
             "INSERT INTO datasets(name, owner_uid, owner_gid, mode, created)"
             " VALUES ('ds2', 2000, 2000, 384, 0);"
             "INSERT INTO dataset_members SELECT id, %lld FROM datasets WHERE name = 'ds1';"
             "INSERT INTO dataset_members SELECT id, %lld FROM datasets WHERE name = 'ds2';"
             "INSERT INTO dataset_members SELECT id, %lld FROM datasets WHERE name = 'ds2';"
             "INSERT INTO cache(object_id, path, size, last_access, segment, file_offset)"
             " VALUES (%lld, 'x', 100, 0, 7, 8192);"
             "INSERT INTO pushes(uuid, uid, gid, dataset_id, created, updated)"
             " SELECT 'p1', 1000, 1000, id, 0, 0 FROM datasets WHERE name = 'ds2';"
             "INSERT INTO push_items(object_id, push_id, state)"
             " SELECT %lld, id, 'RECEIVING' FROM pushes;"
             "INSERT INTO push_items(object_id, push_id, state)"
             " SELECT %lld, id, 'DURABLE' FROM pushes;",
             (long long)id[0], (long long)id[2], (long long)id[4], (long long)id[0],
             (long long)id[3], (long long)id[4]);
    exec_ok(cat, sql);
}

static int count_bucket(const char *bucket, void *arg)
{
    si_strbuf_t *b = arg;
    si_strbuf_printf(b, "%s,", bucket);
    return 0;
}

static int count_archive(const char *name, uid_t owner, void *arg)
{
    si_strbuf_t *b = arg;
    si_strbuf_printf(b, "%s:%u,", name, (unsigned)owner);
    return 0;
}

/* The keys who may list in bucket bkt, as "a,b,": walking the cursor as
 * s3_list_run does (each call from the last key, exclusive). */
static void listed_in(s3_db_t *db, const char *bucket, const s3_who_t *who, si_strbuf_t *out)
{
    s3_db_cursor_t c = {.db = db, .bucket = bucket, .key_prefix = "", .who = *who};
    s3_list_entry_t e;
    si_error_t err;
    char from[SI_KEY_MAX + 1] = "";
    bool inclusive = true;
    int rc;
    while ((rc = s3_db_list_next(&c, from, inclusive, &e, &err)) == 1) {
        si_strbuf_printf(out, "%s:%s,", e.key, e.storage_class);
        snprintf(from, sizeof(from), "%s", e.key);
        inclusive = false;
    }
    if (rc < 0)
        si_strbuf_printf(out, "error %s", err.text);
    s3_db_cursor_end(&c);
}

static void listed(s3_db_t *db, const s3_who_t *who, si_strbuf_t *out)
{
    listed_in(db, "bkt", who, out);
}

/* More keys than one run of the listing statement returns (1000): the
 * cursor goes on from the last key, missing none and repeating none. */
static void check_long_listing(catalog_t *cat, s3_db_t *db, const s3_who_t *root)
{
    enum { N = 1005 };
    si_error_t err;
    si_strbuf_t want, got;
    si_strbuf_init(&want, 1 << 20);
    si_strbuf_init(&got, 1 << 20);
    catalog_begin(cat, &err);
    for (int i = 0; i < N; i++) {
        char key[32];
        snprintf(key, sizeof(key), "k%05d", i);
        put_object(cat, "long", key, 1);
        si_strbuf_printf(&want, "%s:GLACIER,", key);
    }
    catalog_commit(cat, &err);
    listed_in(db, "long", root, &got);
    is_str(si_strbuf_str(&got), si_strbuf_str(&want),
           "a listing of %d keys goes past the statement's batch of 1000", N);
    si_strbuf_free(&want);
    si_strbuf_free(&got);
}

static void run(void)
{
    char path[700];
    si_error_t err;
    test_db_path(path, sizeof(path), "s3db");
    catalog_t *cat = catalog_open(path, CATALOG_CREATE, &err);
    if (!cat) {
        ok(false, "catalog: %s", err.text);
        return;
    }
    int64_t id[5];
    fill(cat, id);

    s3_dbpool_t *pool = s3_dbpool_open(&(catalog_open_opts_t){.target = path}, 2, &err);
    ok(pool != NULL, "%s: the pool opens", test_engine_name());
    if (!pool) {
        diag("%s", err.text);
        catalog_close(cat);
        return;
    }
    s3_db_t *db = s3_dbpool_get(pool);
    s3_who_t user = {.uid = 1000, .gid = 1000}, other = {.uid = 3000, .gid = 3000};
    s3_who_t root = {.all = true};
    s3_object_t o;

    ok(s3_db_object(db, "bkt", "a", &user, &o, &err) == 1 && o.id == id[0] && o.size == 100 &&
           o.readable && o.cached && o.cached_at.size == 100 && o.cached_at.segment == 7 &&
           o.cached_at.offset == 8192 && !o.pushed,
       "a: found, readable by its dataset's owner, cached (in segment 7 at 8192)");
    ok(s3_db_object(db, "bkt", "a", &other, &o, &err) == 1 && !o.readable,
       "a: not readable by another user (mode 0640)");
    ok(s3_db_object(db, "bkt", "b", &other, &o, &err) == 1 && o.readable && !o.cached,
       "b: in no dataset, readable, not cached");
    ok(s3_db_object(db, "bkt", "c", &user, &o, &err) == 1 && !o.readable,
       "c: in another user's 0600 dataset: not readable");
    ok(s3_db_object(db, "bkt", "c", &root, &o, &err) == 1 && o.readable, "c: root reads it");
    ok(s3_db_object(db, "bkt", "d", &user, &o, &err) == 0, "d: an upload still arriving is no object");
    ok(s3_db_object(db, "bkt", "e", &user, &o, &err) == 1 && o.readable && o.pushed &&
           o.writer == 1000, "e: its writer reads it in a dataset it may not read");
    ok(s3_db_object(db, "bkt", "nope", &user, &o, &err) == 0, "a missing key: 0");

    si_strbuf_t b;
    si_strbuf_init(&b, 1 << 20);
    listed(db, &user, &b);
    is_str(si_strbuf_str(&b), "a:STANDARD,b:GLACIER,e:GLACIER,", "the listing: readable, visible keys in order");
    si_strbuf_free(&b);
    si_strbuf_init(&b, 1 << 20);
    listed(db, &root, &b);
    is_str(si_strbuf_str(&b), "a:STANDARD,b:GLACIER,c:GLACIER,e:GLACIER,", "root lists every visible key");
    si_strbuf_free(&b);

    check_long_listing(cat, db, &root);

    ok(s3_db_bucket_has_objects(db, "zzz", &err) == 1 && s3_db_bucket_has_objects(db, "yyy", &err) == 0,
       "bucket_has_objects");
    si_strbuf_init(&b, 1 << 20);
    ok(s3_db_buckets(db, count_bucket, &b, &err) == 0, "buckets");
    is_str(si_strbuf_str(&b), "bkt,long,zzz,", "the distinct buckets, ascending");
    si_strbuf_free(&b);

    s3_restore_state_t st;
    ok(s3_db_restore_state(db, id[1], &st, &err) == 0 && !st.ongoing && st.pinned_until == 0,
       "no restore yet");
    char uuid[64];
    ok(s3_db_stage(db, &user, "bkt", "b", S3_JOB_RESTORE, 0, 3600, uuid, &err) == 0 &&
           strlen(uuid) == 36, "a restore request is made");
    ok(s3_db_restore_state(db, id[1], &st, &err) == 0 && st.ongoing, "the restore is ongoing");

    uid_t owner = 0;
    ok(s3_db_create_archive_bucket(db, "arch", &user, &owner, &err) == 0 && owner == 1000,
       "an archive bucket is made");
    errno = 0;
    ok(s3_db_create_archive_bucket(db, "ds2", &user, &owner, &err) < 0 && errno == EEXIST &&
           owner == 2000, "a dataset's name: EEXIST with its owner");
    si_strbuf_init(&b, 1 << 20);
    ok(s3_db_archive_buckets(db, count_archive, &b, &err) == 0, "archive buckets listed");
    is_str(si_strbuf_str(&b), "arch:1000,", "the archive bucket and its owner");
    si_strbuf_free(&b);
    ok(s3_db_share_archive_bucket(db, "shared", 0750, 500, &err) == 0, "a shared bucket is made");
    ok(s3_db_share_archive_bucket(db, "shared", 0770, 501, &err) == 0 &&
           test_query_int(cat, "SELECT mode FROM datasets WHERE name = 'shared'") == 0770,
       "sharing it again updates it");
    errno = 0;
    ok(s3_db_share_archive_bucket(db, "ds1", 0750, 500, &err) < 0 && errno == EEXIST &&
           test_query_int(cat, "SELECT owner_uid FROM datasets WHERE name = 'ds1'") == 1000,
       "a dataset neither S3 nor push made is not taken over");
    exec_ok(cat, "INSERT INTO dataset_members SELECT d.id, o.id FROM datasets d, objects o"
                 " WHERE d.name = 'arch' AND o.key = 'only'");
    errno = 0;
    ok(s3_db_delete_archive_bucket(db, "arch", &err) < 0 && errno == ENOTEMPTY,
       "a bucket with members is not deleted");
    exec_ok(cat, "DELETE FROM dataset_members WHERE dataset_id ="
                 " (SELECT id FROM datasets WHERE name = 'arch')");
    ok(s3_db_delete_archive_bucket(db, "arch", &err) == 0 &&
           test_query_int(cat, "SELECT count(*) FROM datasets WHERE name = 'arch'") == 0,
       "an empty archive bucket is deleted");

    s3_meta_t meta = {.headers = "content-type: text/plain\n", .storage_class = "DEEP_ARCHIVE",
                      .part_sizes = "5,5,1"};
    ok(s3_db_record_object(db, id[1], "0123456789abcdef0123456789abcdef", &meta, &err) == 0,
       "ETag and metadata recorded");
    ok(s3_db_object(db, "bkt", "b", &user, &o, &err) == 1 && o.multipart &&
           strcmp(o.headers, meta.headers) == 0 && strcmp(o.asked_class, "DEEP_ARCHIVE") == 0 &&
           strstr(o.etag, "0123456789abcdef"), "the object reads them back");
    si_strbuf_init(&b, 1 << 20);
    ok(s3_db_part_sizes(db, id[1], &b, &err) == 1 && strcmp(si_strbuf_str(&b), "5,5,1") == 0,
       "part sizes read back");
    si_strbuf_free(&b);
    meta = (s3_meta_t){.headers = "x-amz-meta-a: 1\n"};
    ok(s3_db_record_object(db, id[1], NULL, &meta, &err) == 0 &&
           s3_db_object(db, "bkt", "b", &user, &o, &err) == 1 && !o.multipart &&
           o.asked_class[0] == '\0' && strstr(o.etag, "0123456789abcdef"),
       "metadata replaced whole, ETag kept");
    ok(s3_db_record_object(db, id[1], NULL, NULL, &err) == 0 &&
           test_query_int(cat, "SELECT count(*) FROM object_meta") == 0, "no metadata: row dropped");

    int64_t del = 0;
    errno = 0;
    ok(s3_db_delete_object_begin(db, "bkt", "d", &del, &err) < 0 && errno == EBUSY,
       "an arriving upload is not deleted (EBUSY)");
    ok(s3_db_delete_object_begin(db, "bkt", "nope", &del, &err) == 0, "a missing key: 0");
    ok(s3_db_delete_object_begin(db, "bkt", "b", &del, &err) == 1 && del == id[1] &&
           test_query_int(cat, "SELECT count(*) FROM request_items") == 0,
       "delete begins: the restore's item is gone");
    ok(s3_db_delete_object_finish(db, del, &err) == 0 &&
           s3_db_object(db, "bkt", "b", &root, &o, &err) == 0, "delete finishes: no object");

    s3_dbpool_put(pool, db);
    s3_dbpool_close(pool);
    catalog_close(cat);
    test_db_remove(path);
}

int main(void)
{
    return test_run_engines(run);
}
