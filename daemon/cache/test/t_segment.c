/* Segment files: small objects packed into shared files at aligned offsets,
 * read back through their place; large ones and those over the memory
 * budget in files of their own; segments sealed when full; an evicted
 * object's blocks freed after the delay, an emptied segment removed; and
 * recovery after a crash (a batch cut short, a lost segment, a leftover
 * file, an unsealed segment, corrupt bytes). */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>

#include "catalog/instances.h"
#include "common/clock.h"
#include "common/tap.h"
#include "daemon/cache/internal.h"
#include "daemon/cache/test/cachetest.h"

static ct_t t;
static int64_t ids[42];
static char sums[42][SI_CHECKSUM_TEXT_MAX];
static size_t sizes[42];

/* Object n's bytes through cache_open_object, compared with its content. */
static bool reads_back(cache_t *c, unsigned n, cache_place_t *place)
{
    si_error_t err;
    int fd;
    if (cache_open_object(c, ids[n], &fd, place, &err) < 0) {
        diag("open %u: %s", n, err.text);
        return false;
    }
    unsigned char *want = ct_content(n, sizes[n]), *have = malloc(sizes[n] + 1);
    ssize_t r = pread(fd, have, sizes[n], (off_t)place->offset);
    close(fd);
    bool same = place->size == sizes[n] && r == (ssize_t)sizes[n] &&
                memcmp(want, have, sizes[n]) == 0;
    free(want);
    free(have);
    return same;
}

static void segment_file(int64_t segment, char *path, size_t size)
{
    snprintf(path, size, "%s/segments/%02x/%02x/%016" PRIx64, t.cache_dir,
             (unsigned)((uint64_t)segment >> 16 & 0xff), (unsigned)((uint64_t)segment >> 8 & 0xff),
             (uint64_t)segment);
}

static long long query(const char *fmt, int64_t a)
{
    char sql[400];
    snprintf(sql, sizeof(sql), fmt, a);
    return ct_query_int(&t, sql);
}

/* Allocated bytes of a file (st_blocks), -1 when it is gone. */
static long long allocated(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_blocks * 512 : -1;
}

typedef struct {
    cache_t *c;
    unsigned n;
    int rc;
    char why[300];
} store_job_t;

static void *store_one(void *arg)
{
    store_job_t *j = arg;
    si_error_t err = {{0}};
    j->rc = ct_store(j->c, ids[j->n], j->n, sizes[j->n], sums[j->n], 3000, 0, &err);
    snprintf(j->why, sizeof(j->why), "%s", err.text);
    return NULL;
}

