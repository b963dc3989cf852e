#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "catalog/catalog.h"
#include "catalog/test/testutil.h"
#include "common/tap.h"

static catalog_t *cat;

static long long counts(void)
{
    /* one number that changes when any imported table changes */
    return test_query_int(cat, "SELECT (SELECT COUNT(*) FROM objects) * 1000000"
                               " + (SELECT COUNT(*) FROM tape_copies) * 1000"
                               " + (SELECT COUNT(*) FROM volumes)"
                               " + (SELECT COUNT(*) FROM dataset_members) * 1000000000"
                               " + (SELECT COUNT(*) FROM datasets) * 1000000000000");
}

static int import_text(const char *name, const char *text, catalog_format_t fmt,
                       catalog_import_stats_t *st, si_error_t *err)
{
    FILE *f = text_file(text);
    catalog_positions_opts_t o = {.format = fmt};
    int rc = catalog_import_positions(cat, name, f, &o, st, err);
    fclose(f);
    return rc;
}

/* The import must fail, name the line and the reason, and change nothing. */
static void rejects(const char *name, const char *text, catalog_format_t fmt, const char *want,
                    const char *what)
{
    catalog_import_stats_t st;
    si_error_t err = {{0}};
    long long before = counts();
    int rc = import_text(name, text, fmt, &st, &err);
    ok(rc < 0 && strstr(err.text, want) && counts() == before, "%s: %s", what, err.text);
}

static int define(const char *dataset, const char *manifest, bool replace, si_error_t *err)
{
    catalog_dataset_attrs_t a = {.name = dataset, .owner_uid = 1000, .owner_gid = 1000,
                                 .mode = 0640, .replace = replace};
    catalog_import_stats_t st;
    FILE *f = text_file(manifest);
    int rc = catalog_import_manifest(cat, &a, "m.txt", f, &st, err);
    fclose(f);
    return rc;
}

static void manifest_rejects(const char *manifest, const char *want, const char *what)
{
    si_error_t err = {{0}};
    long long before = counts();
    int rc = define("bad-ds", manifest, false, &err);
    ok(rc < 0 && strstr(err.text, want) && counts() == before, "%s: %s", what, err.text);
}

static char *repeat(char c, size_t n)
{
    char *s = malloc(n + 1);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

/* A positions file of n records "big/<tag>NNNNN" on volumes of 3000 records
 * each ("V<tag>NNN": new labels while a batch is in flight); line dup
 * repeats the line before it, line bad has a bad size (0: none). */
static char *big_csv(const char *tag, size_t n, size_t dup, size_t bad)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    for (size_t line = 1; line <= n; line++) {
        size_t i = line == dup ? line - 1 : line;
        fprintf(f, "bulk,big/%s%05zu,%s,V%s%03zu,%zu,1,\n", tag, i, line == bad ? "x" : "64",
                tag, i / 3000, i * 64);
    }
    fclose(f);
    return text;
}

/* Imports of more than one batch: the copies of one batch are inserted
 * while the next is read; an error in the batch in flight is the one
 * reported, whatever comes after it. */
