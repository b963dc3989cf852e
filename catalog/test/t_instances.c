#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "catalog/instances.h"
#include "catalog/test/testutil.h"
#include "common/tap.h"

#define RACE_LEASES 200

typedef struct {
    const char *path;
    const char *instance;
    int won[RACE_LEASES];
    int errors;
    pthread_barrier_t *start;
} racer_t;

/* Each racer, on its own connection, claims the same leases in the same
 * order as the other. */
static void *race(void *arg)
{
    racer_t *r = arg;
    si_error_t err;
    catalog_t *cat = catalog_open(r->path, 0, &err);
    pthread_barrier_wait(r->start);
    if (!cat) {
        r->errors++;
        return NULL;
    }
    for (int i = 0; i < RACE_LEASES; i++) {
        char name[32];
        snprintf(name, sizeof(name), "%d", i);
        int rc = lease_claim(cat, "race", name, r->instance, 1000.0, 30.0, &err);
        if (rc < 0) {
            diag("%s: %s", r->instance, err.text);
            r->errors++;
        }
        r->won[i] = rc == 1;
    }
    catalog_close(cat);
    return NULL;
}

static int count_holder(const char *name, const char *holder, void *arg)
{
    (void)name;
    (void)holder;
    (*(int *)arg)++;
    return 0;
}

static int always_loaded(void *arg, const char *label)
{
    (void)arg;
    (void)label;
    return 1;
}

