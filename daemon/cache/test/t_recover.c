/* Start-up recovery after a simulated crash: temp files left behind, a row
 * without its file, files without rows, a truncated file, corrupt content,
 * and entries that are not ours (links pointing outside, junk). */
#include "config.h"

#include <inttypes.h>

#include "common/tap.h"
#include "daemon/cache/test/cachetest.h"

static ct_t t;
static int64_t ids[10];
static char sums[10][SI_CHECKSUM_TEXT_MAX];

#define OBJ 4000

static void object_file(int64_t id, char *path, size_t size)
{
    char rel[64];
    cache_object_path(id, rel, sizeof(rel), NULL);
    snprintf(path, size, "%s/%s", t.cache_dir, rel);
}

static int write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    size_t n = fwrite(data, 1, len, f);
    return fclose(f) == 0 && n == len ? 0 : -1;
}

static void mkdirs_for(const char *path)
{
    char buf[600];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = strchr(buf + 1, '/'); p; p = strchr(p + 1, '/')) {
        *p = '\0';
        mkdir(buf, 0750);
        *p = '/';
    }
}

static bool dropped(const cache_recovery_t *r, int64_t id)
{
    for (size_t i = 0; i < r->ndropped; i++)
        if (r->dropped[i] == id)
            return true;
    return false;
}