static void large_imports(void)
{
    catalog_import_stats_t st;
    si_error_t err = {{0}};
    char *text = big_csv("A", 12001, 0, 0);
    int rc = import_text("big.csv", text, CATALOG_FORMAT_CSV, &st, &err);
    free(text);
    ok(rc == 0 && st.lines == 12001 && st.objects == 12001 && st.copies == 12001 &&
           st.volumes == 5,
       "12,001 records in three batches: %s (%llu lines, %llu objects, %llu copies, %llu volumes)",
       err.text, (unsigned long long)st.lines, (unsigned long long)st.objects,
       (unsigned long long)st.copies, (unsigned long long)st.volumes);
    is_int(test_query_int(cat, "SELECT count(*) FROM tape_copies c JOIN objects o ON o.id = c.object_id"
                               " JOIN volumes v ON v.id = c.volume_id WHERE o.key LIKE 'big/A%'"
                               " AND v.label = 'VA00' || CAST(CAST(substr(o.key, 6) AS INTEGER) / 3000 AS TEXT)"
                               " AND c.position = 64 * CAST(substr(o.key, 6) AS INTEGER)"),
           12001, "every record's copy on its volume at its position");
    if (test_engine_is_pg()) {
        /* ids taken ahead of the batches, in a row: each batch's span is
         * the one range scan of the references check (schema 1.13) */
        is_int(test_query_int(cat, "SELECT max(id) - min(id) + 1 FROM objects"
                                   " WHERE key LIKE 'big/A%'"),
               12001, "PostgreSQL: the three batches' object ids in a row");
        /* the plans after an import see its rows: the import analyzed
         * what it changed, on a sample (at most 11 histogram bounds) */
        long long rows = test_query_int(cat, "SELECT count(*) FROM objects");
        long long planned = test_query_int(cat, "SELECT CAST(reltuples AS BIGINT) FROM pg_class"
                                                " WHERE relname = 'objects'");
        long long bounds = test_query_int(cat, "SELECT array_length(histogram_bounds, 1)"
                                               " FROM pg_stats WHERE tablename = 'objects'"
                                               " AND attname = 'key'");
        ok(planned > rows * 9 / 10 && planned < rows * 11 / 10 && bounds > 1 && bounds <= 11,
           "PostgreSQL plans with the import's rows: %lld of %lld objects, %lld key bounds",
           planned, rows, bounds);
    }

    text = big_csv("B", 6000, 100, 5500);
    rejects("big.csv", text, CATALOG_FORMAT_CSV, "big.csv:100: duplicate entry for bulk/big/B00099",
            "a duplicate in the batch in flight comes before a bad line of the next");
    free(text);
    text = big_csv("C", 7000, 100, 0);
    rejects("big.csv", text, CATALOG_FORMAT_CSV, "big.csv:100: duplicate entry for bulk/big/C00099",
            "a duplicate in the batch in flight, a new volume in the next");
    free(text);
    text = big_csv("D", 5000, 4000, 0);
    rejects("big.csv", text, CATALOG_FORMAT_CSV, "big.csv:4000: duplicate entry for bulk/big/D03999",
            "a duplicate in the last batch, in flight when the file ends");
    free(text);
    /* two records of one new object that disagree, in the batch written
     * while the one before is inserted: that batch goes by statement and
     * names the second record's line */
    text = big_csv("E", 5000, 0, 0);
    size_t len = strlen(text);
    text = realloc(text, len + 200);
    snprintf(text + len, 200, "bulk,big/E99999,64,VE000,1,1,\nbulk,big/E99999,65,VE000,2,2,\n");
    rejects("big.csv", text, CATALOG_FORMAT_CSV, "big.csv:5002:",
            "two records of one object that disagree, in the second batch");
    free(text);
    text = big_csv("A", 12001, 0, 0);
    long long before = counts();
    rc = import_text("big.csv", text, CATALOG_FORMAT_CSV, &st, &err);
    free(text);
    ok(rc == 0 && counts() == before && st.objects == 0 && st.copies == 0,
       "the same 12,001 records again change nothing: %s", err.text);
}

