/* The cache: checked writes, read-back, failures that leave nothing behind,
 * hostile ids, concurrent writers. */
#include "config.h"

#include <dirent.h>
#include <inttypes.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include "common/tap.h"
#include "daemon/cache/test/cachetest.h"

static ct_t t;

static int read_back(cache_t *c, int64_t id, unsigned n, size_t size)
{
    si_error_t err;
    int fd;
    cache_place_t place;
    if (cache_open_object(c, id, &fd, &place, &err) < 0) {
        diag("open %" PRId64 ": %s", id, err.text);
        return -1;
    }
    unsigned char *want = ct_content(n, size), *have = malloc(size + 1);
    ssize_t r = pread(fd, have, size + 1, (off_t)place.offset);
    close(fd);
    int same = place.size == size && place.segment == 0 && place.offset == 0 &&
               r == (ssize_t)size && memcmp(want, have, size) == 0;
    free(want);
    free(have);
    return same ? 0 : -1;
}

static void test_write_read(cache_t *c)
{
    si_error_t err;
    char sum[SI_CHECKSUM_TEXT_MAX];
    size_t size = (1u << 20) + 123;
    int64_t id = ct_object(&t, 1, size, sum);

    /* odd chunk sizes cross the write buffer's boundaries */
    cache_writer_t *w;
    ok(cache_writer_open(c, id, size, sum, &w, &err) == 0, "writer opened");
    unsigned char *data = ct_content(1, size);
    size_t steps[] = {7, 4096, 1u << 20, 3};
    size_t off = 0;
    for (size_t i = 0; off < size; i = (i + 1) % 4) {
        size_t len = size - off < steps[i] ? size - off : steps[i];
        if (cache_writer_write(w, data + off, len, &err) < 0)
            break;
        off += len;
    }
    free(data);
    is_int(cache_writer_received(w), size, "every byte accepted");
    char tmp[400];
    snprintf(tmp, sizeof(tmp), "%s/tmp", t.cache_dir);
    /* where the file system has O_TMPFILE the temp file has no name */
    int probe = open(tmp, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    bool unnamed = probe >= 0;
    if (probe >= 0)
        close(probe);
    is_int(ct_count_entries(tmp), unnamed ? 0 : 1, "the object is written under tmp/ meanwhile"
           " (%s)", unnamed ? "unnamed" : "named");
    cache_entry_t e;
    is_int(cache_stat(c, id, &e, &err), 0, "not visible before finish");
    ok(cache_writer_finish(w, 0, &err) == 0, "finish: size and checksum match");
    is_int(ct_count_entries(tmp), 0, "tmp/ empty after finish");

    is_int(cache_stat(c, id, &e, &err), 1, "cached after finish");
    ok(e.size == size && e.verified && e.pins == 0, "row: size, verified, no pins");
    char rel[64], path[512];
    cache_object_path(id, rel, sizeof(rel), &err);
    snprintf(path, sizeof(path), "%s/%s", t.cache_dir, rel);
    struct stat st;
    ok(stat(path, &st) == 0 && (uint64_t)st.st_size == size, "stored at %s", rel);
    char sql[200];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM cache WHERE object_id = %" PRId64
                               " AND path = '%s'", id, rel);
    is_int(ct_query_int(&t, sql), 1, "catalog row records the relative path");
    ok(read_back(c, id, 1, size) == 0, "read back identical");

    /* many at once (chunks of a few hundred): the cached one, objects not
     * cached, and a bad id stops with an error */
    enum { MANY = 700 };
    int64_t ids[MANY];
    signed char cached[MANY];
    for (int i = 0; i < MANY; i++)
        ids[i] = i % 3 == 0 ? id : id + 100000 + i;
    int right = 0;
    ok(cache_stat_many(c, ids, MANY, cached, &err) == 0, "cache_stat_many: %d objects", MANY);
    for (int i = 0; i < MANY; i++)
        right += cached[i] == (i % 3 == 0);
    is_int(right, MANY, "cache_stat_many: the cached one 1, the others 0");
    ok(!db_in_transaction(catalog_driver(t.cat)), "cache_stat_many: no transaction left open");
    ids[400] = 0;
    ok(cache_stat_many(c, ids, MANY, cached, &err) < 0 && strstr(err.text, "object id 0"),
       "cache_stat_many: a bad id: %s", err.text);
    ok(cache_stat_many(c, ids, 0, cached, &err) == 0, "cache_stat_many: none asked");

    /* opened with the size the caller read from the catalog itself */
    int fd = -1;
    t.now += 10;
    cache_place_t own = {size, 0, 0};
    ok(cache_open_cached(c, id, &own, &fd, &err) == 0 && fd >= 0, "cache_open_cached: opened");
    unsigned char *want = ct_content(1, size), *have = malloc(size);
    ok(fd >= 0 && pread(fd, have, size, 0) == (ssize_t)size && memcmp(want, have, size) == 0,
       "cache_open_cached: the object's bytes");
    free(want);
    free(have);
    if (fd >= 0)
        close(fd);
    ok(cache_flush_access(c, &err) == 0, "access times flushed");
    snprintf(sql, sizeof(sql), "SELECT last_access = %.1f FROM cache WHERE object_id = %" PRId64,
             t.now, id);
    is_int(ct_query_int(&t, sql), 1, "cache_open_cached: the access time is recorded");
    fd = -1;
    cache_place_t longer = {size + 1, 0, 0};
    ok(cache_open_cached(c, id, &longer, &fd, &err) < 0 && errno == EIO && fd == -1,
       "cache_open_cached: another size than the file's is EIO: %s", err.text);
    int64_t absent = ct_object(&t, 3, 10, sum);
    cache_place_t ten = {10, 0, 0};
    ok(cache_open_cached(c, absent, &ten, &fd, &err) < 0 && errno == ENOENT,
       "cache_open_cached: no file is ENOENT: %s", err.text);
    ok(cache_open_cached(c, 0, &ten, &fd, &err) < 0 && errno == EINVAL,
       "cache_open_cached: a bad id is EINVAL");

    cache_usage_t u;
    cache_usage(c, &u, &err);
    ok(u.used_bytes == size && u.objects == 1 && u.reserved_bytes == 0 && u.writers == 0,
       "usage: %" PRIu64 " bytes in %" PRIu64 " objects, nothing reserved", u.used_bytes,
       u.objects);

    /* the same object again: stored once */
    is_int(cache_reserve(c, id, size, NULL, &err), CACHE_PRESENT, "reserve: already present");
    ok(cache_writer_open(c, id, size, sum, &w, &err) < 0 && errno == EEXIST,
       "a second writer for a cached object: %s", err.text);

    /* an empty object */
    int64_t empty = ct_object(&t, 2, 0, sum);
    ok(ct_store(c, empty, 2, 0, sum, 1, 0, &err) == 0, "empty object stored");
    ok(read_back(c, empty, 2, 0) == 0, "empty object reads back empty");

    /* a batch with several reads of each: each object gets its latest access */
    double base = t.now, at[] = {1000, 500, 2000, 1500};
    int64_t who[] = {id, empty, id, id};
    for (int i = 0; i < 4; i++) {
        t.now = base + at[i];
        cache_place_t at_place = {who[i] == id ? size : 0, 0, 0};
        if (cache_open_cached(c, who[i], &at_place, &fd, &err) == 0)
            close(fd);
    }
    ok(cache_flush_access(c, &err) == 0, "a batch of four reads of two objects flushed");
    snprintf(sql, sizeof(sql), "SELECT (SELECT last_access FROM cache WHERE object_id = %" PRId64
             ") = %.1f AND (SELECT last_access FROM cache WHERE object_id = %" PRId64 ") = %.1f",
             id, base + 2000, empty, base + 500);
    is_int(ct_query_int(&t, sql), 1, "each object has its latest access time");
}

