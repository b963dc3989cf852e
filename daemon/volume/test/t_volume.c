/* Volumes: create, append archive files, read back, walk, capacity,
 * unreadable regions, corrupt and hostile volumes. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/checksum.h"
#include "common/tap.h"
#include "daemon/volume/tar.h"
#include "daemon/volume/volume.h"

static char dir[256];

static char *write_file(const char *name, const unsigned char *data, size_t len)
{
    static char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0)
        exit(99);
    return path;
}

static void sha256(const unsigned char *data, size_t len, char out[SI_CHECKSUM_TEXT_MAX])
{
    si_checksum_t *c = si_checksum_new("sha256", NULL);
    si_checksum_update(c, data, len);
    si_checksum_final(c, out);
    si_checksum_free(c);
}

static off_t file_size(const char *label)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s.vol", dir, label);
    return stat(path, &st) == 0 ? st.st_size : -1;
}

/* Raw access to an image, for corrupting it. */
static int image_fd(const char *label)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s.vol", dir, label);
    return open(path, O_RDWR);
}

static void test_create(void)
{
    si_error_t err = {{0}};
    ok(tapevol_create(dir, "lower", "LTO-9", 1u << 20, &err) < 0 &&
           strstr(err.text, "invalid character"), "lower-case label refused: %s", err.text);
    ok(tapevol_create(dir, "L1", "LTO 9", 1u << 20, &err) < 0 &&
           strstr(err.text, "media"), "bad media refused: %s", err.text);
    ok(tapevol_create(dir, "L1", "LTO-9", 100, &err) < 0 && strstr(err.text, "too small"),
       "tiny capacity refused: %s", err.text);
    ok(tapevol_create(dir, "L1", "LTO-9", UINT64_C(18000000000000), &err) == 0,
       "create L1: %s", err.text);
    ok(tapevol_create(dir, "L1", "LTO-9", 1u << 20, &err) < 0 &&
           strstr(err.text, "already exists"), "second create refused: %s", err.text);
    is_int(file_size("L1"), 2 * TAPEVOL_RECORD, "new volume holds label and filemark 0");
    ok(tapevol_open(dir, "NOPE", 0, &err) == NULL && strstr(err.text, "no volume NOPE"),
       "missing volume: %s", err.text);
    is_int(tapevol_media_capacity("LTO-9"), 18000000000000LL, "LTO-9 capacity from tape model");
    is_int(tapevol_media_capacity("LTO-10"), 30000000000000LL, "LTO-10 capacity");
    is_int(tapevol_media_capacity("DLT"), 0, "unknown media has no default capacity");

    tapevol_t *vol = tapevol_open(dir, "L1", TAPEVOL_RDONLY, &err);
    tapevol_info_t info;
    ok(vol && tapevol_info(vol, &info, &err) == 0, "open and info: %s", err.text);
    if (vol) {
        is_str(info.label, "L1", "label");
        is_str(info.media, "LTO-9", "media");
        is_int(info.capacity, 18000000000000LL, "capacity");
        is_int(info.used, 1024, "used");
        is_int(info.files, 0, "no archive files");
        tapevol_member_t m = {.bucket = "bkt", .key = "k", .fd = 0, .size = 0};
        tapevol_listing_t *w = NULL;
        ok(tapevol_append(vol, &m, 1, &w, &err) < 0 && strstr(err.text, "read-only"),
           "append to a read-only handle refused");
        tapevol_close(vol);
    }
    char **labels;
    size_t n;
    ok(tapevol_list(dir, &labels, &n, &err) == 0 && n == 1 && strcmp(labels[0], "L1") == 0,
       "list finds L1");
    tapevol_labels_free(labels, n);
}

#define BIG (5 * (1u << 20) + 17) /* past one write block: its header is flushed before the checksum is known */