static void run(void)
{
    char path[700];
    si_error_t err;
    test_db_path(path, sizeof(path), "inst");
    test_db_remove(path);
    catalog_t *cat = catalog_open(path, CATALOG_CREATE, &err);
    ok(cat != NULL, "%s: catalog opened", test_engine_name());
    if (!cat)
        return;
    char host[64] = "node-a";
    long me = (long)getpid();
    long gone = 4194000; /* above any pid this host gives */

    ok(instance_register(cat, "", host, me, 100.0, 10.0, &err) < 0 && errno == EINVAL,
       "an empty name is refused: %s", err.text);

    /* registry */
    ok(instance_register(cat, "a", host, gone, 100.0, 10.0, &err) == 0, "a registered");
    ok(instance_register(cat, "b", "node-b", 4242, 100.0, 10.0, &err) == 0, "b registered");
    ok(instance_register(cat, "a", host, me, 100.5, 10.0, &err) == 0,
       "a restart on the same host takes its name back when the old pid is gone");
    ok(instance_register(cat, "a", host, gone, 100.6, 10.0, &err) < 0 && errno == EEXIST,
       "but not from a live process on the same host: %s", err.text);
    ok(instance_register(cat, "b", "node-c", 77, 105.0, 10.0, &err) < 0 && errno == EEXIST &&
           strstr(err.text, "in use by pid 4242 on node-b"),
       "a live name on another host is refused: %s", err.text);
    ok(instance_heartbeat(cat, "a", host, gone, 102.0, 10.0, &err) < 0 && errno == ESTALE,
       "the old process's heartbeat is refused: %s", err.text);
    ok(instance_heartbeat(cat, "a", host, me, 102.0, 10.0, &err) == 0,
       "the new process beats");

    /* leases: claim, hold, renew, expire, take over, release */
    is_int(lease_claim(cat, LEASE_VOLUME, "VOL001", "a", 102.0, 10.0, &err), 1, "a claims VOL001");
    is_int(lease_claim(cat, LEASE_VOLUME, "VOL001", "b", 103.0, 10.0, &err), 0,
           "b cannot while a holds it");
    is_int(lease_claim(cat, LEASE_VOLUME, "VOL001", "a", 104.0, 10.0, &err), 1,
           "a claims its own again (extended)");
    char holder[INSTANCE_NAME_MAX + 1] = "";
    ok(lease_holder(cat, LEASE_VOLUME, "VOL001", 113.0, holder, sizeof(holder), &err) == 1 &&
           strcmp(holder, "a") == 0, "held by a until 114");
    ok(instance_heartbeat(cat, "a", host, me, 112.0, 10.0, &err) == 0,
       "a's heartbeat renews its leases");
    is_int(lease_claim(cat, LEASE_VOLUME, "VOL001", "b", 120.0, 10.0, &err), 0,
           "still a's at 120 (renewed to 122)");
    is_int(lease_claim(cat, LEASE_VOLUME, "VOL001", "b", 123.0, 10.0, &err), 1,
           "b takes it over once expired");
    is_int(lease_holder(cat, LEASE_VOLUME, "VOL001", 124.0, holder, sizeof(holder), &err), 1,
           "someone holds it");
    is_str(holder, "b", "b does");
    is_int((int)lease_renew_all(cat, "a", 124.0, 10.0, &err), 0,
           "a renews nothing: its lapsed lease is not its own any more");
    is_int(lease_release(cat, LEASE_VOLUME, "VOL001", "a", &err), 0, "a cannot release b's");
    is_int(lease_release(cat, LEASE_VOLUME, "VOL001", "b", &err), 1, "b releases it");
    is_int(lease_holder(cat, LEASE_VOLUME, "VOL001", 124.0, holder, sizeof(holder), &err), 0,
           "nobody holds it");
    ok(lease_claim(cat, "k", "", "a", 1.0, 1.0, &err) < 0 && errno == EINVAL,
       "an empty lease name is refused: %s", err.text);

    /* one instance's volume leases shared by its threads (volume_holds) */
    volume_holds_t *vh = volume_holds_new("a", 10.0);
    ok(vh != NULL, "a's table of volume leases");
    is_int(volume_hold(vh, cat, "VH1", 125.0, &err), 1, "a's reader holds VH1 (claimed)");
    is_int(volume_hold(vh, cat, "VH1", 125.0, &err), 1, "a's writer holds it too");
    is_int(lease_claim(cat, LEASE_VOLUME, "VH1", "b", 125.5, 10.0, &err), 0, "b cannot have it");
    ok(!volume_unhold(vh, "VH1", 50.0), "the reader is done: the writer still uses it");
    is_int(volume_holds_release_idle(vh, cat, 60.0, 0, NULL, NULL, &err), 0,
           "not given back while the writer uses it");
    ok(volume_unhold(vh, "VH1", 51.0), "the writer is done: VH1 idle");
    is_int((int)volume_holds_busy(vh), 0, "no volume in use");
    is_int(volume_holds_release_idle(vh, cat, 51.5, 1.0, NULL, NULL, &err), 0,
           "kept during the grace time");
    is_int(volume_holds_release_idle(vh, cat, 60.0, 1.0, always_loaded, NULL, &err), 0,
           "kept while the backend has it loaded");
    ok(volume_holds_has(vh, "VH1"), "a still holds VH1");
    is_int(volume_holds_release_idle(vh, cat, 60.0, 1.0, NULL, NULL, &err), 1,
           "given back once idle and unloaded");
    is_int(lease_holder(cat, LEASE_VOLUME, "VH1", 126.0, holder, sizeof(holder), &err), 0,
           "nobody holds VH1");
    is_int(volume_hold(vh, cat, "VH2", 126.0, &err), 1, "a holds VH2");
    volume_unhold(vh, "VH2", 52.0);
    is_int(lease_claim(cat, LEASE_VOLUME, "VH2", "b", 137.0, 10.0, &err), 1,
           "its lease lapsed (no heartbeat) and b took it");
    is_int(volume_hold(vh, cat, "VH2", 137.5, &err), 0,
           "a's next use asks the catalog again: b's now");
    ok(!volume_holds_has(vh, "VH2") && volume_holds_count(vh) == 0, "... and a forgets it");
    lease_release(cat, LEASE_VOLUME, "VH2", "b", &err);
    volume_holds_free(vh);

    /* others' leases */
    lease_claim(cat, LEASE_VOLUME, "V1", "a", 130.0, 10.0, &err);
    lease_claim(cat, LEASE_VOLUME, "V2", "b", 130.0, 10.0, &err);
    lease_claim(cat, LEASE_VOLUME, "V3", "b", 130.0, 10.0, &err);
    int n = 0;
    lease_each_held(cat, LEASE_VOLUME, "a", 131.0, count_holder, &n, &err);
    is_int(n, 2, "a sees b's two volume leases");
    n = 0;
    lease_each_held(cat, LEASE_VOLUME, NULL, 131.0, count_holder, &n, &err);
    is_int(n, 3, "three in all");
    n = 0;
    lease_each_held(cat, LEASE_VOLUME, NULL, 141.0, count_holder, &n, &err);
    is_int(n, 0, "none live once expired");
    is_int((int)lease_release_all(cat, "b", &err), 2, "b drops its two");

    /* dead instances */
    instance_info_t *list = NULL;
    size_t count = 0;
    ok(instance_list(cat, 111.0, 10.0, false, &list, &count, &err) == 0 && count == 2,
       "two instances listed");
    free(list);
    ok(instance_list(cat, 111.0, 10.0, true, &list, &count, &err) == 0 && count == 1 &&
           strcmp(list[0].name, "b") == 0, "b (last beat at 100) is dead at 111, a is not");
    free(list);
    ok(instance_unregister(cat, "b", &err) == 0, "b unregistered");
    ok(instance_list(cat, 111.0, 10.0, false, &list, &count, &err) == 0 && count == 1,
       "one left");
    free(list);
    ok(instance_register(cat, "b", "node-c", 77, 150.0, 10.0, &err) == 0,
       "the name is free again");

    /* orphans: a STARTED item is requeued once no live object lease covers it */
    ok(test_exec(cat, "INSERT INTO objects(id, bucket, key, size) VALUES (1, 'b', 'k1', 5),"
                      " (2, 'b', 'k2', 5);"
                      "INSERT INTO requests(id, uuid, uid, gid, pin_lifetime, state, created,"
                      " updated) VALUES (1, 'u1', 0, 0, 60, 'STARTED', 1, 1);"
                      "INSERT INTO request_items(request_id, object_id, state) VALUES"
                      " (1, 1, 'STARTED'), (1, 2, 'STARTED')") == 0,
       "a request with two started items");
    lease_claim(cat, LEASE_OBJECT, "1", "a", 200.0, 10.0, &err);
    lease_claim(cat, LEASE_OBJECT, "2", "b", 200.0, 10.0, &err);
    is_int((int)instance_requeue_orphans(cat, 205.0, &err), 0, "both leased: none requeued");
    lease_release(cat, LEASE_OBJECT, "2", "b", &err);
    is_int((int)instance_requeue_orphans(cat, 205.0, &err), 1, "the one without a lease is");
    is_int((int)instance_requeue_orphans(cat, 211.0, &err), 1, "the other once its lease expired");
    is_int((int)test_query_int(cat, "SELECT count(*) FROM request_items WHERE state = 'SUBMITTED'"),
           2, "both queued again");

    /* object leases by the batch: the same rules, one statement */
    {
        int64_t ids[] = {501, 502, 503, 502, 504};
        bool claimed[5];
        lease_claim(cat, LEASE_OBJECT, "503", "b", 300.0, 10.0, &err);
        lease_claim(cat, LEASE_OBJECT, "504", "b", 280.0, 10.0, &err); /* expires at 290 */
        lease_claim(cat, LEASE_OBJECT, "501", "a", 299.0, 10.0, &err);
        ok(lease_claim_objects(cat, ids, 5, "a", 300.0, 10.0, claimed, &err) == 0,
           "a batch of object leases claimed");
        ok(claimed[0] && claimed[1] && !claimed[2] && claimed[3] && claimed[4],
           "its own extended, a new one (asked twice), b's live one left, b's expired one taken");
        is_int(lease_holder(cat, LEASE_OBJECT, "504", 305.0, holder, sizeof(holder), &err), 1,
               "the expired one is held again");
        is_str(holder, "a", "by a");
        is_int((int)test_query_int(cat, "SELECT count(*) FROM leases WHERE kind = 'object'"
                                        " AND instance = 'a' AND expires = 310"),
               3, "a's three leases run to now + lease time");
        is_int((int)lease_release_objects(cat, ids, 5, "a", &err), 3, "a releases its three");
        is_int((int)test_query_int(cat, "SELECT count(*) FROM leases WHERE kind = 'object'"
                                        " AND name IN ('501', '502', '503', '504')"),
               1, "b's stays");
        ok(lease_claim_objects(cat, ids, 0, "a", 300.0, 10.0, claimed, &err) == 0 &&
               lease_release_objects(cat, ids, 0, "a", &err) == 0,
           "an empty batch claims and releases nothing");
        enum { MANY = 2500 }; /* several statements */
        int64_t *many = malloc(MANY * sizeof(*many));
        bool *got = malloc(MANY);
        for (int i = 0; i < MANY; i++)
            many[i] = 10000 + i;
        lease_claim(cat, LEASE_OBJECT, "12345", "b", 300.0, 10.0, &err);
        ok(lease_claim_objects(cat, many, MANY, "a", 300.0, 10.0, got, &err) == 0,
           "%d object leases claimed", MANY);
        int won = 0;
        for (int i = 0; i < MANY; i++)
            won += got[i];
        ok(won == MANY - 1 && !got[2345], "all but b's");
        is_int((int)lease_release_objects(cat, many, MANY, "a", &err), MANY - 1,
               "and released");
        free(many);
        free(got);
    }

    /* two connections racing for the same leases: each has exactly one holder */
    racer_t r1 = {.path = path, .instance = "a"}, r2 = {.path = path, .instance = "b"};
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    r1.start = r2.start = &start;
    pthread_t t1, t2;
    pthread_create(&t1, NULL, race, &r1);
    pthread_create(&t2, NULL, race, &r2);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    pthread_barrier_destroy(&start);
    int both = 0, neither = 0, wins_a = 0;
    for (int i = 0; i < RACE_LEASES; i++) {
        both += r1.won[i] && r2.won[i];
        neither += !r1.won[i] && !r2.won[i];
        wins_a += r1.won[i];
    }
    is_int(r1.errors + r2.errors, 0, "no errors while racing");
    is_int(both, 0, "no lease won by both connections");
    is_int(neither, 0, "every lease won by one");
    diag("a won %d of %d, b %d", wins_a, RACE_LEASES, RACE_LEASES - wins_a);
    is_int((int)test_query_int(cat, "SELECT count(*) FROM leases WHERE kind = 'race'"), RACE_LEASES,
           "one row per lease");
    catalog_close(cat);
    test_db_remove(path);
}

int main(void)
{
    return test_run_engines(run);
}
