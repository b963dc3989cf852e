/* Catalog benchmark: import rate, recall-plan time, dataset-summary time,
 * what the status page reads on each call over a kept history of 1,000,000
 * request items, and database size on a generated archive (1,000,000
 * objects over 200 volumes; --quick: 100,000),
 * on SQLite, and on PostgreSQL beside it when STAGEIN_BENCH_PG_URL names an
 * empty database (STAGEIN_BENCH_PG_PASSWORD_FILE: its password file), as
 * tests/bench/scale_out does. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "catalog/db.h"
#include "catalog/requests.h"
#include "common/array.h"
#include "common/clock.h"
#include "common/table.h"
#include "tests/bench/bench_opts.h"

#define VOLUMES 200
#define DATASETS 10

/* Deterministic sizes 1 MB .. ~4 GB, log-uniform-ish, from a 64-bit LCG. */
static uint64_t next_random(uint64_t *state)
{
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return *state >> 11;
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

typedef struct {
    double import_s, import_cpu_s, import_rate, import_per_cpu, define_s, plan_s, summary_s;
    double bulk_load_s; /* PostgreSQL: the engine's own COPY of the imported rows */
    double cache_fill_s;       /* a cache row per object, 4,096 per transaction */
    double cache_fill_plain_s; /* PostgreSQL: the same with the usage trigger disabled */
    double usage_scan_ms;      /* count and sum over the cache's rows (before 1.15) */
    double usage_kept_ms;      /* the kept usage (1.15) */
    double metrics_ms;         /* requests_metrics over HISTORY_ITEMS kept items */
    double list_ms;            /* requests_list of the latest LIST_SHOWN requests */
    double pushes_ms;          /* the 20 latest pushes (catalog_view_recent_pushes) */
    size_t plan_reads, plan_volumes, summary_rows;
    uint64_t db_bytes;
} result_t;

#define REF_BATCH_ROWS 5000 /* the importer's batch */

/* The rows of query as COPY text, with the offset where each batch of
 * REF_BATCH_ROWS rows starts (cuts[0] = 0, cuts[n] = the length). */
static int copy_text(db_t *db, const char *query, char **text, size_t *len, size_t **cuts,
                     size_t *ncuts, si_error_t *err)
{
    db_stmt_t *s = db_prepare(db, query, err);
    if (!s)
        return -1;
    FILE *f = open_memstream(text, len);
    size_t cap = 0, n = 0, rows = 0;
    *cuts = NULL;
    if (!f || si_array_grow((void **)cuts, &cap, 1, sizeof(**cuts)) < 0) {
        if (f)
            fclose(f);
        db_finalize(s);
        return si_errprintf(err, "out of memory");
    }
    (*cuts)[n++] = 0;
    int step;
    while ((step = db_step(s)) == DB_ROW) {
        for (int c = 0; c < db_column_count(s); c++)
            db_copy_field(f, c == 0, db_column_text(s, c));
        fputc('\n', f);
        if (++rows % REF_BATCH_ROWS == 0) {
            fflush(f);
            if (si_array_grow((void **)cuts, &cap, n + 1, sizeof(**cuts)) < 0)
                break;
            (*cuts)[n++] = *len;
        }
    }
    bool failed = step != DB_DONE;
    if (step == DB_ROW) /* stopped: no room for the next batch's offset */
        si_errprintf(err, "out of memory");
    else if (failed)
        db_error(db, err, "reading the imported rows");
    db_finalize(s);
    if (fclose(f) != 0 || (rows % REF_BATCH_ROWS &&
                           si_array_grow((void **)cuts, &cap, n + 1, sizeof(**cuts)) < 0)) {
        if (!failed)
            si_errprintf(err, "out of memory");
        return -1;
    }
    if (rows % REF_BATCH_ROWS)
        (*cuts)[n++] = *len;
    *ncuts = n - 1;
    return failed ? -1 : 0;
}

/* The reference for a PostgreSQL import: the same objects and copies loaded
 * by the engine's COPY, in the importer's batches and one transaction, into
 * tables of the same shape (columns, indexes, checks) without the catalog's
 * triggers: what the server itself takes for these rows, with no parsing,
 * id taking, reference checks or ANALYZE. Seconds, or -1. */
static double bulk_load_reference(catalog_t *cat, si_error_t *err)
{
    db_t *db = catalog_driver(cat);
    char *objects = NULL, *copies = NULL;
    size_t objects_len = 0, copies_len = 0, *ocuts = NULL, *ccuts = NULL, nocuts = 0, nccuts = 0;
    double seconds = -1;
    if (copy_text(db, "SELECT id, bucket, key, size, checksum, mtime, etag FROM objects ORDER BY id",
                  &objects, &objects_len, &ocuts, &nocuts, err) < 0 ||
        copy_text(db, "SELECT object_id, copy, volume_id, file_seq, position, length"
                      " FROM tape_copies ORDER BY object_id, copy",
                  &copies, &copies_len, &ccuts, &nccuts, err) < 0 ||
        db_exec(db, "CREATE TABLE bench_ref_objects (LIKE objects INCLUDING ALL);"
                    "CREATE TABLE bench_ref_copies (LIKE tape_copies INCLUDING ALL)", err) < 0)
        goto done;
    double t0 = si_mono_now();
    if (db_begin(db, err) < 0)
        goto drop;
    for (size_t b = 0; b < nocuts || b < nccuts; b++) {
        if ((b < nocuts &&
             db_copy_in(db, "COPY bench_ref_objects(id, bucket, key, size, checksum, mtime, etag)"
                            " FROM STDIN", objects + ocuts[b], ocuts[b + 1] - ocuts[b], err) < 0) ||
            (b < nccuts &&
             db_copy_in(db, "COPY bench_ref_copies FROM STDIN", copies + ccuts[b],
                        ccuts[b + 1] - ccuts[b], err) < 0)) {
            db_rollback(db);
            goto drop;
        }
    }
    if (db_commit(db, err) == 0)
        seconds = si_mono_now() - t0;
drop:
    if (db_exec(db, "DROP TABLE bench_ref_objects; DROP TABLE bench_ref_copies", err) < 0)
        seconds = -1;
done:
    free(objects);
    free(copies);
    free(ocuts);
    free(ccuts);
    return seconds;
}

#define CACHE_FILL_BATCH 4096 /* rows per transaction, and the daemon's fold (cache/store.c) */

/* Time of the fastest of `runs` executions of query (a row per run). */
static double best_query_s(db_t *db, const char *query, int runs, si_error_t *err)
{
    db_stmt_t *s = db_prepare(db, query, err);
    if (!s)
        return -1;
    double best = 1e9;
    for (int i = 0; i < runs; i++) {
        double t0 = si_mono_now();
        int step = db_step(s);
        double took = si_mono_now() - t0;
        db_reset(s);
        if (step != DB_ROW) {
            db_finalize(s);
            return si_errprintf(err, "%s: %s", query, db_errmsg(db));
        }
        best = took < best ? took : best;
    }
    db_finalize(s);
    return best;
}

/* Every object cached, CACHE_FILL_BATCH rows per transaction (one INSERT
 * each: the cache's batches insert a row per statement, so the trigger's
 * share of their cost is smaller than here), with the usage's changes folded after each (the
 * daemon folds every 4,096); seconds, or -1. */
static double fill_cache(catalog_t *cat, si_error_t *err)
{
    db_t *db = catalog_driver(cat);
    db_stmt_t *last = db_prepare(db, "SELECT coalesce(max(id), 0) FROM objects", err);
    if (!last || db_step(last) != DB_ROW) {
        db_finalize(last);
        return si_errprintf(err, "reading the last object id: %s", db_errmsg(db));
    }
    uint64_t objects = (uint64_t)db_column_int64(last, 0);
    db_finalize(last);
    db_stmt_t *ins = db_prepare(db, "INSERT INTO cache(object_id, path, size, last_access)"
                                    " SELECT id, 'p', size, 1 FROM objects"
                                    " WHERE id > ?1 AND id <= ?2", err);
    if (!ins)
        return -1;
    double t0 = si_mono_now();
    for (uint64_t lo = 0; lo < objects; lo += CACHE_FILL_BATCH) {
        db_bind_int64(ins, 1, (int64_t)lo);
        db_bind_int64(ins, 2, (int64_t)(lo + CACHE_FILL_BATCH));
        if (catalog_begin(cat, err) < 0)
            goto error;
        if (db_step(ins) != DB_DONE) {
            si_errprintf(err, "filling the cache: %s", db_errmsg(db));
            catalog_rollback(cat);
            goto error;
        }
        db_reset(ins);
        if (catalog_commit(cat, err) < 0)
            goto error;
        if (catalog_fold_totals(cat, err) < 0)
            goto error;
    }
    double took = si_mono_now() - t0;
    db_finalize(ins);
    return took;
error:
    db_finalize(ins);
    return -1;
}

/* A site's kept history: HISTORY_REQUESTS requests (the last HISTORY_RUNNING still
 * running) of HISTORY_ITEMS items in all, 1 % of the finished ones failed;
 * HISTORY_REQUESTS pushes holding every object (0.1 % still to archive,
 * 0.1 % failed). */
#define HISTORY_REQUESTS 2000
#define HISTORY_RUNNING 200 /* the latest: their 100,000 items wait */
#define HISTORY_ITEMS 1000000
#define LIST_SHOWN 50 /* the status page's list */

static int fill_history(catalog_t *cat, uint64_t objects, si_error_t *err)
{
    char sql[2400];
    snprintf(sql, sizeof(sql),
             "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d)"
             " INSERT INTO requests(uuid, uid, gid, pin_lifetime, state, created, updated)"
             " SELECT 'history-' || i, 1000, 100, 60,"
             "  CASE WHEN i > %d THEN 'STARTED' ELSE 'RELEASED' END, i, i FROM n;"
             "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < %d)"
             " INSERT INTO request_items(request_id, object_id, state)"
             " SELECT (SELECT id FROM requests WHERE uuid = 'history-1') + i / %d,"
             "  1 + CAST(i AS BIGINT) * 7919 %% %llu,"
             "  CASE WHEN i / %d >= %d THEN (CASE WHEN i %% 3 = 0 THEN 'STARTED' ELSE 'SUBMITTED' END)"
             "  WHEN i %% 100 = 0 THEN 'FAILED' ELSE 'COMPLETED' END FROM n;"
             "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d)"
             " INSERT INTO pushes(uuid, uid, gid, dataset_id, created, updated)"
             " SELECT 'history-' || i, 1000, 100, (SELECT min(id) FROM datasets), i, i FROM n;"
             "INSERT INTO push_items(object_id, push_id, state, received, finished)"
             " SELECT o.id, (SELECT id FROM pushes WHERE uuid = 'history-1') + o.id %% %d,"
             "  CASE WHEN o.id %% 1000 = 0 THEN 'RECEIVED' WHEN o.id %% 997 = 0 THEN 'FAILED'"
             "  ELSE 'DURABLE' END, o.id, o.id FROM objects o",
             HISTORY_REQUESTS, HISTORY_REQUESTS - HISTORY_RUNNING, HISTORY_ITEMS - 1,
             HISTORY_ITEMS / HISTORY_REQUESTS, (unsigned long long)objects,
             HISTORY_ITEMS / HISTORY_REQUESTS, HISTORY_REQUESTS - HISTORY_RUNNING, HISTORY_REQUESTS,
             HISTORY_REQUESTS);
    db_t *db = catalog_driver(cat);
    if (db_exec(db, sql, err) < 0)
        return -1;
    /* as a site's server has them within a minute (autovacuum): the
     * planner's statistics, and PostgreSQL's visibility map, without which
     * an index-only count reads the table's rows too */
    return db_exec(db, db_engine(db) == DB_POSTGRES ? "VACUUM ANALYZE" : "ANALYZE", err);
}

/* What the status page, its sampler and /metrics read on every call, over
 * the kept history: the metrics and the list of the latest requests (best
 * of a few calls, milliseconds). */
static int history_run(catalog_t *cat, result_t *out, si_error_t *err)
{
    /* the imported objects' ids run from 1 */
    long long objects = db_query_int64(catalog_driver(cat), "SELECT max(id) FROM objects");
    if (objects < 1 || fill_history(cat, (uint64_t)objects, err) < 0)
        return -1;
    requests_t *rq = requests_open(cat, err);
    if (!rq)
        return -1;
    out->metrics_ms = out->list_ms = out->pushes_ms = 1e9;
    for (int i = 0; i < 5; i++) {
        requests_metrics_t m;
        double t0 = si_mono_now();
        if (requests_metrics(rq, &m, err) < 0)
            goto error;
        out->metrics_ms = fmin(out->metrics_ms, 1e3 * (si_mono_now() - t0));
        t0 = si_mono_now();
        si_table_t *t = requests_list(rq, (uid_t)-1, false, LIST_SHOWN, err);
        if (!t)
            goto error;
        out->list_ms = fmin(out->list_ms, 1e3 * (si_mono_now() - t0));
        si_table_free(t);
        t0 = si_mono_now();
        if (!(t = catalog_view_recent_pushes(cat, NULL, err)))
            goto error;
        out->pushes_ms = fmin(out->pushes_ms, 1e3 * (si_mono_now() - t0));
        si_table_free(t);
    }
    requests_close(rq);
    return 0;
error:
    requests_close(rq);
    return -1;
}

/* The cache's usage at the archive's size: what each shared reservation
 * reads, kept (1.15) against the scan it replaced, and what keeping it
 * costs a commit (PostgreSQL: the fill again with the trigger disabled). */
static int cache_usage_run(catalog_t *cat, result_t *out, si_error_t *err)
{
    db_t *db = catalog_driver(cat);
    if ((out->cache_fill_s = fill_cache(cat, err)) < 0 ||
        (out->usage_scan_ms = 1e3 * best_query_s(db, "SELECT count(*), coalesce(sum(size), 0) FROM cache",
                                          3, err)) < 0 ||
        (out->usage_kept_ms = 1e3 * best_query_s(db, "SELECT " CATALOG_CACHE_USAGE_COLUMNS
                                              CATALOG_CACHE_USAGE_FROM, 20, err)) < 0)
        return -1;
    if (db_engine(db) != DB_POSTGRES)
        return 0;
    if (db_exec(db, "ALTER TABLE cache DISABLE TRIGGER cache_usage_change; DELETE FROM cache", err) < 0 ||
        (out->cache_fill_plain_s = fill_cache(cat, err)) < 0)
        return -1;
    return 0;
}

/* Import, define the datasets, plan one, summarize all, then cache every
 * object and read the usage, on one catalog. */
static int run_engine(const char *target, const char *password_file, const char *csv,
                      const char *manifest, result_t *out)
{
    si_error_t err;
    memset(out, 0, sizeof(*out));
    if (!strstr(target, "://"))
        unlink(target);
    catalog_open_opts_t oo = {.target = target, .password_file = password_file,
                              .flags = CATALOG_CREATE};
    catalog_t *cat = catalog_open_opts(&oo, &err);
    if (!cat) {
        fprintf(stderr, "%s\n", err.text);
        return -1;
    }
    catalog_import_stats_t st;
    FILE *f = fopen(csv, "r");
    double t0 = si_mono_now();
    double c0 = bench_self_cpu_seconds();
    catalog_positions_opts_t o = {.format = CATALOG_FORMAT_CSV};
    if (catalog_import_positions(cat, csv, f, &o, &st, &err) < 0) {
        fprintf(stderr, "%s\n", err.text);
        return -1;
    }
    out->import_s = si_mono_now() - t0;
    out->import_cpu_s = bench_self_cpu_seconds() - c0;
    out->import_rate = (double)st.objects / out->import_s;
    out->import_per_cpu = (double)st.objects / out->import_cpu_s;
    fclose(f);
    if (db_engine(catalog_driver(cat)) == DB_POSTGRES &&
        (out->bulk_load_s = bulk_load_reference(cat, &err)) < 0) {
        fprintf(stderr, "%s\n", err.text);
        return -1;
    }

    for (int d = 0; d < DATASETS; d++) {
        char m[4200], name[32];
        if (d == 0)
            snprintf(m, sizeof(m), "%s", manifest);
        else
            snprintf(m, sizeof(m), "%s.%d", manifest, d);
        snprintf(name, sizeof(name), "set-%02d", d);
        catalog_dataset_attrs_t a = {.name = name, .owner_uid = 0, .owner_gid = 0, .mode = 0644};
        f = fopen(m, "r");
        t0 = si_mono_now();
        if (catalog_import_manifest(cat, &a, m, f, &st, &err) < 0) {
            fprintf(stderr, "%s\n", err.text);
            return -1;
        }
        out->define_s += si_mono_now() - t0;
        fclose(f);
    }

    catalog_plan_t *plan;
    t0 = si_mono_now();
    if (catalog_plan_dataset(cat, "set-00", &plan, &err) < 0) {
        fprintf(stderr, "%s\n", err.text);
        return -1;
    }
    out->plan_s = si_mono_now() - t0;
    out->plan_reads = plan->nreads;
    out->plan_volumes = plan->nvolumes;
    catalog_plan_free(plan);

    t0 = si_mono_now();
    si_table_t *summary = catalog_view_datasets(cat, &err);
    out->summary_s = si_mono_now() - t0;
    out->summary_rows = summary ? si_table_rows(summary) : 0;
    si_table_free(summary);
    if (cache_usage_run(cat, out, &err) < 0 || history_run(cat, out, &err) < 0) {
        fprintf(stderr, "%s\n", err.text);
        return -1;
    }
    catalog_close(cat);
    return 0;
}

int main(int argc, char **argv)
{
    const bench_opts_t bo = bench_options(argc, argv);
    bool quick = bo.quick, json = bo.json;
    const char *dir = bo.dir;
    const uint64_t objects = quick ? 100000 : 1000000;
    const uint64_t per_dataset = objects / DATASETS;

    char db[4096], csv[4096], manifest[4096];
    snprintf(db, sizeof(db), "%s/stagein-bench-catalog-%d.db", dir, (int)getpid());
    snprintf(csv, sizeof(csv), "%s/stagein-bench-catalog-%d.csv", dir, (int)getpid());
    snprintf(manifest, sizeof(manifest), "%s/stagein-bench-catalog-%d.manifest", dir, (int)getpid());

    /* The positions file: objects striped over the volumes, each volume
     * written front to back. */
    FILE *f = fopen(csv, "w");
    if (!f) {
        perror(csv);
        return 1;
    }
    uint64_t fill[VOLUMES] = {0};
    uint64_t rng = 42;
    fprintf(f, "bucket,key,size,volume,position,copy,checksum\n");
    for (uint64_t i = 0; i < objects; i++) {
        unsigned v = (unsigned)(next_random(&rng) % VOLUMES);
        uint64_t size = 1000000ULL << (next_random(&rng) % 12);
        fprintf(f, "bench,d%02u/f%07llu,%llu,B%05u,%llu,1,\n", (unsigned)(i % DATASETS),
                (unsigned long long)i, (unsigned long long)size, v, (unsigned long long)fill[v]);
        fill[v] += size;
    }
    fclose(f);
    f = fopen(manifest, "w");
    fprintf(f, "bench/d00/\n");
    fclose(f);
    for (int d = 1; d < DATASETS; d++) {
        char m[4200];
        snprintf(m, sizeof(m), "%s.%d", manifest, d);
        f = fopen(m, "w");
        fprintf(f, "bench/d%02d/\n", d);
        fclose(f);
    }

    result_t res[2];
    int nres = 0;
    if (run_engine(db, NULL, csv, manifest, &res[nres++]) < 0)
        return 1;
    char side[4200];
    res[0].db_bytes = file_size(db);
    snprintf(side, sizeof(side), "%s-wal", db);
    res[0].db_bytes += file_size(side);
    /* PostgreSQL beside SQLite in the same run (tests/bench/scale_out starts
     * a private server and names its empty database here). */
    const char *pg_url = getenv("STAGEIN_BENCH_PG_URL");
    if (pg_url && *pg_url &&
        run_engine(pg_url, getenv("STAGEIN_BENCH_PG_PASSWORD_FILE"), csv, manifest,
                   &res[nres++]) < 0)
        return 1;

    if (json) {
        printf("{\"objects\": %llu, \"volumes\": %d", (unsigned long long)objects, VOLUMES);
        for (int i = 0; i < nres; i++) {
            const result_t *r = &res[i];
            const char *pre = i == 0 ? "" : "pg_";
            printf(", \"%simport_seconds\": %.3f, \"%simport_objects_per_s\": %.0f,"
                   " \"%simport_cpu_seconds\": %.3f, \"%sdefine_seconds\": %.3f,"
                   " \"%splan_objects\": %zu, \"%splan_volumes\": %zu, \"%splan_seconds\": %.4f,"
                   " \"%ssummary_datasets\": %zu, \"%ssummary_seconds\": %.4f",
                   pre, r->import_s, pre, (double)objects / r->import_s, pre, r->import_cpu_s,
                   pre, r->define_s, pre, r->plan_reads, pre, r->plan_volumes, pre, r->plan_s,
                   pre, r->summary_rows, pre, r->summary_s);
            printf(", \"%scache_fill_seconds\": %.3f, \"%susage_scan_seconds\": %.5f,"
                   " \"%susage_kept_seconds\": %.6f, \"%susage_kept_speedup\": %.0f",
                   pre, r->cache_fill_s, pre, r->usage_scan_ms / 1e3, pre, r->usage_kept_ms / 1e3,
                   pre, r->usage_scan_ms / r->usage_kept_ms);
            printf(", \"%shistory_items\": %d, \"%smetrics_ms\": %.3f, \"%slist_latest_ms\": %.3f,"
                   " \"%srecent_pushes_ms\": %.3f",
                   pre, HISTORY_ITEMS, pre, r->metrics_ms, pre, r->list_ms, pre, r->pushes_ms);
            if (i == 0)
                printf(", \"db_bytes\": %llu", (unsigned long long)r->db_bytes);
            else
                printf(", \"pg_cache_fill_plain_seconds\": %.3f", r->cache_fill_plain_s);
        }
        if (nres == 2)
            printf(", \"pg_import_ratio\": %.3f, \"pg_bulk_load_seconds\": %.3f,"
                   " \"pg_bulk_load_ratio\": %.3f, \"pg_import_of_bulk_load\": %.3f",
                   res[0].import_s / res[1].import_s, res[1].bulk_load_s,
                   res[0].import_s / res[1].bulk_load_s, res[1].bulk_load_s / res[1].import_s);
        printf("}\n");
    } else {
        printf("catalog benchmark: %llu objects over %d volumes, %d datasets of %llu\n\n",
               (unsigned long long)objects, VOLUMES, DATASETS, (unsigned long long)per_dataset);
        printf("%-34s %14s", "measure", "sqlite");
        if (nres == 2)
            printf(" %14s %8s", "postgresql", "pg/sqlite");
        printf("  %s\n", "target");
#define ROW(label, fmt, field, target)                                            \
    do {                                                                          \
        printf("%-34s " fmt, label, res[0].field);                               \
        if (nres == 2)                                                            \
            printf(" " fmt " %8.2f", res[1].field, (double)res[1].field / res[0].field); \
        printf("  %s\n", target);                                                 \
    } while (0)
        ROW("import (objects/s)", "%14.0f", import_rate, ">= 200000 (pg >= 0.5 x sqlite)");
        ROW("import (s)", "%14.3f", import_s, "");
        ROW("import (objects per CPU second)", "%14.0f", import_per_cpu, "");
        ROW("define 10 datasets (s)", "%14.3f", define_s, "");
        ROW("recall plan, one dataset (s)", "%14.4f", plan_s, "< 0.5");
        ROW("dataset summary, all datasets (s)", "%14.4f", summary_s, "< 0.2");
        ROW("cache a row per object (s)", "%14.3f", cache_fill_s, "");
        ROW("cache usage: scan of the rows (ms)", "%14.3f", usage_scan_ms, "(before 1.15)");
        ROW("cache usage: kept (ms)", "%14.4f", usage_kept_ms, "");
        ROW("metrics, 1,000,000 items kept (ms)", "%14.3f", metrics_ms, "(status page, /metrics)");
        _Static_assert(HISTORY_ITEMS == 1000000, "the label above names the items kept");
        ROW("latest 50 requests (ms)", "%14.3f", list_ms, "(status page)");
        ROW("latest 20 pushes, all pushed (ms)", "%14.3f", pushes_ms, "(status page)");
#undef ROW
        if (nres == 2) {
            /* the engine's own limit for these rows, and the import against it */
            printf("%-34s %14s %14.3f %8.2f  %s\n", "  pg bulk load of the rows (s)", "",
                   res[1].bulk_load_s, res[1].bulk_load_s / res[0].import_s,
                   "COPY only: the engine's limit");
            printf("%-34s %14s %14.2f\n", "  pg import of its bulk-load rate", "",
                   res[1].bulk_load_s / res[1].import_s);
        }
        if (nres == 2)
            printf("%-34s %14s %14.3f %8.2f  %s\n", "  pg cache rows, no usage trigger", "",
                   res[1].cache_fill_plain_s, res[1].cache_fill_s / res[1].cache_fill_plain_s,
                   "with / without");
        printf("%-34s %14zu\n", "  reads planned", res[0].plan_reads);
        printf("%-34s %14.1f\n", "database size, sqlite (MB)", (double)res[0].db_bytes / 1e6);
    }
    unlink(csv);
    unlink(manifest);
    for (int d = 1; d < DATASETS; d++) {
        char m[4200];
        snprintf(m, sizeof(m), "%s.%d", manifest, d);
        unlink(m);
    }
    unlink(db);
    snprintf(side, sizeof(side), "%s-wal", db);
    unlink(side);
    snprintf(side, sizeof(side), "%s-shm", db);
    unlink(side);
    return 0;
}