static void test_append_and_read(void)
{
    si_error_t err = {{0}};
    unsigned char *big = malloc(BIG), small[1000], back[1000];
    char sums[3][SI_CHECKSUM_TEXT_MAX];
    tap_fill_pattern(big, BIG, 1);
    tap_fill_pattern(small, sizeof(small), 2);
    sha256(NULL, 0, sums[0]);
    sha256(small, sizeof(small), sums[1]);
    sha256(big, BIG, sums[2]);

    tapevol_t *vol = tapevol_open(dir, "L1", TAPEVOL_RDWR, &err);
    ok(vol != NULL, "open RDWR: %s", err.text);
    if (!vol)
        return;
    char empty_path[512], small_path[512];
    snprintf(empty_path, sizeof(empty_path), "%s", write_file("empty", NULL, 0));
    snprintf(small_path, sizeof(small_path), "%s", write_file("small", small, sizeof(small)));
    int big_fd = open(write_file("big", big, BIG), O_RDONLY);
    tapevol_member_t m[] = {
        {.bucket = "bkt", .key = "empty", .path = empty_path, .size = 0, .mtime = 1},
        {.bucket = "bkt", .key = "dir/small.bin", .path = small_path, .size = sizeof(small),
         .mtime = 1700000000, .checksum = sums[1]},
        {.bucket = "other", .key = "big", .path = NULL, .fd = big_fd, .size = BIG,
         .mtime = 1700000001},
    };
    tapevol_listing_t *w1 = NULL, *w2 = NULL;
    ok(tapevol_append(vol, m, 3, &w1, &err) == 0, "append archive file 1: %s", err.text);
    close(big_fd);
    if (!w1)
        goto out;
    is_int(w1->nfiles, 1, "one file written");
    is_int(w1->files[0].seq, 1, "first archive file is file 1");
    is_int(w1->files[0].start, TAPEVOL_FIRST_FILE_OFFSET, "it starts after label + filemark");
    is_int(w1->nentries, 3, "three members");
    uint64_t expect = TAPEVOL_FIRST_FILE_OFFSET;
    for (size_t i = 0; i < 3; i++) {
        const tapevol_entry_t *e = &w1->entries[i];
        is_int(e->header_offset, expect, "member %zu header offset", i);
        expect += tar_member_bytes(&(tar_pax_member_t){m[i].bucket, m[i].key, m[i].size,
                                                       m[i].mtime, NULL, NULL});
        is_int(e->position, expect - tar_round_up(m[i].size), "member %zu data offset", i);
        is_str(e->checksum, sums[i], "member %zu sha256 computed while writing", i);
        ok(e->position % TAR_BLOCK == 0, "member %zu data is block aligned", i);
    }
    is_int(w1->files[0].end, expect + 2 * TAR_BLOCK, "tar stream ends after two zero blocks");
    is_int(file_size("L1"), w1->files[0].end + TAPEVOL_RECORD, "filemark closes the data");

    /* a member's ustar header lies right before its data */
    unsigned char block[TAR_BLOCK];
    tar_header_t h;
    ok(tapevol_read(vol, w1->entries[1].position - TAR_BLOCK, block, TAR_BLOCK, &err) == 0 &&
           tar_header_parse(block, &h, &err) == 0 && strcmp(h.name, "bkt/dir/small.bin") == 0 &&
           h.size == sizeof(small), "ustar header precedes the data");

    ok(tapevol_read(vol, w1->entries[1].position, back, sizeof(back), &err) == 0 &&
           memcmp(back, small, sizeof(small)) == 0, "small member reads back byte-exact");
    unsigned char *bigback = malloc(BIG);
    ok(tapevol_read(vol, w1->entries[2].position, bigback, BIG, &err) == 0 &&
           memcmp(bigback, big, BIG) == 0, "5 MiB member reads back byte-exact in one read");
    free(bigback);
    ok(tapevol_read(vol, file_size("L1") - 10, back, 20, &err) < 0 && errno == EINVAL &&
           strstr(err.text, "end of data"), "read past end of data: %s", err.text);

    /* second archive file from a pipe-like fd source */
    int fds[2];
    if (pipe(fds) == 0) {
        ssize_t wr = write(fds[1], small, 500);
        (void)wr;
        close(fds[1]);
    }
    tapevol_member_t m2 = {.bucket = "bkt", .key = "piped", .fd = fds[0], .size = 500};
    ok(tapevol_append(vol, &m2, 1, &w2, &err) == 0, "append archive file 2: %s", err.text);
    close(fds[0]);
    if (w2) {
        is_int(w2->files[0].seq, 2, "second archive file is file 2");
        is_int(w2->files[0].start, w1->files[0].end + TAPEVOL_RECORD, "it follows filemark 1");
        ok(tapevol_read(vol, w2->entries[0].position, back, 500, &err) == 0 &&
               memcmp(back, small, 500) == 0, "piped member reads back");
    }
    tapevol_info_t info;
    ok(tapevol_info(vol, &info, &err) == 0 && info.files == 2 &&
           info.used == (uint64_t)file_size("L1"), "info: 2 files, used = image size");

    /* the walk finds the same, from the volume alone */
    tapevol_listing_t *l = NULL;
    ok(tapevol_walk(vol, TAPEVOL_WALK_VERIFY, &l, &err) == 0, "walk with verify: %s", err.text);
    if (l && w2) {
        is_int(l->nfiles, 2, "walk: 2 archive files");
        is_int(l->nentries, 4, "walk: 4 members");
        is_int(l->files[0].end, w1->files[0].end, "walk: file 1 end");
        is_int(l->files[1].start, w2->files[0].start, "walk: file 2 start");
        is_int(l->files[1].first, 3, "walk: file 2 members start at entry 3");
        bool same = true;
        for (size_t i = 0; i < 3; i++) {
            const tapevol_entry_t *a = &l->entries[i], *b = &w1->entries[i];
            same = same && strcmp(a->bucket, b->bucket) == 0 && strcmp(a->key, b->key) == 0 &&
                   a->position == b->position && a->size == b->size && a->mtime == b->mtime &&
                   strcmp(a->checksum, b->checksum) == 0 && a->file_seq == 1;
        }
        ok(same, "walk: members of file 1 as written");
        is_str(l->entries[3].key, "piped", "walk: member of file 2");
        is_int(l->entries[3].file_seq, 2, "walk: file_seq 2");
    }
    tapevol_listing_free(l);

    /* refused appends leave the volume unchanged */
    off_t before = file_size("L1");
    tapevol_listing_t *w = NULL;
    tapevol_member_t wrong_size = {.bucket = "bkt", .key = "s", .path = small_path, .size = 999};
    ok(tapevol_append(vol, &wrong_size, 1, &w, &err) < 0 && strstr(err.text, "holds 1000"),
       "source of another size refused: %s", err.text);
    int short_fd = open(small_path, O_RDONLY);
    tapevol_member_t too_short[] = {
        {.bucket = "bkt", .key = "ok", .path = small_path, .size = sizeof(small)},
        {.bucket = "bkt", .key = "short", .fd = short_fd, .size = 2000},
    };
    ok(tapevol_append(vol, too_short, 2, &w, &err) < 0 && strstr(err.text, "ended after 1000"),
       "short fd source refused mid-write: %s", err.text);
    close(short_fd);
    tapevol_member_t bad_sum = {.bucket = "bkt", .key = "s", .path = small_path,
                                .size = sizeof(small), .checksum = sums[0]};
    ok(tapevol_append(vol, &bad_sum, 1, &w, &err) < 0 && strstr(err.text, "expected"),
       "checksum mismatch refused: %s", err.text);
    static const struct { const char *bucket, *key, *why; } hostile[] = {
        {"bkt", "../etc/passwd", "'..'"},
        {"bkt", "a/./b", "'.'"},
        {"bkt", "/abs", "starts with '/'"},
        {"bkt", "dir/", "ends with '/'"},
        {"Bad_Bucket", "k", "invalid character"},
        {"bkt", "a\nb", "control byte"},
    };
    for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
        tapevol_member_t hm = {.bucket = hostile[i].bucket, .key = hostile[i].key,
                               .path = small_path, .size = sizeof(small)};
        ok(tapevol_append(vol, &hm, 1, &w, &err) < 0 && strstr(err.text, hostile[i].why),
           "hostile name %zu refused: %s", i, err.text);
    }
    tapevol_member_t dup[] = {
        {.bucket = "bkt", .key = "same", .path = small_path, .size = sizeof(small)},
        {.bucket = "bkt", .key = "same", .path = small_path, .size = sizeof(small)},
    };
    ok(tapevol_append(vol, dup, 2, &w, &err) < 0 && strstr(err.text, "twice"),
       "duplicate member refused: %s", err.text);
    is_int(file_size("L1"), before, "refused appends left the volume unchanged");
    ok(tapevol_info(vol, &info, &err) == 0 && info.files == 2, "still 2 archive files");

    tapevol_listing_free(w1);
    tapevol_listing_free(w2);
