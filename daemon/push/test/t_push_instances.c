/* push with two instances on one catalog and one cache directory: each
 * push archived by the instance holding its lease and given back after;
 * a live instance's push left alone; a dead instance's interrupted write
 * taken over and archived once; a writer whose push was taken over during
 * its archive write cannot commit (fenced), so every file has exactly its
 * copies. Both engines. */
#include "config.h"

#include <pthread.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "catalog/instances.h"
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

#define LEASE_S 30.0

static char dir[256], dbpath[700];

/* A backend that runs a hook in the middle of its archive write (what
 * another instance does while this one writes), and fails as many of its
 * next writes as `failures` says (a drive's write error). */
typedef struct {
    archive_backend_t base;
    archive_backend_ops_t ops;
    archive_backend_t *inner;
    void (*hook)(void *arg);
    void *hook_arg;
    int failures;
} hooked_t;

static int hooked_archive(archive_backend_t *b, const archive_member_t *members, size_t n,
                          int ncopies, archive_placement_t *pl, si_error_t *err)
{
    hooked_t *h = (hooked_t *)b;
    h->inner->write_claims = b->write_claims; /* the push set them on this one */
    if (h->hook) {
        void (*hook)(void *) = h->hook;
        h->hook = NULL;
        hook(h->hook_arg);
    }
    if (h->failures > 0) {
        h->failures--;
        return si_errnoprintf(err, EIO, "the drive reported a write error (test)");
    }
    return archive_write(h->inner, members, n, ncopies, pl, err);
}

static void hooked_free(archive_backend_t *b)
{
    hooked_t *h = (hooked_t *)b;
    archive_backend_free(h->inner);
    free(h);
}

static int hooked_loaded(archive_backend_t *b, const char *label)
{
    return archive_volume_loaded(((hooked_t *)b)->inner, label);
}

static archive_backend_t *hooked_new(archive_backend_t *inner)
{
    hooked_t *h = calloc(1, sizeof(*h));
    h->inner = inner;
    h->ops = *inner->ops;
    h->ops.archive = hooked_archive;
    h->ops.free = hooked_free;
    h->base.ops = &h->ops;
    h->base.impl = h;
    h->base.volume_loaded = hooked_loaded;
    return &h->base;
}

typedef struct {
    const char *name;
    catalog_t *cache_cat;
    cache_t *cache;
    archive_backend_t *backend;
    push_t *push;
} instance_t;

static int instance_start(instance_t *in, const char *name, const push_conf_t *pc,
                          const si_conf_t *conf, si_error_t *err)
{
    in->name = name;
    char state[300], voldir[400];
    snprintf(state, sizeof(state), "%s/%s", dir, name);
    snprintf(voldir, sizeof(voldir), "%s/volumes", state);
    mkdir(state, 0700);
    mkdir(voldir, 0700);
    /* each instance its own volumes: one library's drives per instance */
    for (int i = 1; i <= 2; i++) {
        char label[8];
        snprintf(label, sizeof(label), "%c%05d", name[0] == 'a' ? 'A' : 'B', i);
        tapevol_create(voldir, label, "LTO-9", 200u << 20, err);
    }
    cache_conf_t cc;
    cache_conf_defaults(&cc, dir); /* one cache directory for both */
    cc.capacity = 64u << 20;
    snprintf(cc.instance, sizeof(cc.instance), "%s", name);
    cc.lease_s = LEASE_S;
    if (!(in->cache_cat = catalog_open(dbpath, 0, err)) ||
        !(in->cache = cache_open(&cc, in->cache_cat, err)))
        return -1;
    archive_backend_opts_t bo = {.conf = conf, .state_dir = state};
    archive_backend_t *sim = archive_sim_new(&bo, err);
    if (!sim)
        return -1;
    in->backend = hooked_new(sim);
    push_opts_t po = {.conf = *pc, .catalog = &(catalog_open_opts_t){.target = dbpath},
                      .cache = in->cache, .cache_dir = cc.dir, .backend = in->backend,
                      .instance = name, .lease_s = LEASE_S};
    if (!(in->push = push_open(&po, err)))
        return -1;
    push_recovery_t rec;
    return push_recover(in->push, &rec, err);
}

