/* Fixtures for the cache tests: a scratch directory with a catalog (of the
 * engine test_run_engines runs the body on), objects
 * with known content and checksums, requests to pin with, a virtual clock. */
#ifndef STAGEIN_CACHE_TEST_H
#define STAGEIN_CACHE_TEST_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "catalog/requests.h"
#include "catalog/test/testutil.h"
#include "common/checksum.h"
#include "daemon/cache/cache.h"

typedef struct {
    char root[256];      /* scratch directory */
    char db[600];        /* the catalog: a file in root, or a PostgreSQL URL */
    char cache_dir[300];
    catalog_t *cat;
    requests_t *req;
    double now;          /* the virtual clock */
} ct_t;

static double ct_clock(void *arg)
{
    return ((ct_t *)arg)->now;
}

static inline int ct_rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(path);
}

static inline void ct_rm_tree(const char *path)
{
    nftw(path, ct_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static inline int ct_setup(ct_t *t, const char *tag)
{
    si_error_t err;
    memset(t, 0, sizeof(*t));
    snprintf(t->root, sizeof(t->root), "%s/cache-%s-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", tag);
    if (!mkdtemp(t->root))
        return -1;
    snprintf(t->cache_dir, sizeof(t->cache_dir), "%s/cache", t->root);
    if (test_engine_is_pg())
        test_db_path(t->db, sizeof(t->db), tag);
    else
        snprintf(t->db, sizeof(t->db), "%s/catalog.db", t->root);
    if (!(t->cat = catalog_open(t->db, CATALOG_CREATE, &err)) || !(t->req = requests_open(t->cat, &err))) {
        fprintf(stderr, "setup: %s\n", err.text);
        return -1;
    }
    t->now = 1000.0;
    return 0;
}

static inline void ct_teardown(ct_t *t)
{
    requests_close(t->req);
    catalog_close(t->cat);
    if (test_engine_is_pg())
        test_db_remove(t->db);
    ct_rm_tree(t->root);
}

/* A cache of capacity bytes on t's virtual clock, every object in a file
 * of its own (t_segment tests segment files: ct_conf_segments). */
static inline cache_conf_t ct_conf(ct_t *t, uint64_t capacity)
{
    cache_conf_t conf;
    cache_conf_defaults(&conf, t->root);
    conf.capacity = capacity;
    conf.clock = ct_clock;
    conf.clock_arg = t;
    conf.segment_object_max = 0;
    return conf;
}

/* ct_conf with objects below 1 MiB in segments of segment_bytes. */
static inline cache_conf_t ct_conf_segments(ct_t *t, uint64_t capacity, uint64_t segment_bytes)
{
    cache_conf_t conf = ct_conf(t, capacity);
    conf.segment_object_max = 1u << 20;
    conf.segment_bytes = segment_bytes;
    return conf;
}

/* Instance name of several sharing t's cache directory (1000 bytes,
 * watermarks 0.9/0.5) on a catalog connection of its own (*cat). */
static inline cache_t *ct_open_instance(ct_t *t, const char *name, double lease_s,
                                        catalog_t **cat)
{
    si_error_t err;
    cache_conf_t conf = ct_conf(t, 1000);
    conf.high_watermark = 0.9;
    conf.low_watermark = 0.5;
    snprintf(conf.instance, sizeof(conf.instance), "%s", name);
    conf.lease_s = lease_s;
    *cat = catalog_open(t->db, 0, &err);
    cache_t *c = *cat ? cache_open(&conf, *cat, &err) : NULL;
    if (!c)
        fprintf(stderr, "# instance %s: %s\n", name, err.text);
    return c;
}

/* Closes an instance of ct_open_instance, then its catalog connection
 * (either may be NULL). */
static inline void ct_close_instance(cache_t *c, catalog_t *cat)
{
    cache_close(c);
    catalog_close(cat);
}

/* A test run once with every object in a file of its own and once with
 * small objects in segments (in_segments), on each engine: the body's
 * layout is the argument test_run_engines has no room for. */
static void (*ct_layout_body)(bool in_segments);

static inline void ct_both_layouts(void)
{
    ct_layout_body(false);
    ct_layout_body(true);
}

static inline int ct_run_layouts(void (*body_with)(bool in_segments))
{
    ct_layout_body = body_with;
    return test_run_engines(ct_both_layouts);
}

/* Deterministic content of object n. */
static inline unsigned char *ct_content(unsigned n, size_t size)
{
    unsigned char *p = malloc(size ? size : 1);
    uint32_t x = 2463534242u ^ (n * 2654435761u);
    for (size_t i = 0; i < size; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (unsigned char)x;
    }
    return p;
}

static inline void ct_sha256(const unsigned char *data, size_t size, char out[SI_CHECKSUM_TEXT_MAX])
{
    si_checksum_t *c = si_checksum_new("sha256", NULL);
    si_checksum_update(c, data, size);
    si_checksum_final(c, out);
    si_checksum_free(c);
}

/* Catalogs bucket "bkt", key "obj-<n>" with its sha256; returns the id. */
static inline int64_t ct_object(ct_t *t, unsigned n, size_t size, char sum[SI_CHECKSUM_TEXT_MAX])
{
    unsigned char *data = ct_content(n, size);
    char key[32];
    snprintf(key, sizeof(key), "obj-%u", n);
    ct_sha256(data, size, sum);
    free(data);
    catalog_object_t o = {.bucket = "bkt", .key = key, .size = size, .checksum = sum};
    int64_t id = -1;
    si_error_t err;
    if (catalog_object_put(t->cat, &o, &id, &err) < 0)
        fprintf(stderr, "object: %s\n", err.text);
    return id;
}

/* A stage request for object n (catalogued before); returns requests.id. */
static inline int64_t ct_request(ct_t *t, unsigned n)
{
    char file[40];
    snprintf(file, sizeof(file), "bkt/obj-%u", n);
    const char *files[] = {file};
    requests_spec_t spec = {.uid = 0, .gid = 0, .pin_lifetime = 3600, .files = files, .nfiles = 1};
    requests_created_t out;
    si_error_t err;
    if (requests_create(t->req, &spec, &out, &err) < 0) {
        fprintf(stderr, "request: %s\n", err.text);
        return -1;
    }
    return out.id;
}

/* Writes object n through the cache in chunks of chunk bytes. */
static inline int ct_store(cache_t *c, int64_t id, unsigned n, size_t size, const char *sum,
                           size_t chunk, int64_t pin_request, si_error_t *err)
{
    cache_writer_t *w;
    if (cache_writer_open(c, id, size, sum, &w, err) < 0)
        return -1;
    unsigned char *data = ct_content(n, size);
    for (size_t off = 0; off < size; off += chunk) {
        size_t len = size - off < chunk ? size - off : chunk;
        if (cache_writer_write(w, data + off, len, err) < 0) {
            cache_writer_abort(w);
            free(data);
            return -1;
        }
    }
    free(data);
    return cache_writer_finish(w, pin_request, err);
}

/* Entries in a directory other than . and .., -1 if it cannot be read. */
static inline int ct_count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static inline long long ct_query_int(ct_t *t, const char *sql)
{
    return test_query_int(t->cat, sql);
}

/* Object n (of ids[]) stored whole a clock second later; pinned by pin
 * when it is not 0. */
static inline int ct_store_next(ct_t *t, cache_t *c, const int64_t *ids,
                                char (*sums)[SI_CHECKSUM_TEXT_MAX], unsigned n, size_t size,
                                int64_t pin)
{
    si_error_t err;
    t->now += 1;
    int rc = ct_store(c, ids[n], n, size, sums[n], size, pin, &err);
    if (rc < 0)
        fprintf(stderr, "# store %u: %s\n", n, err.text);
    return rc;
}

static inline bool ct_cached(cache_t *c, int64_t id)
{
    si_error_t err;
    return cache_stat(c, id, NULL, &err) == 1;
}

/* "1,7,8": which of objects 1..last (of ids[]) are cached. */
static inline const char *ct_resident(cache_t *c, const int64_t *ids, unsigned last)
{
    static char buf[200];
    buf[0] = '\0';
    for (unsigned n = 1; n <= last; n++)
        if (ct_cached(c, ids[n]))
            snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%u", buf[0] ? "," : "", n);
    return buf;
}

#endif
