/* Reservations across instances sharing one cache directory: each counts
 * the live others' reservations (recorded in the catalog), so that two
 * instances reserving at once, from two threads, never set aside more than
 * the capacity together; a commit and an unreserve give the row back; a
 * dead instance's reservations stop counting and are dropped; an instance
 * alone records nothing in the catalog. Both engines. */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>

#include "catalog/instances.h"
#include "common/clock.h"
#include "common/tap.h"
#include "daemon/cache/test/cachetest.h"

#define OBJ 100      /* bytes per object; the cache holds 1000 */
#define NOBJ 48      /* objects 1..24 for a, 25..48 for b in the race */
#define LEASE_S 30.0

static ct_t t;
static int64_t ids[NOBJ + 1];
static char sums[NOBJ + 1][SI_CHECKSUM_TEXT_MAX];

static cache_t *open_instance(const char *name, catalog_t **cat)
{
    return ct_open_instance(&t, name, LEASE_S, cat);
}

static long long rows_of(const char *instance)
{
    char sql[160];
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM cache_reservations WHERE instance = '%s'", instance);
    return ct_query_int(&t, sql);
}

typedef struct {
    cache_t *c;
    unsigned first, last; /* object numbers it tries */
    unsigned granted, blocked, failed;
} racer_t;

static void *race(void *arg)
{
    racer_t *r = arg;
    for (unsigned n = r->first; n <= r->last; n++) {
        si_error_t err;
        int rc = cache_reserve(r->c, ids[n], OBJ, NULL, &err);
        if (rc == CACHE_RESERVED)
            r->granted++;
        else if (rc == CACHE_WOULD_BLOCK)
            r->blocked++;
        else
            r->failed++;
    }
    return NULL;
}