/* The open flags of this process's descriptor of a file under dir/, from
 * /proc/self/fdinfo; -1 when none is open. */
static long open_flags_under(const char *dir)
{
    DIR *d = opendir("/proc/self/fd");
    long flags = -1;
    struct dirent *e;
    while (d && flags < 0 && (e = readdir(d))) {
        char link[64], target[600], info[64], line[128];
        snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(link, target, sizeof(target) - 1);
        if (n <= 0)
            continue;
        target[n] = '\0';
        if (strncmp(target, dir, strlen(dir)) != 0 || target[strlen(dir)] != '/')
            continue;
        snprintf(info, sizeof(info), "/proc/self/fdinfo/%s", e->d_name);
        FILE *f = fopen(info, "r");
        while (f && fgets(line, sizeof(line), f))
            if (sscanf(line, "flags: %lo", &flags) == 1)
                break;
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return flags;
}

/* Direct writes: whole blocks with O_DIRECT, the tail buffered, feeds of
 * any size and address; the bytes read back identical. */
static void test_direct(cache_t *c)
{
    si_error_t err;
    char sum[SI_CHECKSUM_TEXT_MAX], tmp[400];
    snprintf(tmp, sizeof(tmp), "%s/tmp", t.cache_dir);
    size_t sizes[] = {(9u << 20) + 123, 65536, 5000, 3};
    for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t size = sizes[k];
        unsigned n = 160 + k;
        int64_t id = ct_object(&t, n, size, sum);
        cache_writer_t *w;
        if (cache_writer_open(c, id, size, sum, &w, &err) < 0) {
            ok(0, "direct writer for %zu bytes: %s", size, err.text);
            continue;
        }
        cache_writer_direct(w);
        long flags = open_flags_under(tmp);
        ok(flags >= 0 && (flags & O_DIRECT), "%zu bytes: the temp file is open with O_DIRECT",
           size);
        /* one byte past an aligned address: the feeds are copied into the
         * writer's aligned buffer; a whole buffer from an aligned address
         * goes straight to the disk */
        unsigned char *data = ct_content(n, size), *aligned = NULL;
        if (posix_memalign((void **)&aligned, 4096, size + 4097) != 0)
            abort();
        memcpy(aligned + 1, data, size);
        size_t steps[] = {7, 4096, 1u << 20, 3, 8u << 20};
        size_t off = 0;
        int rc = 0;
        for (size_t i = 0; rc == 0 && off < size; i = (i + 1) % 5) {
            size_t len = size - off < steps[i] ? size - off : steps[i];
            if (i == 4 && off % 4096 == 0) { /* aligned source for this feed */
                memcpy(aligned, data + off, len);
                rc = cache_writer_write(w, aligned, len, &err);
            } else {
                rc = cache_writer_write(w, data + off, len, &err);
            }
            off += len;
        }
        free(aligned);
        free(data);
        ok(rc == 0 && cache_writer_finish(w, 0, &err) == 0,
           "%zu bytes written direct: size and checksum match%s%s", size, rc ? ": " : "",
           rc ? err.text : "");
        ok(read_back(c, id, n, size) == 0, "%zu bytes written direct: read back identical", size);
    }
    is_int(ct_count_entries(tmp), 0, "tmp/ empty after the direct writes");
}

