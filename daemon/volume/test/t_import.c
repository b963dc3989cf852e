/* Catalog entries rebuilt from a volume alone; idempotent; all or nothing. */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "catalog/db.h"
#include "common/tap.h"
#include "daemon/volume/volume.h"

static char dir[256];

/* One read-only query, as its JSON rows. */
static char *query(const char *db, const char *sql)
{
    si_error_t err = {{0}};
    char *text = NULL;
    size_t len = 0;
    catalog_t *cat = catalog_open(db, CATALOG_READONLY, &err);
    si_table_t *t = cat ? catalog_view_sql(cat, sql, &err) : NULL;
    FILE *out = open_memstream(&text, &len);
    if (t)
        si_table_print(t, out, true);
    else
        fprintf(out, "error: %s", err.text);
    fclose(out);
    si_table_free(t);
    catalog_close(cat);
    len = strlen(text);
    while (len && text[len - 1] == '\n')
        text[--len] = '\0';
    return text;
}

static void is_query(const char *db, const char *sql, const char *want, const char *what)
{
    char *got = query(db, sql);
    is_str(got, want, "%s", what);
    free(got);
}

static char *data_file(const char *content)
{
    static char path[512];
    static int n;
    snprintf(path, sizeof(path), "%s/source%d", dir, ++n);
    FILE *f = fopen(path, "w");
    if (!f)
        exit(99);
    fputs(content, f);
    fclose(f);
    return path;
}

static tapevol_listing_t *append(tapevol_t *vol, const char *bucket, const char *key,
                                 const char *content, int64_t mtime)
{
    si_error_t err = {{0}};
    tapevol_listing_t *w = NULL;
    tapevol_member_t m = {.bucket = bucket, .key = key, .path = data_file(content),
                          .size = strlen(content), .mtime = mtime};
    if (tapevol_append(vol, &m, 1, &w, &err) < 0)
        diag("append %s/%s: %s", bucket, key, err.text);
    return w;
}

/* What an S3 client stored with an object, written into the pax header and
 * restored into object_meta by an import; the catalog's own never replaced. */
static void test_meta(void)
{
    si_error_t err = {{0}};
    char db[512], db2[512];
    snprintf(db, sizeof(db), "%s/meta.db", dir);
    snprintf(db2, sizeof(db2), "%s/meta2.db", dir);
    ok(tapevol_create(dir, "META01", "LTO-9", 1u << 30, &err) == 0, "create: %s", err.text);
    tapevol_t *vol = tapevol_open(dir, "META01", TAPEVOL_RDWR, &err);
    if (!vol)
        return;
    const char *headers = "content-type: text/csv\ncache-control: no-cache\n"
                          "x-amz-meta-owner: a\\b \"q\"\n";
    char *src[3]; /* data_file's buffer is reused */
    src[0] = strdup(data_file("one\n"));
    src[1] = strdup(data_file("two\n"));
    src[2] = strdup(data_file("three\n"));
    tapevol_member_t m[] = {
        {.bucket = "mbk", .key = "with", .path = src[0], .fd = -1, .size = 4,
         .headers = headers, .storage_class = "DEEP_ARCHIVE"},
        {.bucket = "mbk", .key = "class-only", .path = src[1], .fd = -1, .size = 4,
         .storage_class = "GLACIER"},
        {.bucket = "mbk", .key = "plain", .path = src[2], .fd = -1, .size = 6},
    };
    tapevol_listing_t *w = NULL;
    ok(tapevol_append(vol, m, 3, &w, &err) == 0, "append with headers: %s", err.text);
    tapevol_listing_free(w);
    for (int i = 0; i < 3; i++)
        free(src[i]);

    /* a header block the reader would refuse is refused when writing */
    char *huge = malloc(40000);
    for (size_t i = 0; i < 39996; i += 4)
        memcpy(huge + i, "\\\\\\\\", 4);
    memcpy(huge + 39996, ": x", 4);
    tapevol_member_t hm = {.bucket = "mbk", .key = "huge", .path = data_file("x"), .fd = -1,
                           .size = 1, .headers = huge};
    w = NULL;
    ok(tapevol_append(vol, &hm, 1, &w, &err) < 0 && strstr(err.text, "pax header"),
       "headers that would pass the pax header limit refused: %s", err.text);
    free(huge);

    catalog_t *cat = catalog_open(db, CATALOG_CREATE, &err);
    ok(cat && tapevol_import(vol, cat, 1, TAPEVOL_WALK_VERIFY, NULL, &err) == 0,
       "import: %s", err.text);
    catalog_close(cat);
    char want[512];
    snprintf(want, sizeof(want), "[{\"key\":\"class-only\",\"headers\":null,"
             "\"storage_class\":\"GLACIER\"},{\"key\":\"with\",\"headers\":"
             "\"content-type: text/csv\\ncache-control: no-cache\\nx-amz-meta-owner: "
             "a\\\\b \\\"q\\\"\\n\",\"storage_class\":\"DEEP_ARCHIVE\"}]");
    is_query(db, "SELECT o.key, m.headers, m.storage_class FROM object_meta m"
                 " JOIN objects o ON o.id = m.object_id ORDER BY o.key", want,
             "headers and storage classes restored; none for the plain member");

    /* the catalog already holds the object's headers: kept */
    cat = catalog_open(db2, CATALOG_CREATE, &err);
    catalog_object_t o = {.bucket = "mbk", .key = "with", .size = 4, .mtime = 0,
                          .checksum = "sha256:"
                          "2c8b08da5ce60398e1f19af0e5dccc744df274b826abe585eaba68c525434806"};
    int64_t id = 0;
    ok(cat && catalog_object_put(cat, &o, &id, &err) == 1, "object catalogued: %s", err.text);
    char sql[256];
    snprintf(sql, sizeof(sql), "INSERT INTO object_meta(object_id, headers) VALUES (%lld,"
             " 'content-type: image/png\n')", (long long)id);
    ok(cat && db_exec(catalog_driver(cat), sql, &err) == 0,
       "its headers catalogued");
    ok(cat && tapevol_import(vol, cat, 1, 0, NULL, &err) == 0, "import: %s", err.text);
    catalog_close(cat);
    is_query(db2, "SELECT m.headers, m.storage_class FROM object_meta m JOIN objects o"
                  " ON o.id = m.object_id WHERE o.key = 'with'",
             "[{\"headers\":\"content-type: image/png\\n\",\"storage_class\":null}]",
             "the catalog's headers are not replaced by the volume's");
    tapevol_close(vol);
}