out:
    tapevol_close(vol);
    free(big);
}

static void test_capacity(void)
{
    si_error_t err = {{0}};
    unsigned char data[5000];
    tap_fill_pattern(data, sizeof(data), 3);
    char path[512];
    snprintf(path, sizeof(path), "%s", write_file("cap", data, sizeof(data)));
    tapevol_member_t m = {.bucket = "bkt", .key = "cap", .path = path, .size = sizeof(data)};
    uint64_t need = tapevol_archive_bytes(&m, 1);
    /* room for exactly one such archive file */
    uint64_t capacity = TAPEVOL_FIRST_FILE_OFFSET + need;
    ok(tapevol_create(dir, "SMALL", "LTO-9", capacity, &err) == 0, "create small volume");
    tapevol_t *vol = tapevol_open(dir, "SMALL", TAPEVOL_RDWR, &err);
    tapevol_listing_t *w = NULL;
    ok(vol && tapevol_append(vol, &m, 1, &w, &err) == 0, "an archive file that just fits: %s",
       err.text);
    is_int(file_size("SMALL"), capacity, "volume is exactly full");
    tapevol_listing_free(w);
    w = NULL;
    m.size = 0;
    m.path = write_file("zero", NULL, 0);
    errno = 0;
    ok(vol && tapevol_append(vol, &m, 1, &w, &err) < 0 && errno == ENOSPC &&
           strstr(err.text, "is full"), "one more refused with ENOSPC: %s", err.text);
    is_int(file_size("SMALL"), capacity, "nothing written past capacity");
    tapevol_close(vol);
}