/* A direct writer of an object larger than its buffer writes each full
 * buffer behind the caller, from a thread: a write that fails there
 * (RLIMIT_FSIZE: EFBIG past 6 MiB) fails the writer with the disk's error,
 * at the next hand-off or when sealed, and nothing is recorded. */
static void test_direct_behind_failure(cache_t *c)
{
    si_error_t err;
    char sum[SI_CHECKSUM_TEXT_MAX], tmp[400];
    snprintf(tmp, sizeof(tmp), "%s/tmp", t.cache_dir);
    size_t size = 16u << 20;
    int64_t id = ct_object(&t, 170, size, sum);
    cache_writer_t *w;
    if (cache_writer_open(c, id, size, sum, &w, &err) < 0) {
        ok(0, "direct writer for 16 MiB: %s", err.text);
        return;
    }
    cache_writer_direct(w);
    unsigned char *data = ct_content(170, size);
    struct rlimit was;
    getrlimit(RLIMIT_FSIZE, &was);
    struct rlimit small = {6u << 20, was.rlim_max};
    void (*was_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    setrlimit(RLIMIT_FSIZE, &small);
    int rc = 0;
    for (size_t off = 0; rc == 0 && off < size; off += 1u << 20)
        rc = cache_writer_write(w, data + off, 1u << 20, &err);
    if (rc == 0)
        rc = cache_writer_seal(w, &err);
    setrlimit(RLIMIT_FSIZE, &was);
    signal(SIGXFSZ, was_handler);
    ok(rc < 0 && errno == EFBIG && strstr(err.text, "object") && strstr(err.text, "/tmp/") &&
           strstr(err.text, strerror(EFBIG)),
       "a write behind the caller that fails fails the writer: %s", err.text);
    ok(cache_writer_seal(w, &err) < 0 && strstr(err.text, "already failed"),
       "the failed writer refuses to seal: %s", err.text);
    cache_writer_abort(w);
    free(data);
    char sql[96];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM cache WHERE object_id = %" PRId64, id);
    is_int(ct_query_int(&t, sql), 0, "no row for the object whose write failed");
    is_int(ct_count_entries(tmp), 0, "tmp/ empty after the failed writer");
}

static void test_mismatches(cache_t *c)
{
    si_error_t err;
    char sum[SI_CHECKSUM_TEXT_MAX], tmp[400];
    snprintf(tmp, sizeof(tmp), "%s/tmp", t.cache_dir);
    size_t size = 100000;
    int64_t id = ct_object(&t, 3, size, sum);
    unsigned char *data = ct_content(3, size);
    cache_usage_t u;

    /* one flipped byte */
    cache_writer_t *w;
    cache_writer_open(c, id, size, sum, &w, &err);
    data[5000] ^= 1;
    cache_writer_write(w, data, size, &err);
    data[5000] ^= 1;
    char expect[200];
    snprintf(expect, sizeof(expect), "object %" PRId64 ": checksum mismatch: expected %s, got sha256:",
             id, sum);
    ok(cache_writer_finish(w, 0, &err) < 0 && errno == EBADMSG &&
           strncmp(err.text, expect, strlen(expect)) == 0,
       "checksum mismatch named: %s", err.text);
    is_int(ct_count_entries(tmp), 0, "mismatch: temp file removed");
    is_int(cache_stat(c, id, NULL, &err), 0, "mismatch: not cached");
    cache_usage(c, &u, &err);
    ok(u.reserved_bytes == 0 && u.checksum_failures == 1, "mismatch: reservation given back");

    /* short */
    cache_writer_open(c, id, size, sum, &w, &err);
    cache_writer_write(w, data, size - 1, &err);
    snprintf(expect, sizeof(expect), "object %" PRId64 ": size mismatch: expected %zu bytes,"
                                     " received %zu", id, size, size - 1);
    ok(cache_writer_finish(w, 0, &err) < 0 && errno == EBADMSG && strcmp(err.text, expect) == 0,
       "short object: %s", err.text);
    is_int(ct_count_entries(tmp), 0, "short: temp file removed");

    /* long: refused at the first byte too many */
    cache_writer_open(c, id, size, sum, &w, &err);
    ok(cache_writer_write(w, data, size, &err) == 0, "exact size accepted");
    ok(cache_writer_write(w, data, 1, &err) < 0 && errno == EBADMSG &&
           strstr(err.text, "size mismatch") && strstr(err.text, "at least 100001"),
       "one byte too many: %s", err.text);
    ok(cache_writer_write(w, data, 1, &err) < 0 && strstr(err.text, "already failed"),
       "a failed writer refuses more: %s", err.text);
    cache_writer_abort(w);
    is_int(ct_count_entries(tmp), 0, "long: temp file removed on abort");

    /* abort halfway */
    cache_writer_open(c, id, size, sum, &w, &err);
    cache_writer_write(w, data, size / 2, &err);
    cache_writer_abort(w);
    is_int(ct_count_entries(tmp), 0, "abort: temp file removed");
    is_int(cache_stat(c, id, NULL, &err), 0, "abort: not cached");
    cache_usage(c, &u, &err);
    ok(u.reserved_bytes == 0 && u.writers == 0, "abort: reservation given back");

    /* and the retry succeeds */
    ok(ct_store(c, id, 3, size, sum, 65536, 0, &err) == 0, "retry after failures stores it");
    ok(read_back(c, id, 3, size) == 0, "retry reads back identical");

    /* md5 checksums too */
    int64_t md5_id;
    {
        catalog_object_t o = {.bucket = "bkt", .key = "md5-obj", .size = 3,
                              .checksum = "md5:900150983cd24fb0d6963f7d28e17f72"}; /* "abc" */
        catalog_object_put(t.cat, &o, &md5_id, &err);
        cache_writer_open(c, md5_id, 3, o.checksum, &w, &err);
        cache_writer_write(w, "abc", 3, &err);
        ok(cache_writer_finish(w, 0, &err) == 0, "md5 checksum verified");
    }
    /* no checksum in the catalog: kept, but not marked verified */
    {
        catalog_object_t o = {.bucket = "bkt", .key = "nosum", .size = 3};
        int64_t nid;
        catalog_object_put(t.cat, &o, &nid, &err);
        cache_writer_open(c, nid, 3, NULL, &w, &err);
        cache_writer_write(w, "xyz", 3, &err);
        cache_entry_t e;
        ok(cache_writer_finish(w, 0, &err) == 0 && cache_stat(c, nid, &e, &err) == 1 &&
               !e.verified, "no catalog checksum: stored unverified");
    }
    free(data);
}

/* Bytes taken from a file (copy_file_range), mixed with plain writes,
 * verified as written ones are; a file that ends early fails. */
static void test_copy_fd(cache_t *c)
{
    si_error_t err;
    char sum[SI_CHECKSUM_TEXT_MAX], src[400];
    size_t size = 3 * (1u << 20) + 17;
    int64_t id = ct_object(&t, 60, size, sum);
    unsigned char *data = ct_content(60, size);
    snprintf(src, sizeof(src), "%s/copy-src", t.root);
    FILE *f = fopen(src, "wb");
    fwrite(data, 1, size, f);
    fclose(f);
    int fd = open(src, O_RDONLY);
    cache_writer_t *w;
    ok(cache_writer_open(c, id, size, sum, &w, &err) == 0, "writer opened for copy_fd");
    ok(cache_writer_write(w, data, 1000, &err) == 0 &&
       cache_writer_copy_fd(w, fd, 1000, (1u << 20), &err) == 0 &&
       cache_writer_write(w, data + 1000 + (1u << 20), 5, &err) == 0 &&
       cache_writer_copy_fd(w, fd, 1005 + (1u << 20), size - 1005 - (1u << 20), &err) == 0,
       "write, copy_fd, write, copy_fd: %s", err.text);
    ok(cache_writer_finish(w, 0, &err) == 0 && read_back(c, id, 60, size) == 0,
       "finished: checksum of the copied bytes verified, read back identical");
    int64_t id2 = ct_object(&t, 61, size, sum);
    ok(cache_writer_open(c, id2, size, sum, &w, &err) == 0 &&
       cache_writer_copy_fd(w, fd, 0, size, &err) == 0 && cache_writer_finish(w, 0, &err) < 0 &&
       errno == EBADMSG && strstr(err.text, "checksum mismatch"),
       "another object's bytes by copy_fd: checksum mismatch caught: %s", err.text);
    int64_t id3 = ct_object(&t, 62, size + 10, sum);
    ok(cache_writer_open(c, id3, size + 10, NULL, &w, &err) == 0 &&
       cache_writer_copy_fd(w, fd, 0, size + 10, &err) < 0 && errno == EBADMSG &&
       strstr(err.text, "ended 10 bytes early"), "a source that ends early: %s", err.text);
    cache_writer_abort(w);

    /* a direct writer reads into its aligned buffer and writes past the
     * page cache until an unaligned tail turns it buffered */
    close(fd);
    free(data);
    data = ct_content(65, size);
    f = fopen(src, "wb");
    fwrite(data, 1, size, f);
    fclose(f);
    fd = open(src, O_RDONLY);
    char tmp[400];
    snprintf(tmp, sizeof(tmp), "%s/tmp", t.cache_dir);
    int64_t id4 = ct_object(&t, 65, size, sum);
    ok(cache_writer_open(c, id4, size, sum, &w, &err) == 0, "direct writer opened for copy_fd");
    cache_writer_direct(w);
    int rc = cache_writer_copy_fd(w, fd, 0, 2u << 20, &err);
    long flags = open_flags_under(tmp);
    ok(rc == 0 && flags >= 0 && (flags & O_DIRECT), "2 MiB by copy_fd, still O_DIRECT: %s",
       err.text);
    ok(cache_writer_copy_fd(w, fd, 2u << 20, 5, &err) == 0 &&
       cache_writer_write(w, data + (2u << 20) + 5, 1000, &err) == 0 &&
       cache_writer_copy_fd(w, fd, (2u << 20) + 1005, size - (2u << 20) - 1005, &err) == 0,
       "an unaligned tail, a write, the rest by copy_fd: %s", err.text);
    ok(cache_writer_finish(w, 0, &err) == 0 && read_back(c, id4, 65, size) == 0,
       "direct: checksum of the copied bytes verified, read back identical");
    int64_t id5 = ct_object(&t, 66, size, sum);
    ok(cache_writer_open(c, id5, size, sum, &w, &err) == 0, "direct writer for another object");
    cache_writer_direct(w);
    ok(cache_writer_copy_fd(w, fd, 0, size, &err) == 0 && cache_writer_finish(w, 0, &err) < 0 &&
       errno == EBADMSG && strstr(err.text, "checksum mismatch"),
       "direct: another object's bytes: checksum mismatch caught: %s", err.text);
    int64_t id6 = ct_object(&t, 67, size + 10, sum);
    ok(cache_writer_open(c, id6, size + 10, NULL, &w, &err) == 0, "direct writer, 10 bytes more");
    cache_writer_direct(w);
    ok(cache_writer_copy_fd(w, fd, 0, size + 10, &err) < 0 && errno == EBADMSG &&
       strstr(err.text, "ended 10 bytes early"), "direct: a source that ends early: %s", err.text);
    cache_writer_abort(w);
    close(fd);
    free(data);
}

/* A file at the object's place without a row (a batch cut short, left
 * before a restart's recovery) is replaced, as a rename would replace it. */
static void test_stray_file(cache_t *c)
{
    si_error_t err;
    char sum[SI_CHECKSUM_TEXT_MAX], rel[64], path[600];
    int64_t id = ct_object(&t, 70, 5000, sum);
    cache_object_path(id, rel, sizeof(rel), &err);
    snprintf(path, sizeof(path), "%s/%s", t.cache_dir, rel);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    char parent[600];
    snprintf(parent, sizeof(parent), "%s", path);
    *strrchr(parent, '/') = '\0';
    mkdir(parent, 0750);
    mkdir(path, 0750);
    *slash = '/';
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0640);
    ok(fd >= 0 && write(fd, "stray", 5) == 5, "a stray file at the object's place");
    if (fd >= 0)
        close(fd);
    int stored = ct_store(c, id, 70, 5000, sum, 4096, 0, &err);
    ok(stored == 0, "the object is stored over it%s%s", stored ? ": " : "", stored ? err.text : "");
    ok(read_back(c, id, 70, 5000) == 0, "and reads back whole");
}