static void test_packing(cache_t *c)
{
    si_error_t err;
    /* five stored at once (one batch, or a few), sizes around the block */
    pthread_t th[5];
    store_job_t jobs[5];
    for (unsigned n = 1; n <= 5; n++) {
        jobs[n - 1] = (store_job_t){c, n, -1, ""};
        pthread_create(&th[n - 1], NULL, store_one, &jobs[n - 1]);
    }
    int stored = 0;
    for (unsigned n = 1; n <= 5; n++) {
        pthread_join(th[n - 1], NULL);
        stored += jobs[n - 1].rc == 0;
        if (jobs[n - 1].rc < 0)
            diag("object %u: %s", n, jobs[n - 1].why);
    }
    is_int(stored, 5, "five small objects stored together");
    bool all = true, aligned = true, disjoint = true;
    cache_place_t p[6];
    for (unsigned n = 1; n <= 5; n++) {
        all = reads_back(c, n, &p[n]) && all;
        aligned = aligned && p[n].segment > 0 && p[n].offset >= 4096 && p[n].offset % 4096 == 0;
    }
    for (unsigned a = 1; a <= 5; a++)
        for (unsigned b = 1; b <= 5; b++)
            if (a != b && p[a].segment == p[b].segment && p[a].offset <= p[b].offset &&
                p[b].offset < p[a].offset + (p[a].size ? p[a].size : 1))
                disjoint = false;
    ok(all, "each reads back identical from its place");
    ok(aligned, "each in a segment, at a multiple of 4096 from the second block on");
    ok(disjoint, "no two share a byte");
    is_int(query("SELECT count(*) FROM cache WHERE segment IS NOT NULL AND path LIKE"
                 " 'segments/%%' AND file_offset > 0 AND %lld = 0", 0), 5,
           "their rows name the segment's path and the offsets");
    char objects[400], tmp[400];
    snprintf(objects, sizeof(objects), "%s/objects", t.cache_dir);
    snprintf(tmp, sizeof(tmp), "%s/tmp", t.cache_dir);
    ok(ct_count_entries(objects) == 0 && ct_count_entries(tmp) == 0,
       "no file of their own, nothing in tmp/");
    char path[600], head[64] = "";
    segment_file(p[1].segment, path, sizeof(path));
    int fd = open(path, O_RDONLY);
    ok(fd >= 0 && read(fd, head, sizeof(head) - 1) > 0 &&
           strncmp(head, "stagein cache segment 1\n", 24) == 0,
       "the segment's first block says what it is");
    if (fd >= 0)
        close(fd);
    struct stat st;
    ok(stat(path, &st) == 0 && (st.st_mode & 0777) == 0640, "segment file mode 0640");

    /* the place a reader found in the catalog itself */
    cache_place_t found = {sizes[3], (uint64_t)query("SELECT file_offset FROM cache WHERE"
                                                     " object_id = %lld", ids[3]),
                           query("SELECT segment FROM cache WHERE object_id = %lld", ids[3])};
    ok(cache_open_cached(c, ids[3], &found, &fd, &err) == 0, "cache_open_cached with the row's place");
    close(fd);
    cache_place_t beyond = found;
    beyond.offset = 1ull << 40;
    ok(cache_open_cached(c, ids[3], &beyond, &fd, &err) < 0 && errno == EIO &&
           strstr(err.text, "from offset"),
       "a place beyond the segment's end is EIO: %s", err.text);

    /* from a file descriptor (a backend's copy), and an empty object */
    char src[400];
    snprintf(src, sizeof(src), "%s/source", t.root);
    unsigned char *data = ct_content(6, sizes[6]);
    FILE *f = fopen(src, "w");
    fwrite("pre", 1, 3, f);
    fwrite(data, 1, sizes[6], f);
    fclose(f);
    free(data);
    cache_writer_t *w;
    fd = open(src, O_RDONLY);
    ok(cache_writer_open(c, ids[6], sizes[6], sums[6], &w, &err) == 0 &&
           cache_writer_copy_fd(w, fd, 3, sizes[6], &err) == 0 &&
           cache_writer_finish(w, 0, &err) == 0 && reads_back(c, 6, &p[0]) && p[0].segment,
       "copied from a file into a segment: %s", err.text);
    ok(cache_writer_open(c, ids[7], sizes[7], sums[7], &w, &err) == 0 &&
           cache_writer_copy_fd(w, fd, 3 + 10, sizes[7] + 100000, &err) < 0 && errno == EBADMSG,
       "more bytes than the object's: %s", err.text);
    cache_writer_abort(w);
    ok(cache_writer_open(c, ids[7], sizes[7], sums[7], &w, &err) == 0 &&
           cache_writer_copy_fd(w, fd, 1u << 30, sizes[7], &err) < 0 &&
           strstr(err.text, "ended"),
       "a source that ends early: %s", err.text);
    cache_writer_abort(w);
    close(fd);
    ok(ct_store(c, ids[8], 8, 0, sums[8], 1, 0, &err) == 0 && reads_back(c, 8, &p[0]) &&
           p[0].segment,
       "an empty object in a segment");

    /* held in memory, fed in pieces of odd sizes from odd addresses */
    {
        static const size_t pieces[] = {1, 15, 63, 64, 65, 127, 4096, 4099, 3};
        unsigned char *bytes = ct_content(33, sizes[33]);
        bool fed = cache_writer_open(c, ids[33], sizes[33], sums[33], &w, &err) == 0;
        for (size_t off = 0, i = 0; fed && off < sizes[33]; i = (i + 1) % 9) {
            size_t len = sizes[33] - off < pieces[i] ? sizes[33] - off : pieces[i];
            fed = cache_writer_write(w, bytes + off, len, &err) == 0;
            off += len;
        }
        ok(fed && cache_writer_finish(w, 0, &err) == 0 && reads_back(c, 33, &p[0]) &&
               p[0].segment,
           "fed in pieces of 1 to 4,099 bytes, it reads back identical: %s", fed ? "" : err.text);
        free(bytes);
    }

    /* read straight into the writer's memory: half landed, half written */
    {
        unsigned char *bytes = ct_content(38, sizes[38]);
        size_t len = 0, half = sizes[38] / 2;
        bool opened = cache_writer_open(c, ids[38], sizes[38], sums[38], &w, &err) == 0;
        unsigned char *room = opened ? cache_writer_room(w, &len) : NULL;
        ok(room && len == sizes[38] && (uintptr_t)room % CACHE_BLOCK == 0,
           "a small object's writer offers its whole buffer (%zu bytes), block-aligned", len);
        if (room)
            memcpy(room, bytes, half);
        ok(room && cache_writer_landed(w, half, &err) == 0 &&
               cache_writer_room(w, &len) == room + half && len == sizes[38] - half &&
               cache_writer_write(w, bytes + half, sizes[38] - half, &err) == 0 &&
               cache_writer_finish(w, 0, &err) == 0 && reads_back(c, 38, &p[0]) &&
               p[0].segment,
           "half landed in its room, half written: it reads back identical, checksum"
           " verified: %s", err.text);
        free(bytes);
        ok(cache_writer_open(c, ids[39], sizes[39], sums[39], &w, &err) == 0 &&
               cache_writer_room(w, &len) && cache_writer_landed(w, len + 1, &err) < 0 &&
               errno == EBADMSG && cache_writer_room(w, &len) == NULL && len == 0,
           "more landed than the room: refused, and the failed writer offers no room: %s",
           err.text);
        cache_writer_abort(w);
    }

    /* too large for a segment: its own file */
    ok(ct_store(c, ids[9], 9, sizes[9], sums[9], 65536, 0, &err) == 0 &&
           reads_back(c, 9, &p[0]) && p[0].segment == 0 && p[0].offset == 0,
       "an object of segment_object_max bytes gets a file of its own");
    is_int(ct_count_entries(objects), 1, "objects/ holds it");
}

