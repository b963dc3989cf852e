/* Cache space: pins from several requests, LRU eviction between the
 * watermarks, reservations, backpressure and progress after unpinning. */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>

#include "common/tap.h"
#include "daemon/cache/test/cachetest.h"

static ct_t t;
static bool segments; /* the small objects in segment files */
static int64_t ids[40];
static char sums[40][SI_CHECKSUM_TEXT_MAX];

#define OBJ 100 /* bytes per object; the cache holds 1000 */

static int store(cache_t *c, unsigned n, int64_t pin)
{
    return ct_store_next(&t, c, ids, sums, n, OBJ, pin);
}

static bool cached(cache_t *c, unsigned n)
{
    return ct_cached(c, ids[n]);
}

static const char *resident(cache_t *c, unsigned last)
{
    return ct_resident(c, ids, last);
}

static void touch(cache_t *c, unsigned n)
{
    si_error_t err;
    int fd;
    cache_place_t place;
    t.now += 1;
    if (cache_open_object(c, ids[n], &fd, &place, &err) == 0)
        close(fd);
}

/* "1,7,8" for the objects among 1..last that are cached */
static void test_pins(cache_t *c)
{
    si_error_t err;
    int64_t ra = ct_request(&t, 1), rb = ct_request(&t, 1);
    store(c, 1, ra);
    cache_entry_t e;
    cache_stat(c, ids[1], &e, &err);
    is_int(e.pins, 1, "finish pinned it for the first request");
    is_int(cache_pin(c, ids[1], rb, &err), 1, "second request pins the same object");
    is_int(cache_pin(c, ids[1], rb, &err), 0, "pinning twice for one request is one pin");
    cache_stat(c, ids[1], &e, &err);
    is_int(e.pins, 2, "two requests, two pins, one copy");
    is_int(ct_query_int(&t, "SELECT count(*) FROM cache_pins"), 2, "cache_pins records both");
    ok(cache_remove(c, ids[1], &err) < 0 && errno == EBUSY, "a pinned object is not removed: %s",
       err.text);
    is_int(cache_unpin(c, ids[1], ra, &err), 1, "first request unpins");
    is_int(cache_unpin(c, ids[1], ra, &err), 0, "unpinning again changes nothing");
    cache_stat(c, ids[1], &e, &err);
    is_int(e.pins, 1, "still pinned by the second");
    uint64_t n = 9;
    ok(cache_unpin_request(c, rb, &n, &err) == 0 && n == 1, "release of the second request");
    cache_stat(c, ids[1], &e, &err);
    is_int(e.pins, 0, "unpinned");
    ok(cache_remove(c, ids[1], &err) == 0 && !cached(c, 1), "then it can be removed");
    ok(cache_remove(c, ids[1], &err) < 0 && errno == ENOENT, "removing it again: %s", err.text);
}

static void test_eviction(cache_t *c)
{
    si_error_t err;
    for (unsigned n = 1; n <= 8; n++)
        store(c, n, 0);
    touch(c, 1); /* LRU order now 2..8, 1 */
    cache_usage_t u;
    cache_usage(c, &u, &err);
    is_int(u.used_bytes, 800, "8 objects: 800 bytes");
    is_int(cache_reserve(c, ids[9], OBJ, NULL, &err), CACHE_RESERVED, "reserve up to the high watermark");
    is_str(resident(c, 8), "1,2,3,4,5,6,7,8", "at the high watermark nothing is evicted");
    store(c, 9, 0);
    is_int(cache_reserve(c, ids[10], OBJ, NULL, &err), CACHE_RESERVED, "reserve past it");
    is_str(resident(c, 9), "1,7,8,9",
           "least recently used evicted down to the low watermark (used + reserved <= 500)");
    cache_usage(c, &u, &err);
    ok(u.used_bytes == 400 && u.reserved_bytes == 100 && u.evicted_objects == 5 &&
           u.evicted_bytes == 500, "usage: 400 used + 100 reserved, 5 evicted");
    char rel[64], path[512];
    cache_object_path(ids[2], rel, sizeof(rel), &err);
    snprintf(path, sizeof(path), "%s/%s", t.cache_dir, rel);
    ok(segments || access(path, F_OK) < 0, "evicted files are gone");
    is_int(ct_query_int(&t, "SELECT count(*) FROM cache"), 4, "and their rows");
    store(c, 10, 0);
    /* trim does nothing below the high watermark */
    uint64_t eo = 9, eb = 9;
    ok(cache_trim(c, &eo, &eb, &err) == 0 && eo == 0 && eb == 0, "trim below high: nothing");
}

