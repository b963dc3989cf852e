/* Cache write benchmark: bytes written through the cache (hashed, fsync'd,
 * renamed, recorded in the catalog) against plain write(2) + fsync of the
 * same bytes to the same file system (what `dd bs=4M conv=fsync` does), and
 * the hash alone. Cases: one large object, many 1 MiB objects, many small
 * ones. Times include every fsync. */
#include "config.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "common/checksum.h"
#include "common/clock.h"
#include "common/table.h"
#include "daemon/cache/cache.h"
#include "tests/bench/bench_opts.h"

#define FEED (1u << 20)      /* bytes per cache_writer_write, like a tape read */
#define SOURCE (64u << 20)   /* random bytes, reused cyclically */

typedef struct {
    const char *name;
    size_t objects;
    uint64_t object_size;
} bench_case_t;

static unsigned char *source;

/* Object i's bytes are the source from offset i * 4099, cyclically. */
static const unsigned char *piece(size_t object, uint64_t off, size_t *len)
{
    uint64_t at = (object * 4099 + off) % SOURCE;
    if (*len > SOURCE - at)
        *len = (size_t)(SOURCE - at);
    return source + at;
}

static void object_sum(size_t object, uint64_t size, char out[SI_CHECKSUM_TEXT_MAX])
{
    si_checksum_t *c = si_checksum_new("sha256", NULL);
    for (uint64_t off = 0; off < size;) {
        size_t len = size - off < FEED ? (size_t)(size - off) : FEED;
        const unsigned char *p = piece(object, off, &len);
        si_checksum_update(c, p, len);
        off += len;
    }
    si_checksum_final(c, out);
    si_checksum_free(c);
}

static double raw_write(const char *dir, const bench_case_t *bc)
{
    char path[600];
    double t0 = si_mono_now();
    for (size_t i = 0; i < bc->objects; i++) {
        snprintf(path, sizeof(path), "%s/raw-%zu", dir, i);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0640);
        if (fd < 0)
            return -1;
        for (uint64_t off = 0; off < bc->object_size;) {
            size_t len = bc->object_size - off < (4u << 20) ? (size_t)(bc->object_size - off)
                                                             : (4u << 20);
            const unsigned char *p = piece(i, off, &len);
            if (write(fd, p, len) != (ssize_t)len) {
                close(fd);
                return -1;
            }
            off += len;
        }
        if (fsync(fd) < 0 || close(fd) < 0)
            return -1;
    }
    double t = si_mono_now() - t0;
    for (size_t i = 0; i < bc->objects; i++) {
        snprintf(path, sizeof(path), "%s/raw-%zu", dir, i);
        unlink(path);
    }
    return t;
}

static double hash_only(const bench_case_t *bc)
{
    char sum[SI_CHECKSUM_TEXT_MAX];
    double t0 = si_mono_now();
    for (size_t i = 0; i < bc->objects; i++)
        object_sum(i, bc->object_size, sum);
    return si_mono_now() - t0;
}

