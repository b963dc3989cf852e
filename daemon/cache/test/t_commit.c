/* The cache's group commit: submitted objects committed in batches (fewer
 * batches than objects when they come together), each told once, visible
 * only when recorded; a failed flush fails its whole batch and keeps
 * nothing; readers waiting for a commit are woken; the settings. */
#include "config.h"

#include <pthread.h>

#include "common/tap.h"
#include "daemon/cache/test/cachetest.h"

static ct_t t;

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int told, ok, failed;
    char why[512];
} tally_t;

static void on_committed(void *arg, int64_t object_id, int rc, int errnum, const char *why)
{
    tally_t *ty = arg;
    (void)object_id;
    (void)errnum;
    pthread_mutex_lock(&ty->mu);
    ty->told++;
    if (rc == 0)
        ty->ok++;
    else {
        ty->failed++;
        snprintf(ty->why, sizeof(ty->why), "%s", why ? why : "");
    }
    pthread_cond_broadcast(&ty->cv);
    pthread_mutex_unlock(&ty->mu);
}

static void tally_wait(tally_t *ty, int n)
{
    pthread_mutex_lock(&ty->mu);
    while (ty->told < n)
        pthread_cond_wait(&ty->cv, &ty->mu);
    pthread_mutex_unlock(&ty->mu);
}

/* Writes objects first..first+n-1 (4 KiB each), then submits them all:
 * while writers are open a batch waits commit_delay for them, so they come
 * together however fast the committer is. They are catalogued first: the
 * cache shares the test's catalog connection, which its committer uses as
 * soon as the first object is submitted. */
static int submit_many(cache_t *c, unsigned first, int n, int64_t *ids, tally_t *ty)
{
    si_error_t err;
    char sum[SI_CHECKSUM_TEXT_MAX];
    cache_writer_t **ws = calloc((size_t)n, sizeof(*ws));
    int rc = ws ? 0 : -1, opened = 0;
    for (int i = 0; i < n && rc == 0; i++)
        ids[i] = ct_object(&t, first + (unsigned)i, 4096, sum);
    for (; opened < n && rc == 0; opened++) {
        unsigned k = first + (unsigned)opened;
        unsigned char *data = ct_content(k, 4096);
        ct_sha256(data, 4096, sum);
        rc = cache_writer_open(c, ids[opened], 4096, sum, &ws[opened], &err);
        if (rc == 0 && (rc = cache_writer_write(ws[opened], data, 4096, &err)) < 0)
            cache_writer_abort(ws[opened]);
        free(data);
        if (rc < 0)
            diag("object %u: %s", k, err.text);
    }
    if (rc < 0)
        opened--; /* the failed one is aborted */
    for (int i = 0; i < opened; i++) {
        if (rc < 0) {
            cache_writer_abort(ws[i]);
        } else if ((rc = cache_writer_submit(ws[i], 0, on_committed, ty, &err)) < 0) {
            diag("object %u: %s", first + (unsigned)i, err.text);
            cache_writer_abort(ws[i]);
        }
    }
    free(ws);
    return rc;
}

typedef struct {
    cache_t *c;
    uint64_t generation;
    bool woken;
} waiter_t;

static void *wait_commit(void *arg)
{
    waiter_t *wt = arg;
    wt->woken = cache_wait_commit(wt->c, wt->generation, 10000);
    return NULL;
}