static void test_unreadable(void)
{
    si_error_t err = {{0}};
    tapevol_t *a = tapevol_open(dir, "L1", TAPEVOL_RDONLY, &err);
    tapevol_t *b = tapevol_open(dir, "L1", TAPEVOL_RDONLY, &err);
    tapevol_listing_t *l = NULL;
    unsigned char buf[4096];
    if (!a || !b || tapevol_walk(a, 0, &l, &err) < 0) {
        ok(0, "open and walk L1: %s", err.text);
        return;
    }
    const tapevol_entry_t *big = &l->entries[2];
    uint64_t bad = big->position + (1u << 20);
    ok(tapevol_fault_add(a, bad, 4096, &err) == 0, "set unreadable region: %s", err.text);
    ok(tapevol_fault_add(a, 5, 0, &err) < 0, "empty region refused");
    errno = 0;
    ok(tapevol_read(b, bad - 100, buf, 200, &err) < 0 && errno == EIO &&
           strstr(err.text, "unreadable region") && strstr(err.text, "Input/output error"),
       "another handle's overlapping read fails with EIO: %s", err.text);
    ok(tapevol_read(b, bad + 4096, buf, 100, &err) == 0, "read just after the region works");
    ok(tapevol_read(b, bad - 100, buf, 100, &err) == 0, "read just before the region works");
    tapevol_listing_t *l2 = NULL;
    ok(tapevol_walk(b, 0, &l2, &err) == 0, "walk skips over data in the region: %s", err.text);
    tapevol_listing_free(l2);
    l2 = NULL;
    errno = 0;
    ok(tapevol_walk(b, TAPEVOL_WALK_VERIFY, &l2, &err) < 0 && errno == EIO,
       "verify reads the region and fails: %s", err.text);
    ok(tapevol_fault_add(b, l->files[0].start, 1, &err) == 0, "region over a tar header");
    ok(tapevol_walk(a, 0, &l2, &err) < 0 && strstr(err.text, "unreadable"),
       "walk fails on an unreadable header: %s", err.text);
    tapevol_region_t *r;
    size_t n;
    ok(tapevol_faults(a, &r, &n, &err) == 0 && n == 2 && r[0].start == bad &&
           r[0].length == 4096, "both regions listed");
    free(r);
    ok(tapevol_fault_clear(b, &err) == 0, "clear");
    ok(tapevol_read(a, bad - 100, buf, 200, &err) == 0, "read works again after clear");
    ok(tapevol_faults(a, &r, &n, &err) == 0 && n == 0, "no regions");

    char path[512];
    snprintf(path, sizeof(path), "%s/L1.unreadable", dir);
    FILE *f = fopen(path, "w");
    fputs("# comment\n10 20\nbogus line\n", f);
    fclose(f);
    ok(tapevol_read(a, 0, buf, 10, &err) < 0 && strstr(err.text, "L1.unreadable:3:"),
       "bad region file reported with file:line: %s", err.text);
    unlink(path);
    tapevol_listing_free(l);
    tapevol_close(a);
    tapevol_close(b);
}