typedef struct {
    cache_t *c;
    cache_writer_t *w;
    int rc;
} opener_t;

static void *open_object_41(void *arg)
{
    opener_t *o = arg;
    si_error_t err;
    o->rc = cache_writer_open(o->c, ids[41], sizes[41], sums[41], &o->w, &err);
    return NULL;
}

static void test_budget(ct_t *tt, cache_conf_t conf)
{
    si_error_t err;
    /* room in memory for one 64 KiB object at a time */
    conf.segment_memory = 65536;
    cache_t *c = cache_open(&conf, tt->cat, &err);
    cache_writer_t *w1, *w2;
    cache_place_t p;
    ok(cache_writer_open(c, ids[10], sizes[10], sums[10], &w1, &err) == 0 &&
           cache_writer_open(c, ids[11], sizes[11], sums[11], &w2, &err) == 0,
       "two writers open at once");
    size_t len1 = 0, len2 = 1;
    ok(cache_writer_room(w1, &len1) && len1 == sizes[10] && !cache_writer_room(w2, &len2) &&
           len2 == 0 && cache_writer_landed(w2, 1, &err) < 0 && errno == EINVAL,
       "the first offers its memory as room, the second (a file) none: %s", err.text);
    unsigned char *d1 = ct_content(10, sizes[10]), *d2 = ct_content(11, sizes[11]);
    ok(cache_writer_write(w1, d1, sizes[10], &err) == 0 &&
           cache_writer_write(w2, d2, sizes[11], &err) == 0 &&
           cache_writer_finish(w1, 0, &err) == 0 && cache_writer_finish(w2, 0, &err) == 0,
       "both stored: %s", err.text);
    free(d1);
    free(d2);
    ok(reads_back(c, 10, &p) && p.segment, "the first in memory, then a segment");
    ok(reads_back(c, 11, &p) && p.segment == 0,
       "the second, over the memory budget with nothing committing, in a file");
    /* a writer finding the budget full waits for a batch to give memory back */
    cache_writer_t *w3;
    ok(cache_writer_open(c, ids[40], sizes[40], sums[40], &w3, &err) == 0 &&
           cache_writer_room(w3, &(size_t){0}),
       "a third writer open, in memory");
    opener_t o = {.c = c, .rc = -1};
    pthread_t th;
    pthread_create(&th, NULL, open_object_41, &o);
    usleep(20000);
    unsigned char *d3 = ct_content(40, sizes[40]);
    ok(cache_writer_write(w3, d3, sizes[40], &err) == 0 && cache_writer_finish(w3, 0, &err) == 0,
       "the third stored while a fourth waits to open: %s", err.text);
    free(d3);
    pthread_join(th, NULL);
    size_t len4 = 0;
    ok(o.rc == 0 && cache_writer_room(o.w, &len4) && len4 == sizes[41],
       "the fourth got the memory the third's batch gave back, not a file");
    cache_writer_abort(o.w);
    cache_close(c);
}