static double cache_write(const char *dir, const bench_case_t *bc, si_error_t *err)
{
    char db[600];
    snprintf(db, sizeof(db), "%s/catalog.db", dir);
    catalog_t *cat = catalog_open(db, CATALOG_CREATE, err);
    if (!cat)
        return -1;
    int64_t *ids = calloc(bc->objects, sizeof(*ids));
    char (*sums)[SI_CHECKSUM_TEXT_MAX] = calloc(bc->objects, sizeof(*sums));
    catalog_begin(cat, err);
    for (size_t i = 0; i < bc->objects; i++) {
        char key[64];
        snprintf(key, sizeof(key), "%s-%zu", bc->name, i);
        object_sum(i, bc->object_size, sums[i]);
        catalog_object_t o = {.bucket = "bench", .key = key, .size = bc->object_size,
                              .checksum = sums[i]};
        if (catalog_object_put(cat, &o, &ids[i], err) < 0)
            goto error;
    }
    catalog_commit(cat, err);
    cache_conf_t conf;
    cache_conf_defaults(&conf, dir);
    cache_t *c = cache_open(&conf, cat, err);
    if (!c)
        goto error;
    double t0 = si_mono_now();
    for (size_t i = 0; i < bc->objects; i++) {
        cache_writer_t *w;
        if (cache_writer_open(c, ids[i], bc->object_size, sums[i], &w, err) < 0)
            goto error_cache;
        for (uint64_t off = 0; off < bc->object_size;) {
            size_t len = bc->object_size - off < FEED ? (size_t)(bc->object_size - off) : FEED;
            const unsigned char *p = piece(i, off, &len);
            if (cache_writer_write(w, p, len, err) < 0) {
                cache_writer_abort(w);
                goto error_cache;
            }
            off += len;
        }
        if (cache_writer_finish(w, 0, err) < 0)
            goto error_cache;
    }
    double t = si_mono_now() - t0;
    for (size_t i = 0; i < bc->objects; i++)
        cache_remove(c, ids[i], NULL);
    cache_close(c);
    catalog_close(cat);
    free(ids);
    free(sums);
    return t;
error_cache:
    cache_close(c);
error:
    catalog_close(cat);
    free(ids);
    free(sums);
    return -1;
}

int main(int argc, char **argv)
{
    const bench_opts_t bo = bench_options(argc, argv);
    bool quick = bo.quick, json = bo.json;
    const char *base = bo.dir;
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/cache-bench-XXXXXX", base);
    if (!mkdtemp(dir)) {
        perror(dir);
        return 1;
    }
    source = malloc(SOURCE);
    uint64_t x = 88172645463325252ULL;
    for (size_t i = 0; i < SOURCE; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        source[i] = (unsigned char)x;
    }
    const bench_case_t cases[] = {
        {"large", 1, quick ? UINT64_C(256) << 20 : UINT64_C(1) << 30},
        {"1MiB", quick ? 256 : 1024, UINT64_C(1) << 20},
        {"64KiB", quick ? 1000 : 5000, UINT64_C(64) << 10},
    };
    static const si_column_t columns[] = {
        {"case", SI_COL_STR}, {"objects", SI_COL_INT}, {"bytes", SI_COL_BYTES},
        {"cache_MBps", SI_COL_REAL}, {"write_fsync_MBps", SI_COL_REAL},
        {"sha256_MBps", SI_COL_REAL}, {"cache_objects_per_s", SI_COL_REAL},
    };
    si_table_t *t = si_table_new(columns, sizeof(columns) / sizeof(columns[0]));
    int rc = 0;
    for (size_t i = 0; t && i < sizeof(cases) / sizeof(cases[0]); i++) {
        si_error_t err = {{0}};
        const bench_case_t *bc = &cases[i];
        double bytes = (double)bc->objects * (double)bc->object_size;
        double hash_s = hash_only(bc);
        double raw_s = raw_write(dir, bc);
        double cache_s = cache_write(dir, bc, &err);
        if (raw_s < 0 || cache_s < 0) {
            fprintf(stderr, "cache bench %s: %s\n", bc->name, cache_s < 0 ? err.text : "raw write failed");
            rc = 1;
            break;
        }
        si_table_row(t);
        si_table_str(t, bc->name);
        si_table_int(t, (int64_t)bc->objects);
        si_table_int(t, (int64_t)bytes);
        si_table_real(t, bytes / 1e6 / cache_s);
        si_table_real(t, bytes / 1e6 / raw_s);
        si_table_real(t, bytes / 1e6 / hash_s);
        si_table_real(t, (double)bc->objects / cache_s);
    }
    bench_remove_tree("cache bench", dir);
    free(source);
    if (!t || rc)
        return 1;
    bench_print_results(t, "cache", quick, json);
    si_table_free(t);
    return 0;
}