/* Copies L1 to a fresh volume NAME (same label text rewritten) for corrupting. */
static void copy_volume(const char *name)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "cp '%s/L1.vol' '%s/%s.vol'", dir, dir, name);
    if (system(cmd) != 0)
        exit(99);
    int fd = image_fd(name);
    char rec[TAPEVOL_RECORD];
    if (pread(fd, rec, sizeof(rec), 0) != (ssize_t)sizeof(rec))
        exit(99);
    char *at = strstr(rec, "label L1\n");
    size_t tail = strlen(at + 9);
    /* "label L1\n" -> "label NAME\n" */
    char fixed[TAPEVOL_RECORD] = {0};
    size_t head = (size_t)(at - rec);
    memcpy(fixed, rec, head);
    int n = snprintf(fixed + head, sizeof(fixed) - head, "label %s\n", name);
    memcpy(fixed + head + n, at + 9, tail);
    if (pwrite(fd, fixed, sizeof(fixed), 0) != (ssize_t)sizeof(fixed))
        exit(99);
    close(fd);
}

static void expect_walk_error(const char *label, const char *want, const char *what)
{
    si_error_t err = {{0}};
    tapevol_listing_t *l = NULL;
    tapevol_t *vol = tapevol_open(dir, label, 0, &err);
    int rc = vol ? tapevol_walk(vol, 0, &l, &err) : -1;
    ok(rc < 0 && strstr(err.text, want), "%s: %s", what, err.text);
    tapevol_listing_free(l);
    tapevol_close(vol);
}