static void test_rotation_and_eviction(ct_t *tt, cache_conf_t conf)
{
    si_error_t err;
    /* segments of 64 KiB: objects 12.. fill several */
    conf.segment_bytes = 65536;
    cache_t *c = cache_open(&conf, tt->cat, &err);
    long long before = ct_query_int(&t, "SELECT count(*) FROM cache_segments");
    cache_place_t p[40];
    for (unsigned n = 12; n < 20; n++)
        if (ct_store_next(&t, c, ids, sums, n, sizes[n], 0) < 0 || !reads_back(c, n, &p[n]))
            diag("object %u", n);
    long long made = ct_query_int(&t, "SELECT count(*) FROM cache_segments") - before;
    ok(made >= 3, "eight 20 KB objects in segments of 64 KiB: %lld segments", made);
    is_int(ct_query_int(&t, "SELECT count(*) FROM cache_segments WHERE sealed = 0"), 1,
           "all sealed but the one written now");
    int64_t first = p[12].segment;
    char path[600];
    segment_file(first, path, sizeof(path));
    long long full = allocated(path);

    /* removed: the blocks are freed a minute later, the segment when empty */
    unsigned in_first[8], k = 0;
    for (unsigned n = 12; n < 20; n++)
        if (p[n].segment == first)
            in_first[k++] = n;
    ok(k >= 2, "the first segment holds %u objects", k);
    ok(cache_remove(c, ids[in_first[0]], &err) == 0, "one removed");
    ok(allocated(path) == full, "its blocks still allocated (a reader may be in them)");
    t.now += 61;
    cache_trim(c, NULL, NULL, &err);
    ok(allocated(path) < full, "freed after the delay: %lld -> %lld bytes", full, allocated(path));
    ok(reads_back(c, in_first[1], &p[0]), "its neighbour reads back unchanged");
    for (unsigned i = 1; i < k; i++)
        cache_remove(c, ids[in_first[i]], &err);
    ok(allocated(path) < 0 && query("SELECT count(*) FROM cache_segments WHERE id = %lld",
                                    first) == 0,
       "the last one removed: the sealed segment's file and row are gone");

    /* the open one keeps its row when emptied, and goes once sealed */
    int64_t open_seg = query("SELECT id FROM cache_segments WHERE sealed = 0 AND %lld = 0", 0);
    for (unsigned n = 12; n < 20; n++)
        if (p[n].segment == open_seg)
            cache_remove(c, ids[n], &err);
    segment_file(open_seg, path, sizeof(path));
    ok(allocated(path) >= 0, "the open segment stays, empty");
    cache_close(c);
    ok(allocated(path) < 0 && query("SELECT count(*) FROM cache_segments WHERE id = %lld",
                                    open_seg) == 0,
       "closing the cache seals it: removed, being empty");
}