int main(void)
{
    si_error_t err = {{0}};
    char db[512], db2[512];
    snprintf(dir, sizeof(dir), "%s/t_import.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir))
        return 99;
    snprintf(db, sizeof(db), "%s/catalog.db", dir);
    snprintf(db2, sizeof(db2), "%s/other.db", dir);

    ok(tapevol_create(dir, "IMP001", "LTO-9", 1u << 30, &err) == 0, "create: %s", err.text);
    tapevol_t *vol = tapevol_open(dir, "IMP001", TAPEVOL_RDWR, &err);
    if (!vol)
        return done_testing();
    tapevol_listing_free(append(vol, "bkt", "a.txt", "alpha\n", 1700000000));
    tapevol_listing_free(append(vol, "bkt", "dir/b.txt", "bravo bravo\n", 1700000001));
    /* a.txt written again later: the later copy is the one that counts */
    tapevol_listing_t *last = append(vol, "bkt", "a.txt", "alpha, second version\n", 1700000002);
    ok(last != NULL, "three archive files written");

    catalog_t *cat = catalog_open(db, CATALOG_CREATE, &err);
    ok(cat != NULL, "catalog: %s", err.text);
    tapevol_import_stats_t stats = {0};
    ok(tapevol_import(vol, cat, 1, TAPEVOL_WALK_VERIFY, &stats, &err) == 0, "import: %s",
       err.text);
    is_int(stats.files, 3, "3 archive files");
    is_int(stats.members, 3, "3 members on the volume");
    is_int(stats.recorded, 2, "2 objects recorded (a.txt once)");
    is_int(stats.new_objects, 2, "both new");
    is_int(stats.new_copies, 2, "2 new copies");
    catalog_close(cat);

    is_query(db, "SELECT label, media, capacity_bytes AS cap, used_bytes > 0 AS used FROM volumes",
             "[{\"label\":\"IMP001\",\"media\":\"LTO-9\",\"cap\":1073741824,\"used\":1}]",
             "volume recorded from the label");
    char want[1024];
    snprintf(want, sizeof(want),
             "[{\"bucket\":\"bkt\",\"key\":\"a.txt\",\"size\":22,\"mtime\":1700000002,"
             "\"copy\":1,\"file_seq\":3,\"position\":%llu,\"length\":22}",
             (unsigned long long)(last ? last->entries[0].position : 0));
    char *got = query(db, "SELECT bucket, key, size, mtime, copy, file_seq, position, length "
                          "FROM objects o JOIN tape_copies c ON c.object_id = o.id "
                          "ORDER BY key");
    ok(strncmp(got, want, strlen(want)) == 0, "a.txt: its last copy, file 3, position");
    ok(strstr(got, "\"key\":\"dir/b.txt\",\"size\":12,\"mtime\":1700000001,\"copy\":1,"
                   "\"file_seq\":2") != NULL, "dir/b.txt in file 2");
    if (strncmp(got, want, strlen(want)) != 0)
        diag("got %s", got);
    free(got);
    is_query(db, "SELECT checksum FROM objects WHERE key = 'dir/b.txt'",
             "[{\"checksum\":\"sha256:"
             "d0eaa02c3a91eaaaf2c9df3f5002ed310878eea168cce544e6142c1830af5851\"}]",
             "checksum from the pax header");

    /* idempotent */
    cat = catalog_open(db, 0, &err);
    ok(cat && tapevol_import(vol, cat, 1, 0, &stats, &err) == 0, "re-import: %s", err.text);
    ok(stats.recorded == 2 && stats.new_objects == 0 && stats.new_copies == 0,
       "re-import found everything catalogued");
    catalog_close(cat);
    is_query(db, "SELECT (SELECT count(*) FROM objects) AS o, (SELECT count(*) FROM tape_copies)"
                 " AS c, (SELECT count(*) FROM volumes) AS v",
             "[{\"o\":2,\"c\":2,\"v\":1}]", "re-import changed nothing");

    /* a conflicting catalog: nothing of the volume goes in */
    cat = catalog_open(db2, CATALOG_CREATE, &err);
    catalog_object_t clash = {.bucket = "bkt", .key = "dir/b.txt", .size = 999};
    int64_t id;
    ok(cat && catalog_object_put(cat, &clash, &id, &err) == 1, "conflicting object: %s", err.text);
    ok(cat && tapevol_import(vol, cat, 1, 0, NULL, &err) < 0 && strstr(err.text, "dir/b.txt"),
       "conflict reported with the member's name: %s", err.text);
    catalog_close(cat);
    is_query(db2, "SELECT (SELECT count(*) FROM objects) AS o, (SELECT count(*) FROM tape_copies)"
                  " AS c, (SELECT count(*) FROM volumes) AS v",
             "[{\"o\":1,\"c\":0,\"v\":0}]", "failed import changed nothing");

    /* a corrupt volume: clear error, catalog untouched */
    int fd = open(tapevol_path(vol), O_RDWR);
    if (fd < 0 || pwrite(fd, "garbage!", 8, TAPEVOL_FIRST_FILE_OFFSET + 600) != 8)
        return 99;
    close(fd);
    unlink(db2);
    cat = catalog_open(db2, CATALOG_CREATE, &err);
    ok(cat && tapevol_import(vol, cat, 1, 0, NULL, &err) < 0 && strstr(err.text, "IMP001"),
       "corrupt volume refused: %s", err.text);
    catalog_close(cat);
    is_query(db2, "SELECT (SELECT count(*) FROM objects) AS o, (SELECT count(*) FROM volumes) AS v",
             "[{\"o\":0,\"v\":0}]", "nothing recorded from a corrupt volume");

    /* recording what an append wrote (the write path) */
    tapevol_info_t info;
    ok(tapevol_info(vol, &info, &err) == 0, "info");
    cat = catalog_open(db2, 0, &err);
    ok(cat && tapevol_catalog_record(cat, &info, last, 2, NULL, &err) == 0,
       "record an append's listing as copy 2: %s", err.text);
    ok(cat && tapevol_catalog_record(cat, &info, last, 0, NULL, &err) < 0, "copy 0 refused");
    catalog_close(cat);
    is_query(db2, "SELECT copy, file_seq, length FROM tape_copies",
             "[{\"copy\":2,\"file_seq\":3,\"length\":22}]", "copy recorded");

    is_query(db, "SELECT count(*) AS n FROM object_meta", "[{\"n\":0}]",
             "a volume without headers records none");

    /* an archive file written again on another volume (its first writer
     * died before recording it): imported as copy 1 too, it becomes copy 2 */
    ok(tapevol_create(dir, "IMP002", "LTO-9", 1u << 30, &err) == 0, "second volume");
    tapevol_t *vol2 = tapevol_open(dir, "IMP002", TAPEVOL_RDWR, &err);
    tapevol_listing_free(vol2 ? append(vol2, "bkt", "dir/b.txt", "bravo bravo\n", 1700000001)
                              : NULL);
    cat = catalog_open(db, 0, &err);
    ok(cat && vol2 && tapevol_import(vol2, cat, 1, 0, &stats, &err) == 0,
       "the same object under copy 1 on another volume: imported (%s)", err.text);
    ok(stats.new_copies == 1 && stats.renumbered == 1,
       "as the next free copy number (new %llu, renumbered %llu)",
       (unsigned long long)stats.new_copies, (unsigned long long)stats.renumbered);
    ok(cat && vol2 && tapevol_import(vol2, cat, 1, 0, &stats, &err) == 0 &&
           stats.new_copies == 0 && stats.renumbered == 0,
       "imported again: nothing changes");
    catalog_close(cat);
    is_query(db, "SELECT c.copy, v.label FROM tape_copies c JOIN volumes v ON v.id = c.volume_id"
                 " JOIN objects o ON o.id = c.object_id WHERE o.key = 'dir/b.txt' ORDER BY copy",
             "[{\"copy\":1,\"label\":\"IMP001\"},{\"copy\":2,\"label\":\"IMP002\"}]",
             "both volumes hold a copy");
    tapevol_close(vol2);

    tapevol_listing_free(last);
    tapevol_close(vol);
    test_meta();
    tap_remove_tree(dir);
    return done_testing();
}