static void body(void)
{
    si_error_t err;
    if (ct_setup(&t, "t_shared_reserve") < 0) {
        ok(0, "setting up on %s", test_engine_name());
        return;
    }
    for (unsigned n = 1; n <= NOBJ; n++)
        ids[n] = ct_object(&t, n, OBJ, sums[n]);
    double now = si_wall_now();
    ok(instance_register(t.cat, "a", "h", 1, now, LEASE_S, &err) == 0 &&
           instance_register(t.cat, "b", "h", 2, now, LEASE_S, &err) == 0,
       "instances a and b registered: %s", err.text);
    catalog_t *cat_a = NULL, *cat_b = NULL;
    cache_t *a = open_instance("a", &cat_a), *b = open_instance("b", &cat_b);
    ok(a && b, "a and b open one cache directory");
    if (!a || !b)
        goto out;

    /* ---- two threads, one per instance, reserve 24 objects each at once ---- */
    racer_t ra = {a, 1, 24, 0, 0, 0}, rb = {b, 25, 48, 0, 0, 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, race, &ra);
    pthread_create(&tb, NULL, race, &rb);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    is_int(ra.failed + rb.failed, 0, "no reservation failed");
    ok((ra.granted + rb.granted) * OBJ <= 1000,
       "together they set aside at most the capacity: a %u, b %u objects of %d bytes",
       ra.granted, rb.granted, OBJ);
    ok(ct_query_int(&t, "SELECT coalesce(sum(bytes), 0) FROM cache_reservations") <= 1000,
       "the catalog's reservations stay within the capacity");
    is_int(rows_of("a"), ra.granted, "a's granted reservations are its rows");
    is_int(rows_of("b"), rb.granted, "b's granted reservations are its rows");
    for (unsigned n = 1; n <= NOBJ; n++)
        cache_unreserve(n <= 24 ? a : b, ids[n]);
    is_int(ct_query_int(&t, "SELECT count(*) FROM cache_reservations"), 0,
           "unreserving gives every row back");

    /* ---- one after the other: b sees a's 600 bytes ---- */
    for (unsigned n = 1; n <= 6; n++)
        cache_reserve(a, ids[n], OBJ, NULL, &err);
    unsigned got = 0;
    cache_block_t block = {.generation = 0};
    for (unsigned n = 25; n <= 30; n++)
        got += cache_reserve(b, ids[n], OBJ, &block, &err) == CACHE_RESERVED;
    is_int(got, 4, "b gets the 400 bytes a left, not 600");
    ok(strstr(block.reason, "by other instances") != NULL,
       "b's reason names the others' reservations: %s", block.reason);
    cache_usage_t u;
    int urc = cache_usage(b, &u, &err);
    ok(urc == 0 && u.reserved_bytes == 4 * OBJ,
       "b's usage shows its own reservations: %" PRIu64, u.reserved_bytes);

    /* ---- many at once: one insert, then the site's usage read again ---- */
    int64_t both[] = {ids[35], ids[36], ids[37]};
    uint64_t sizes[] = {OBJ, OBJ, OBJ};
    int outcome[3];
    for (unsigned n = 25; n <= 30; n++)
        cache_unreserve(b, ids[n]);
    int many_rc = cache_reserve_many(b, both, sizes, 3, outcome, &block, &err);
    ok(many_rc == 0 &&
           outcome[0] == CACHE_RESERVED && outcome[1] == CACHE_RESERVED &&
           outcome[2] == CACHE_RESERVED,
       "b reserves three at once");
    is_int(rows_of("b"), 3, "each is a row of b's");
    got = 0;
    for (unsigned n = 7; n <= 9; n++)
        got += cache_reserve(a, ids[n], OBJ, NULL, &err) == CACHE_RESERVED;
    is_int(got, 1, "a sees them: one more of its own fits, not three");
    cache_unreserve(a, ids[7]);
    int64_t more[] = {ids[38], ids[39], ids[40], ids[41], ids[42]};
    uint64_t more_sizes[] = {OBJ, OBJ, OBJ, OBJ, OBJ};
    int more_outcome[5];
    int more_rc = cache_reserve_many(b, more, more_sizes, 5, more_outcome, &block, &err);
    ok(more_rc == 0 &&
           more_outcome[0] == CACHE_RESERVED && more_outcome[1] == CACHE_WOULD_BLOCK &&
           more_outcome[2] == CACHE_NOT_TRIED && more_outcome[4] == CACHE_NOT_TRIED,
       "b's next five: one fits beside a's 600 bytes, then it would block (%d %d %d %d %d)",
       more_outcome[0], more_outcome[1], more_outcome[2], more_outcome[3], more_outcome[4]);
    is_int(rows_of("b"), 4, "only the reserved one's row was added");
    for (unsigned k = 0; k < 3; k++)
        cache_unreserve(b, both[k]);
    cache_unreserve(b, more[0]);
    is_int(rows_of("b"), 0, "given back, row and all");
    /* b read the site's usage a moment ago; a reserves 200 bytes more since:
     * b's three fit its view, and its read after the insert gives the last back */
    urc = cache_usage(b, &u, &err);
    got = cache_reserve(a, ids[7], OBJ, NULL, &err) == CACHE_RESERVED &&
          cache_reserve(a, ids[8], OBJ, NULL, &err) == CACHE_RESERVED;
    int64_t late[] = {ids[43], ids[44], ids[45]};
    int late_rc = cache_reserve_many(b, late, sizes, 3, outcome, &block, &err);
    ok(urc == 0 && got && late_rc == 0 && outcome[0] == CACHE_RESERVED &&
           outcome[1] == CACHE_RESERVED && outcome[2] == CACHE_WOULD_BLOCK,
       "a's 800 bytes, then b's three: two fit, the third would block (%d %d %d): %s",
       outcome[0], outcome[1], outcome[2], block.reason);
    is_int(rows_of("b"), 2, "the third's row is given back");
    ok(ct_query_int(&t, "SELECT sum(bytes) FROM cache_reservations") <= 1000,
       "the site's reservations stay within the capacity");
    cache_unreserve(a, ids[7]);
    cache_unreserve(a, ids[8]);
    for (unsigned k = 0; k < 3; k++)
        cache_unreserve(b, late[k]);
    for (unsigned n = 25; n <= 28; n++)
        cache_reserve(b, ids[n], OBJ, NULL, &err);

    /* ---- a commit moves a's reservation into the cache's rows ---- */
    int64_t req = ct_request(&t, 1);
    ok(ct_store_next(&t, a, ids, sums, 1, OBJ, req) == 0,
       "a stores object 1 on its reservation, pinned (eviction cannot make room)");
    is_int(rows_of("a"), 5, "its reservation's row went with the commit");
    got = cache_reserve(b, ids[31], OBJ, NULL, &err) == CACHE_RESERVED;
    is_int(got, 0, "b still finds no room: pinned object 1 now counts as used");
    cache_writer_t *w;
    ok(cache_writer_open(a, ids[2], OBJ, sums[2], &w, &err) == 0, "a opens a writer on object 2");
    cache_writer_abort(w);
    is_int(rows_of("a"), 4, "an aborted writer gives its row back");

    /* ---- a dies: its reservations stop counting and are dropped ---- */
    test_exec(t.cat, "UPDATE instances SET heartbeat = 1 WHERE name = 'a'");
    got = 0;
    for (unsigned n = 31; n <= 34; n++)
        got += cache_reserve(b, ids[n], OBJ, NULL, &err) == CACHE_RESERVED;
    is_int(got, 4, "b reserves the room of dead a's reservations");
    ok(cache_trim(b, NULL, NULL, &err) == 0, "b's trim: %s", err.text);
    is_int(rows_of("a"), 0, "dead a's reservations are dropped");
    is_int(rows_of("b"), 8, "b's own are kept");

    cache_close(a);
    cache_close(b);
    a = b = NULL;
    is_int(rows_of("b"), 8, "closing keeps rows (a crash would)");
    catalog_close(cat_b);
    b = open_instance("b", &cat_b);
    is_int(rows_of("b"), 0, "b opening again drops its earlier life's rows");
    cache_close(b);
    b = NULL;

    /* ---- alone: in memory only ---- */
    cache_conf_t alone = ct_conf(&t, 1000);
    cache_t *x = cache_open(&alone, t.cat, &err);
    ok(x && cache_reserve(x, ids[40], OBJ, NULL, &err) == CACHE_RESERVED,
       "an instance alone reserves: %s", err.text);
    is_int(ct_query_int(&t, "SELECT count(*) FROM cache_reservations"), 0,
           "and records nothing in the catalog");
    cache_close(x);
out:
    ct_close_instance(a, cat_a);
    ct_close_instance(b, cat_b);
    ct_teardown(&t);
}

int main(void)
{
    return test_run_engines(body);
}
