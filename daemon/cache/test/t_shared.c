/* One cache directory shared by two instances (a and b) on one catalog:
 * a process without an instance name is kept out, each sees the other's
 * objects in its usage, b's eviction spares what a pinned, a's open object
 * stays readable when b drops it, and b's start-up recovery removes only
 * its own and dead instances' temp files (and a young file without its row
 * only once no other instance lives); the kept usage stays the rows', and
 * on PostgreSQL its changes are folded. Both engines. */
#include "config.h"

#include <inttypes.h>

#include "catalog/instances.h"
#include "common/clock.h"
#include "common/tap.h"
#include "daemon/cache/test/cachetest.h"

#define OBJ 100 /* bytes per object; the cache holds 1000 */
#define LEASE_S 30.0

static ct_t t;
static int64_t ids[24];
static char sums[24][SI_CHECKSUM_TEXT_MAX];

static cache_t *open_instance(const char *name, catalog_t **cat)
{
    return ct_open_instance(&t, name, LEASE_S, cat);
}

static void make_file(const char *path)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("partial", f);
        fclose(f);
    }
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* The kept usage (schema 1.15) against a scan of the cache's rows. */
static bool usage_is_rows(void)
{
    return ct_query_int(&t, "SELECT " CATALOG_CACHE_USAGE_COLUMNS CATALOG_CACHE_USAGE_FROM) ==
               ct_query_int(&t, "SELECT count(*) FROM cache") &&
           ct_query_int(&t, "SELECT u.bytes + d.bytes" CATALOG_CACHE_USAGE_FROM) ==
               ct_query_int(&t, "SELECT coalesce(sum(size), 0) FROM cache");
}

/* Thousands of rows changed behind the instances' backs (as another
 * instance's batches would): reading the usage still counts them, and on
 * PostgreSQL folds the piled-up changes into the totals row. */
static void many_changes(cache_t *a)
{
    si_error_t err;
    cache_usage_t before, u;
    ok(cache_usage(a, &before, &err) == 0, "usage before: %s", err.text);
    ok(test_exec(t.cat, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)"
                        " INSERT INTO objects(id, bucket, key, size) SELECT 100000 + i, 'many', 'k' || i, 1"
                        " FROM n;"
                        "INSERT INTO cache(object_id, path, size, last_access)"
                        " SELECT id, 'p', 1, 1 FROM objects WHERE bucket = 'many'") == 0,
       "5,000 rows added behind the instances' backs");
    int rc = cache_usage(a, &u, &err);
    ok(rc == 0 && u.objects == before.objects + 5000 && u.used_bytes == before.used_bytes + 5000,
       "a's usage counts them: %" PRIu64 " objects, %" PRIu64 " bytes", u.objects, u.used_bytes);
    is_int(ct_query_int(&t, "SELECT count(*) FROM cache_usage_changes"), 0,
           "no change left unfolded after the read (%s)", test_engine_name());
    ok(usage_is_rows(), "the kept usage is the rows' after the fold");
    ok(test_exec(t.cat, "DELETE FROM objects WHERE bucket = 'many'") == 0,
       "the 5,000 deleted (their cache rows by cascade)");
    rc = cache_usage(a, &u, &err);
    ok(rc == 0 && u.objects == before.objects && u.used_bytes == before.used_bytes,
       "a's usage is back to %" PRIu64 " objects", u.objects);
    ok(usage_is_rows() && ct_query_int(&t, "SELECT count(*) FROM cache_usage_changes") == 0,
       "folded again, and still the rows'");
}