typedef struct {
    cache_t *c;
    uint64_t generation;
    bool changed;
} waiter_t;

static void *waiter(void *arg)
{
    waiter_t *w = arg;
    w->changed = cache_wait(w->c, w->generation, 10000);
    return NULL;
}

static void test_backpressure(cache_t *c)
{
    si_error_t err;
    /* pin everything there is (1,7,8,9,10) and fill up with pinned data */
    int64_t req = ct_request(&t, 1);
    for (unsigned n = 1; n <= 10; n++)
        if (cached(c, n))
            cache_pin(c, ids[n], req, &err);
    for (unsigned n = 11; n <= 14; n++) {
        if (cache_reserve(c, ids[n], OBJ, NULL, &err) != CACHE_RESERVED)
            break;
        store(c, n, req);
    }
    cache_usage_t u;
    cache_usage(c, &u, &err);
    ok(u.used_bytes == 900 && u.pinned_bytes == 900 && u.pinned_objects == 9 &&
           u.pinning_requests == 1, "900 bytes pinned by one request");
    ok(cache_reserve(c, ids[15], OBJ, NULL, &err) == CACHE_RESERVED, "the last 100 bytes fit");
    cache_block_t block;
    is_int(cache_reserve(c, ids[16], OBJ, &block, &err), CACHE_WOULD_BLOCK,
           "full of pinned data: would block");
    ok(strstr(block.reason, "cache full: 900 B pinned (9 objects, 1 requests)") &&
           strstr(block.reason, "100 B reserved for 1 recalls") &&
           strstr(block.reason, "capacity 1.0 kB") && strstr(block.reason, "needs 100 B"),
       "reason: %s", block.reason);
    is_str(resident(c, 14), "1,7,8,9,10,11,12,13,14", "nothing pinned was evicted");
    cache_writer_t *w;
    ok(cache_writer_open(c, ids[16], OBJ, sums[16], &w, &err) < 0 && errno == EAGAIN &&
           strstr(err.text, "cache full"), "a writer without room: EAGAIN: %s", err.text);
    ok(cache_reserve(c, ids[17], 5000, NULL, &err) < 0 && errno == EFBIG,
       "larger than the cache: %s", err.text);

    /* giving the reservation back is progress too */
    cache_unreserve(c, ids[15]);
    ok(cache_wait(c, block.generation, 0), "unreserve wakes waiters");
    ok(cache_reserve(c, ids[16], OBJ, &block, &err) == CACHE_RESERVED, "then the next one fits");
    is_int(cache_reserve(c, ids[15], OBJ, &block, &err), CACHE_WOULD_BLOCK, "and is full again");

    /* a waiter wakes up when a release makes room */
    waiter_t wt = {c, block.generation, false};
    pthread_t th;
    pthread_create(&th, NULL, waiter, &wt);
    ok(!cache_wait(c, block.generation, 50), "nothing changed yet: wait times out");
    uint64_t n = 0;
    cache_unpin_request(c, req, &n, &err);
    pthread_join(th, NULL);
    ok(wt.changed && n == 9, "release of the request (9 pins) wakes the waiter");
    is_int(cache_reserve(c, ids[15], OBJ, &block, &err), CACHE_RESERVED,
           "after the release the recall proceeds");
    cache_usage(c, &u, &err);
    ok(u.used_bytes + u.reserved_bytes <= 500, "evicted down to the low watermark (%" PRIu64
                                               " used, %" PRIu64 " reserved)",
       u.used_bytes, u.reserved_bytes);
    is_int(u.blocked, 3, "three reservations were refused");
    cache_unreserve(c, ids[15]);
    cache_unreserve(c, ids[16]);
}