static void test_corrupt(void)
{
    si_error_t err = {{0}};
    tapevol_listing_t *l = NULL;
    tapevol_t *vol = tapevol_open(dir, "L1", 0, &err);
    if (!vol || tapevol_walk(vol, 0, &l, &err) < 0) {
        ok(0, "walk L1: %s", err.text);
        return;
    }
    tapevol_close(vol);

    copy_volume("FLIP");
    int fd = image_fd("FLIP");
    unsigned char c = 'X';
    if (pwrite(fd, &c, 1, (off_t)l->entries[1].position - TAR_BLOCK + 3) != 1)
        exit(99);
    close(fd);
    expect_walk_error("FLIP", "checksum mismatch", "flipped header byte");

    copy_volume("TRUNC");
    char path[512];
    snprintf(path, sizeof(path), "%s/TRUNC.vol", dir);
    if (truncate(path, (off_t)(l->entries[2].position + 4096)) < 0)
        exit(99);
    expect_walk_error("TRUNC", "truncated", "truncated in member data");
    vol = tapevol_open(dir, "TRUNC", TAPEVOL_RDWR, &err);
    tapevol_info_t info;
    ok(vol && tapevol_info(vol, &info, &err) < 0 && strstr(err.text, "no filemark"),
       "info on a truncated volume: %s", err.text);
    tapevol_member_t m = {.bucket = "bkt", .key = "k", .path = "/dev/null", .size = 0};
    tapevol_listing_t *w = NULL;
    off_t before = file_size("TRUNC");
    ok(vol && tapevol_append(vol, &m, 1, &w, &err) < 0 && strstr(err.text, "no filemark"),
       "append to a truncated volume refused: %s", err.text);
    is_int(file_size("TRUNC"), before, "and nothing written");
    tapevol_close(vol);

    copy_volume("MARK");
    fd = image_fd("MARK");
    char mark[TAPEVOL_RECORD] = "STAGEIN-FILEMARK\nfile 7\nstart 1024\nend 0\n";
    if (pwrite(fd, mark, sizeof(mark), (off_t)l->files[0].end) != (ssize_t)sizeof(mark))
        exit(99);
    close(fd);
    expect_walk_error("MARK", "impossible", "filemark with end < start");

    copy_volume("LABEL");
    fd = image_fd("LABEL");
    if (pwrite(fd, "STAGEIN-VOLUMX", 14, 0) != 14)
        exit(99);
    close(fd);
    ok(tapevol_open(dir, "LABEL", 0, &err) == NULL && strstr(err.text, "bad volume label"),
       "corrupt label refused on open: %s", err.text);

    copy_volume("ZERO");
    fd = image_fd("ZERO");
    unsigned char zero[TAR_BLOCK] = {0};
    /* a zero block where file 2's first header was: one zero block then garbage */
    if (pwrite(fd, zero, sizeof(zero), (off_t)l->files[1].start) != (ssize_t)sizeof(zero))
        exit(99);
    close(fd);
    expect_walk_error("ZERO", "lone zero block", "lone zero block");
    tapevol_listing_free(l);
}

/* A volume crafted by hand, as a hostile party could: label, filemark 0,
 * then the given tar blocks, two zero blocks and filemark 1. */
static void craft(const char *label, const unsigned char *blocks, size_t len)
{
    si_error_t err;
    unsigned char zero[2 * TAR_BLOCK] = {0}, mark[TAPEVOL_RECORD];
    if (tapevol_create(dir, label, "LTO-9", 1u << 30, &err) < 0)
        exit(99);
    int fd = image_fd(label);
    off_t at = TAPEVOL_FIRST_FILE_OFFSET;
    if (pwrite(fd, blocks, len, at) != (ssize_t)len ||
        pwrite(fd, zero, sizeof(zero), at + (off_t)len) != (ssize_t)sizeof(zero))
        exit(99);
    uint64_t end = (uint64_t)at + len + sizeof(zero);
    snprintf((char *)mark, sizeof(mark), "STAGEIN-FILEMARK\nfile 1\nstart %d\nend %llu\n",
             TAPEVOL_FIRST_FILE_OFFSET, (unsigned long long)end);
    memset(mark + strlen((char *)mark), 0, sizeof(mark) - strlen((char *)mark));
    if (pwrite(fd, mark, sizeof(mark), (off_t)end) != (ssize_t)sizeof(mark))
        exit(99);
    close(fd);
}

