/* The `hsm` backend over a directory: read-through, a stage command that
 * logs its batches (position order, batch size), one that fails for some
 * paths (only those fail, with its message), one that hangs (killed at the
 * limit, its batch failed), symlinks out of the root refused, size and
 * checksum mismatches, cancel, push (files, placements, archive command)
 * and configuration errors. */
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
#include "daemon/archive/backend.h"
#include "daemon/archive/test/item.h"
#include "daemon/archive/test/sink.h"
#include "daemon/push/push.h"

#define NFILES 8

static const si_conf_key_t *const schemas[] = {
    archive_conf_keys, archive_hsm_conf_keys, push_conf_keys, NULL,
};

static char dir[64], root[128];
static unsigned char *data[NFILES + 1];
static size_t sizes[NFILES + 1];
static char sums[NFILES + 1][SI_CHECKSUM_TEXT_MAX];
static const char *names[NFILES + 1] = {NULL, "a/f1", "a/f2", "f3", "f4", "bad5", "hang6",
                                        "f7", "f8"};

static void make_file(int i)
{
    char path[300];
    sizes[i] = (size_t)(1000 + i * 77777);
    data[i] = malloc(sizes[i]);
    for (size_t k = 0; k < sizes[i]; k++)
        data[i][k] = (unsigned char)((k * 2654435761u + (unsigned)i * 97) >> 7);
    snprintf(path, sizeof(path), "%s/data/%s", root, names[i]);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    mkdir(path, 0755);
    *slash = '/';
    FILE *f = fopen(path, "wb");
    fwrite(data[i], 1, sizes[i], f);
    fclose(f);
    si_checksum_t *c = si_checksum_new("sha256", NULL);
    si_checksum_update(c, data[i], sizes[i]);
    si_checksum_final(c, sums[i]);
    si_checksum_free(c);
}

static archive_item_t item(int i, const char *volume, uint64_t position)
{
    archive_item_t it = test_item(i, sizes[i], volume, position);
    it.bucket = "data";
    it.key = names[i];
    snprintf(it.checksum, sizeof(it.checksum), "%s", sums[i]);
    return it;
}

static archive_backend_t *start(test_sink_t *s, bool with_fd, const char *extra,
                                si_conf_t **conf, si_error_t *err)
{
    char text[2000];
    snprintf(text, sizeof(text), "archive: { backend = \"hsm\"; checksum_retries = 1;"
             " hsm: { root = \"%s\"; %s }; };", root, extra);
    *conf = si_conf_load_string(text, schemas, err);
    if (!*conf)
        return NULL;
    archive_backend_opts_t bo = {.conf = *conf, .state_dir = dir,
                                 .cb = test_sink_callbacks(s, with_fd)};
    return archive_backend_new(&bo, err);
}

static void stop(archive_backend_t *b, si_conf_t *conf)
{
    archive_backend_free(b);
    si_conf_free(conf);
}

static bool same(test_sink_t *s, int i)
{
    return s->got[i] && s->size[i] == sizes[i] && memcmp(s->got[i], data[i], sizes[i]) == 0;
}