static void test_reservations(cache_t *c)
{
    si_error_t err;
    /* empty the cache */
    for (unsigned n = 1; n < 40; n++)
        if (cached(c, n))
            cache_remove(c, ids[n], &err);
    int64_t req = ct_request(&t, 1);
    store(c, 20, req); /* 100 pinned */
    /* reservations alone cannot overfill: 400 + 400 + 100 pinned fit, a third does not */
    uint64_t big = 400;
    is_int(cache_reserve(c, ids[21], big, NULL, &err), CACHE_RESERVED, "first 400 reserved");
    is_int(cache_reserve(c, ids[22], big, NULL, &err), CACHE_RESERVED, "second 400 reserved");
    is_int(cache_reserve(c, ids[21], big, NULL, &err), CACHE_RESERVED,
           "reserving the same object again is the same reservation");
    cache_block_t block;
    is_int(cache_reserve(c, ids[23], big, &block, &err), CACHE_WOULD_BLOCK,
           "third would overfill: %s", block.reason);
    cache_unreserve(c, ids[21]);
    is_int(cache_reserve(c, ids[23], big, NULL, &err), CACHE_RESERVED,
           "after one is given back it fits");
    cache_usage_t u;
    cache_usage(c, &u, &err);
    ok(u.reserved_bytes == 800 && u.reservations == 2, "800 bytes in 2 reservations");
    cache_unreserve(c, ids[22]);
    cache_unreserve(c, ids[23]);
    cache_unpin_request(c, req, NULL, &err);
}

/* A scan's reservations in one call: each outcome as cache_reserve's one
 * by one would be, and nothing tried after the first that would block. */
static void test_reserve_many(cache_t *c)
{
    si_error_t err;
    for (unsigned n = 1; n < 40; n++)
        if (cached(c, n))
            cache_remove(c, ids[n], &err);
    int64_t req = ct_request(&t, 1);
    store(c, 20, req);
    store(c, 24, req); /* 200 bytes pinned */
    int64_t asked[] = {ids[24], ids[21], ids[21], -5, ids[25], ids[22], ids[23], ids[26]};
    uint64_t sizes[] = {OBJ, 400, 400, OBJ, 5000, 400, 400, OBJ};
    int want[] = {CACHE_PRESENT, CACHE_RESERVED, CACHE_NOT_TRIED, -1, -1, CACHE_RESERVED,
                  CACHE_WOULD_BLOCK, CACHE_NOT_TRIED};
    enum { N = sizeof(asked) / sizeof(asked[0]) };
    int outcome[N];
    cache_block_t block = {.generation = 0};
    ok(cache_reserve_many(c, asked, sizes, N, outcome, &block, &err) == 0, "8 asked at once");
    int wrong = 0;
    for (unsigned k = 0; k < N; k++)
        if (outcome[k] != want[k]) {
            diag("object %u: %d, not %d", k, outcome[k], want[k]);
            wrong++;
        }
    ok(wrong == 0, "cached, reserved, asked twice (cache_reserve's), a bad id, too large,"
                   " reserved, would block, after it not tried");
    ok(strstr(block.reason, "cache full: 200 B pinned") && strstr(block.reason, "needs 400 B"),
       "the one that would block says why: %s", block.reason);
    cache_usage_t u;
    cache_usage(c, &u, &err);
    ok(u.reservations == 2 && u.reserved_bytes == 800, "800 bytes in 2 reservations");
    is_int(cache_reserve(c, ids[21], 400, NULL, &err), CACHE_RESERVED,
           "the one asked twice: the same reservation");
    ok(cache_reserve(c, ids[25], 5000, NULL, &err) < 0 && errno == EFBIG,
       "the one too large, asked alone: %s", err.text);
    ok(cache_reserve_many(c, asked, sizes, 0, outcome, &block, &err) == 0, "none asked");
    cache_unreserve(c, ids[21]);
    cache_unreserve(c, ids[22]);
    cache_unpin_request(c, req, NULL, &err);

    /* past one look-up's few hundred */
    enum { M = 600 };
    static int64_t many[M];
    static uint64_t zero[M];
    static int got[M];
    for (unsigned k = 0; k < M; k++)
        many[k] = 2000001 + k;
    ok(cache_reserve_many(c, many, zero, M, got, NULL, &err) == 0, "600 asked");
    wrong = 0;
    for (unsigned k = 0; k < M; k++)
        wrong += got[k] != CACHE_RESERVED;
    cache_usage(c, &u, &err);
    ok(wrong == 0 && u.reservations == M, "600 reserved (%d not)", wrong);
    for (unsigned k = 0; k < M; k++)
        cache_unreserve(c, many[k]);
}