static size_t pax_member(unsigned char *out, const char *records, const char *name,
                         char type)
{
    size_t plen = strlen(records);
    tar_header(out, "PaxHeaders/x", 'x', plen, 0);
    memset(out + TAR_BLOCK, 0, TAR_BLOCK);
    memcpy(out + TAR_BLOCK, records, plen);
    tar_header(out + 2 * TAR_BLOCK, name, type, 0, 0);
    return 3 * TAR_BLOCK;
}

static void test_hostile(void)
{
    unsigned char blocks[8 * TAR_BLOCK];

    tar_header(blocks, "bkt/../../etc/passwd", '0', 0, 0);
    craft("H1", blocks, TAR_BLOCK);
    expect_walk_error("H1", "'..' path component", "'..' in a ustar name");

    size_t n = pax_member(blocks, "22 path=bkt/a/../../x\n", "bkt/ok", '0');
    craft("H2", blocks, n);
    expect_walk_error("H2", "'..' path component", "'..' in a pax path");

    n = pax_member(blocks, "25 STAGEIN.bucket=../etc\n22 STAGEIN.key=passwd\n", "x", '0');
    craft("H3", blocks, n);
    expect_walk_error("H3", "bucket name", "bad bucket in STAGEIN.bucket");

    n = pax_member(blocks, "19 path=bkt/a/evil\n22 STAGEIN.bucket=bkt\n17 STAGEIN.key=b\n",
                   "x", '0');
    craft("H4", blocks, n);
    expect_walk_error("H4", "is not STAGEIN.bucket/STAGEIN.key", "path and key disagree");

    tar_header(blocks, "bkt/link", '2', 0, 0);
    craft("H5", blocks, TAR_BLOCK);
    expect_walk_error("H5", "type '2'", "symlink entry refused");

    tar_header(blocks, "bkt/big", '0', UINT64_C(1) << 32, 0);
    craft("H6", blocks, TAR_BLOCK);
    expect_walk_error("H6", "pass the end", "member size past the end of the volume");

    tar_header(blocks, "x", 'x', 1u << 20, 0);
    craft("H7", blocks, TAR_BLOCK);
    expect_walk_error("H7", "limit", "huge pax header refused");

    tar_header(blocks, "nobucket", '0', 0, 0);
    craft("H8", blocks, TAR_BLOCK);
    expect_walk_error("H8", "not \"bucket/key\"", "name without a bucket");

    /* an ordinary foreign tar member "bkt/file" is accepted (no checksum) */
    tar_header(blocks, "bkt/file", '0', 0, 0);
    craft("FOREIGN", blocks, TAR_BLOCK);
    si_error_t err = {{0}};
    tapevol_listing_t *l = NULL;
    tapevol_t *vol = tapevol_open(dir, "FOREIGN", 0, &err);
    ok(vol && tapevol_walk(vol, TAPEVOL_WALK_VERIFY, &l, &err) == 0 && l->nentries == 1 &&
           strcmp(l->entries[0].key, "file") == 0 && l->entries[0].checksum[0] == '\0',
       "plain ustar member read as bucket/key without checksum: %s", err.text);
    tapevol_listing_free(l);
    tapevol_close(vol);
}