static void test_recovery(ct_t *tt, cache_conf_t conf)
{
    si_error_t err;
    conf.segment_bytes = 1u << 20;
    conf.verify_on_start = CACHE_VERIFY_ALL;
    cache_t *c = cache_open(&conf, tt->cat, &err);
    cache_place_t p[40];
    for (unsigned n = 20; n < 30; n++)
        if (ct_store_next(&t, c, ids, sums, n, sizes[n], 0) < 0 || !reads_back(c, n, &p[n]))
            diag("object %u", n);
    int64_t seg = p[20].segment;
    ok(seg > 0 && p[29].segment == seg, "ten objects in one segment");
    cache_close(c);

    /* the crash: unsealed as a killed process leaves it, a batch cut short
     * (bytes after the last row), a lost segment, a leftover file, a
     * corrupt object, a hole where no row is */
    test_exec(t.cat, "UPDATE cache_segments SET sealed = 0");
    char path[600], lost[600], leftover[600];
    segment_file(seg, path, sizeof(path));
    struct stat st;
    stat(path, &st);
    uint64_t end = (uint64_t)st.st_size;
    int fd = open(path, O_WRONLY);
    char junk[8192];
    memset(junk, 'j', sizeof(junk));
    ok(pwrite(fd, junk, sizeof(junk), (off_t)end) == (ssize_t)sizeof(junk),
       "8 KiB written after the last object (a batch without its transaction)");
    char bad = 'X';
    ok(pwrite(fd, &bad, 1, (off_t)p[25].offset + 7) == 1, "one byte of object 25 changed");
    close(fd);
    test_exec(t.cat, "INSERT INTO cache_segments(instance, created, sealed) VALUES ('', 0, 1)");
    int64_t gone = ct_query_int(&t, "SELECT max(id) FROM cache_segments");
    char sql[300];
    snprintf(sql, sizeof(sql), "UPDATE cache SET segment = %" PRId64 " WHERE object_id = %" PRId64,
             gone, ids[21]);
    test_exec(t.cat, sql);
    segment_file(gone, lost, sizeof(lost)); /* never made: the row's file is lost */
    segment_file(gone + 1000, leftover, sizeof(leftover));
    char dir[600];
    snprintf(dir, sizeof(dir), "%s", leftover);
    *strrchr(dir, '/') = '\0';
    mkdir(dir, 0750);
    fd = open(leftover, O_CREAT | O_WRONLY, 0640);
    close(fd);
    snprintf(sql, sizeof(sql), "DELETE FROM cache WHERE object_id = %" PRId64, ids[23]);
    test_exec(t.cat, sql); /* its range is now a gap */

    c = cache_open(&conf, tt->cat, &err);
    cache_recovery_t r;
    ok(cache_recover(c, &r, &err) == 0, "recovery: %s", err.text);
    ok(r.rows_without_file == 1 && r.verify_failed == 1,
       "a row whose segment is lost and a corrupt object dropped (%" PRIu64 ", %" PRIu64 ")",
       r.rows_without_file, r.verify_failed);
    ok(r.segments_removed == 1 && access(leftover, F_OK) < 0,
       "the leftover segment file removed (%" PRIu64 ")", r.segments_removed);
    is_int(query("SELECT count(*) FROM cache_segments WHERE id = %lld", gone), 0,
           "the lost segment's row removed, no object left in it");
    is_int(ct_query_int(&t, "SELECT count(*) FROM cache_segments WHERE sealed = 0"), 0,
           "the segment left open is sealed");
    stat(path, &st);
    ok(r.orphan_ranges >= 2 && (uint64_t)st.st_size < end + sizeof(junk),
       "the gaps freed and the cut batch's bytes cut off: %" PRIu64 " ranges, %lld bytes",
       r.orphan_ranges, (long long)st.st_size);
    bool rest = true;
    for (unsigned n = 20; n < 30; n++)
        if (n != 21 && n != 23 && n != 25)
            rest = reads_back(c, n, &p[0]) && rest;
    ok(rest, "the other seven read back unchanged");
    cache_recovery_free(&r);
    ok(cache_recover(c, &r, &err) == 0 && r.ndropped == 0 && r.segments_removed == 0 &&
           r.orphan_ranges == 0 && r.rows_without_file == 0,
       "a second recovery finds nothing to do");
    cache_recovery_free(&r);
    cache_close(c);
}