/* Thousands of reservations given back in a scattered order: each kept one
 * is still found, each given back is gone, and the counts follow. */
static void test_many_reservations(cache_t *c)
{
    enum { N = 5000 };
    const int64_t first = 1000001;
    si_error_t err;
    cache_usage_t u;
    int failures = 0;
    for (int64_t k = 0; k < N; k++)
        failures += cache_reserve(c, first + k, 0, NULL, &err) != CACHE_RESERVED;
    ok(failures == 0, "5,000 reservations of 0 bytes");
    /* 7919 is prime to N: every id once, scattered */
    for (int64_t k = 0; k < N; k++) {
        int64_t id = first + (k * 7919) % N;
        if (id % 3)
            cache_unreserve(c, id);
    }
    int64_t kept = 0;
    for (int64_t k = 0; k < N; k++)
        kept += (first + k) % 3 == 0;
    cache_usage(c, &u, &err);
    is_int((int64_t)u.reservations, kept, "two of every three given back");
    failures = 0;
    for (int64_t k = 0; k < N; k++) {
        int64_t id = first + k;
        int rc = cache_reserve(c, id, id % 3 ? 0 : 1, NULL, &err);
        failures += id % 3 ? rc != CACHE_RESERVED : !(rc < 0 && errno == EINVAL);
    }
    ok(failures == 0, "each kept one found (another size refused), each given back reserved anew");
    cache_usage(c, &u, &err);
    is_int((int64_t)u.reservations, N, "all 5,000 reserved again");
    for (int64_t k = N - 1; k >= 0; k--)
        cache_unreserve(c, first + k);
    cache_usage(c, &u, &err);
    ok(u.reservations == 0 && u.reserved_bytes == 0, "none left once all are given back");
}

static void test_restart(ct_t *tt, cache_conf_t *conf, cache_t **cp)
{
    si_error_t err;
    cache_t *c = *cp;
    int64_t ra = ct_request(tt, 30), rb = ct_request(tt, 30);
    store(c, 30, ra);
    cache_pin(c, ids[30], rb, &err);
    touch(c, 30);
    double last = t.now;
    cache_close(c);
    *cp = c = cache_open(conf, tt->cat, &err);
    cache_entry_t e;
    ok(c && cache_stat(c, ids[30], &e, &err) == 1 && e.pins == 2, "pins survive a restart");
    is_near(e.last_access, last, 1e-6, "batched access time was written at close");
    uint64_t n;
    ok(cache_unpin_request(c, ra, &n, &err) == 0 && n == 1 &&
           cache_unpin_request(c, rb, &n, &err) == 0 && n == 1,
       "each request still knows its pin after the restart");
    cache_usage_t u;
    cache_usage(c, &u, &err);
    is_int(u.used_bytes, ct_query_int(tt, "SELECT sum(size) FROM cache"), "usage reloaded");
}

static void body_with(bool in_segments)
{
    si_error_t err;
    segments = in_segments;
    if (ct_setup(&t, "t_space") < 0) {
        ok(0, "setting up on %s", test_engine_name());
        return;
    }
    diag("%s", segments ? "segments" : "a file per object");
    for (unsigned n = 1; n < 40; n++)
        ids[n] = ct_object(&t, n, n == 17 ? 5000 : OBJ, sums[n]);
    cache_conf_t conf = segments ? ct_conf_segments(&t, 1000, 1u << 20) : ct_conf(&t, 1000);
    conf.high_watermark = 0.9;
    conf.low_watermark = 0.5;
    cache_t *c = cache_open(&conf, t.cat, &err);
    ok(c != NULL, "cache of 1000 bytes, watermarks 0.9 / 0.5");

    test_pins(c);
    test_many_reservations(c);
    test_eviction(c);
    test_backpressure(c);
    test_reservations(c);
    test_reserve_many(c);
    test_restart(&t, &conf, &c);

    cache_close(c);
    ct_teardown(&t);
}

int main(void)
{
    return ct_run_layouts(body_with);
}