static void test_hostile(cache_t *c)
{
    si_error_t err;
    cache_writer_t *w;
    char sum[SI_CHECKSUM_TEXT_MAX];
    int64_t bad_ids[] = {0, -1, INT64_MIN};
    for (size_t i = 0; i < 3; i++) {
        int64_t id = bad_ids[i];
        int fd;
        cache_place_t place;
        char buf[64];
        ok(cache_writer_open(c, id, 1, NULL, &w, &err) < 0 && errno == EINVAL &&
               strstr(err.text, "is not a catalog object id"),
           "writer for id %" PRId64 ": %s", id, err.text);
        ok(cache_open_object(c, id, &fd, &place, &err) < 0 && errno == EINVAL,
           "open id %" PRId64 " refused", id);
        ok(cache_stat(c, id, NULL, &err) < 0 && cache_pin(c, id, 1, &err) < 0 &&
               cache_reserve(c, id, 1, NULL, &err) < 0 && cache_remove(c, id, &err) < 0 &&
               cache_object_path(id, buf, sizeof(buf), &err) < 0,
           "stat, pin, reserve, remove, path refuse id %" PRId64, id);
    }
    char buf[64];
    ok(cache_object_path(INT64_MAX, buf, sizeof(buf), &err) == 0 &&
           strcmp(buf, "objects/ff/ff/7fffffffffffffff") == 0,
       "the largest id stays inside objects/: %s", buf);
    ok(cache_object_path(0x1234, buf, sizeof(buf), &err) == 0 &&
           strcmp(buf, "objects/00/12/0000000000001234") == 0, "path from the id alone: %s", buf);

    const char *bad_sums[] = {"../../etc/passwd", "sha256:zz", "crc32:12345678", "sha256:",
                              "md5:900150983cd24fb0d6963f7d28e17f7"};
    for (size_t i = 0; i < sizeof(bad_sums) / sizeof(bad_sums[0]); i++)
        ok(cache_writer_open(c, 5000, 1, bad_sums[i], &w, &err) < 0 && errno == EINVAL &&
               strstr(err.text, "is not sha256"),
           "checksum '%s' refused: %s", bad_sums[i], err.text);

    /* an id the catalog does not know: nothing left behind */
    ok(cache_writer_open(c, 999999, 2, NULL, &w, &err) == 0, "writer for an unknown id opens");
    cache_writer_write(w, "hi", 2, &err);
    ok(cache_writer_finish(w, 0, &err) < 0 && errno == ENOENT &&
           strstr(err.text, "999999 is not in the catalog"),
       "finish for an unknown object: %s", err.text);
    char path[512], rel[64];
    cache_object_path(999999, rel, sizeof(rel), &err);
    snprintf(path, sizeof(path), "%s/%s", t.cache_dir, rel);
    ok(access(path, F_OK) < 0, "no file under its name");
    cache_usage_t u;
    cache_usage(c, &u, &err);
    is_int(u.reserved_bytes, 0, "its reservation given back");

    /* two writers for one object */
    int64_t id = ct_object(&t, 40, 10, sum);
    cache_writer_t *w2;
    ok(cache_writer_open(c, id, 10, sum, &w, &err) == 0, "first writer");
    ok(cache_writer_open(c, id, 10, sum, &w2, &err) < 0 && errno == EBUSY,
       "second writer for the same object: %s", err.text);
    ok(cache_reserve(c, id, 11, NULL, &err) < 0 && errno == EINVAL,
       "reserving it again with another size: %s", err.text);
    cache_writer_abort(w);

    /* a pin for an unknown request, and for an object not cached */
    ok(cache_pin(c, 1, 424242, &err) < 0 && errno == ENOENT && strstr(err.text, "no request"),
       "pin for an unknown request: %s", err.text);
    ok(cache_pin(c, id, 1, &err) < 0 && errno == ENOENT && strstr(err.text, "not in the cache"),
       "pin of an object not cached: %s", err.text);
}