static void run(void)
{
    char path[512];
    si_error_t err;
    catalog_import_stats_t st;
    test_db_path(path, sizeof(path), "import");
    test_db_remove(path);
    cat = catalog_open(path, CATALOG_CREATE, &err);

    /* ---- CSV ---- */
    const char *csv =
        "bucket,key,size,volume,position,copy,checksum\n"
        "# comment\n"
        "\n"
        "ds1,a/one,100,L00001,1000,1,sha256:" "0000000000000000000000000000000000000000000000000000000000000001\n"
        "ds1,a/two,200,L00001,5000,1,\n"
        "ds1,a/two,200,L00002,10,2,\n"
        "ds1,\"b/with,comma\",300,L00002,900,1,md5:d41d8cd98f00b204e9800998ecf8427e\r\n";
    ok(import_text("pos.csv", csv, CATALOG_FORMAT_AUTO, &st, &err) == 0, "CSV imports: %s", err.text);
    is_int(st.lines, 4, "4 records");
    is_int(st.objects, 3, "3 objects");
    is_int(st.copies, 4, "4 copies");
    is_int(st.volumes, 2, "2 volumes");
    is_int(test_query_int(cat, "SELECT position FROM tape_copies c JOIN objects o ON o.id = c.object_id"
                               " WHERE o.key = 'a/two' AND c.copy = 2"), 10, "second copy position");
    is_int(test_query_int(cat, "SELECT size FROM objects WHERE key = 'b/with,comma'"), 300,
           "quoted key with comma");
    /* COPY's escape character in a key, and a batch of new and known objects
     * (the bulk path undone, each record decided alone) */
    ok(import_text("esc.csv", "ds1,\"e/back\\slash \\N \"\"q\"\"\",7,L00001,20000,1,\n"
                              "ds1,a/one,100,L00001,1000,1,sha256:"
                              "0000000000000000000000000000000000000000000000000000000000000001\n"
                              "ds1,e/new,8,L00002,30000,1,\n",
                   CATALOG_FORMAT_CSV, &st, &err) == 0 && st.objects == 2 && st.copies == 2,
       "new and known objects in one batch: %s (%llu objects, %llu copies)", err.text,
       (unsigned long long)st.objects, (unsigned long long)st.copies);
    is_int(test_query_int(cat, "SELECT size FROM objects WHERE key = 'e/back\\slash \\N \"q\"'"), 7,
           "a key with a backslash, \\N and quotes is stored as written");
    is_int(test_query_int(cat, "SELECT count(*) FROM objects WHERE checksum IS NULL AND mtime IS NULL"
                               " AND etag IS NULL AND key LIKE 'e/%'"), 2,
           "absent checksum, mtime and etag are NULL");
    long long after_first = counts();
    ok(import_text("pos.csv", csv, CATALOG_FORMAT_CSV, &st, &err) == 0 && counts() == after_first &&
       st.objects == 0 && st.copies == 0, "identical re-import is a no-op");
    is_int(test_query_int(cat, "SELECT COUNT(*) FROM events WHERE kind = 'import-positions'"), 3,
           "imports logged as events");

    rejects("c.csv", "ds1,x,1,L1,0,1\n", CATALOG_FORMAT_CSV, "c.csv:1: 6 fields, want 7", "6 columns");
    rejects("c.csv", "ds1,x,1,L1,0,1,,extra\n", CATALOG_FORMAT_CSV, "c.csv:1: too many fields", "8 columns");
    rejects("c.csv", "ds1,ok,1,L1,0,1,\nds1,x,-5,L1,0,1,\n", CATALOG_FORMAT_CSV,
            "c.csv:2: size '-5' is not a non-negative integer", "negative size, after a good line");
    rejects("c.csv", "ds1,x,12kb,L1,0,1,\n", CATALOG_FORMAT_CSV, "size '12kb'", "non-numeric size");
    rejects("c.csv", "ds1,x,1,L1,abc,1,\n", CATALOG_FORMAT_CSV, "position 'abc'", "non-numeric position");
    rejects("c.csv", "ds1,x,1,L1,0,0,\n", CATALOG_FORMAT_CSV, "copy 0 must be between 1", "copy 0");
    rejects("c.csv", "ds1,dup,1,L1,0,1,\nds1,dup,1,L1,0,1,\n", CATALOG_FORMAT_CSV,
            "c.csv:2: duplicate entry for ds1/dup copy 1", "duplicate key");
    rejects("c.csv", "ds1,a/one,999,L00001,1000,1,\n", CATALOG_FORMAT_CSV,
            "already catalogued with size 100", "conflicts with the catalog");
    rejects("c.csv", "ds1,a/two,200,L00009,10,2,\n", CATALOG_FORMAT_CSV,
            "copy 2 is already catalogued at another volume", "copy moved");
    rejects("c.csv", "ds1,bad\xff" "key,1,L1,0,1,\n", CATALOG_FORMAT_CSV, "c.csv:1: line is not valid UTF-8",
            "invalid UTF-8");
    rejects("c.csv", "ds1,a/../etc,1,L1,0,1,\n", CATALOG_FORMAT_CSV, "'..' path component", "key with ..");
    rejects("c.csv", "ds1,a//b,1,L1,0,1,\n", CATALOG_FORMAT_CSV, "contains '//'", "key with //");
    rejects("c.csv", "ds1,/abs,1,L1,0,1,\n", CATALOG_FORMAT_CSV, "starts with '/'", "absolute key");
    rejects("c.csv", "BAD_BUCKET,k,1,L1,0,1,\n", CATALOG_FORMAT_CSV, "bucket name", "bad bucket");
    rejects("c.csv", "ds1,k,1,bad label,0,1,\n", CATALOG_FORMAT_CSV, "volume label", "bad volume label");
    rejects("c.csv", "ds1,k,1,L1,0,1,sha256:xyz\n", CATALOG_FORMAT_CSV, "checksum", "bad checksum");
    rejects("c.csv", "ds1,\"open,1,L1,0,1,\n", CATALOG_FORMAT_CSV, "unterminated quoted field", "open quote");
    {
        char line[64] = "ds1,nul\0key,1,L1,0,1,\n";
        FILE *f = fmemopen(line, 23, "r");
        long long before = counts();
        catalog_positions_opts_t o = {.format = CATALOG_FORMAT_CSV};
        int rc = catalog_import_positions(cat, "nul.csv", f, &o, &st, &err);
        fclose(f);
        ok(rc < 0 && strstr(err.text, "NUL") && counts() == before, "NUL in a line: %s", err.text);
    }
    {
        char *key = repeat('k', 1025);
        char *text = malloc(1200);
        snprintf(text, 1200, "ds1,%s,1,L1,0,1,\n", key);
        rejects("c.csv", text, CATALOG_FORMAT_CSV, "longer than 1024", "1025-byte key");
        free(text);
        free(key);
    }
    {
        char *big = repeat('x', 1024 * 1024 + 10);
        big[0] = 'd', big[1] = 's', big[2] = '1', big[3] = ',';
        rejects("c.csv", big, CATALOG_FORMAT_CSV, "c.csv:1: line is longer than 1048576 bytes",
                "line over 1 MiB");
        free(big);
    }

    /* ---- JSON lines ---- */
    const char *jsonl =
        "{\"bucket\":\"ds2\",\"key\":\"j/1\",\"size\":10,\"volume\":\"L00003\",\"position\":7,"
        "\"copy\":1,\"file_seq\":3,\"mtime\":1700000000,\"etag\":\"abc\"}\n"
        "{\"bucket\":\"ds2\",\"key\":\"j/2\",\"size\":20,\"volume\":\"L00003\",\"position\":70}\n";
    ok(import_text("p.jsonl", jsonl, CATALOG_FORMAT_AUTO, &st, &err) == 0 && st.objects == 2,
       "JSON lines import: %s", err.text);
    is_int(test_query_int(cat, "SELECT file_seq FROM tape_copies c JOIN objects o ON o.id = c.object_id"
                               " WHERE o.key = 'j/1'"), 3, "file_seq kept");
    rejects("p.jsonl", "{\"bucket\":\"ds2\",\"key\":\"j/3\",\"size\":1,\"volume\":\"L1\"\n",
            CATALOG_FORMAT_JSONL, "p.jsonl:1: invalid JSON", "malformed JSON");
    rejects("p.jsonl", "[1,2]\n", CATALOG_FORMAT_JSONL, "must be a JSON object", "not an object");
    rejects("p.jsonl", "{\"bucket\":\"ds2\",\"key\":\"j/3\",\"size\":-1,\"volume\":\"L1\",\"position\":0}\n",
            CATALOG_FORMAT_JSONL, "\"size\" must be a non-negative integer", "negative size");
    rejects("p.jsonl", "{\"bucket\":\"ds2\",\"key\":\"j/3\",\"size\":\"1\",\"volume\":\"L1\",\"position\":0}\n",
            CATALOG_FORMAT_JSONL, "\"size\" must be a non-negative integer", "string size");
    rejects("p.jsonl", "{\"bucket\":\"ds2\",\"key\":\"j/3\",\"size\":1,\"volume\":\"L1\"}\n",
            CATALOG_FORMAT_JSONL, "missing \"position\"", "missing member");
    rejects("p.jsonl", "{\"bucket\":\"ds2\",\"key\":\"j/3\",\"size\":1,\"volume\":\"L1\",\"position\":0,\"colour\":1}\n",
            CATALOG_FORMAT_JSONL, "unknown member \"colour\"", "unknown member");
    rejects("p.jsonl", "{\"bucket\":\"ds2\",\"key\":\"j/3\",\"key\":\"j/4\",\"size\":1,\"volume\":\"L1\",\"position\":0}\n",
            CATALOG_FORMAT_JSONL, "invalid JSON", "duplicate member");
    rejects("p.jsonl", "{\"bucket\":\"ds2\",\"key\":\"j\\u0000x\",\"size\":1,\"volume\":\"L1\",\"position\":0}\n",
            CATALOG_FORMAT_JSONL, "NUL", "NUL escaped in key");
    rejects("p.jsonl", "{\"bucket\":\"ds2\",\"key\":\"../x\",\"size\":1,\"volume\":\"L1\",\"position\":0}\n",
            CATALOG_FORMAT_JSONL, "'..' path component", "traversal key");

    /* ---- manifests ---- */
    ok(define("set-a", "# the a files\n\nds1/a/\n  ds1/b/with,comma  \n", false, &err) == 0,
       "manifest with prefix, comment, blank line: %s", err.text);
    is_int(test_query_int(cat, "SELECT COUNT(*) FROM dataset_members m JOIN datasets d"
                               " ON d.id = m.dataset_id WHERE d.name = 'set-a'"), 3, "3 members");
    is_int(test_query_int(cat, "SELECT mode FROM datasets WHERE name = 'set-a'"), 0640, "mode stored");
    manifest_rejects("ds1/a/one\nds1/missing\n", "m.txt:2: no object ds1/missing", "missing object");
    manifest_rejects("ds1/zzz/\n", "m.txt:1: prefix ds1/zzz/ matches no catalogued object", "empty prefix");
    manifest_rejects("ds1/a/one\nds1/a/one\n", "m.txt:2: 'ds1/a/one' repeats line 1", "duplicate line");
    manifest_rejects("ds1/a/../x\n", "'..' path component", "traversal");
    manifest_rejects("ds1/a//x\n", "'//'", "double slash");
    manifest_rejects("nobucket\n", "not bucket/key", "no slash");
    manifest_rejects("# only comments\n", "names no objects", "empty manifest");
    manifest_rejects("ds1/a/one\xc3\n", "not valid UTF-8", "invalid UTF-8");
    ok(define("set-a", "ds1/a/one\n", false, &err) < 0 && strstr(err.text, "already exists"),
       "redefinition needs replace: %s", err.text);
    ok(define("set-a", "ds1/a/one\n", true, &err) == 0 &&
       test_query_int(cat, "SELECT COUNT(*) FROM dataset_members m JOIN datasets d"
                           " ON d.id = m.dataset_id WHERE d.name = 'set-a'") == 1,
       "replace redefines the members");
    ok(define("../evil", "ds1/a/one\n", false, &err) < 0, "bad dataset name: %s", err.text);

    /* ---- LTFS ---- */
    {
        char p[1024];
        snprintf(p, sizeof(p), "%s/tests/data/sample-ltfs.xml", getenv("top_srcdir") ? getenv("top_srcdir") : "..");
        FILE *f = fopen(p, "r");
        ok(f != NULL, "sample LTFS index found");
        if (f) {
            catalog_positions_opts_t o = {.format = CATALOG_FORMAT_AUTO};
            int rc = catalog_import_positions(cat, p, f, &o, &st, &err);
            fclose(f);
            ok(rc == 0, "LTFS index imports: %s", rc ? err.text : "");
            is_int(st.objects, 4, "4 objects (one empty)");
            is_int(st.copies, 3, "3 tape copies");
            is_int(test_query_int(cat, "SELECT c.position FROM tape_copies c JOIN objects o ON o.id = c.object_id"
                                       " WHERE o.bucket = 'climate-2026' AND o.key = 'run1/t001.nc'"),
                   12 * 524288, "position = startblock x block size");
            is_int(test_query_int(cat, "SELECT c.position FROM tape_copies c JOIN objects o ON o.id = c.object_id"
                                       " WHERE o.key = 'read me.txt'"), 18 * 524288 + 4096,
                   "percent-encoded name and byte offset");
            is_int(test_query_int(cat, "SELECT COUNT(*) FROM volumes WHERE label = 'L90101'"), 1,
                   "volume label from the index root");
            is_int(test_query_int(cat, "SELECT mtime FROM objects WHERE key = 'run1/t000.nc'"),
                   1790771400, "modify time");
        }
    }
    const char *head = "<?xml version=\"1.0\"?>\n<ltfsindex version=\"2.4.0\"><directory><name>L90102</name><contents>";
    const char *tail = "</contents></directory></ltfsindex>\n";
    char xml[8192];
    snprintf(xml, sizeof(xml), "%s<directory><name>bk1</name><contents><file><name>f</name><length>5</length>"
             "<extentinfo><extent><fileoffset>0</fileoffset><partition>b</partition><startblock>1</startblock>"
             "<byteoffset>0</byteoffset><bytecount>5</bytecount></extent></extentinfo></file>%s", head, tail);
    {
        char cut[8192];
        snprintf(cut, sizeof(cut), "%.*s", (int)(strlen(xml) - 30), xml);
        rejects("t.xml", cut, CATALOG_FORMAT_LTFS, "malformed XML", "truncated index");
    }
    rejects("t.xml", "<ltfsindex><directory><name>L1</name></directory>", CATALOG_FORMAT_LTFS,
            "t.xml:1: malformed XML", "unclosed root");
    rejects("t.xml", "<ltfsindex><a></b></ltfsindex>", CATALOG_FORMAT_LTFS, "malformed XML: mismatched tag",
            "mismatched tags");
    rejects("t.xml", "<html/>", CATALOG_FORMAT_LTFS, "not an LTFS index", "wrong root element");
    rejects("t.xml",
            "<?xml version=\"1.0\"?>\n<!DOCTYPE lolz [\n <!ENTITY lol \"lol\">\n"
            " <!ENTITY lol2 \"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\">\n]>\n"
            "<ltfsindex>&lol2;</ltfsindex>\n",
            CATALOG_FORMAT_LTFS, "t.xml:3: entity declaration 'lol' is not allowed", "billion laughs");
    {
        size_t depth = 200;
        char *deep = malloc(depth * 20 + 100);
        strcpy(deep, "<ltfsindex>");
        for (size_t i = 0; i < depth; i++)
            strcat(deep, "<d>");
        for (size_t i = 0; i < depth; i++)
            strcat(deep, "</d>");
        strcat(deep, "</ltfsindex>");
        rejects("t.xml", deep, CATALOG_FORMAT_LTFS, "nested deeper than 64", "deep nesting");
        free(deep);
    }
    snprintf(xml, sizeof(xml), "%s<file><name>rootfile</name><length>5</length>"
             "<extentinfo><extent><fileoffset>0</fileoffset><partition>b</partition><startblock>1</startblock>"
             "<byteoffset>0</byteoffset><bytecount>5</bytecount></extent></extentinfo></file>%s", head, tail);
    rejects("t.xml", xml, CATALOG_FORMAT_LTFS, "is at the index root: give a bucket", "file at root, no bucket");
    snprintf(xml, sizeof(xml), "%s<directory><name>bk1</name><contents><file><name>f</name><length>5</length>"
             "<extentinfo><extent><fileoffset>0</fileoffset><partition>a</partition><startblock>1</startblock>"
             "<byteoffset>0</byteoffset><bytecount>5</bytecount></extent></extentinfo></file>%s", head, tail);
    rejects("t.xml", xml, CATALOG_FORMAT_LTFS, "partition 'a'", "extent on the index partition");
    snprintf(xml, sizeof(xml), "%s<directory><name>bk1</name><contents><file><name>..</name><length>5</length>"
             "<extentinfo><extent><fileoffset>0</fileoffset><partition>b</partition><startblock>1</startblock>"
             "<byteoffset>0</byteoffset><bytecount>5</bytecount></extent></extentinfo></file>%s", head, tail);
    rejects("t.xml", xml, CATALOG_FORMAT_LTFS, "'..' path component", "file named ..");
    snprintf(xml, sizeof(xml), "%s<directory><name>bk1</name><contents><file><name>f</name><length>x5</length>"
             "</file>%s", head, tail);
    rejects("t.xml", xml, CATALOG_FORMAT_LTFS, "<length> 'x5' is not a non-negative integer", "bad length");
    large_imports();

    catalog_close(cat);
    test_db_remove(path);
}

int main(void)
{
    return test_run_engines(run);
}
