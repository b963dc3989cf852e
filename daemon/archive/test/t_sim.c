/* The `sim` archive backend: recalls from real volume images delivered into a
 * sink, a second copy after an unreadable region, a re-read after a checksum
 * mismatch, cancel, archive writes with two copies, status. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/checksum.h"
#include "common/tap.h"
#include "daemon/archive/backend.h"
#include "daemon/archive/test/sink.h"
#include "daemon/volume/volume.h"
#include "daemon/simlib/engine.h"
#include "daemon/tape/model.h"

#define NOBJ 4

static const si_conf_key_t *const schemas[] = {
    library_conf_keys, volume_conf_keys, tape_conf_keys, archive_conf_keys, NULL,
};

static void write_source(const char *path, unsigned char *data, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        data[i] = (unsigned char)((i * 131 + seed * 7919) >> 3);
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
}

int main(void)
{
    si_error_t err = {{0}};
    char dir[] = "/tmp/t_sim.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char vdir[4200], path[NOBJ + 1][4300], conftext[5000];
    snprintf(vdir, sizeof(vdir), "%s/volumes", dir);
    test_sink_t s;
    test_sink_init(&s);
    unsigned char *src[NOBJ + 1] = {0};
    const size_t sizes[NOBJ + 1] = {0, 1000000, 2500001, 4096, 3 * 1024 * 1024 + 5};
    tapevol_member_t members[NOBJ];
    char keys[NOBJ][8];
    for (int i = 1; i <= NOBJ; i++) {
        snprintf(path[i], sizeof(path[i]), "%s/src%d", dir, i);
        src[i] = malloc(sizes[i]);
        write_source(path[i], src[i], sizes[i], (unsigned)i);
        snprintf(keys[i - 1], sizeof(keys[i - 1]), "o%d", i);
        members[i - 1] = (tapevol_member_t){.bucket = "data", .key = keys[i - 1],
                                            .path = path[i], .fd = -1, .size = sizes[i]};
    }
    /* V1 holds objects 1..4, V2 holds 1 and 2 again (second copies) */
    tapevol_listing_t *l1 = NULL, *l2 = NULL;
    tapevol_t *v = NULL;
    int setup = tapevol_create(vdir, "V1", "LTO-9", 10000000000ULL, &err) == 0 &&
                tapevol_create(vdir, "V2", "LTO-9", 10000000000ULL, &err) == 0 &&
                tapevol_create(vdir, "V3", "LTO-9", 10000000000ULL, &err) == 0 &&
                (v = tapevol_open(vdir, "V1", TAPEVOL_RDWR, &err)) &&
                tapevol_append(v, members, NOBJ, &l1, &err) == 0;
    tapevol_close(v);
    v = NULL;
    setup = setup && (v = tapevol_open(vdir, "V2", TAPEVOL_RDWR, &err)) &&
            tapevol_append(v, members, 2, &l2, &err) == 0;
    tapevol_close(v);
    if (!ok(setup, "three volumes, objects written")) {
        diag("%s", err.text);
        return done_testing();
    }

    snprintf(conftext, sizeof(conftext),
             "library: { drives = 2; time_scale = 0.0001; volume_dir = \"%s\"; };", vdir);
    si_conf_t *conf = si_conf_load_string(conftext, schemas, &err);
    ok(conf != NULL, "configuration accepted: %s", conf ? "" : err.text);
    archive_backend_opts_t bo = {.conf = conf, .state_dir = dir,
                                 .cb = test_sink_callbacks(&s, false)};
    archive_backend_t *b = archive_backend_new(&bo, &err);
    if (!ok(b != NULL, "sim backend started")) {
        diag("%s", err.text);
        return done_testing();
    }

    archive_item_t items[NOBJ];
    for (int i = 0; i < NOBJ; i++) {
        memset(&items[i], 0, sizeof(items[i]));
        items[i].object_id = i + 1;
        items[i].size = sizes[i + 1];
        items[i].ncopies = 1;
        snprintf(items[i].copies[0].volume, sizeof(items[i].copies[0].volume), "V1");
        items[i].copies[0].position = l1->entries[i].position;
        items[i].copies[0].copy = 1;
        if (i < 2) {
            items[i].ncopies = 2;
            items[i].copies[1] = items[i].copies[0];
            snprintf(items[i].copies[1].volume, sizeof(items[i].copies[1].volume), "V2");
            items[i].copies[1].position = l2->entries[i].position;
            items[i].copies[1].copy = 2;
        }
    }
    archive_batch_t batch = {1, 0, 0};

    /* 1. every object, byte for byte */
    ok(archive_recall(b, &batch, items, NOBJ, &err) == 0, "four objects queued");
    test_sink_wait(&s, NOBJ, 120);
    int good = 0;
    for (int i = 1; i <= NOBJ; i++)
        good += s.ok[i] == 1 && memcmp(s.got[i], src[i], sizes[i]) == 0;
    is_int(good, NOBJ, "each object delivered once, byte-identical");
    archive_status_t st;
    memset(&st, 0, sizeof(st));
    int status_rc = archive_status(b, &st, &err);
    ok(status_rc == 0 && st.reads == NOBJ && st.queued_items == 0 &&
           st.bytes_read == sizes[1] + sizes[2] + sizes[3] + sizes[4] && st.drives == 2 &&
           st.mounts >= 1,
       "status: 4 reads, all bytes, nothing queued, 2 drives, %llu mounts",
       (unsigned long long)st.mounts);

    /* 2. the same objects again (recalled twice over time is allowed), now
     * into memory the sink offers (the cache's for a small object) */
    test_sink_reset(&s);
    s.rooms = true;
    ok(archive_recall(b, &batch, items, 1, &err) == 0, "object 1 queued again");
    test_sink_wait(&s, 1, 120);
    is_int(s.ok[1], 1, "recalled again after its first recall was done");
    ok(s.landed > 0 && memcmp(s.got[1], src[1], sizes[1]) == 0,
       "read straight into the sink's memory (%d chunks landed), byte-identical", s.landed);

    /* 3. unreadable region on V1 over objects 1 and 3: 1 from V2, 3 fails */
    tapevol_t *f = tapevol_open(vdir, "V1", TAPEVOL_RDWR, &err);
    ok(f && tapevol_fault_add(f, l1->entries[0].position + 10, 100, &err) == 0 &&
           tapevol_fault_add(f, l1->entries[2].position + 10, 100, &err) == 0,
       "unreadable regions over objects 1 and 3 on V1");
    tapevol_close(f);
    test_sink_reset(&s);
    ok(archive_recall(b, &batch, items, 3, &err) == 0, "objects 1, 2, 3 queued");
    test_sink_wait(&s, 3, 120);
    ok(s.ok[1] == 1 && memcmp(s.got[1], src[1], sizes[1]) == 0, "object 1 from its second copy");
    is_int(s.ok[2], 1, "object 2 unaffected");
    ok(s.failed[3] == 1 && strstr(s.why[3], "unreadable region") && strstr(s.why[3], "V1"),
       "object 3 failed: %s", s.why[3]);
    f = tapevol_open(vdir, "V1", TAPEVOL_RDWR, &err);
    tapevol_fault_clear(f, &err);
    tapevol_close(f);

    /* 4. a checksum mismatch is read again once: refused twice, it fails */
    test_sink_reset(&s);
    s.commits_refused = 1;
    ok(archive_recall(b, &batch, &items[3], 1, &err) == 0, "object 4 queued, one refusal");
    test_sink_wait(&s, 1, 120);
    ok(s.ok[4] == 1 && s.begins[4] == 2, "delivered on the re-read (%d attempts)", s.begins[4]);
    test_sink_reset(&s);
    s.commits_refused = 2;
    ok(archive_recall(b, &batch, &items[2], 1, &err) == 0, "object 3 queued, two refusals");
    test_sink_wait(&s, 1, 120);
    ok(s.failed[3] == 1 && s.begins[3] == 2 && strstr(s.why[3], "read 2 times from volume V1"),
       "failed after the re-read: %s", s.why[3]);

    /* 5. cancel before the read, on a library of its own whose first mount
     * takes 290 ms: not delivered, reported cancelled */
    char slowtext[5000];
    snprintf(slowtext, sizeof(slowtext),
             "library: { drives = 1; time_scale = 0.01; volume_dir = \"%s\"; };", vdir);
    si_conf_t *slowconf = si_conf_load_string(slowtext, schemas, &err);
    archive_backend_opts_t so = bo;
    so.conf = slowconf;
    archive_backend_t *slow = slowconf ? archive_backend_new(&so, &err) : NULL;
    test_sink_reset(&s);
    ok(slow && archive_recall(slow, &batch, &items[3], 1, &err) == 0, "object 4 queued");
    is_int(slow ? archive_cancel(slow, 4) : -1, 1, "cancelled while queued");
    test_sink_wait(&s, 1, 120);
    ok(s.failed[4] == 1 && strcmp(s.why[4], "cancelled") == 0 && s.begins[4] == 0,
       "reported cancelled, no bytes delivered");
    is_int(slow ? archive_cancel(slow, 4) : -1, 0, "cancel of an object not queued: 0");
    archive_backend_free(slow);
    si_conf_free(slowconf);

    /* 6. bad input changes nothing */
    archive_item_t bad = items[0];
    snprintf(bad.copies[0].volume, sizeof(bad.copies[0].volume), "NOPE");
    bad.ncopies = 1;
    ok(archive_recall(b, &batch, &bad, 1, &err) < 0 && strstr(err.text, "NOPE"),
       "unknown volume refused: %s", err.text);

    /* 7. archive write: two members, two copies on distinct volumes */
    archive_member_t am[2] = {
        {.bucket = "push", .key = "x1", .path = path[3], .size = sizes[3]},
        {.bucket = "push", .key = "x2", .path = path[1], .size = sizes[1]},
    };
    archive_placement_t pl[4];
    err.text[0] = 0;
    int wrc = archive_write(b, am, 2, 2, pl, &err);
    ok(wrc == 0, "aggregate written with two copies%s%s", wrc ? ": " : "", err.text);
    ok(strcmp(pl[0].volume, pl[1].volume) != 0 && strcmp(pl[2].volume, pl[0].volume) == 0 &&
           pl[0].copy == 1 && pl[1].copy == 2,
       "copies on %s and %s", pl[0].volume, pl[1].volume);
    int same = 0;
    for (int i = 0; i < 4; i++) {
        const unsigned char *want = i < 2 ? src[3] : src[1];
        size_t n = i < 2 ? sizes[3] : sizes[1];
        unsigned char *buf = malloc(n);
        tapevol_t *rv = tapevol_open(vdir, pl[i].volume, TAPEVOL_RDONLY, &err);
        same += rv && tapevol_read(rv, pl[i].position, buf, n, &err) == 0 &&
                memcmp(buf, want, n) == 0 && pl[i].length == n;
        tapevol_close(rv);
        free(buf);
    }
    is_int(same, 4, "every member of every copy reads back identical at its placement");
    ok(archive_write(b, am, 2, 4, pl, &err) < 0 && strstr(err.text, "needs 4 volumes"),
       "four copies on three volumes refused: %s", err.text);
    ok(archive_status(b, &st, &err) == 0 && st.archive_files_written == 2,
       "status: 2 archive files written");

    FILE *mf = tmpfile();
    archive_metrics(b, mf);
    rewind(mf);
    char line[256];
    int drive_lines = 0;
    while (fgets(line, sizeof(line), mf))
        drive_lines += strncmp(line, "stagein_drive_state{", 20) == 0;
    fclose(mf);
    is_int(drive_lines, 2, "metrics: one state line per drive");

    archive_backend_free(b);
    si_conf_free(conf);

    /* 8. configuration errors */
    conf = si_conf_load_string("library: { time_scale = 0.0; };", schemas, &err);
    bo.conf = conf;
    b = archive_backend_new(&bo, &err);
    ok(!b && strstr(err.text, "time_scale"), "virtual clock refused: %s", err.text);
    si_conf_free(conf);

    tapevol_listing_free(l1);
    tapevol_listing_free(l2);
    for (int i = 1; i <= NOBJ; i++) {
        free(src[i]);
    }
    test_sink_free(&s);
    tap_remove_tree(dir);
    return done_testing();
}