typedef struct {
    cache_t *c;
    int64_t ids[8];
    unsigned first;
    int failures;
} worker_t;

static void *worker(void *arg)
{
    worker_t *wk = arg;
    si_error_t err;
    for (unsigned i = 0; i < 8; i++) {
        char sum[SI_CHECKSUM_TEXT_MAX];
        unsigned n = wk->first + i;
        unsigned char *data = ct_content(n, 300000);
        ct_sha256(data, 300000, sum);
        free(data);
        if (ct_store(wk->c, wk->ids[i], n, 300000, sum, 10000 + n, 0, &err) < 0 ||
            read_back(wk->c, wk->ids[i], n, 300000) < 0) {
            diag("worker: %s", err.text);
            wk->failures++;
        }
    }
    return NULL;
}

/* The owner's rows of an unrecorded writer: made in the batch (the
 * object's row, its id given to the cache), or refused. */
typedef struct {
    const char *key;
    bool refuse;
    int64_t made;
} unrecorded_t;

static int record_unrecorded(void *arg, catalog_t *cat, int64_t *object_id, si_error_t *err)
{
    unrecorded_t *u = arg;
    if (u->refuse) {
        si_errprintf(err, "object unrec/%s exists already", u->key);
        errno = EEXIST;
        return CACHE_RECORD_REFUSED;
    }
    db_t *db = catalog_driver(cat);
    db_stmt_t *s = db_prepare(db, "INSERT INTO objects(bucket, key, size) VALUES ('unrec', ?1, 5000)"
                                  " RETURNING id", err);
    if (!s)
        return -1;
    db_bind_text(s, 1, u->key, -1);
    int rc = db_step(s);
    if (rc == DB_ROW)
        u->made = *object_id = db_column_int64(s, 0);
    db_finalize(s);
    return rc == DB_ROW ? 0 : si_errprintf(err, "inserting unrec/%s", u->key);
}

