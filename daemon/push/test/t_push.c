/* push: receiving (checked, recorded, pinned), refusals that change nothing,
 * archiving through the real `sim` backend with two copies on distinct
 * volumes (bytes read back from the volumes), and recovery after a crash. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "catalog/db.h"
#include "catalog/test/testutil.h"
#include "common/checksum.h"
#include "common/clock.h"
#include "common/conf.h"
#include "common/tap.h"
#include "daemon/archive/backend.h"
#include "daemon/cache/cache.h"
#include "daemon/push/push.h"
#include "daemon/simlib/engine.h"
#include "daemon/tape/model.h"
#include "daemon/volume/volume.h"

static char dir[256], dbpath[700], voldir[300];

static long long count(catalog_t *cat, const char *sql)
{
    return test_query_int(cat, sql);
}

/* Rows of every table a push writes, as one number per table. */
static void snapshot(catalog_t *cat, long long out[5])
{
    out[0] = count(cat, "SELECT count(*) FROM objects");
    out[1] = count(cat, "SELECT count(*) FROM pushes");
    out[2] = count(cat, "SELECT count(*) FROM push_items");
    out[3] = count(cat, "SELECT count(*) FROM datasets");
    out[4] = count(cat, "SELECT count(*) FROM cache");
}

static bool unchanged(catalog_t *cat, const long long before[5])
{
    long long now[5];
    snapshot(cat, now);
    return memcmp(now, before, sizeof(now)) == 0;
}

static void fill(unsigned char *buf, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        buf[i] = (unsigned char)(seed >> 16);
    }
}

static void sha256_of(const void *data, size_t n, char out[SI_CHECKSUM_TEXT_MAX])
{
    si_checksum_t *c = si_checksum_new("sha256", NULL);
    si_checksum_update(c, data, n);
    si_checksum_final(c, out);
    si_checksum_free(c);
}

typedef struct {
    int rc;
    push_received_t file;
} submitted_t;

static void on_submitted(void *arg, int rc, int errnum, const push_received_t *file,
                         const char *why)
{
    submitted_t *s = arg;
    (void)errnum;
    (void)why;
    s->file = *file;
    s->rc = rc;
}

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int rc, errnum;           /* rc 1: not answered yet */
    push_upload_t *u;
    si_error_t err;
} begun_t;

