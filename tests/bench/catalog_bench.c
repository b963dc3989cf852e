/* Catalog benchmark: import rate, recall-plan time, dataset-summary time and
 * database size on a generated archive (1,000,000 objects over 200 volumes). */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "catalog/catalog.h"
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

/* CPU seconds of this process: on a shared machine, wall time alone misleads. */
static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

int main(int argc, char **argv)
{
    bench_opts_t bo;
    int parsed = bench_parse_options(argc, argv, &bo);
    if (parsed >= 0)
        return parsed;
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

    si_error_t err;
    unlink(db);
    catalog_t *cat = catalog_open(db, CATALOG_CREATE, &err);
    if (!cat) {
        fprintf(stderr, "%s\n", err.text);
        return 1;
    }
    catalog_import_stats_t st;
    f = fopen(csv, "r");
    double t0 = si_mono_now();
    double c0 = cpu_seconds();
    catalog_positions_opts_t o = {.format = CATALOG_FORMAT_CSV};
    if (catalog_import_positions(cat, csv, f, &o, &st, &err) < 0) {
        fprintf(stderr, "%s\n", err.text);
        return 1;
    }
    double import_s = si_mono_now() - t0;
    double import_cpu_s = cpu_seconds() - c0;
    fclose(f);

    double define_s = 0;
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
            return 1;
        }
        define_s += si_mono_now() - t0;
        fclose(f);
        unlink(m);
    }

    catalog_plan_t *plan;
    t0 = si_mono_now();
    if (catalog_plan_dataset(cat, "set-00", &plan, &err) < 0) {
        fprintf(stderr, "%s\n", err.text);
        return 1;
    }
    double plan_s = si_mono_now() - t0;
    size_t plan_reads = plan->nreads, plan_volumes = plan->nvolumes;
    catalog_plan_free(plan);

    t0 = si_mono_now();
    si_table_t *summary = catalog_view_datasets(cat, &err);
    double summary_s = si_mono_now() - t0;
    size_t summary_rows = summary ? si_table_rows(summary) : 0;
    si_table_free(summary);
    catalog_close(cat);

    uint64_t db_bytes = file_size(db);
    char side[4200];
    snprintf(side, sizeof(side), "%s-wal", db);
    db_bytes += file_size(side);

    double rate = (double)objects / import_s;
    if (json) {
        printf("{\"objects\": %llu, \"volumes\": %d, \"import_seconds\": %.3f,"
               " \"import_objects_per_s\": %.0f, \"import_cpu_seconds\": %.3f,"
               " \"define_seconds\": %.3f,"
               " \"plan_objects\": %zu, \"plan_volumes\": %zu, \"plan_seconds\": %.4f,"
               " \"summary_datasets\": %zu, \"summary_seconds\": %.4f, \"db_bytes\": %llu}\n",
               (unsigned long long)objects, VOLUMES, import_s, rate, import_cpu_s, define_s,
               plan_reads,
               plan_volumes, plan_s, summary_rows, summary_s, (unsigned long long)db_bytes);
    } else {
        printf("catalog benchmark: %llu objects over %d volumes, %d datasets of %llu\n\n",
               (unsigned long long)objects, VOLUMES, DATASETS, (unsigned long long)per_dataset);
        printf("%-34s %14s  %s\n", "measure", "value", "target");
        printf("%-34s %14.0f  %s\n", "import (objects/s)", rate, ">= 200000");
        printf("%-34s %14.3f\n", "import (s)", import_s);
        printf("%-34s %14.0f\n", "import (objects per CPU second)",
               (double)objects / import_cpu_s);
        printf("%-34s %14.3f\n", "define 10 datasets (s)", define_s);
        printf("%-34s %14.4f  %s\n", "recall plan, one dataset (s)", plan_s, "< 0.5");
        printf("%-34s %14zu\n", "  reads planned", plan_reads);
        printf("%-34s %14.4f  %s\n", "dataset summary, all datasets (s)", summary_s, "< 0.2");
        printf("%-34s %14.1f\n", "database size (MB)", (double)db_bytes / 1e6);
    }
    unlink(csv);
    unlink(manifest);
    unlink(db);
    unlink(side);
    snprintf(side, sizeof(side), "%s-shm", db);
    unlink(side);
    return 0;
}