/* Runs on each engine. */
static void body(void)
{
    si_error_t err;
    char path[600], other[600];
    if (ct_setup(&t, "t_recover") < 0) {
        ok(0, "setting up on %s", test_engine_name());
        return;
    }
    for (unsigned n = 1; n < 10; n++)
        ids[n] = ct_object(&t, n, OBJ, sums[n]);
    cache_conf_t conf = ct_conf(&t, 1u << 20);
    cache_t *c = cache_open(&conf, t.cat, &err);
    int64_t req = ct_request(&t, 2);
    for (unsigned n = 1; n <= 5; n++)
        ct_store(c, ids[n], n, OBJ, sums[n], 1000, n == 2 ? req : 0, &err);
    /* a write in flight when the "crash" comes */
    cache_writer_t *w;
    cache_writer_open(c, ids[6], OBJ, sums[6], &w, &err);
    unsigned char *data = ct_content(6, OBJ);
    cache_writer_write(w, data, OBJ / 2, &err);
    cache_writer_finish(w, 0, &err); /* too short: cleans up; recreate the leftover by hand */
    snprintf(path, sizeof(path), "%s/tmp/%016" PRIx64 ".999.1", t.cache_dir, (uint64_t)ids[6]);
    write_file(path, data, OBJ / 2);
    snprintf(path, sizeof(path), "%s/tmp/leftover-dir/inner", t.cache_dir);
    mkdirs_for(path);
    write_file(path, "x", 1);
    cache_close(c);

    /* the damage */
    object_file(ids[2], path, sizeof(path));
    unlink(path); /* row without file (and pinned) */
    object_file(ids[3], path, sizeof(path));
    if (truncate(path, OBJ - 1) < 0) /* size mismatch */
        diag("truncate: %s", strerror(errno));
    object_file(ids[4], path, sizeof(path));
    unsigned char *four = ct_content(4, OBJ);
    four[10] ^= 0xff;
    write_file(path, four, OBJ); /* same size, wrong content, verified row */
    free(four);
    test_exec(t.cat, "UPDATE cache SET verified = 0");
    test_exec(t.cat, "UPDATE cache SET verified = 1 WHERE object_id = 4"); /* so only "all" finds it */
    object_file(ids[7], path, sizeof(path)); /* file without row (crash before commit) */
    mkdirs_for(path);
    write_file(path, data, OBJ);
    object_file(777777, path, sizeof(path)); /* file without row, id not even catalogued */
    mkdirs_for(path);
    write_file(path, "y", 1);
    /* not ours: junk, a link to a file outside, a file filed under the wrong directory */
    snprintf(path, sizeof(path), "%s/objects/README", t.cache_dir);
    write_file(path, "junk", 4);
    snprintf(other, sizeof(other), "%s/outside", t.root);
    write_file(other, "precious", 8);
    object_file(ids[8], path, sizeof(path));
    mkdirs_for(path);
    if (symlink(other, path) < 0)
        diag("symlink: %s", strerror(errno));
    snprintf(path, sizeof(path), "%s/objects/zz", t.cache_dir);
    mkdir(path, 0750);
    object_file(ids[1], path, sizeof(path));
    snprintf(other, sizeof(other), "%s/objects/01/00/%016" PRIx64, t.cache_dir, (uint64_t)ids[1]);
    mkdirs_for(other);
    if (link(path, other) < 0)
        diag("link: %s", strerror(errno));
    free(data);

    conf.verify_on_start = CACHE_VERIFY_UNVERIFIED;
    c = cache_open(&conf, t.cat, &err);
    cache_recovery_t r;
    ok(cache_recover(c, &r, &err) == 0, "recovery ran: %s", err.text);
    diag("temp %" PRIu64 " (%" PRIu64 " B), rows without file %" PRIu64 ", files without row %" PRIu64
         ", stray %" PRIu64 ", size %" PRIu64 ", verified %" PRIu64 ", failed %" PRIu64,
         r.temp_files_removed, r.temp_bytes_removed, r.rows_without_file, r.files_without_row,
         r.stray_entries_removed, r.size_mismatches, r.verified, r.verify_failed);
    ok(r.temp_files_removed == 2 && r.temp_bytes_removed == OBJ / 2 + 1,
       "temp files removed (a directory's content too)");
    char tmp[400];
    snprintf(tmp, sizeof(tmp), "%s/tmp", t.cache_dir);
    is_int(ct_count_entries(tmp), 0, "tmp/ is empty");
    is_int(r.rows_without_file, 1, "row without its file dropped");
    is_int(r.size_mismatches, 1, "truncated file dropped with its row");
    is_int(r.files_without_row, 2, "files without rows removed");
    is_int(r.stray_entries_removed, 4, "junk, the link, a foreign directory, a misfiled file removed");
    is_int(r.verified, 2, "unverified objects re-hashed (1, 5)");
    is_int(r.verify_failed, 0, "the verified corrupt one is not re-hashed in 'unverified' mode");
    ok(r.ndropped == 2 && dropped(&r, ids[2]) && dropped(&r, ids[3]),
       "dropped objects listed for requeueing");
    is_int(r.objects, 3, "3 objects remain (1, 4, 5)");
    is_int(r.bytes, 3 * OBJ, "their bytes");
    cache_recovery_free(&r);
    snprintf(other, sizeof(other), "%s/outside", t.root);
    ok(access(other, F_OK) == 0, "the link's target outside the cache is untouched");
    is_int(ct_query_int(&t, "SELECT count(*) FROM cache_pins"), 0,
           "the dropped object's pin went with its row");
    is_int(ct_query_int(&t, "SELECT count(*) FROM cache WHERE verified = 1"), 3,
           "re-hashed objects now verified");
    object_file(ids[1], path, sizeof(path));
    ok(access(path, F_OK) == 0, "intact objects stay");
    cache_usage_t u;
    cache_usage(c, &u, &err);
    is_int(u.used_bytes, 3 * OBJ, "usage follows the reconciled catalog");

    /* "all" finds the corrupt file behind a verified row */
    cache_close(c);
    conf.verify_on_start = CACHE_VERIFY_ALL;
    c = cache_open(&conf, t.cat, &err);
    ok(cache_recover(c, &r, &err) == 0 && r.verified == 2 && r.verify_failed == 1 &&
           r.ndropped == 1 && r.dropped[0] == ids[4],
       "verify all: the corrupt object is dropped");
    cache_recovery_free(&r);
    object_file(ids[4], path, sizeof(path));
    ok(access(path, F_OK) < 0 && cache_stat(c, ids[4], NULL, &err) == 0,
       "its file and row are gone");

    /* a clean cache: nothing to do */
    ok(cache_recover(c, &r, &err) == 0 &&
           r.temp_files_removed + r.rows_without_file + r.files_without_row +
                   r.stray_entries_removed + r.size_mismatches + r.verify_failed + r.ndropped ==
               0 && r.objects == 2,
       "second recovery finds nothing to fix");
    cache_recovery_free(&r);
    ok(ct_store(c, ids[4], 4, OBJ, sums[4], OBJ, 0, &err) == 0, "a dropped object is recalled again");

    /* with writers open, recovery refuses */
    cache_writer_open(c, ids[9], OBJ, sums[9], &w, &err);
    ok(cache_recover(c, &r, &err) < 0 && errno == EBUSY, "recovery with an open writer: %s",
       err.text);
    cache_writer_abort(w);

    cache_close(c);
    ct_teardown(&t);
}

int main(void)
{
    return test_run_engines(body);
}