static char *slurp(const char *path)
{
    static char buf[8192];
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

int main(void)
{
    si_error_t err;
    si_conf_t *conf;
    test_sink_t s;
    char extra[1500], log[200], script[200], path[400];
    snprintf(dir, sizeof(dir), "/tmp/t_hsm.XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    snprintf(root, sizeof(root), "%s/archive", dir);
    snprintf(path, sizeof(path), "%s/data", root);
    mkdir(root, 0755);
    mkdir(path, 0755);
    for (int i = 1; i <= NFILES; i++)
        make_file(i);
    snprintf(log, sizeof(log), "%s/stage.log", dir);
    snprintf(script, sizeof(script), "%s/stage.sh", dir);
    /* the test's stage command: logs each batch on one line, fails paths
     * named bad*, hangs on hang* */
    FILE *f = fopen(script, "w");
    fprintf(f, "#!/bin/sh\necho \"$*\" >> %s\nfor p in \"$@\"; do\n"
               "  case $p in *hang*) sleep 60;; *bad*) echo \"cannot stage $p\" >&2; exit 2;; "
               "esac\ndone\nexit 0\n", log);
    fclose(f);
    chmod(script, 0755);
    test_sink_init(&s);

    /* ---- read-through ---------------------------------------------------- */
    archive_backend_t *b = start(&s, true, "", &conf, &err);
    if (!ok(b != NULL, "hsm backend started (read-through)")) {
        diag("%s", err.text);
        return done_testing();
    }
    archive_item_t items[NFILES];
    items[0] = item(1, NULL, 0);
    items[1] = item(2, NULL, 0);
    items[2] = item(3, NULL, 0);
    archive_batch_t batch = {1, 0, 0};
    ok(archive_recall(b, &batch, items, 3, &err) == 0, "three items queued");
    ok(test_sink_wait(&s, 3, 20), "three outcomes");
    ok(s.ok[1] && s.ok[2] && s.ok[3], "all ok: %s %s %s", s.why[1], s.why[2], s.why[3]);
    ok(same(&s, 1) && same(&s, 2) && same(&s, 3), "byte-identical");
    ok(s.fd_writes >= 3, "copied through write_fd (copy_file_range), %d calls", s.fd_writes);
    archive_status_t st;
    ok(archive_status(b, &st, &err) == 0 && strcmp(st.backend, "hsm") == 0 && st.reads == 3 &&
       st.queued_items == 0, "status: hsm, 3 reads, nothing queued");
    stop(b, conf);

    /* read-through copies run on every worker at once (each waits, 5 s at
     * most, for three sessions to be open) */
    test_sink_reset(&s);
    s.hold_open = 3;
    b = start(&s, true, "concurrency = 3;", &conf, &err);
    items[0] = item(1, "V1", 1);
    items[1] = item(2, "V1", 2);
    items[2] = item(3, "V1", 3);
    ok(b && archive_recall(b, &batch, items, 3, &err) == 0 && test_sink_wait(&s, 3, 20) &&
       s.ok[1] && s.ok[2] && s.ok[3], "read-through, 3 workers: three done");
    ok(s.max_open == 3, "read-through: the three copies ran at once (%d at most)", s.max_open);
    stop(b, conf);

    /* a stage command's batch is copied by every worker, not only by the one that staged it */
    test_sink_reset(&s);
    s.hold_open = 3;
    snprintf(extra, sizeof(extra), "stage_command = \"%s\"; batch_size = 8; concurrency = 3;",
             script);
    b = start(&s, true, extra, &conf, &err);
    ok(b && archive_recall(b, &batch, items, 3, &err) == 0 && test_sink_wait(&s, 3, 20) &&
       s.ok[1] && s.ok[2] && s.ok[3] && same(&s, 1) && same(&s, 2) && same(&s, 3),
       "one staged batch of three: all copied");
    ok(s.max_open == 3, "the batch's three copies ran at once (%d at most)", s.max_open);
    stop(b, conf);

    /* without write_fd: read and written */
    test_sink_reset(&s);
    b = start(&s, false, "", &conf, &err);
    items[0] = item(4, NULL, 0);
    ok(b && archive_recall(b, &batch, items, 1, &err) == 0 && test_sink_wait(&s, 1, 20) &&
       s.ok[4] && same(&s, 4) && s.fd_writes == 0, "a sink without write_fd gets the bytes by write");
    stop(b, conf);

    /* ---- a stage command: batches in position order ------------------------ */
    test_sink_reset(&s);
    snprintf(extra, sizeof(extra), "stage_command = \"%s\"; batch_size = 2; concurrency = 1;",
             script);
    b = start(&s, true, extra, &conf, &err);
    ok(b != NULL, "started with a stage command");
    unlink(log);
    /* positions on V1: f4 (1), f1 (2), f7 (3), f3 (4); f2 and f8 on V2 */
    items[0] = item(3, "V1", 4000);
    items[1] = item(1, "V1", 2000);
    items[2] = item(7, "V1", 3000);
    items[3] = item(4, "V1", 1000);
    items[4] = item(8, "V2", 20);
    items[5] = item(2, "V2", 10);
    ok(archive_recall(b, &batch, items, 6, &err) == 0 && test_sink_wait(&s, 6, 30), "six done");
    ok(s.ok[1] && s.ok[2] && s.ok[3] && s.ok[4] && s.ok[7] && s.ok[8], "all staged and copied");
    ok(same(&s, 1) && same(&s, 2) && same(&s, 3) && same(&s, 4) && same(&s, 7) && same(&s, 8),
       "byte-identical");
    char want[2000];
    snprintf(want, sizeof(want),
             "%1$s/data/f4 %1$s/data/a/f1\n%1$s/data/f7 %1$s/data/f3\n"
             "%1$s/data/a/f2 %1$s/data/f8\n", root);
    is_str(slurp(log), want, "batches of 2, volume by volume in position order");
    stop(b, conf);

    /* ---- a command that fails for one path ------------------------------ */
    test_sink_reset(&s);
    b = start(&s, true, extra, &conf, &err);
    unlink(log);
    items[0] = item(3, NULL, 0);
    items[1] = item(5, NULL, 0);
    items[2] = item(4, NULL, 0);
    ok(b && archive_recall(b, &batch, items, 3, &err) == 0 && test_sink_wait(&s, 3, 30),
       "three done");
    ok(s.ok[3] && s.ok[4] && same(&s, 3) && same(&s, 4), "the good paths staged and copied");
    ok(s.failed[5] && strstr(s.why[5], "cannot stage") && strstr(s.why[5], "status 2"),
       "the bad one failed with the command's message: %s", s.why[5]);
    ok(s.begins[5] == 0, "nothing of it reached the cache");
    stop(b, conf);

    /* ---- a command that hangs -------------------------------------------- */
    test_sink_reset(&s);
    snprintf(extra, sizeof(extra), "stage_command = \"%s\"; batch_size = 2; concurrency = 1;"
             " stage_timeout = 0.5;", script);
    b = start(&s, true, extra, &conf, &err);
    items[0] = item(6, NULL, 0);
    items[1] = item(7, NULL, 0);
    items[2] = item(8, NULL, 0);
    ok(b && archive_recall(b, &batch, items, 3, &err) == 0 && test_sink_wait(&s, 3, 30),
       "three done");
    ok(s.failed[6] && s.failed[7] && strstr(s.why[6], "timed out after 0.5 s"),
       "the hanging batch failed, timed out: %s", s.why[6]);
    ok(s.ok[8] && same(&s, 8), "the next batch staged");
    stop(b, conf);

    /* ---- cancel: queued behind a hanging batch ------------------------------ */
    test_sink_reset(&s);
    snprintf(extra, sizeof(extra), "stage_command = \"%s\"; batch_size = 1; concurrency = 1;"
             " stage_timeout = 2;", script);
    b = start(&s, true, extra, &conf, &err);
    items[0] = item(6, NULL, 0);
    items[1] = item(1, NULL, 0);
    ok(b && archive_recall(b, &batch, items, 2, &err) == 0, "queued behind a hang");
    usleep(200000);
    is_int(archive_cancel(b, 1), 1, "cancel of the queued one");
    is_int(archive_cancel(b, 33), 0, "cancel of an unknown object: 0");
    ok(test_sink_wait(&s, 2, 30) && s.failed[1] && strcmp(s.why[1], "cancelled") == 0 &&
       s.begins[1] == 0, "reported cancelled, never copied");
    stop(b, conf);

    /* ---- symlinks, sizes, checksums ----------------------------------------- */
    test_sink_reset(&s);
    b = start(&s, true, "", &conf, &err);
    snprintf(path, sizeof(path), "%s/outside", dir);
    f = fopen(path, "w");
    fprintf(f, "secret");
    fclose(f);
    char link[400];
    snprintf(link, sizeof(link), "%s/data/escape", root);
    ok(symlink(path, link) == 0, "a symlink to a file outside the root");
    snprintf(link, sizeof(link), "%s/data/inside", root);
    ok(symlink("f3", link) == 0, "a symlink to a file inside the root");
    archive_item_t esc = item(1, NULL, 0); /* its own object, 9 */
    esc.object_id = 9;
    esc.key = "escape";
    esc.size = 6;
    esc.checksum[0] = '\0';
    archive_item_t in = item(3, NULL, 0);
    in.object_id = 10;
    in.key = "inside";
    archive_item_t shortf = item(4, NULL, 0);
    shortf.object_id = 11;
    shortf.size += 1;
    shortf.checksum[0] = '\0';
    archive_item_t badsum = item(2, NULL, 0);
    badsum.object_id = 12;
    badsum.checksum[7] = badsum.checksum[7] == '0' ? '1' : '0';
    archive_item_t missing = item(2, NULL, 0);
    missing.object_id = 13;
    missing.key = "no/such";
    archive_item_t more[] = {esc, in, shortf, badsum, missing};
    ok(archive_recall(b, &batch, more, 5, &err) == 0 && test_sink_wait(&s, 5, 30), "five done");
    ok(s.failed[9] && strstr(s.why[9], "out of the archive root") && s.begins[9] == 0,
       "the escaping symlink refused: %s", s.why[9]);
    ok(s.ok[10] && s.got[10] && memcmp(s.got[10], data[3], sizes[3]) == 0,
       "a symlink within the root is followed");
    ok(s.failed[11] && strstr(s.why[11], "the catalog says"), "size mismatch: %s", s.why[11]);
    ok(s.failed[12] && strstr(s.why[12], "checksum mismatch") && s.begins[12] == 2,
       "checksum mismatch after 2 reads: %s", s.why[12]);
    ok(s.failed[13] && strstr(s.why[13], "no such file in the archive"), "missing: %s",
       s.why[13]);

    /* ---- push ------------------------------------------------------------------ */
    archive_member_t m[2] = {
        {.bucket = "stageout", .key = "ds/x/one", .size = sizes[1], .mtime = 1700000000,
         .checksum = sums[1]},
        {.bucket = "stageout", .key = "ds/two", .size = sizes[2]},
    };
    char src1[300], src2[300];
    snprintf(src1, sizeof(src1), "%s/data/a/f1", root);
    snprintf(src2, sizeof(src2), "%s/data/a/f2", root);
    m[0].path = src1;
    m[1].path = src2;
    archive_placement_t pl[2];
    ok(archive_write(b, m, 2, 1, pl, &err) == 0, "two members written: %s", err.text);
    snprintf(path, sizeof(path), "%s/stageout/ds/x/one", root);
    struct stat sb;
    ok(stat(path, &sb) == 0 && (size_t)sb.st_size == sizes[1] && sb.st_mtime == 1700000000,
       "the first one is in the archive, with its mtime");
    is_str(pl[0].volume, "HSM", "placed on the pseudo-volume HSM");
    ok(pl[0].copy == 1 && pl[0].file_seq == -1 && pl[1].length == sizes[2], "copy 1, no file seq");
    ok(archive_write(b, m, 2, 2, pl, &err) < 0 && strstr(err.text, "one copy"),
       "two copies refused: %s", err.text);
    archive_member_t wrong = m[0];
    wrong.checksum = sums[2];
    ok(archive_write(b, &wrong, 1, 1, pl, &err) < 0 && strstr(err.text, "checksum mismatch"),
       "a member whose bytes do not match its checksum: %s", err.text);
    archive_member_t outside = m[1];
    outside.bucket = "data";
    outside.key = "escape/x";
    ok(archive_write(b, &outside, 1, 1, pl, &err) < 0, "a path through a symlink refused: %s",
       err.text);
    stop(b, conf);

    snprintf(extra, sizeof(extra), "archive_command = \"echo archived >> %s/archived.log; "
             "printf '%%s\\\\n' >> %s/archived.log\";", dir, dir);
    b = start(&s, true, extra, &conf, &err);
    ok(b && archive_write(b, m, 2, 1, pl, &err) == 0, "with an archive command: %s", err.text);
    snprintf(path, sizeof(path), "%s/archived.log", dir);
    snprintf(want, sizeof(want), "archived\n%1$s/stageout/ds/x/one\n%1$s/stageout/ds/two\n", root);
    is_str(slurp(path), want, "the archive command got the written paths");
    stop(b, conf);
    b = start(&s, true, "archive_command = \"echo tape full >&2; exit 1\";", &conf, &err);
    ok(b && archive_write(b, m, 1, 1, pl, &err) < 0 && strstr(err.text, "tape full"),
       "a failing archive command fails the write: %s", err.text);
    stop(b, conf);

    /* ---- configuration ---------------------------------------------------------- */
    conf = si_conf_load_string("archive: { backend = \"hsm\"; };", schemas, &err);
    archive_backend_opts_t bo = {.conf = conf, .state_dir = dir,
                                 .cb = test_sink_callbacks(&s, true)};
    ok(!archive_backend_new(&bo, &err) && strstr(err.text, "archive.hsm.root"),
       "no root: %s", err.text);
    si_conf_free(conf);
    conf = si_conf_load_string("archive: { backend = \"hsm\"; hsm: { root = \"/nonexistent/x\";"
                               " }; };", schemas, &err);
    bo.conf = conf;
    ok(!archive_backend_new(&bo, &err) && strstr(err.text, "(string):1") &&
       strstr(err.text, "No such file"), "a missing root, with its place: %s", err.text);
    si_conf_free(conf);
    snprintf(extra, sizeof(extra), "archive: { backend = \"hsm\"; hsm: { root = \"%s\"; }; };\n"
             "push: { copies = 2; };", root);
    conf = si_conf_load_string(extra, schemas, &err);
    bo.conf = conf;
    ok(!archive_backend_new(&bo, &err) && strstr(err.text, "(string):2") &&
       strstr(err.text, "push.copies"), "push.copies = 2 refused: %s", err.text);
    si_conf_free(conf);
    snprintf(extra, sizeof(extra), "archive: { backend = \"hsm\"; hsm: { root = \"%s\"; "
             "volume = \"bad label\"; }; };", root);
    conf = si_conf_load_string(extra, schemas, &err);
    bo.conf = conf;
    ok(!archive_backend_new(&bo, &err) && strstr(err.text, "archive.hsm.volume"),
       "a bad pseudo-volume label: %s", err.text);
    si_conf_free(conf);
    ok(!si_conf_load_string("archive: { backend = \"dvd\"; };", schemas, &err) &&
       strstr(err.text, "(string):1"), "an unknown backend: %s", err.text);

    test_sink_free(&s);
    for (int i = 1; i <= NFILES; i++)
        free(data[i]);
    tap_remove_tree(dir);
    return done_testing();
}