/* c keeps small objects in segments. */
static void test_unrecorded(cache_t *c)
{
    si_error_t err;
    cache_writer_t *w = NULL;
    unsigned char *data = ct_content(61, 5000);
    unrecorded_t made = {.key = "made"}, refused = {.key = "refused", .refuse = true};
    bool opened = cache_writer_open_unrecorded(c, 5000, NULL, &w, &err) == 0;
    ok(opened && cache_writer_write(w, data, 5000, &err) == 0,
       "a writer for an object without its row yet: %s", opened ? "open" : err.text);
    if (!opened) {
        free(data);
        return;
    }
    cache_writer_on_record(w, record_unrecorded, &made);
    ok(cache_writer_finish(w, 0, &err) == 0 && made.made > 0,
       "committed, its row made by the batch: object %lld", (long long)made.made);
    int fd = -1;
    cache_place_t place;
    unsigned char back[5000];
    ok(made.made > 0 && cache_open_object(c, made.made, &fd, &place, &err) == 0 &&
           place.size == 5000 && place.segment != 0 &&
           pread(fd, back, sizeof(back), (off_t)place.offset) == 5000 &&
           memcmp(back, data, 5000) == 0,
       "... read back under that id, from a segment");
    if (fd >= 0)
        close(fd);
    ok(cache_writer_open_unrecorded(c, 5000, NULL, &w, &err) == 0 &&
           cache_writer_write(w, data, 5000, &err) == 0,
       "another");
    cache_writer_on_record(w, record_unrecorded, &refused);
    ok(cache_writer_finish(w, 0, &err) < 0 && errno == EEXIST && strstr(err.text, "exists already"),
       "its rows refused: it fails alone: %s", err.text);
    cache_usage_t u;
    ok(cache_usage(c, &u, &err) == 0 && u.reserved_bytes == 0, "... its reservation given back");
    is_int(test_query_int(t.cat, "SELECT count(*) FROM objects WHERE bucket = 'unrec'"), 1,
           "... and no row of it");
    ok(cache_writer_open_unrecorded(c, 1ull << 30, NULL, &w, &err) < 0 && errno == ENOTSUP,
       "too large to wait in memory for its id: %s", err.text);
    free(data);
}