/* Cuts the copy NAME of L1 at offset cut, then recovers it. */
static void expect_recovered(const char *name, uint64_t cut, const tapevol_listing_t *l,
                             const char *what)
{
    si_error_t err = {{0}};
    char path[512];
    const tapevol_file_t *last = &l->files[l->nfiles - 1];
    copy_volume(name);
    snprintf(path, sizeof(path), "%s/%s.vol", dir, name);
    if (truncate(path, (off_t)cut) < 0)
        exit(99);
    tapevol_t *vol = tapevol_open(dir, name, TAPEVOL_RDWR, &err);
    tapevol_recovery_t rec;
    int rc = vol ? tapevol_recover(vol, &rec, &err) : -1;
    ok(rc == 0 && rec.used == last->start && rec.files == last->seq - 1 &&
           rec.discarded == cut - last->start,
       "%s: cut back to the end of archive file %d (%s)", what, (int)last->seq - 1,
       err.text);
    is_int(file_size(name), (off_t)last->start, "%s: the volume ends there", what);
    tapevol_listing_t *walked = NULL;
    ok(vol && tapevol_walk(vol, 0, &walked, &err) == 0 &&
           walked->nfiles == l->nfiles - 1, "%s: the rest walks cleanly: %s", what, err.text);
    tapevol_listing_free(walked);
    tapevol_member_t m = {.bucket = "bkt", .key = "again", .path = "/dev/null", .size = 0};
    tapevol_listing_t *w = NULL;
    ok(vol && tapevol_append(vol, &m, 1, &w, &err) == 0 && w->files[0].seq == last->seq &&
           w->files[0].start == last->start,
       "%s: the next append takes the interrupted file's place: %s", what, err.text);
    tapevol_listing_free(w);
    tapevol_close(vol);
}

static void test_recover(void)
{
    si_error_t err = {{0}};
    tapevol_listing_t *l = NULL;
    tapevol_t *vol = tapevol_open(dir, "L1", TAPEVOL_RDWR, &err);
    if (!vol || tapevol_walk(vol, 0, &l, &err) < 0 || l->nfiles < 2) {
        ok(0, "walk L1: %s", err.text);
        tapevol_close(vol);
        return;
    }
    tapevol_recovery_t rec;
    off_t before = file_size("L1");
    ok(tapevol_recover(vol, &rec, &err) == 0 && rec.discarded == 0 &&
           rec.used == (uint64_t)before && rec.files == (int64_t)l->nfiles,
       "an intact volume needs nothing: %s", err.text);
    is_int(file_size("L1"), before, "and is left as it was");
    tapevol_close(vol);
    vol = tapevol_open(dir, "L1", TAPEVOL_RDONLY, &err);
    ok(vol && tapevol_recover(vol, &rec, &err) < 0 && strstr(err.text, "read-only"),
       "recovery needs the volume open for writing: %s", err.text);
    tapevol_close(vol);

    const tapevol_file_t *last = &l->files[l->nfiles - 1];
    const tapevol_entry_t *first = &l->entries[last->first];
    expect_recovered("CUTDATA", first->position + 1024, l, "cut inside member data");
    expect_recovered("CUTHEAD", first->header_offset + TAR_BLOCK, l, "cut after a header");
    expect_recovered("CUTMARK", last->end, l, "cut before the filemark");
    expect_recovered("CUTODD", first->position + 700, l, "cut inside a record");
    expect_recovered("CUTSTART", last->start + 1, l, "cut a byte into the file");

    /* damage that no interrupted write leaves: refused, nothing cut */
    copy_volume("BROKEN");
    int fd = image_fd("BROKEN");
    unsigned char c = 'X';
    if (pwrite(fd, &c, 1, (off_t)l->entries[0].position - TAR_BLOCK + 3) != 1 ||
        ftruncate(fd, (off_t)(first->position + 1024)) < 0)
        exit(99);
    close(fd);
    before = file_size("BROKEN");
    vol = tapevol_open(dir, "BROKEN", TAPEVOL_RDWR, &err);
    ok(vol && tapevol_recover(vol, &rec, &err) < 0 &&
           strstr(err.text, "not the trace of an interrupted write"),
       "a corrupt header before the tail is refused: %s", err.text);
    is_int(file_size("BROKEN"), before, "and nothing is cut");
    tapevol_close(vol);
    tapevol_listing_free(l);
}

int main(void)
{
    snprintf(dir, sizeof(dir), "%s/t_volume.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir))
        return 99;
    test_create();
    test_append_and_read();
    test_capacity();
    test_unreadable();
    test_corrupt();
    test_recover();
    test_hostile();
    tap_remove_tree(dir);
    return done_testing();
}