static void test_flush_fault(ct_t *tt, cache_conf_t conf)
{
    si_error_t err;
    setenv("STAGEIN_TEST_CACHE_FLUSH_FAULT", "ENOSPC:1", 1);
    cache_t *c = cache_open(&conf, tt->cat, &err);
    unsetenv("STAGEIN_TEST_CACHE_FLUSH_FAULT");
    ok(ct_store(c, ids[30], 30, sizes[30], sums[30], 4096, 0, &err) < 0 && errno == ENOSPC &&
           strstr(err.text, "flushing the cache"),
       "a failed flush fails the object: %s", err.text);
    ok(!ct_cached(c, ids[30]), "nothing recorded");
    cache_place_t p;
    ok(ct_store(c, ids[30], 30, sizes[30], sums[30], 4096, 0, &err) == 0 && reads_back(c, 30, &p) &&
           p.segment,
       "stored by the next batch: %s", err.text);
    cache_usage_t u;
    ok(cache_usage(c, &u, &err) == 0 && u.reserved_bytes == 0 && u.writers == 0,
       "no reservation or writer left");
    cache_close(c);
}

/* Two instances on one directory: each appends to a segment of its own, each
 * reads the other's; a recovery leaves a live instance's open segment alone,
 * seals a dead one's and frees its cut batch, but not a segment that instance
 * made after the others last saw it alive. */
