/* A whole volume file of the simulated library (daemon/volume/walk.c): the
 * input is written as FUZZ01.vol, opened (label record), walked with every
 * member's sha256 checked, then recovered as after an interrupted append.
 * FUZZ_WRITE_SEEDS=DIR makes the target write volumes built by the
 * project's writer (tapevol_create, tapevol_append) into DIR and exit;
 * FUZZ_VERBOSE=1 prints each input's outcome. */
#include "config.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/text.h"
#include "daemon/volume/volume.h"
#include "tests/fuzz/fuzz.h"

#define LABEL "FUZZ01"

static char dir[64], vol_path[128];

static void copy_file(const char *from, const char *to)
{
    char buf[65536];
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    size_t n;
    if (!in || !out)
        abort();
    while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            abort();
    fclose(in);
    if (fclose(out) != 0)
        abort();
}

/* Volumes of 0, 1 and 2 archive files, and one cut inside its last file. */
static void write_seeds(const char *out_dir)
{
    si_error_t err;
    static const char *const contents[] = {"", "hello\n", "x"};
    int n = 0;
    for (int files = 0; files <= 2; files++) {
        unlink(vol_path);
        if (tapevol_create(dir, LABEL, "LTO-9", 1 << 30, &err) < 0)
            abort();
        tapevol_t *vol = tapevol_open(dir, LABEL, TAPEVOL_RDWR, &err);
        if (!vol)
            abort();
        for (int f = 0; f < files; f++) {
            char src[160], key[32];
            tapevol_member_t m[3];
            for (int i = 0; i < 3; i++) {
                snprintf(src, sizeof(src), "%s/src%d", dir, i);
                FILE *s = fopen(src, "wb");
                fputs(contents[i], s);
                fclose(s);
                snprintf(key, sizeof(key), "dir/key-%d-%d", f, i);
                m[i] = (tapevol_member_t){.bucket = "bucket", .key = strdup(key),
                                          .path = strdup(src),
                                          .size = strlen(contents[i]), .mtime = 1700000000};
            }
            tapevol_listing_t *written = NULL;
            if (tapevol_append(vol, m, 1 + (size_t)f * 2, &written, &err) < 0)
                abort();
            tapevol_listing_free(written);
            for (int i = 0; i < 3; i++) {
                free((char *)m[i].key);
                free((char *)m[i].path);
            }
        }
        tapevol_close(vol);
        for (int i = 0; i < 3; i++) {
            char src[160];
            snprintf(src, sizeof(src), "%s/src%d", dir, i);
            unlink(src);
        }
        char seed[4096];
        snprintf(seed, sizeof(seed), "%s/seed-%d", out_dir, n++);
        copy_file(vol_path, seed);
        if (files == 2) {
            /* an append cut short: the last 1024 bytes are gone */
            struct stat stb;
            if (stat(vol_path, &stb) < 0 || truncate(vol_path, stb.st_size - 1024) < 0)
                abort();
            snprintf(seed, sizeof(seed), "%s/seed-%d", out_dir, n++);
            copy_file(vol_path, seed);
        }
    }
    printf("%d seeds written to %s\n", n, out_dir);
    exit(0);
}

static void remove_dir(void)
{
    unlink(vol_path);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(dir, sizeof(dir), "/tmp/fuzz-volume.%ld", (long)getpid());
    if (mkdir(dir, 0700) < 0)
        abort();
    atexit(remove_dir); /* libFuzzer ends with exit() at the end of a run */
    snprintf(vol_path, sizeof(vol_path), "%s/%s.vol", dir, LABEL);
    const char *out = getenv("FUZZ_WRITE_SEEDS");
    if (out)
        write_seeds(out);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    si_error_t err;
    fuzz_write_file(vol_path, data, size);

    tapevol_t *vol = tapevol_open(dir, LABEL, TAPEVOL_RDWR, &err);
    if (!vol) {
        if (getenv("FUZZ_VERBOSE"))
            fprintf(stderr, "open: %s\n", err.text);
        return 0;
    }
    tapevol_info_t info;
    (void)tapevol_info(vol, &info, &err);
    tapevol_listing_t *listing = NULL;
    int walked = tapevol_walk(vol, TAPEVOL_WALK_VERIFY, &listing, &err);
    if (getenv("FUZZ_VERBOSE")) /* why a seed walks or not */
        fprintf(stderr, "walk: %s\n", walked == 0 ? "OK" : err.text);
    if (walked == 0) {
        for (size_t i = 0; i < listing->nentries; i++) {
            const tapevol_entry_t *e = &listing->entries[i];
            if (e->position + e->size > size || e->header_offset >= e->position)
                abort(); /* every member lies inside the volume, after its header */
            if (si_bucket_check(e->bucket, strlen(e->bucket), &err) < 0 ||
                si_key_check(e->key, strlen(e->key), &err) < 0)
                abort(); /* no name from a volume escapes the cache */
        }
        for (size_t i = 0; i < listing->nfiles; i++) {
            const tapevol_file_t *f = &listing->files[i];
            if (f->first + f->count > listing->nentries || f->end > size || f->start > f->end)
                abort();
        }
        tapevol_listing_free(listing);
    }
    tapevol_recovery_t rec;
    if (tapevol_recover(vol, &rec, &err) == 0 && rec.used > size)
        abort();
    tapevol_close(vol);
    return 0;
}