/* Every object in a file of its own, or (segments) in segment files. */
static void body_with(bool segments)
{
    si_error_t err;
    if (ct_setup(&t, "t_commit") < 0) {
        ok(0, "setting up on %s", test_engine_name());
        return;
    }
    cache_conf_t conf = segments ? ct_conf_segments(&t, 1ull << 30, 256u << 20)
                                 : ct_conf(&t, 1ull << 30);
    /* a batch waits a moment for more: the 200 objects below come together
     * however fast the committer is next to the writer (on a loaded
     * machine it could take each one alone) */
    conf.commit_delay = 0.05;
    cache_t *c = cache_open(&conf, t.cat, &err);
    ok(c != NULL, "cache opened (%s): %s", segments ? "segments" : "a file per object",
       c ? "" : err.text);

    /* 200 objects submitted at once: committed in far fewer batches */
    tally_t ty = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, ""};
    int64_t ids[200];
    cache_usage_t u0, u1;
    cache_usage(c, &u0, &err);
    ok(submit_many(c, 1, 200, ids, &ty) == 0, "200 objects written and submitted");
    tally_wait(&ty, 200);
    cache_usage(c, &u1, &err);
    is_int(ty.ok, 200, "each told once that it is committed%s%s", ty.failed ? ": " : "", ty.why);
    ok(u1.commit_batches - u0.commit_batches < 200,
       "in fewer batches than objects: %llu batches",
       (unsigned long long)(u1.commit_batches - u0.commit_batches));
    is_int(ct_query_int(&t, "SELECT count(*) FROM cache"), 200, "200 rows recorded");
    char sub[400];
    snprintf(sub, sizeof(sub), "%s/tmp", t.cache_dir);
    is_int(ct_count_entries(sub), 0, "tmp/ empty");
    int fd;
    cache_place_t place;
    ok(cache_open_object(c, ids[199], &fd, &place, &err) == 0 && place.size == 4096,
       "the last one readable");
    close(fd);
    is_int(u1.writers, 0, "no writer left open");

    /* a reader waiting for a commit is woken by the next one */
    waiter_t wt = {c, cache_commit_generation(c), false};
    pthread_t th;
    pthread_create(&th, NULL, wait_commit, &wt);
    usleep(50000);
    char sum[SI_CHECKSUM_TEXT_MAX];
    int64_t id = ct_object(&t, 500, 1000, sum);
    ok(ct_store(c, id, 500, 1000, sum, 1000, 0, &err) == 0, "one more object: %s", err.text);
    pthread_join(th, NULL);
    ok(wt.woken, "a waiter on the commit generation was woken");
    ok(!cache_wait_commit(c, cache_commit_generation(c), 20),
       "with nothing to commit the wait times out");
    cache_close(c);

    /* failed flushes: the whole batch fails, nothing is kept */
    setenv("STAGEIN_TEST_CACHE_FLUSH_FAULT", "EIO:1000", 1);
    c = cache_open(&conf, t.cat, &err);
    unsetenv("STAGEIN_TEST_CACHE_FLUSH_FAULT");
    tally_t bad = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, ""};
    ok(submit_many(c, 1000, 20, ids, &bad) == 0, "20 objects submitted while flushes fail");
    tally_wait(&bad, 20);
    is_int(bad.failed, 20, "every one told it failed");
    ok(strstr(bad.why, "flushing the cache") && strstr(bad.why, "Input/output error"),
       "the error names the flush and its cause: %s", bad.why);
    is_int(ct_query_int(&t, "SELECT count(*) FROM cache"), 201, "no row for any of them");
    is_int(ct_count_entries(sub), 0, "no temp file left");
    cache_usage(c, &u1, &err);
    ok(u1.commit_failures > 0 && u1.reserved_bytes == 0, "failures counted, reservations given back");
    id = ct_object(&t, 501, 3000, sum);
    ok(ct_store(c, id, 501, 3000, sum, 3000, 0, &err) < 0 && errno == EIO &&
           strstr(err.text, "flushing the cache"),
       "cache_writer_finish reports the failed flush: %s", err.text);
    ok(cache_stat(c, id, NULL, &err) == 0, "and the object is not cached");
    cache_close(c);

    /* settings */
    const si_conf_key_t *schemas[] = {cache_conf_keys, NULL};
    si_conf_t *sc = si_conf_load_string(
        "cache = { commit_bytes = 1048576; commit_objects = 64; commit_delay = 0.01; };", schemas,
        &err);
    cache_conf_t from;
    ok(sc && cache_conf_from(sc, "/var/lib/stagein", &from, &err) == 0 &&
           from.commit_bytes == 1048576 && from.commit_objects == 64 && from.commit_delay == 0.01,
       "commit settings read: %s", sc ? "" : err.text);
    si_conf_free(sc);
    ok(si_conf_load_string("cache = { commit_objects = 0; };", schemas, &err) == NULL,
       "commit_objects 0 refused: %s", err.text);
    cache_conf_defaults(&from, "/x");
    ok(from.commit_bytes == 256u << 20 && from.commit_objects == 4096 && from.commit_delay == 0,
       "defaults: 256 MiB, 4096 objects, no delay");

    /* a small batch limit still commits everything */
    conf.commit_objects = 3;
    conf.commit_delay = 0;
    c = cache_open(&conf, t.cat, &err);
    tally_t small = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, ""};
    cache_usage(c, &u0, &err);
    ok(submit_many(c, 2000, 30, ids, &small) == 0, "30 objects with batches of at most 3");
    tally_wait(&small, 30);
    cache_usage(c, &u1, &err);
    ok(small.ok == 30 && u1.commit_batches - u0.commit_batches >= 10,
       "all committed, in %llu batches", (unsigned long long)(u1.commit_batches - u0.commit_batches));
    cache_close(c);

    /* one batch of 100 pinned objects (more rows than one statement
     * takes), one of them deleted from the catalog meanwhile: it fails
     * alone, the others are recorded and pinned */
    conf.commit_objects = 4096;
    conf.commit_delay = 0.5;
    c = cache_open(&conf, t.cat, &err);
    enum { BATCH = 100, GONE = 50 };
    int64_t bids[BATCH];
    char bsum[SI_CHECKSUM_TEXT_MAX];
    for (int i = 0; i < BATCH; i++)
        bids[i] = ct_object(&t, 3000 + (unsigned)i, 4096, bsum);
    int64_t request = ct_request(&t, 3000);
    cache_writer_t *bw[BATCH];
    int opened = 0;
    for (int i = 0; i < BATCH; i++) {
        unsigned char *data = ct_content(3000 + (unsigned)i, 4096);
        ct_sha256(data, 4096, bsum);
        opened += cache_writer_open(c, bids[i], 4096, bsum, &bw[i], &err) == 0 &&
                  cache_writer_write(bw[i], data, 4096, &err) == 0;
        free(data);
    }
    char gone[120];
    snprintf(gone, sizeof(gone), "DELETE FROM objects WHERE id = %lld", (long long)bids[GONE]);
    ok(opened == BATCH && request > 0 && test_exec(t.cat, gone) == 0,
       "%d objects written, one of them then deleted from the catalog", BATCH);
    tally_t one = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, ""};
    cache_usage(c, &u0, &err);
    int submitted = 0;
    for (int i = 0; i < BATCH; i++)
        submitted += cache_writer_submit(bw[i], request, on_committed, &one, &err) == 0;
    tally_wait(&one, BATCH);
    cache_usage(c, &u1, &err);
    ok(submitted == BATCH && one.ok == BATCH - 1 && one.failed == 1 &&
           strstr(one.why, "is not in the catalog"),
       "all committed but the deleted one (%d ok, %d failed: %s), in %llu batches", one.ok,
       one.failed, one.why, (unsigned long long)(u1.commit_batches - u0.commit_batches));
    char q[200];
    snprintf(q, sizeof(q), "SELECT count(*) FROM cache WHERE object_id BETWEEN %lld AND %lld",
             (long long)bids[0], (long long)bids[BATCH - 1]);
    is_int(ct_query_int(&t, q), BATCH - 1, "their rows recorded");
    snprintf(q, sizeof(q), "SELECT count(*) FROM cache_pins WHERE request_id = %lld",
             (long long)request);
    is_int(ct_query_int(&t, q), BATCH - 1, "each pinned for the request");
    snprintf(q, sizeof(q), "SELECT sum(pins) FROM cache WHERE object_id BETWEEN %lld AND %lld",
             (long long)bids[0], (long long)bids[BATCH - 1]);
    is_int(ct_query_int(&t, q), BATCH - 1, "once each");
    cache_close(c);
    if (segments)
        is_int(ct_query_int(&t, "SELECT count(*) FROM cache WHERE segment IS NULL"), 0,
               "every object was in a segment");
    ct_teardown(&t);
}

int main(void)
{
    return ct_run_layouts(body_with);
}
