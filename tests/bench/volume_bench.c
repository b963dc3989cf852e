/* Volume format benchmark: append, read back, walk and catalog import on a
 * simulated volume, for large members (streaming) and small ones (header
 * and per-member overhead). Times include fsync; the data sits on whatever
 * disk --dir names. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "common/clock.h"
#include "common/table.h"
#include "daemon/volume/volume.h"
#include "tests/bench/bench_opts.h"

#define READ_BLOCK (16u << 20)

static int make_source(const char *path, uint64_t size)
{
    FILE *f = fopen(path, "wb");
    unsigned char block[65536];
    uint64_t x = 88172645463325252ULL;
    if (!f)
        return -1;
    for (uint64_t done = 0; done < size;) {
        for (size_t i = 0; i < sizeof(block); i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            block[i] = (unsigned char)x;
        }
        size_t n = size - done < sizeof(block) ? (size_t)(size - done) : sizeof(block);
        if (fwrite(block, 1, n, f) != n)
            break;
        done += n;
    }
    return fclose(f);
}

typedef struct {
    const char *name;
    size_t members;
    uint64_t member_size;
    const char *headers; /* S3 stored headers on every member (STAGEIN.headers) */
} bench_case_t;

/* What a typical S3 client stores: Content-Type, Cache-Control and a few
 * x-amz-meta-* (about 200 bytes). */
static const char typical_headers[] =
    "content-type: application/octet-stream\ncache-control: max-age=86400, private\n"
    "x-amz-meta-owner: alice\nx-amz-meta-run: 2026-12-01T23:00:00Z/job-4711\n"
    "x-amz-meta-sha: 3f786850e387550fdab836ed7e6dc881de23001b\n";

typedef struct {
    double write_s, read_s, walk_s, import_s;
    uint64_t bytes;
} bench_result_t;

static int run_case(const char *dir, const bench_case_t *c, bench_result_t *r, si_error_t *err)
{
    char vdir[4096], src[4096], db[4096];
    tapevol_member_t *m = calloc(c->members, sizeof(*m));
    char (*keys)[32] = calloc(c->members, sizeof(*keys));
    tapevol_listing_t *w = NULL, *l = NULL;
    tapevol_t *vol = NULL;
    catalog_t *cat = NULL;
    unsigned char *buf = malloc(READ_BLOCK);
    int rc = -1;

    snprintf(vdir, sizeof(vdir), "%s/stagein-bench-volume-%d", dir, (int)getpid());
    snprintf(src, sizeof(src), "%s/source", vdir);
    snprintf(db, sizeof(db), "%s/catalog.db", vdir);
    if (!m || !keys || !buf) {
        si_errprintf(err, "out of memory");
        goto out;
    }
    if (tapevol_create(vdir, "BENCH1", "LTO-9", UINT64_C(18000000000000), err) < 0)
        goto out;
    if (make_source(src, c->member_size) < 0) {
        si_errprintf(err, "cannot write %s", src);
        goto out;
    }
    for (size_t i = 0; i < c->members; i++) {
        snprintf(keys[i], sizeof(keys[i]), "obj/%08zu", i);
        m[i] = (tapevol_member_t){.bucket = "bench", .key = keys[i], .path = src, .fd = -1,
                                  .size = c->member_size, .mtime = 1700000000,
                                  .headers = c->headers};
    }
    vol = tapevol_open(vdir, "BENCH1", TAPEVOL_RDWR, err);
    if (!vol)
        goto out;

    double t0 = si_mono_now();
    if (tapevol_append(vol, m, c->members, &w, err) < 0)
        goto out;
    r->write_s = si_mono_now() - t0;
    r->bytes = c->members * c->member_size;

    t0 = si_mono_now();
    for (size_t i = 0; i < w->nentries; i++) {
        for (uint64_t done = 0; done < w->entries[i].size;) {
            uint64_t left = w->entries[i].size - done;
            size_t n = left < READ_BLOCK ? (size_t)left : READ_BLOCK;
            if (tapevol_read(vol, w->entries[i].position + done, buf, n, err) < 0)
                goto out;
            done += n;
        }
    }
    r->read_s = si_mono_now() - t0;

    t0 = si_mono_now();
    if (tapevol_walk(vol, 0, &l, err) < 0)
        goto out;
    r->walk_s = si_mono_now() - t0;
    if (l->nentries != c->members) {
        si_errprintf(err, "walk found %zu members, wrote %zu", l->nentries, c->members);
        goto out;
    }

    cat = catalog_open(db, CATALOG_CREATE, err);
    t0 = si_mono_now();
    if (!cat || tapevol_import(vol, cat, 1, 0, NULL, err) < 0)
        goto out;
    r->import_s = si_mono_now() - t0;
    rc = 0;
out:
    catalog_close(cat);
    tapevol_listing_free(w);
    tapevol_listing_free(l);
    tapevol_close(vol);
    free(m);
    free(keys);
    free(buf);
    bench_remove_tree("volume", vdir);
    return rc;
}

int main(int argc, char **argv)
{
    const bench_opts_t bo = bench_options(argc, argv);
    bool quick = bo.quick, json = bo.json;
    const char *dir = bo.dir;
    const bench_case_t cases[] = {
        {"large", quick ? 4 : 8, quick ? UINT64_C(64) << 20 : UINT64_C(256) << 20, NULL},
        {"small", quick ? 5000 : 50000, UINT64_C(64) << 10, NULL},
        /* the same with S3 headers in every pax header: their cost, same run */
        {"small+headers", quick ? 5000 : 50000, UINT64_C(64) << 10, typical_headers},
    };
    static const si_column_t columns[] = {
        {"case", SI_COL_STR}, {"members", SI_COL_INT}, {"bytes", SI_COL_BYTES},
        {"write_MBps", SI_COL_REAL}, {"read_MBps", SI_COL_REAL},
        {"walk_members_per_s", SI_COL_REAL}, {"import_objects_per_s", SI_COL_REAL},
    };
    si_table_t *t = si_table_new(columns, sizeof(columns) / sizeof(columns[0]));
    for (size_t i = 0; t && i < sizeof(cases) / sizeof(cases[0]); i++) {
        bench_result_t r = {0};
        si_error_t err;
        if (run_case(dir, &cases[i], &r, &err) < 0) {
            fprintf(stderr, "volume bench %s: %s\n", cases[i].name, err.text);
            si_table_free(t);
            return 1;
        }
        si_table_row(t);
        si_table_str(t, cases[i].name);
        si_table_int(t, (int64_t)cases[i].members);
        si_table_int(t, (int64_t)r.bytes);
        si_table_real(t, (double)r.bytes / 1e6 / r.write_s);
        si_table_real(t, (double)r.bytes / 1e6 / r.read_s);
        si_table_real(t, (double)cases[i].members / r.walk_s);
        si_table_real(t, (double)cases[i].members / r.import_s);
    }
    if (!t)
        return 1;
    bench_print_results(t, "volume", quick, json);
    si_table_free(t);
    return 0;
}
