/* Catalog imports (catalog/import.c, catalog/ltfs.c): tape positions as
 * CSV, JSON lines or an LTFS index, and dataset manifests, each into a
 * catalog in the same state before every input: one prepared at start,
 * which already knows the objects of tests/data/sample-positions.csv' first
 * lines, its file copied back and reopened after an input that imported
 * (a refused import changes nothing: checked).
 *
 * Input: byte 0 chooses the import (bits 0-2: CSV, JSON lines, LTFS, by
 * content, manifest) and for LTFS the label and bucket options (bits 3-4);
 * the rest is the file. FUZZ_VERBOSE=1 prints each input's outcome. */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "catalog/db.h"
#include "catalog/test/sqlite_files.h"
#include "tests/fuzz/fuzz.h"

static catalog_t *cat;
static unsigned char *template_db;
static size_t template_len;
static char path[64];
static int64_t template_rows;
static bool changed; /* the last input was imported: reset before the next */

/* Rows of the tables an import writes: a refused import leaves them as
 * they were (all or nothing). */
static int64_t catalog_rows(void)
{
    int64_t n = db_query_int64(
        catalog_driver(cat),
        "SELECT (SELECT COUNT(*) FROM objects) + (SELECT COUNT(*) FROM tape_copies)"
        " + (SELECT COUNT(*) FROM volumes) + (SELECT COUNT(*) FROM datasets)"
        " + (SELECT COUNT(*) FROM dataset_members)"
        " + (SELECT COUNT(*) FROM events)");
    if (n < 0) {
        fprintf(stderr, "catalog rows: %s\n", db_errmsg(catalog_driver(cat)));
        abort();
    }
    return n;
}

static const char known_positions[] =
    "bucket,key,size,volume,position,copy,checksum\n"
    "imagenet-2026,train/n00000000/shard-000.tar,2472268,L90001,4096,1,\n"
    "imagenet-2026,train/n00000000/shard-001.tar,45530455,L90002,4096,1,\n"
    "climate-era5,t2m/1990.nc,1000,L90002,8192,1,"
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n";

/* The catalog's files (each input works on a fresh copy of the template). */
static void remove_files(void)
{
    test_sqlite_files_remove(path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    si_error_t err;
    snprintf(path, sizeof(path), "/tmp/fuzz-catalog.%ld.db", (long)getpid());
    remove_files();
    atexit(remove_files);
    cat = catalog_open(path, CATALOG_CREATE, &err);
    if (!cat) {
        fprintf(stderr, "catalog: %s\n", err.text);
        abort();
    }
    FILE *in = fmemopen((void *)known_positions, sizeof(known_positions) - 1, "r");
    catalog_positions_opts_t opts = {.format = CATALOG_FORMAT_CSV};
    if (!in || catalog_import_positions(cat, "seed.csv", in, &opts, NULL, &err) < 0) {
        fprintf(stderr, "seed import: %s\n", err.text);
        abort();
    }
    fclose(in);
    template_rows = catalog_rows();
    catalog_close(cat); /* the last connection: its WAL is checkpointed into the file */
    cat = NULL;
    FILE *f = fopen(path, "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0 || (long)(template_len = (size_t)ftell(f)) < 100)
        abort();
    rewind(f);
    if (!(template_db = malloc(template_len)) ||
        fread(template_db, 1, template_len, f) != template_len)
        abort();
    fclose(f);
    changed = true;
    return 0;
}

/* The catalog as it was after LLVMFuzzerInitialize. */
static void reset_catalog(void)
{
    if (!changed)
        return;
    changed = false;
    catalog_close(cat);
    remove_files();
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, template_db, template_len) != (ssize_t)template_len)
        abort();
    close(fd);
    si_error_t err;
    if (!(cat = catalog_open(path, 0, &err))) {
        fprintf(stderr, "catalog: %s\n", err.text);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    unsigned choice = data[0];
    FILE *in = fmemopen((void *)(data + 1), size - 1, "r");
    if (!in)
        abort();
    reset_catalog();
    si_error_t err;
    catalog_import_stats_t stats;
    int rc;
    static const catalog_format_t formats[] = {CATALOG_FORMAT_CSV, CATALOG_FORMAT_JSONL,
                                               CATALOG_FORMAT_LTFS, CATALOG_FORMAT_AUTO};
    if ((choice & 7) < 4) {
        catalog_positions_opts_t opts = {
            .format = formats[choice & 7],
            .volume = (choice & 8) ? "L90009" : NULL,
            .bucket = (choice & 16) ? "ltfs-bucket" : NULL,
        };
        const char *name = (choice & 7) == 3 ? ((choice & 8) ? "input.jsonl" : "input") : "input";
        rc = catalog_import_positions(cat, name, in, &opts, &stats, &err);
    } else {
        catalog_dataset_attrs_t attrs = {.name = "fuzz-set", .owner_uid = 1000,
                                         .owner_gid = 100, .mode = 0640,
                                         .replace = (choice & 8) != 0};
        rc = catalog_import_manifest(cat, &attrs, "input.manifest", in, &stats, &err);
    }
    if (getenv("FUZZ_VERBOSE")) /* why a seed imports or not */
        fprintf(stderr, "import: %s\n", rc == 0 ? "OK" : err.text);
    if (rc < 0 && catalog_rows() != template_rows)
        abort(); /* a refused import changed the catalog */
    changed = rc == 0;
    fclose(in);
    return 0;
}