static void test_shared(ct_t *tt, cache_conf_t conf)
{
    si_error_t err;
    double now = si_wall_now();
    ok(instance_register(tt->cat, "a", "h", 1, now, 30, &err) == 0 &&
           instance_register(tt->cat, "b", "h", 2, now, 30, &err) == 0,
       "instances a and b registered: %s", err.text);
    catalog_t *cat_a = catalog_open(tt->db, 0, &err), *cat_b = catalog_open(tt->db, 0, &err);
    conf.lease_s = 30;
    snprintf(conf.instance, sizeof(conf.instance), "a");
    cache_t *a = cache_open(&conf, cat_a, &err);
    snprintf(conf.instance, sizeof(conf.instance), "b");
    cache_t *b = cache_open(&conf, cat_b, &err);
    cache_place_t pa, pb, p;
    ok(a && b && ct_store_next(&t, a, ids, sums, 31, sizes[31], 0) == 0 &&
           ct_store_next(&t, b, ids, sums, 32, sizes[32], 0) == 0 && reads_back(b, 31, &pa) &&
           reads_back(a, 32, &pb) && pa.segment && pb.segment && pa.segment != pb.segment,
       "a and b write segments of their own and read each other's objects");
    is_int(query("SELECT count(*) FROM cache_segments WHERE instance = 'a' AND id = %lld",
                 pa.segment), 1, "a segment's row names its instance");
    char path[600];
    segment_file(pa.segment, path, sizeof(path));
    struct stat st;
    stat(path, &st);
    off_t end = st.st_size;
    int fd = open(path, O_WRONLY);
    ok(fd >= 0 && pwrite(fd, "junk", 4, end) == 4, "a batch of a's cut short (bytes after its last)");
    close(fd);
    cache_recovery_t r;
    ok(cache_recover(b, &r, &err) == 0 && r.orphan_ranges == 0 && r.segments_removed == 0,
       "b's recovery while a lives: %s", err.text);
    cache_recovery_free(&r);
    stat(path, &st);
    ok(st.st_size == end + 4 &&
           query("SELECT sealed FROM cache_segments WHERE id = %lld", pa.segment) == 0,
       "a's open segment left alone (unsealed, its tail kept)");

    /* b's view of a's open segment is older than the rows it reads next: a
     * batch of a's may commit in between, its objects past the end b saw
     * (here: the file cut before a's object, put back afterwards) */
    size_t keep = (size_t)(pa.offset + pa.size);
    char *bytes = malloc(keep);
    fd = open(path, O_RDWR);
    ok(fd >= 0 && bytes && pread(fd, bytes, keep, 0) == (ssize_t)keep &&
           ftruncate(fd, (off_t)pa.offset) == 0,
       "a's open segment seen shorter than a's committed object");
    ok(cache_recover(b, &r, &err) == 0 && r.size_mismatches == 0 && r.ndropped == 0 &&
           query("SELECT count(*) FROM cache WHERE object_id = %lld", ids[31]) == 1,
       "b's recovery leaves the rows of a live instance's open segment to it: %s", err.text);
    cache_recovery_free(&r);
    ok(fd >= 0 && pwrite(fd, bytes, keep, 0) == (ssize_t)keep && ftruncate(fd, end + 4) == 0 &&
           reads_back(b, 31, &p),
       "a's object reads back once its bytes are there");
    if (fd >= 0)
        close(fd);
    free(bytes);

    /* a dies: its heartbeat and its segment older than a lease */
    char sql[300];
    snprintf(sql, sizeof(sql), "UPDATE instances SET heartbeat = %.3f WHERE name = 'a'",
             now - 1000);
    test_exec(t.cat, sql);
    snprintf(sql, sizeof(sql), "UPDATE cache_segments SET created = %.3f WHERE instance = 'a'",
             now - 1000);
    test_exec(t.cat, sql);
    /* and a segment of a's made after b last saw it alive: a's next life's */
    snprintf(sql, sizeof(sql), "INSERT INTO cache_segments(instance, created) VALUES ('a', %.3f)",
             now + 5);
    test_exec(t.cat, sql);
    int64_t young = ct_query_int(&t, "SELECT max(id) FROM cache_segments");
    ok(cache_recover(b, &r, &err) == 0 && r.orphan_ranges == 1,
       "b's recovery once a is dead frees a's cut batch: %s", err.text);
    cache_recovery_free(&r);
    stat(path, &st);
    ok(st.st_size == end &&
           query("SELECT sealed FROM cache_segments WHERE id = %lld", pa.segment) == 1,
       "a's segment sealed, cut back to its last object");
    ok(reads_back(b, 31, &p), "a's object still reads back through b");
    is_int(query("SELECT sealed FROM cache_segments WHERE id = %lld", young), 0,
           "a segment a made after b listed the live instances is not b's to seal");
    test_exec(t.cat, "DELETE FROM cache_segments WHERE instance = 'a' AND sealed = 0");
    cache_close(b);
    cache_close(a);
    catalog_close(cat_a);
    catalog_close(cat_b);
}

/* Descriptors this process holds on removed segment files. */
static int removed_segments_open(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d));) {
        char link[64], target[700];
        snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(link, target, sizeof(target) - 1);
        if (len > 0) {
            target[len] = '\0';
            n += strstr(target, "/segments/") && strstr(target, "(deleted)");
        }
    }
    if (d)
        closedir(d);
    return n;
}

/* Segment files kept open for readers: reused, let go when idle, never
 * serving a file removed meanwhile. Last: it removes a segment under the
 * cache's feet. */