static void on_begun(void *arg, push_upload_t *u, int rc, int errnum, const si_error_t *err)
{
    begun_t *b = arg;
    pthread_mutex_lock(&b->mu);
    b->u = u;
    b->errnum = errnum;
    if (err)
        b->err = *err;
    b->rc = rc;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

/* One whole upload in pieces; returns finish's result. */
static int push_bytes(push_t *p, push_file_t f, const unsigned char *data, size_t n,
                      push_received_t *r, si_error_t *err)
{
    push_upload_t *u;
    f.size = n;
    if (push_upload_begin(p, &f, &u, err) < 0)
        return -1;
    for (size_t off = 0; off < n; off += 70000) {
        size_t len = n - off < 70000 ? n - off : 70000;
        if (push_upload_write(u, data + off, len, err) < 0) {
            int saved = errno;
            push_upload_abort(u);
            errno = saved;
            return -1;
        }
    }
    return push_upload_finish(u, r, err);
}

static void run(void)
{
    si_error_t err;
    snprintf(dir, sizeof(dir), "/tmp/t_push.%ld.%s", (long)getpid(), test_engine_name());
    if (test_engine_is_pg())
        test_db_path(dbpath, sizeof(dbpath), "push");
    else
        snprintf(dbpath, sizeof(dbpath), "%s/catalog.db", dir);
    snprintf(voldir, sizeof(voldir), "%s/volumes", dir);
    mkdir(dir, 0700);

    /* ---- configuration ---- */
    static const si_conf_key_t *const schemas[] = {push_conf_keys, library_conf_keys,
                                                   volume_conf_keys, archive_conf_keys,
                                                   tape_conf_keys, NULL};
    push_conf_t pc;
    si_conf_t *conf = si_conf_load_string("push = { bucket = \"Bad_Bucket\"; };", schemas, &err);
    ok(conf && push_conf_from(conf, &pc, &err) < 0 && strstr(err.text, "push.bucket"),
       "a bad push.bucket is refused: %s", err.text);
    si_conf_free(conf);
    conf = si_conf_load_string("push = { copies = 2; aggregate_bytes = 10000000;"
                               " aggregate_window = 3600.0; max_file_size = 4000000; };"
                               "library = { time_scale = 0.00001; };",
                               schemas, &err);
    ok(conf && push_conf_from(conf, &pc, &err) == 0, "push group read");
    is_str(pc.bucket, "stageout", "default bucket");
    is_int(pc.copies, 2, "copies from the file");
    is_int(pc.dataset_mode, 0600, "default dataset mode");

    /* ---- a catalog, a cache, three volumes, the sim backend ---- */
    catalog_t *cat = catalog_open(dbpath, CATALOG_CREATE, &err);
    cache_conf_t cc;
    cache_conf_defaults(&cc, dir);
    cc.capacity = 64u << 20;
    catalog_t *cache_cat = catalog_open(dbpath, 0, &err);
    cache_t *cache = cache_open(&cc, cache_cat, &err);
    ok(cat && cache, "catalog and cache open: %s", err.text);
    const char *labels[] = {"P00001", "P00002", "P00003"};
    for (int i = 0; i < 3; i++)
        tapevol_create(voldir, labels[i], "LTO-9", 200u << 20, &err);
    archive_backend_opts_t bo = {.conf = conf, .state_dir = dir};
    archive_backend_t *backend = archive_sim_new(&bo, &err);
    ok(backend != NULL, "sim backend: %s", backend ? "started" : err.text);

    push_opts_t po = {.conf = pc, .catalog = &(catalog_open_opts_t){.target = dbpath}, .cache = cache, .cache_dir = cc.dir,
                      .backend = backend};
    push_t *p = push_open(&po, &err);
    ok(p != NULL, "push opened: %s", p ? "yes" : err.text);
    push_recovery_t rec;
    ok(push_recover(p, &rec, &err) == 0 && rec.discarded == 0 && rec.pending == 0,
       "recovery of an empty catalog does nothing");

    /* ---- receiving ---- */
    enum { SMALL = 5000, BIG = 3 * 1000 * 1000 };
    unsigned char *small = malloc(SMALL), *big = malloc(BIG);
    fill(small, SMALL, 1);
    fill(big, BIG, 2);
    char small_sum[SI_CHECKSUM_TEXT_MAX], big_sum[SI_CHECKSUM_TEXT_MAX];
    sha256_of(small, SMALL, small_sum);
    sha256_of(big, BIG, big_sum);

    push_file_t f = {.uid = 1000, .gid = 100, .dataset = "ckpt-1", .key = "step1/a.bin",
                     .mode = -1, .checksum = small_sum, .mtime = 1700000000};
    push_received_t r1, r2;
    ok(push_bytes(p, f, small, SMALL, &r1, &err) == 0, "small file received: %s", err.text);
    is_str(r1.object_key, "ckpt-1/step1/a.bin", "object key is dataset/key");
    is_str(r1.bucket, "stageout", "in the push bucket");
    cache_entry_t ce;
    ok(cache_stat(cache, r1.object_id, &ce, &err) == 1 && ce.pins == 1,
       "the received file is cached and pinned by its push item");
    is_int(count(cat, "SELECT mode FROM datasets WHERE name = 'ckpt-1'"), 0600,
           "the new dataset has the default mode");
    is_int(count(cat, "SELECT owner_uid FROM datasets WHERE name = 'ckpt-1'"), 1000,
           "... and is owned by the pusher");

    /* no checksum from the client: computed, and the same file in the same push */
    f.key = "step1/b.bin";
    f.checksum = NULL;
    f.push_uuid = r1.uuid;
    double before_b = si_wall_now();
    ok(push_bytes(p, f, big, BIG, &r2, &err) == 0, "big file received into the same push: %s",
       err.text);
    is_str(r2.checksum, big_sum, "its sha256 computed as it arrived");
    is_str(r2.uuid, r1.uuid, "same push id");
    char sq[400];
    snprintf(sq, sizeof(sq), "SELECT count(*) FROM objects WHERE (id = %lld AND checksum = '%s')"
             " OR (id = %lld AND checksum = '%s')", (long long)r1.object_id, small_sum,
             (long long)r2.object_id, big_sum);
    is_int(count(cat, sq), 2, "the catalog holds the checksum the client sent and the computed one");
    snprintf(sq, sizeof(sq), "SELECT count(*) FROM pushes WHERE uuid = '%s' AND updated >= %.6f",
             r1.uuid, before_b - 0.001);
    is_int(count(cat, sq), 1, "the push's time of last activity is the second file's");

    push_status_t *st = NULL;
    ok(push_get(p, r1.uuid, 1000, &st, &err) == 0 && st->nitems == 2, "status lists 2 files");
    if (st) {
        is_str(st->state, "RECEIVED", "push RECEIVED");
        is_str(st->items[0].key, "step1/a.bin", "first file's key in the dataset");
        is_int(st->bytes_total, SMALL + BIG, "bytes total");
    }
    push_status_free(st);
    st = NULL;
    ok(push_get(p, r1.uuid, 1001, &st, &err) < 0 && errno == EACCES,
       "another user cannot read the push: %s", err.text);

    /* ---- refusals change nothing ---- */
    long long before[5];
    snapshot(cat, before);
    push_file_t bad = {.uid = 1000, .gid = 100, .dataset = "ckpt-2", .key = "../escape",
                       .mode = -1, .mtime = -1};
    ok(push_bytes(p, bad, small, SMALL, NULL, &err) < 0 && errno == EINVAL,
       "key with '..' refused: %s", err.text);
    bad.key = "ok.bin";
    bad.dataset = "bad/name";
    ok(push_bytes(p, bad, small, SMALL, NULL, &err) < 0 && errno == EINVAL,
       "bad dataset name refused: %s", err.text);
    bad.dataset = "ckpt-1";
    bad.uid = 1001;
    ok(push_bytes(p, bad, small, SMALL, NULL, &err) < 0 && errno == EACCES,
       "another user's dataset refused: %s", err.text);
    bad.uid = 1000;
    bad.key = "step1/a.bin";
    ok(push_bytes(p, bad, small, SMALL, NULL, &err) < 0 && errno == EEXIST,
       "an existing key refused: %s", err.text);
    bad.dataset = "ckpt-3";
    bad.key = "wrong.bin";
    bad.checksum = big_sum;
    ok(push_bytes(p, bad, small, SMALL, NULL, &err) < 0 && errno == EBADMSG,
       "bytes not matching the checksum refused: %s", err.text);
    bad.checksum = NULL;
    push_upload_t *u;
    bad.size = 5000000;
    ok(push_upload_begin(p, &bad, &u, &err) < 0 && errno == EFBIG,
       "over push.max_file_size refused: %s", err.text);
    bad.size = SMALL;
    ok(push_upload_begin(p, &bad, &u, &err) == 0, "an upload begins");
    push_upload_write(u, small, 100, &err);
    push_upload_abort(u); /* the client went away */
    ok(unchanged(cat, before), "no refused upload left anything in the catalog");
    ok(push_bytes(p, bad, small, SMALL, NULL, &err) == 0,
       "the aborted upload's key and dataset can be pushed again: %s", err.text);

    /* the metrics, from the kept totals: the three files received */
    push_metrics_t m;
    int mrc = push_metrics(p, &m, &err);
    ok(mrc == 0 && m.received_files == 3 &&
           m.received_bytes == (uint64_t)count(cat, "SELECT sum(o.size) FROM push_items i"
                                                    " JOIN objects o ON o.id = i.object_id"
                                                    " WHERE i.state = 'RECEIVED'") &&
           m.archiving_files == 0 && m.durable_files == 0 && m.failed_files == 0,
       "metrics: 3 files received, %llu bytes, none durable", (unsigned long long)m.received_bytes);

    /* ---- archiving: one aggregate, two copies on distinct volumes ---- */
    push_archived_t done;
    ok(push_archive_once(p, false, &done, &err) == 0, "nothing due within the window");
    ok(push_archive_once(p, true, &done, &err) == 1 && done.files == 3,
       "forced aggregate: 3 files durable (%s)", err.text);
    is_int(count(cat, "SELECT count(*) FROM push_items WHERE state = 'DURABLE'"), 3,
           "every item DURABLE");
    ok(push_metrics(p, &m, &err) == 0 && m.received_files == 0 && m.received_bytes == 0 &&
           m.durable_files == 3,
       "metrics: the 3 files durable, none received");
    is_int(count(cat, "SELECT count(*) FROM tape_copies"), 6, "two tape copies each");
    is_int(count(cat, "SELECT count(*) FROM (SELECT object_id FROM tape_copies"
                      " GROUP BY object_id HAVING count(DISTINCT volume_id) = 2) AS two"), 3,
           "each file's copies are on two distinct volumes");
    is_int(count(cat, "SELECT count(*) FROM dataset_members m JOIN datasets d"
                      " ON d.id = m.dataset_id WHERE d.name = 'ckpt-1'"), 2,
           "the files are members of their dataset");
    is_int(count(cat, "SELECT stat_objects FROM datasets WHERE name = 'ckpt-1'"), 2,
           "dataset totals refreshed");
    ok(cache_stat(cache, r2.object_id, &ce, &err) == 1 && ce.pins == 0,
       "a durable file is no longer pinned");
    /* the bytes on both volumes */
    db_stmt_t *s = db_prepare(catalog_driver(cat), "SELECT v.label, t.position FROM tape_copies t"
                              " JOIN volumes v ON v.id = t.volume_id WHERE t.object_id = ?1",
                              &err);
    int copies_ok = 0;
    unsigned char *back = malloc(BIG);
    if (s) {
        db_bind_int64(s, 1, r2.object_id);
        while (db_step(s) == DB_ROW) {
            tapevol_t *v = tapevol_open(voldir, db_column_text(s, 0), TAPEVOL_RDONLY, &err);
            if (v && tapevol_read(v, (uint64_t)db_column_int64(s, 1), back, BIG, &err) == 0 &&
                memcmp(back, big, BIG) == 0)
                copies_ok++;
            tapevol_close(v);
        }
        db_finalize(s);
    }
    is_int(copies_ok, 2, "both copies read back identical from their volumes");
    st = NULL;
    ok(push_get(p, r1.uuid, 0, &st, &err) == 0 && strcmp(st->state, "DURABLE") == 0 &&
           st->items[1].ncopies == 2 && strcmp(st->items[1].copies[0].volume,
                                               st->items[1].copies[1].volume) != 0,
       "status: DURABLE, copies listed on distinct volumes (root may read it)");
    push_status_free(st);

    /* ---- recovery after a crash ---- */
    push_file_t c = {.uid = 1000, .gid = 100, .dataset = "ckpt-4", .key = "x.bin", .mode = 0640,
                     .mtime = -1};
    push_received_t rc1, rc2;
    ok(push_bytes(p, c, small, SMALL, &rc1, &err) == 0, "a file to be archived after restart");
    c.key = "y.bin";
    c.push_uuid = rc1.uuid;
    ok(push_bytes(p, c, small, SMALL, &rc2, &err) == 0, "a file whose cache copy rots");
    c.key = "z.bin";
    c.push_uuid = NULL;
    c.size = SMALL;
    push_upload_t *inflight;
    ok(push_upload_begin(p, &c, &inflight, &err) == 0 &&
           push_upload_write(inflight, small, 10, &err) == 0,
       "an upload in flight when the daemon dies");
    char sql[200];
    snprintf(sql, sizeof(sql), "UPDATE push_items SET state = 'ARCHIVING' WHERE object_id = %lld",
             (long long)rc1.object_id);
    test_exec(cat, sql);
    /* its first byte, wherever the cache put it (a file, or a segment's range) */
    char rel[64], path[512];
    snprintf(sql, sizeof(sql), "SELECT %%s FROM cache WHERE object_id = %lld",
             (long long)rc2.object_id);
    char q[300];
    snprintf(q, sizeof(q), sql, "file_offset");
    cache_place_t where = {SMALL, (uint64_t)count(cat, q), 0};
    snprintf(q, sizeof(q), sql, "coalesce(segment, 0)");
    where.segment = count(cat, q);
    cache_place_path(rc2.object_id, &where, rel, sizeof(rel), NULL);
    snprintf(path, sizeof(path), "%s/%s", cc.dir, rel);
    FILE *rot = fopen(path, "r+");
    if (rot) {
        fseek(rot, (long)where.offset, SEEK_SET);
        fputc('!', rot);
        fclose(rot);
    }
    /* The "crashed" instance is abandoned, not closed: its upload is still in
     * flight while a new instance recovers, as after a kill -9. */
    push_t *crashed = p;
    p = push_open(&po, &err);
    ok(p && push_recover(p, &rec, &err) == 0, "recovery runs: %s", err.text);
    is_int(rec.discarded, 1, "the unacknowledged upload is dropped");
    is_int(rec.requeued, 1, "the interrupted archive write is queued again");
    is_int(rec.failed, 1, "the rotten cache copy is found");
    is_int(rec.pending, 1, "one file waits to be archived");
    is_int(count(cat, "SELECT count(*) FROM objects WHERE key = 'ckpt-4/z.bin'"), 0,
           "no trace of the unacknowledged upload");
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM push_items WHERE state = 'FAILED'"
                               " AND error LIKE '%%corrupt%%' AND object_id = %lld",
             (long long)rc2.object_id);
    is_int(count(cat, sql), 1, "the rotten file is FAILED with the reason");
    push_upload_abort(inflight); /* the dead process's writer */
    push_close(crashed);
    pc.aggregate_bytes = 1000; /* the waiting file now fills an aggregate */
    push_reconfigure(p, &pc, NULL, true);
    ok(push_archive_once(p, false, &done, &err) == 1 && done.files == 1,
       "the requeued file is archived once enough bytes wait, window or not");
    st = NULL;
    ok(push_get(p, rc1.uuid, 1000, &st, &err) == 0 && strcmp(st->state, "FAILED") == 0 &&
           st->files_durable == 1 && st->files_failed == 1,
       "its push: one DURABLE, one FAILED, so FAILED");
    push_status_free(st);

    /* ---- an archive write whose outcome the catalog refuses to record ---- */
    {
        push_file_t w = {.uid = 1000, .gid = 100, .dataset = "ckpt-6", .key = "w.bin",
                         .mode = 0640, .mtime = -1};
        push_received_t rw;
        int rc = push_bytes(p, w, small, SMALL, &rw, &err);
        ok(rc == 0, "a file to archive: %s", rc == 0 ? "received" : err.text);
        /* neither DURABLE nor put back: as a catalog lost between the tape
         * write and its record */
        if (test_engine_is_pg()) {
            test_exec(cat, "CREATE FUNCTION refuse_outcome() RETURNS trigger LANGUAGE plpgsql"
                           " AS $$ BEGIN RAISE EXCEPTION 'the catalog refuses'; END $$");
            test_exec(cat, "CREATE TRIGGER refuse_outcome BEFORE UPDATE OF state ON push_items"
                           " FOR EACH ROW WHEN (OLD.state = 'ARCHIVING')"
                           " EXECUTE FUNCTION refuse_outcome()");
        } else {
            test_exec(cat, "CREATE TRIGGER refuse_outcome BEFORE UPDATE OF state ON push_items"
                           " WHEN OLD.state = 'ARCHIVING'"
                           " BEGIN SELECT RAISE(ABORT, 'the catalog refuses'); END");
        }
        rc = push_archive_once(p, true, &done, &err);
        ok(rc < 0 && strstr(err.text, "refuses"), "the write's record fails: %s",
           rc < 0 ? err.text : "no");
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM push_items WHERE state = '%%s'"
                                   " AND object_id = %lld", (long long)rw.object_id);
        snprintf(q, sizeof(q), sql, "ARCHIVING");
        is_int(count(cat, q), 1, "and its put-back too: the file is left ARCHIVING");
        test_exec(cat, test_engine_is_pg() ? "DROP TRIGGER refuse_outcome ON push_items"
                                           : "DROP TRIGGER refuse_outcome");
        rc = push_archive_once(p, false, &done, &err);
        ok(rc == 1 && done.files == 1, "once the catalog answers, the next pass archives it,"
                                       " no restart: %s",
           rc < 0 ? err.text : rc == 1 ? "archived" : "nothing archived");
        snprintf(q, sizeof(q), sql, "DURABLE");
        is_int(count(cat, q), 1, "the file is DURABLE");
        snprintf(q, sizeof(q), "SELECT attempts FROM push_items WHERE object_id = %lld",
                 (long long)rw.object_id);
        is_int(count(cat, q), 0, "the catalog's refusal counted no failed attempt");
    }

    /* ---- push.aggregate_files: a full aggregate is written whatever its age ---- */
    {
        si_conf_t *few = si_conf_load_string("push = { aggregate_files = 2; };", schemas, &err);
        push_conf_t fc;
        ok(few && push_conf_from(few, &fc, &err) == 0 && fc.aggregate_files == 2,
           "push.aggregate_files read");
        si_conf_free(few);
        few = si_conf_load_string("push = { aggregate_files = 0; };", schemas, &err);
        ok(!few && strstr(err.text, "aggregate_files"), "push.aggregate_files = 0 refused: %s",
           err.text);
        si_conf_free(few);
        push_conf_t saved = pc;
        pc.aggregate_files = 2;
        pc.aggregate_window = 3600;
        pc.aggregate_bytes = 1ull << 40;
        push_reconfigure(p, &pc, NULL, true);
        push_file_t f3 = {.uid = 1000, .gid = 100, .dataset = "ckpt-7", .mode = 0640, .mtime = -1};
        const char *keys[] = {"a.bin", "b.bin", "c.bin"};
        int received = 0;
        for (int i = 0; i < 3; i++) {
            f3.key = keys[i];
            received += push_bytes(p, f3, small, SMALL, NULL, &err) == 0;
        }
        is_int(received, 3, "three files received");
        int rc = push_archive_once(p, false, &done, &err);
        ok(rc == 1 && done.files == 2, "two of them make a full aggregate, written at once: %s",
           rc < 0 ? err.text : "yes");
        double before_pass = si_wall_now();
        ok(push_archive_once(p, false, &done, &err) == 0, "the third waits for its window");
        ok(done.next_due > before_pass + 3500 && done.next_due <= si_wall_now() + 3600,
           "the pass says when it is due: in %.0f s", done.next_due - before_pass);
        ok(push_archive_once(p, true, &done, &err) == 1 && done.files == 1, "and goes when forced");
        ok(push_archive_once(p, false, &done, &err) == 0 && done.next_due == 0,
           "then none waits, none is due");
        pc = saved;
        push_reconfigure(p, &pc, NULL, true);
    }

    /* ---- uploads beginning together: recorded in groups ---- */
    {
        enum { N = 24, STRANGER = 7 };
        push_file_t g[N];
        char keys[N][32];
        begun_t b[N];
        for (int i = 0; i < N; i++) {
            snprintf(keys[i], sizeof(keys[i]), "group/%02d.bin", i);
            g[i] = (push_file_t){.uid = i == STRANGER ? 1001 : 1000, .gid = 100,
                                 .dataset = "ckpt-1", .key = keys[i], .mode = -1,
                                 .push_uuid = r1.uuid, .size = SMALL, .mtime = -1};
            b[i] = (begun_t){.rc = 1};
            pthread_mutex_init(&b[i].mu, NULL);
            pthread_cond_init(&b[i].cv, NULL);
        }
        int queued = 0;
        for (int i = 0; i < N; i++)
            queued += push_upload_begin_async(p, &g[i], on_begun, &b[i], &err) == 0;
        is_int(queued, N, "%d uploads begun at once into one push", N);
        bool all_answered = true, others_ok = true, sent = true;
        for (int i = 0; i < N; i++) {
            pthread_mutex_lock(&b[i].mu);
            while (b[i].rc == 1)
                pthread_cond_wait(&b[i].cv, &b[i].mu);
            pthread_mutex_unlock(&b[i].mu);
        }
        /* small files joining a push: their rows come with their batch */
        is_int(count(cat, "SELECT count(*) FROM objects WHERE key LIKE 'ckpt-1/group/%'"), 0,
               "... begun with no rows yet: they come with the files' cache batch");
        for (int i = 0; i < N; i++) {
            all_answered = all_answered && b[i].rc != 1;
            if (i == STRANGER)
                continue;
            others_ok = others_ok && b[i].rc == 0;
            push_received_t got;
            bool this_sent = b[i].u && push_upload_write(b[i].u, small, SMALL, &err) == 0 &&
                             push_upload_finish(b[i].u, &got, &err) == 0;
            if (!this_sent)
                diag("upload %d: rc %d: %s", i, b[i].rc, b[i].u ? err.text : b[i].err.text);
            sent = sent && this_sent;
        }
        ok(all_answered && others_ok && sent, "every upload of the owner recorded and received");
        ok(b[STRANGER].rc < 0 && b[STRANGER].errnum == EACCES && !b[STRANGER].u,
           "another user's upload among them refused: %s", b[STRANGER].err.text);
        snprintf(sq, sizeof(sq), "SELECT count(*) FROM push_items i JOIN pushes p ON"
                 " p.id = i.push_id JOIN objects o ON o.id = i.object_id WHERE p.uuid = '%s'"
                 " AND o.key LIKE 'ckpt-1/group/%%' AND i.state = 'RECEIVED'", r1.uuid);
        is_int(count(cat, sq), N - 1, "... the others are items of the push, RECEIVED");
        is_int(count(cat, "SELECT count(*) FROM objects WHERE key = 'ckpt-1/group/07.bin'"), 0,
               "... and nothing of the refused one is kept");
        for (int i = 0; i < N; i++) {
            pthread_mutex_destroy(&b[i].mu);
            pthread_cond_destroy(&b[i].cv);
        }

        /* one key twice at once: both begin (neither has rows), the
         * second's batch refuses it alone; a key that exists is refused
         * before the first byte */
        begun_t d[3];
        push_file_t df = g[0];
        df.key = "group/twice.bin";
        for (int i = 0; i < 3; i++) {
            d[i] = (begun_t){.rc = 1};
            pthread_mutex_init(&d[i].mu, NULL);
            pthread_cond_init(&d[i].cv, NULL);
        }
        push_file_t taken = g[0]; /* group/00.bin, received above */
        ok(push_upload_begin_async(p, &df, on_begun, &d[0], &err) == 0 &&
               push_upload_begin_async(p, &df, on_begun, &d[1], &err) == 0 &&
               push_upload_begin_async(p, &taken, on_begun, &d[2], &err) == 0,
           "the same key begun twice, and a key already pushed");
        for (int i = 0; i < 3; i++) {
            pthread_mutex_lock(&d[i].mu);
            while (d[i].rc == 1)
                pthread_cond_wait(&d[i].cv, &d[i].mu);
            pthread_mutex_unlock(&d[i].mu);
        }
        ok(d[2].rc < 0 && d[2].errnum == EEXIST && strstr(d[2].err.text, "exists already"),
           "a key already pushed is refused before its body: %s", d[2].err.text);
        push_received_t got = {0};
        bool first = d[0].rc == 0 && d[1].rc == 0 &&
                     push_upload_write(d[0].u, small, SMALL, &err) == 0 &&
                     push_upload_finish(d[0].u, &got, &err) == 0;
        ok(first && got.object_id > 0, "the first of the twice-begun key is received (object %lld)",
           (long long)got.object_id);
        int twice = d[1].rc == 0 && push_upload_write(d[1].u, small, SMALL, &err) == 0
                        ? push_upload_finish(d[1].u, &got, &err)
                        : 0;
        ok(twice < 0 && errno == EEXIST && strstr(err.text, "exists already"),
           "the second is refused by its batch alone: %s", err.text);
        is_int(count(cat, "SELECT count(*) FROM objects o JOIN push_items i ON i.object_id = o.id"
                          " WHERE o.key = 'ckpt-1/group/twice.bin' AND i.state = 'RECEIVED'"),
               1, "... one object and one item of that key kept");
        for (int i = 0; i < 3; i++) {
            pthread_mutex_destroy(&d[i].mu);
            pthread_cond_destroy(&d[i].cv);
        }
    }

    /* ---- submit: the answer from the commit, no thread waiting ---- */
    push_file_t sub = c;
    sub.dataset = "ckpt-5";
    sub.key = "async.bin";
    sub.checksum = NULL;
    submitted_t got = {.rc = 1};
    ok(push_upload_begin(p, &sub, &u, &err) == 0 && push_upload_write(u, small, SMALL, &err) == 0 &&
           push_upload_submit(u, on_submitted, &got, &err) == 0,
       "an upload submitted");
    cache_commit_drain(cache);
    ok(got.rc == 0 && strncmp(got.file.checksum, "sha256:", 7) == 0,
       "its callback says durable, with the checksum computed (rc %d)", got.rc);
    is_int(count(cat, "SELECT count(*) FROM push_items i JOIN objects o ON o.id = i.object_id"
                      " WHERE o.key = 'ckpt-5/async.bin' AND i.state = 'RECEIVED'"),
           1, "... and it is RECEIVED in the catalog");
    sub.key = "short.bin";
    got.rc = 1;
    ok(push_upload_begin(p, &sub, &u, &err) == 0 && push_upload_write(u, small, 10, &err) == 0 &&
           push_upload_submit(u, on_submitted, &got, &err) < 0 && got.rc == 1,
       "a short upload refused at submit, no callback: %s", err.text);
    is_int(count(cat, "SELECT count(*) FROM objects WHERE key = 'ckpt-5/short.bin'"), 0,
           "... and nothing of it kept");

    /* ---- the aggregator thread: woken once an aggregate's worth waits ---- */
    {
        while (push_archive_once(p, true, &done, &err) == 1) /* what waits, archived */
            ;
        pc.aggregate_window = 3600;
        pc.aggregate_bytes = 2 * SMALL;
        push_reconfigure(p, &pc, NULL, true);
        int started = push_start(p, &err);
        ok(started == 0, "the aggregator starts: %s", started == 0 ? "yes" : err.text);
        push_file_t k = {.uid = 1000, .gid = 100, .dataset = "ckpt-8", .key = "k1.bin",
                         .mode = 0640, .mtime = -1};
        int received = push_bytes(p, k, small, SMALL, NULL, &err) == 0;
        /* a pass that finds it waiting, not due (a reconfiguration wakes one) */
        push_reconfigure(p, &pc, NULL, true);
        usleep(300000);
        k.key = "k2.bin";
        received += push_bytes(p, k, small, SMALL, NULL, &err) == 0;
        is_int(received, 2, "two files received, the second after the pass");
        const char *durable_q = "SELECT count(*) FROM push_items i JOIN objects o ON o.id = i.object_id"
                         " WHERE o.key LIKE 'ckpt-8/%' AND i.state = 'DURABLE'";
        long long durable = 0;
        for (int i = 0; i < 100 && durable < 2; i++) {
            usleep(100000);
            durable = count(cat, durable_q);
        }
        is_int(durable, 2, "together an aggregate's bytes: archived at once, not at the window");
    }

    push_close(p);
    archive_backend_free(backend);
    cache_close(cache);
    catalog_close(cache_cat);
    catalog_close(cat);
    si_conf_free(conf);
    free(small);
    free(big);
    free(back);
    tap_remove_tree(dir);
}

int main(void)
{
    return test_run_engines(run);
}