static void test_threads(cache_t *c)
{
    worker_t wk[4];
    pthread_t th[4];
    char sum[SI_CHECKSUM_TEXT_MAX];
    for (unsigned k = 0; k < 4; k++) {
        wk[k] = (worker_t){.c = c, .first = 100 + 8 * k};
        for (unsigned i = 0; i < 8; i++)
            wk[k].ids[i] = ct_object(&t, 100 + 8 * k + i, 300000, sum);
    }
    for (unsigned k = 0; k < 4; k++)
        pthread_create(&th[k], NULL, worker, &wk[k]);
    int failures = 0;
    for (unsigned k = 0; k < 4; k++) {
        pthread_join(th[k], NULL);
        failures += wk[k].failures;
    }
    is_int(failures, 0, "4 threads wrote and read back 8 objects each");
    is_int(ct_query_int(&t, "SELECT count(*) FROM cache WHERE size = 300000"), 32,
           "32 rows recorded");
}

/* Runs on each engine. */
static void body(void)
{
    si_error_t err;
    if (ct_setup(&t, "t_cache") < 0) {
        ok(0, "setting up on %s", test_engine_name());
        return;
    }
    cache_conf_t conf = ct_conf(&t, 1ull << 30);
    cache_t *c = cache_open(&conf, t.cat, &err);
    ok(c != NULL, "cache opened: %s", c ? "" : err.text);
    char sub[400];
    snprintf(sub, sizeof(sub), "%s/objects", t.cache_dir);
    ok(ct_count_entries(sub) == 0, "objects/ created");
    ok(cache_open(&conf, t.cat, &err) == NULL && errno == EBUSY && strstr(err.text, "in use"),
       "a second cache on the same directory is refused: %s", err.text);

    test_write_read(c);
    test_direct(c);
    test_direct_behind_failure(c);
    test_mismatches(c);
    test_copy_fd(c);
    test_stray_file(c);
    test_hostile(c);
    cache_writer_t *w;
    ok(cache_writer_open_unrecorded(c, 5000, NULL, &w, &err) < 0 && errno == ENOTSUP,
       "without segments, an object needs its row before its writer: %s", err.text);
    cache_close(c);

    cache_conf_t segmented = ct_conf_segments(&t, 1ull << 30, 64u << 20);
    c = cache_open(&segmented, t.cat, &err);
    ok(c != NULL, "cache with segments opened: %s", c ? "" : err.text);
    if (c) {
        test_unrecorded(c);
        cache_close(c);
    }

    /* a small write buffer: large feeds bypass it, small ones fill it */
    conf.write_buffer = 4096;
    c = cache_open(&conf, t.cat, &err);
    char sum[SI_CHECKSUM_TEXT_MAX];
    int64_t id = ct_object(&t, 50, 100000, sum);
    ok(ct_store(c, id, 50, 100000, sum, 50000, 0, &err) == 0 && read_back(c, id, 50, 100000) == 0,
       "4 KiB buffer, 50 kB feeds: stored and read back");
    test_threads(c);
    cache_close(c);

    /* configuration */
    cache_conf_t bad = conf;
    bad.low_watermark = 0.95;
    ok(cache_open(&bad, t.cat, &err) == NULL && errno == EINVAL && strstr(err.text, "watermarks"),
       "low above high refused: %s", err.text);
    const si_conf_key_t *schemas[] = {cache_conf_keys, NULL};
    si_conf_t *sc = si_conf_load_string(
        "cache = { dir = \"/srv/cache\"; capacity = 5000000000L; high_watermark = 0.8;"
        " low_watermark = 0.6; verify_on_start = \"all\"; write_buffer = 1048576; };",
        schemas, &err);
    cache_conf_t from;
    ok(sc && cache_conf_from(sc, "/var/lib/stagein", &from, &err) == 0 &&
           strcmp(from.dir, "/srv/cache") == 0 && from.capacity == 5000000000ull &&
           from.high_watermark == 0.8 && from.low_watermark == 0.6 &&
           from.verify_on_start == CACHE_VERIFY_ALL && from.write_buffer == 1048576,
       "configuration read: %s", sc ? "" : err.text);
    si_conf_free(sc);
    sc = si_conf_load_string("cache = { high_watermark = 0.5; low_watermark = 0.7; };", schemas,
                             &err);
    ok(sc && cache_conf_from(sc, "/var/lib/stagein", &from, &err) < 0 &&
           strstr(err.text, "cache.low_watermark (0.70) must be below"),
       "inverted watermarks: %s", err.text);
    si_conf_free(sc);
    ok(si_conf_load_string("cache = { verify_on_start = \"sometimes\"; };", schemas, &err) == NULL,
       "unknown verify mode refused: %s", err.text);
    sc = si_conf_load_string("", schemas, &err);
    ok(sc && cache_conf_from(sc, "/var/lib/stagein", &from, &err) == 0 &&
           strcmp(from.dir, "/var/lib/stagein/cache") == 0 && from.capacity == 0,
       "defaults: %s under the state directory", from.dir);
    si_conf_free(sc);

    ct_teardown(&t);
}

int main(void)
{
    return test_run_engines(body);
}