static void test_kept(ct_t *tt, cache_conf_t conf)
{
    si_error_t err;
    conf.segment_bytes = 65536; /* sealed by its third 20 KB object */
    cache_t *c = cache_open(&conf, tt->cat, &err);
    cache_place_t p34, p35, p;
    ok(c && ct_store_next(&t, c, ids, sums, 34, sizes[34], 0) == 0 &&
           ct_store_next(&t, c, ids, sums, 35, sizes[35], 0) == 0 &&
           ct_store_next(&t, c, ids, sums, 36, sizes[36], 0) == 0 && reads_back(c, 34, &p34) &&
           reads_back(c, 35, &p35) && reads_back(c, 36, &p) && p34.segment &&
           p34.segment == p35.segment && p.segment == p34.segment &&
           query("SELECT sealed FROM cache_segments WHERE id = %lld", p34.segment) == 1,
       "three objects in one sealed segment, read once each");
    char path[600], moved[620];
    segment_file(p34.segment, path, sizeof(path));
    snprintf(moved, sizeof(moved), "%s.moved", path);
    int fd;
    ok(rename(path, moved) == 0 && reads_back(c, 35, &p),
       "with the segment's path gone, its object is read through the descriptor kept open");
    rename(moved, path);
    t.now += CACHE_KEPT_IDLE_S + 1;
    cache_usage_t u;
    ok(cache_usage(c, &u, &err) == 0, "cache_usage: %s", err.text);
    ok(rename(path, moved) == 0 && cache_open_cached(c, ids[35], &p35, &fd, &err) < 0 &&
           errno == ENOENT,
       "idle for %.0f s, the descriptor was closed at the next usage query: %s",
       CACHE_KEPT_IDLE_S + 1, err.text);
    rename(moved, path);
    ok(reads_back(c, 34, &p) && unlink(path) == 0, "read again, then its file removed (as another"
                                                 " instance removes an emptied segment)");
    ok(cache_open_cached(c, ids[34], &p34, &fd, &err) < 0 && errno == ENOENT,
       "the removed file is not served from the kept descriptor: %s", err.text);
    is_int(removed_segments_open(), 0, "no descriptor of the removed file stays open");
    ok(ct_store_next(&t, c, ids, sums, 37, sizes[37], 0) == 0 && reads_back(c, 37, &p) &&
           p.segment && p.segment != p34.segment && removed_segments_open() == 0,
       "another segment written and read: still none");
    cache_close(c);
    is_int(removed_segments_open(), 0, "none after the cache closes");
}

/* The writers' buffers are kept in the cache's pool (common/bufpool.c,
 * tested by t_bufpool) within half of cache.segment_memory. */
static void test_buffers(cache_t *c)
{
    ok(c->buffers.max_kept == c->conf.segment_memory / 2,
       "the cache keeps at most half of segment_memory of writers' buffers (%zu bytes)",
       c->buffers.max_kept);
    void *buf = si_bufpool_get(&c->buffers, 100000);
    ok(buf && ((uintptr_t)buf % CACHE_BLOCK) == 0, "a writer's buffer is block-aligned");
    si_bufpool_put(&c->buffers, buf, 100000);
}

/* Runs on each engine. */
static void body(void)
{
    if (ct_setup(&t, "t_segment") < 0) {
        ok(0, "setting up on %s", test_engine_name());
        return;
    }
    /* 1-5 around the block, 6-7 copied from a file, 8 empty, 9 as large as
     * segment_object_max, 10-11 for the budget, then about 20 KB each, and
     * 40-41 for the budget's wait */
    static const size_t first[] = {1, 5000, 4096, 4097, 70000, 30000, 30000, 0, 1u << 20,
                                   65536, 65536};
    for (unsigned n = 1; n < 42; n++) {
        sizes[n] = n <= 11 ? first[n - 1] : n >= 40 ? 65536 : 20000 + n;
        ids[n] = ct_object(&t, n, sizes[n], sums[n]);
    }
    si_error_t err;
    cache_conf_t conf = ct_conf_segments(&t, 1ull << 30, 1u << 20);
    cache_t *c = cache_open(&conf, t.cat, &err);
    ok(c != NULL, "cache with segments opened: %s", c ? "" : err.text);
    test_packing(c);
    test_buffers(c);
    cache_close(c);
    test_budget(&t, conf);
    test_rotation_and_eviction(&t, conf);
    test_recovery(&t, conf);
    test_flush_fault(&t, conf);
    test_shared(&t, conf);
    test_kept(&t, conf);
    ct_teardown(&t);
}

int main(void)
{
    return test_run_engines(body);
}