static void instance_stop(instance_t *in)
{
    push_close(in->push);
    archive_backend_free(in->backend);
    cache_close(in->cache);
    catalog_close(in->cache_cat);
}

static int push_small(instance_t *in, const char *dataset, const char *key, unsigned seed,
                      push_received_t *r, si_error_t *err)
{
    unsigned char buf[3000];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (unsigned char)(seed * 131 + i * 7);
    push_file_t f = {.uid = 1000, .gid = 100, .dataset = dataset, .key = key, .mode = -1,
                     .size = sizeof(buf), .mtime = 1700000000};
    push_upload_t *u;
    if (push_upload_begin(in->push, &f, &u, err) < 0)
        return -1;
    if (push_upload_write(u, buf, sizeof(buf), err) < 0) {
        push_upload_abort(u);
        return -1;
    }
    return push_upload_finish(u, r, err);
}

static long long q(catalog_t *cat, const char *fmt, const char *arg)
{
    char sql[600];
    snprintf(sql, sizeof(sql), fmt, arg);
    return test_query_int(cat, sql);
}

static const char *state_of(catalog_t *cat, int64_t object_id)
{
    static char out[16];
    char sql[200];
    snprintf(sql, sizeof(sql), "SELECT CASE state WHEN 'DURABLE' THEN 1 WHEN 'ARCHIVING' THEN 2"
                               " WHEN 'RECEIVED' THEN 3 ELSE 4 END FROM push_items"
                               " WHERE object_id = %lld", (long long)object_id);
    static const char *names[] = {"?", "DURABLE", "ARCHIVING", "RECEIVED", "other"};
    long long v = test_query_int(cat, sql);
    snprintf(out, sizeof(out), "%s", v >= 1 && v <= 4 ? names[v] : "?");
    return out;
}

/* What instance b does while a writes: a's lease lapses (a stalled), b
 * takes the push over and archives it. */
typedef struct {
    catalog_t *cat;
    instance_t *b;
    int rc;
    push_archived_t done;
} takeover_t;

static void take_over(void *arg)
{
    takeover_t *t = arg;
    si_error_t err;
    test_exec(t->cat, "UPDATE leases SET expires = 1 WHERE instance = 'a'");
    t->rc = push_archive_once(t->b->push, true, &t->done, &err);
    if (t->rc < 0)
        diag("b: %s", err.text);
}

/* Another instance that gives its volume leases back a moment after a's
 * write began: a's write waits for them. */
typedef struct {
    const char *holder;
    pthread_t thread;
} giver_t;

static void *give_back_later(void *arg)
{
    giver_t *g = arg;
    si_error_t err;
    si_sleep(0.5);
    catalog_t *cat = catalog_open(dbpath, 0, &err);
    if (cat) {
        lease_release_all(cat, g->holder, &err);
        catalog_close(cat);
    }
    return NULL;
}

static void give_back_soon(void *arg)
{
    giver_t *g = arg;
    pthread_create(&g->thread, NULL, give_back_later, g);
}

/* The volume of an object's one copy among a's two ("?" if neither). */
static const char *copy_volume(catalog_t *cat, int64_t object_id)
{
    static const char *labels[] = {"A00001", "A00002"};
    for (int i = 0; i < 2; i++) {
        char sql[200];
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM tape_copies c JOIN volumes v"
                                   " ON v.id = c.volume_id WHERE c.object_id = %lld"
                                   " AND v.label = '%s'", (long long)object_id, labels[i]);
        if (test_query_int(cat, sql) == 1)
            return labels[i];
    }
    return "?";
}

/* After a write, a's volume lease of label: held by a while the backend
 * has the volume loaded, given back once not. */
static bool lease_follows_drive(catalog_t *cat, instance_t *in, const char *label)
{
    si_error_t err;
    char holder[80] = "";
    int held = lease_holder(cat, "volume", label, si_wall_now(), holder, sizeof(holder), &err);
    int loaded = archive_volume_loaded(((hooked_t *)in->backend)->inner, label);
    diag("volume %s: loaded %d, lease %s", label, loaded, held == 1 ? holder : "free");
    return loaded == 1 ? held == 1 && strcmp(holder, in->name) == 0 : held == 0;
}