static void body(void)
{
    si_error_t err;
    if (ct_setup(&t, "t_shared") < 0) {
        ok(0, "setting up on %s", test_engine_name());
        return;
    }
    for (unsigned n = 1; n < 24; n++)
        ids[n] = ct_object(&t, n, OBJ, sums[n]);
    double now = si_wall_now();
    ok(instance_register(t.cat, "a", "h", 1, now, LEASE_S, &err) == 0 &&
           instance_register(t.cat, "b", "h", 2, now, LEASE_S, &err) == 0 &&
           instance_register(t.cat, "c", "h", 3, now - 10 * LEASE_S, LEASE_S, &err) == 0,
       "instances a, b (alive) and c (silent for ten lease times) registered: %s", err.text);

    catalog_t *cat_a, *cat_b;
    cache_t *a = open_instance("a", &cat_a), *b = open_instance("b", &cat_b);
    ok(a && b, "instances a and b open one cache directory");
    cache_conf_t alone = ct_conf(&t, 1000);
    cache_t *x = cache_open(&alone, t.cat, &err);
    ok(!x && errno == EBUSY && strstr(err.text, "in use"),
       "a stageind without an instance name is kept out: %s", err.text);
    cache_close(x);

    /* ---- usage: each counts the other's objects ---- */
    int64_t req = ct_request(&t, 1);
    ok(ct_store_next(&t, a, ids, sums, 1, OBJ, req) == 0, "a stores object 1 pinned by a request");
    for (unsigned n = 2; n <= 5; n++)
        ct_store_next(&t, a, ids, sums, n, OBJ, 0);
    for (unsigned n = 6; n <= 9; n++)
        ct_store_next(&t, b, ids, sums, n, OBJ, 0);
    cache_usage_t u;
    ok(cache_usage(b, &u, &err) == 0 && u.used_bytes == 9 * OBJ && u.objects == 9,
       "b's usage counts a's objects too: %" PRIu64 " bytes, %" PRIu64 " objects",
       u.used_bytes, u.objects);
    ok(cache_usage(a, &u, &err) == 0 && u.pinned_objects == 1, "the pin is seen by both");

    /* a reads object 6 (b's) while b drops it */
    int fd = -1;
    cache_place_t place = {0};
    ok(cache_open_object(a, ids[6], &fd, &place, &err) == 0 && place.size == OBJ,
       "a opens object 6, written by b");

    /* ---- b's eviction: 1000 bytes would pass the high watermark (900) ---- */
    ok(ct_store_next(&t, b, ids, sums, 10, OBJ, 0) == 0, "b stores object 10");
    is_str(ct_resident(b, ids, 10), "1,7,8,9,10",
           "b evicted the least recently used down to the low watermark, not a's pinned 1");
    ok(exists(t.cache_dir) && ct_cached(a, ids[1]), "a still has its pinned object");
    unsigned char buf[OBJ];
    unsigned char *want = ct_content(6, OBJ);
    ok(fd >= 0 && pread(fd, buf, OBJ, 0) == OBJ && memcmp(buf, want, OBJ) == 0,
       "a's open object 6 reads back whole after b evicted it");
    ok(usage_is_rows(), "the kept usage is the rows' after a's and b's commits and b's eviction");
    free(want);
    if (fd >= 0)
        close(fd);
    ok(cache_unpin_request(a, req, NULL, &err) == 0, "a releases its request");
    many_changes(a);

    /* ---- recovery: only its own and dead instances' leftovers ---- */
    char p_a[400], p_b[400], p_c[400], p_loose[400], p_rowless[500], rel[64];
    snprintf(p_a, sizeof(p_a), "%s/tmp/a/0000000000000014.1.1", t.cache_dir);
    snprintf(p_b, sizeof(p_b), "%s/tmp/b/0000000000000015.2.1", t.cache_dir);
    char c_dir[400];
    snprintf(c_dir, sizeof(c_dir), "%s/tmp/c", t.cache_dir);
    mkdir(c_dir, 0700);
    snprintf(p_c, sizeof(p_c), "%s/0000000000000016.3.1", c_dir);
    snprintf(p_loose, sizeof(p_loose), "%s/tmp/0000000000000017.9.1", t.cache_dir);
    cache_object_path(ids[20], rel, sizeof(rel), NULL);
    snprintf(p_rowless, sizeof(p_rowless), "%s/%s", t.cache_dir, rel);
    char d0[500];
    snprintf(d0, sizeof(d0), "%s", p_rowless);
    *strrchr(d0, '/') = '\0';
    make_file(p_a);
    make_file(p_b);
    make_file(p_c);
    make_file(p_loose);
    mkdir(d0, 0700);
    make_file(p_rowless); /* as if a had just renamed it, its batch not committed yet */
    cache_recovery_t rep = {0};
    ok(cache_recover(b, &rep, &err) == 0, "b's recovery: %s", err.text);
    ok(exists(p_a), "a's temp file is kept: a lives");
    ok(!exists(p_b), "b's own temp file is removed");
    ok(!exists(c_dir), "dead c's temp folder is removed");
    ok(!exists(p_loose), "a temp file from a time alone is removed");
    is_int(rep.temp_files_removed, 3, "3 temp files removed");
    ok(exists(p_rowless), "a young object file without its row is kept while a lives");
    ok(ct_cached(b, ids[1]) && ct_cached(b, ids[10]), "the cached objects are kept");
    cache_recovery_free(&rep);

    test_exec(t.cat, "UPDATE instances SET heartbeat = 1 WHERE name = 'a'");
    ok(cache_recover(b, &rep, &err) == 0, "b's recovery once a is dead: %s", err.text);
    ok(!exists(p_a), "dead a's temp file is removed");
    ok(!exists(p_rowless), "the object file without its row is removed");
    cache_recovery_free(&rep);

    ct_close_instance(a, cat_a);
    ct_close_instance(b, cat_b);
    ct_teardown(&t);
}

int main(void)
{
    return test_run_engines(body);
}