static void run(void)
{
    si_error_t err;
    snprintf(dir, sizeof(dir), "/tmp/t_push_instances.%ld.%s", (long)getpid(),
             test_engine_name());
    if (test_engine_is_pg())
        test_db_path(dbpath, sizeof(dbpath), "pushinst");
    else
        snprintf(dbpath, sizeof(dbpath), "%s/catalog.db", dir);
    mkdir(dir, 0700);

    static const si_conf_key_t *const schemas[] = {push_conf_keys, library_conf_keys,
                                                   volume_conf_keys, archive_conf_keys,
                                                   tape_conf_keys, NULL};
    si_conf_t *conf = si_conf_load_string("push = { aggregate_window = 3600.0; };"
                                          "library = { time_scale = 0.00001; };",
                                          schemas, &err);
    push_conf_t pc;
    ok(conf && push_conf_from(conf, &pc, &err) == 0, "push group read");
    catalog_t *cat = catalog_open(dbpath, CATALOG_CREATE, &err);
    ok(cat != NULL, "catalog: %s", cat ? "open" : err.text);
    double now = si_wall_now();
    ok(instance_register(cat, "a", "host", 1, now, LEASE_S, &err) == 0 &&
           instance_register(cat, "b", "host", 2, now, LEASE_S, &err) == 0,
       "instances a and b registered: %s", err.text);

    instance_t a = {0}, b = {0};
    ok(instance_start(&a, "a", &pc, conf, &err) == 0, "instance a: %s", err.text);
    ok(instance_start(&b, "b", &pc, conf, &err) == 0, "instance b: %s", err.text);

    /* ---- pushes through both, archived by whichever claims them ---- */
    push_received_t r1, r2;
    ok(push_small(&a, "ck-1", "x.bin", 1, &r1, &err) == 0, "a file pushed through a: %s",
       err.text);
    ok(push_small(&b, "ck-2", "y.bin", 2, &r2, &err) == 0, "a file pushed through b: %s",
       err.text);
    push_archived_t done;
    ok(push_archive_once(a.push, true, &done, &err) == 1 && done.files == 2,
       "a archives both pushes (received through either)");
    is_str(state_of(cat, r2.object_id), "DURABLE", "the file received through b is durable");
    is_int(q(cat, "SELECT count(*) FROM leases WHERE kind = '%s'", "push"), 0,
           "the pushes' leases were given back once nothing was left to archive");
    ok(push_archive_once(b.push, true, &done, &err) == 0, "b finds nothing to archive");

    /* ---- a push a live instance holds is left alone ---- */
    push_received_t r3;
    ok(push_small(&a, "ck-3", "z.bin", 3, &r3, &err) == 0, "another file through a");
    now = si_wall_now();
    ok(lease_claim(cat, "push", r3.uuid, "a", now, LEASE_S, &err) == 1, "a holds its push");
    char sql[300];
    snprintf(sql, sizeof(sql), "UPDATE push_items SET state = 'ARCHIVING' WHERE object_id = %lld",
             (long long)r3.object_id);
    test_exec(cat, sql); /* as if a were writing it now */
    ok(push_archive_once(b.push, true, &done, &err) == 0, "b leaves a's push alone");
    is_str(state_of(cat, r3.object_id), "ARCHIVING", "... still being archived by a");

    /* ---- a dies: its lease lapses, b takes the push over ---- */
    test_exec(cat, "UPDATE leases SET expires = 1 WHERE instance = 'a'");
    test_exec(cat, "UPDATE instances SET heartbeat = 1 WHERE name = 'a'");
    push_metrics_t m;
    ok(push_archive_once(b.push, true, &done, &err) == 1 && done.files == 1,
       "b takes a's push over and archives it: %s", done.files ? "1 file" : err.text);
    is_str(state_of(cat, r3.object_id), "DURABLE", "the taken-over file is durable");
    ok(push_metrics(b.push, &m, &err) == 0 && m.pushes_taken_over == 1,
       "b counts one push taken over");
    is_int(q(cat, "SELECT count(*) FROM events WHERE kind = '%s'", "push.taken_over"), 1,
           "the take-over is in the event log");
    test_exec(cat, "UPDATE instances SET heartbeat = 1e12 WHERE name = 'a'");

    /* ---- a stalls in its write; b takes over; a's commit is fenced out ---- */
    push_received_t r4;
    ok(push_small(&a, "ck-4", "w.bin", 4, &r4, &err) == 0, "a file through a");
    takeover_t t = {.cat = cat, .b = &b};
    hooked_t *ha = (hooked_t *)a.backend;
    ha->hook = take_over;
    ha->hook_arg = &t;
    int rc = push_archive_once(a.push, true, &done, &err);
    ok(rc < 0 && errno == ESTALE, "a's commit is refused: %s", err.text);
    ok(t.rc == 1 && t.done.files == 1, "b archived the push meanwhile");
    is_str(state_of(cat, r4.object_id), "DURABLE", "the file is durable");
    ok(push_metrics(a.push, &m, &err) == 0 && m.commits_fenced == 1,
       "a counts one fenced commit");
    is_int(q(cat, "SELECT count(*) FROM leases WHERE kind = '%s' AND instance = 'a'", "push"), 0,
           "a holds no push lease");

    /* ---- a's write taken over by b, whose own write fails: one attempt,
     * b's; the interrupted one is not counted ---- */
    push_received_t r9;
    ok(push_small(&a, "ck-9", "s.bin", 9, &r9, &err) == 0, "a file through a");
    t = (takeover_t){.cat = cat, .b = &b};
    ha->hook = take_over;
    ha->hook_arg = &t;
    ((hooked_t *)b.backend)->failures = 1;
    rc = push_archive_once(a.push, true, &done, &err);
    ok(rc < 0 && errno == ESTALE && t.rc < 0, "a's write is taken over, b's own write fails");
    snprintf(sql, sizeof(sql), "SELECT attempts FROM push_items WHERE object_id = %lld"
             " AND state = 'RECEIVED' AND error LIKE '%%attempt 1 of 5%%'",
             (long long)r9.object_id);
    is_int(test_query_int(cat, sql), 1, "the file waits again, one failed attempt counted");
    ok(push_archive_once(b.push, true, &done, &err) == 1 && done.files == 1,
       "b's next write makes it durable");
    is_str(state_of(cat, r9.object_id), "DURABLE", "... DURABLE");

    /* every file exactly once on tape (one copy each), none left in flight */
    is_int(test_query_int(cat, "SELECT count(*) FROM push_items WHERE state = 'DURABLE'"), 5,
           "5 files durable");
    is_int(test_query_int(cat, "SELECT count(*) FROM tape_copies"), 5,
           "5 tape copies: none archived twice");
    is_int(test_query_int(cat, "SELECT count(*) FROM (SELECT object_id FROM tape_copies"
                               " GROUP BY object_id HAVING count(*) <> 1) x"), 0,
           "each object has exactly one copy");
    char ta[400], tb[400];
    snprintf(ta, sizeof(ta), "%s/cache/tmp/a", dir);
    snprintf(tb, sizeof(tb), "%s/cache/tmp/b", dir);
    struct stat st;
    ok(stat(ta, &st) == 0 && S_ISDIR(st.st_mode) && stat(tb, &st) == 0,
       "each instance writes its temp files under tmp/<instance>/");

    /* ---- an upload a began: left alone while a lives, removed once dead ---- */
    unsigned char part[1000] = {0};
    push_file_t f = {.uid = 1000, .gid = 100, .dataset = "ck-5", .key = "half.bin", .mode = -1,
                     .size = 5000, .mtime = 1700000000};
    push_upload_t *u = NULL;
    ok(push_upload_begin(a.push, &f, &u, &err) == 0 &&
           push_upload_write(u, part, sizeof(part), &err) == 0,
       "a begins an upload: %s", err.text);
    test_exec(cat, "UPDATE push_items SET received = 1 WHERE state = 'RECEIVING'");
    is_int(test_query_int(cat, "SELECT count(*) FROM push_items WHERE state = 'RECEIVING'"
                               " AND instance = 'a'"), 1, "a's upload records its instance");
    /* hidden from the temp-folder check: the catalog alone must keep it */
    char hidden[420];
    snprintf(hidden, sizeof(hidden), "%s.hidden", ta);
    ok(rename(ta, hidden) == 0, "a's temp folder moved aside");
    push_recovery_t rec;
    ok(push_recover(b.push, &rec, &err) == 0 && rec.discarded == 0,
       "b's recovery leaves a's upload in progress alone (found live in the catalog)");
    ok(rename(hidden, ta) == 0, "a's temp folder back");
    test_exec(cat, "UPDATE instances SET heartbeat = 1 WHERE name = 'a'");
    ok(push_recover(b.push, &rec, &err) == 0 && rec.discarded == 1,
       "once a is dead, b's recovery removes its unacknowledged upload");
    is_int(test_query_int(cat, "SELECT count(*) FROM objects WHERE key = 'ck-5/half.bin'"), 0,
           "... nothing of it is left in the catalog");
    push_upload_abort(u);

    /* ---- archive writes hold the volume lease of the volume they write ---- */
    test_exec(cat, "UPDATE instances SET heartbeat = 1e12 WHERE name = 'a'");
    test_exec(cat, "DELETE FROM leases");
    now = si_wall_now();
    ok(lease_claim(cat, "volume", "A00001", "b", now, LEASE_S, &err) == 1,
       "b holds volume A00001 (in its drive)");
    push_received_t r6;
    ok(push_small(&a, "ck-6", "v.bin", 6, &r6, &err) == 0, "a file through a");
    ok(push_archive_once(a.push, true, &done, &err) == 1 && done.files == 1,
       "a archives it: %s", done.files ? "1 file" : err.text);
    is_str(copy_volume(cat, r6.object_id), "A00002",
           "... on A00002: the volume b holds is skipped");
    ok(lease_follows_drive(cat, &a, "A00002"),
       "a holds A00002's lease while its drive has it, and only then");
    is_int(q(cat, "SELECT count(*) FROM leases WHERE kind = 'volume' AND name = '%s'"
                  " AND instance = 'b'", "A00001"), 1, "b still holds A00001");

    /* every volume with room another live instance's: the write waits */
    now = si_wall_now();
    test_exec(cat, "UPDATE leases SET instance = 'b' WHERE kind = 'volume'");
    ok(lease_claim(cat, "volume", "A00002", "b", now, LEASE_S, &err) == 1,
       "b holds A00002 too");
    push_received_t r7;
    ok(push_small(&a, "ck-7", "u.bin", 7, &r7, &err) == 0, "another file through a");
    giver_t g = {.holder = "b"};
    ha->hook = give_back_soon;
    ha->hook_arg = &g;
    double t0 = si_mono_now();
    rc = push_archive_once(a.push, true, &done, &err);
    double waited = si_mono_now() - t0;
    pthread_join(g.thread, NULL);
    ok(rc == 1 && done.files == 1, "a's write waited for a volume and wrote: %s",
       rc == 1 ? "ok" : err.text);
    ok(waited >= 0.45, "... it waited until b gave its volumes back (%.2f s)", waited);
    ok(lease_follows_drive(cat, &a, copy_volume(cat, r7.object_id)),
       "a holds the written volume's lease while its drive has it, and only then");

    /* a writer killed mid-write: its volume lease lapses and is taken over */
    test_exec(cat, "DELETE FROM leases");
    now = si_wall_now();
    ok(lease_claim(cat, "volume", "A00001", "ghost", now, LEASE_S, &err) == 1 &&
           lease_claim(cat, "volume", "A00002", "ghost", now, LEASE_S, &err) == 1,
       "a killed writer held both volumes");
    test_exec(cat, "UPDATE leases SET expires = 1 WHERE instance = 'ghost'");
    push_received_t r8;
    ok(push_small(&a, "ck-8", "t.bin", 8, &r8, &err) == 0, "a file through a");
    t0 = si_mono_now();
    ok(push_archive_once(a.push, true, &done, &err) == 1 && done.files == 1,
       "a takes an expired volume lease over and writes: %s", done.files ? "ok" : err.text);
    ok(si_mono_now() - t0 < 5, "... without waiting");
    is_int(q(cat, "SELECT count(*) FROM leases WHERE instance = '%s'", "ghost"), 1,
           "the ghost's lease of the other volume is left (it lapses)");
    ok(lease_follows_drive(cat, &a, copy_volume(cat, r8.object_id)),
       "the volume taken over is a's while its drive has it");

    instance_stop(&a);
    instance_stop(&b);
    catalog_close(cat);
    si_conf_free(conf);
    tap_remove_tree(dir);
    if (test_engine_is_pg())
        test_db_remove(dbpath);
}

int main(void)
{
    return test_run_engines(run);
}
