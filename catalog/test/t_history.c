/* Old history removed: ended requests with their items, holders and pins;
 * pushes whose files are all archived, with their files' push rows; what
 * is active, recent or changed since kept; a dry run counts the same and
 * changes nothing; small batches. Both engines. */
#include "config.h"

#include <stdio.h>

#include "catalog/history.h"
#include "catalog/test/testutil.h"
#include "common/tap.h"

#define OLD 1000.0   /* finished long ago */
#define CUTOFF 5000.0
#define RECENT 9000.0

/* A request in state, finished and updated at those times, with items
 * of objects id*10+1..id*10+items. */
static void request(catalog_t *cat, int id, const char *state, double finished, double updated,
                    int items)
{
    char sql[1024];
    int n = snprintf(sql, sizeof(sql),
                     "INSERT INTO requests(id, uuid, uid, gid, pin_lifetime, state, created,"
                     " updated, finished) VALUES (%d, 'r%d', 1000, 100, 60, '%s', 1, %.1f, %.1f);"
                     "INSERT INTO request_holders(request_id, kind, holder, since)"
                     " VALUES (%d, 'job', '%d', 1);",
                     id, id, state, updated, finished, id, id);
    for (int k = 1; k <= items; k++)
        n += snprintf(sql + n, sizeof(sql) - (size_t)n,
                      "INSERT INTO request_items(request_id, object_id, state)"
                      " VALUES (%d, %d, 'COMPLETED');", id, k);
    if (test_exec(cat, sql) < 0)
        diag("request %d: %s", id, db_errmsg(catalog_driver(cat)));
}

/* A push updated at that time, its files in the states given ("DD" = two
 * DURABLE files, 'X' DISCARDED, 'F' FAILED, 'R' RECEIVED). */
static void push(catalog_t *cat, int id, double updated, const char *files)
{
    char sql[2048];
    int n = snprintf(sql, sizeof(sql),
                     "INSERT INTO pushes(id, uuid, uid, gid, dataset_id, created, updated)"
                     " VALUES (%d, 'p%d', 1000, 100, 1, 1, %.1f);", id, id, updated);
    for (int k = 0; files[k]; k++) {
        const char *state = files[k] == 'D' ? "DURABLE" : files[k] == 'X' ? "DISCARDED"
                            : files[k] == 'F' ? "FAILED" : "RECEIVED";
        int object = 1000 + id * 10 + k;
        n += snprintf(sql + n, sizeof(sql) - (size_t)n,
                      "INSERT INTO objects(id, bucket, key, size) VALUES (%d, 'ck', 'f%d', 5);"
                      "INSERT INTO push_items(object_id, push_id, state) VALUES (%d, %d, '%s');",
                      object, object, object, id, state);
    }
    if (test_exec(cat, sql) < 0)
        diag("push %d: %s", id, db_errmsg(catalog_driver(cat)));
}

static long long ids_left(catalog_t *cat, const char *table)
{
    char sql[200];
    snprintf(sql, sizeof(sql), "SELECT coalesce(sum(id * id), 0) FROM %s", table);
    return test_query_int(cat, sql);
}

static void run(void)
{
    char path[512];
    si_error_t err;
    test_db_path(path, sizeof(path), "history");
    test_db_remove(path);
    catalog_t *cat = catalog_open(path, CATALOG_CREATE, &err);
    ok(cat != NULL, "catalog on %s", test_engine_name());
    if (!cat)
        return;
    ok(test_exec(cat, "INSERT INTO objects(id, bucket, key, size) VALUES (1, 'ds', 'a', 1),"
                      " (2, 'ds', 'b', 2), (3, 'ds', 'c', 3);"
                      "INSERT INTO datasets(id, name, owner_uid, owner_gid, created)"
                      " VALUES (1, 'ck', 1000, 100, 1)") == 0,
       "three objects and a dataset");
    /* purged: ended long ago and not changed since */
    request(cat, 1, "RELEASED", OLD, OLD, 3);
    request(cat, 2, "FAILED", OLD, OLD, 2);
    request(cat, 3, "CANCELLED", OLD, OLD, 1);
    request(cat, 4, "RELEASED", OLD, OLD, 0);
    request(cat, 5, "RELEASED", OLD, OLD, 3);
    /* kept: still pinned, recent, released lately, not ended */
    request(cat, 10, "COMPLETED", OLD, OLD, 3);
    request(cat, 11, "RELEASED", RECENT, RECENT, 3);
    request(cat, 12, "RELEASED", OLD, RECENT, 2);
    request(cat, 13, "STARTED", OLD, OLD, 1);
    test_exec(cat, "INSERT INTO cache(object_id, path, size, last_access) VALUES (1, 'p', 1, 1);"
                   "INSERT INTO cache_pins(object_id, request_id, since) VALUES (1, 10, 1)");
    push(cat, 1, OLD, "DD");
    push(cat, 2, OLD, "DXD");
    push(cat, 3, OLD, "");
    push(cat, 10, OLD, "DF");
    push(cat, 11, OLD, "DR");
    push(cat, 12, RECENT, "DD");
    /* a large one: its items go in several transactions */
    ok(test_exec(cat, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n"
                      " WHERE i < 25000) INSERT INTO objects(id, bucket, key, size)"
                      " SELECT 100000 + i, 'big', 'k' || i, 1 FROM n;"
                      "INSERT INTO requests(id, uuid, uid, gid, pin_lifetime, state, created,"
                      " updated, finished) VALUES (6, 'r6', 1000, 100, 60, 'RELEASED', 1, 1, 1);"
                      "INSERT INTO request_items(request_id, object_id, state)"
                      " SELECT 6, id, 'COMPLETED' FROM objects WHERE bucket = 'big'") == 0,
       "a released request of 25,000 items (%s)", db_errmsg(catalog_driver(cat)));
    long long objects = test_query_int(cat, "SELECT count(*) FROM objects");

    catalog_history_purged_t dry, done;
    int dry_rc = catalog_history_purge(cat, CUTOFF, 2, true, &dry, &err);
    ok(dry_rc == 0, "a dry run");
    ok(dry.requests == 6 && dry.request_items == 25009 && dry.pushes == 3 && dry.push_files == 5,
       "it counts 6 requests (25,009 items) and 3 pushes (5 files): %llu (%llu), %llu (%llu)",
       (unsigned long long)dry.requests, (unsigned long long)dry.request_items,
       (unsigned long long)dry.pushes, (unsigned long long)dry.push_files);
    is_int(test_query_int(cat, "SELECT count(*) FROM requests"), 10, "... and removes nothing");

    int done_rc = catalog_history_purge(cat, CUTOFF, 2, false, &done, &err);
    ok(done_rc == 0, "purged in batches of 2");
    ok(done.requests == dry.requests && done.request_items == dry.request_items &&
           done.pushes == dry.pushes && done.push_files == dry.push_files,
       "as the dry run counted: %llu (%llu), %llu (%llu)", (unsigned long long)done.requests,
       (unsigned long long)done.request_items, (unsigned long long)done.pushes,
       (unsigned long long)done.push_files);
    is_int(ids_left(cat, "requests"), 10 * 10 + 11 * 11 + 12 * 12 + 13 * 13,
           "kept: the pinned, the recent, the one released lately, the active");
    is_int(test_query_int(cat, "SELECT count(*) FROM request_items WHERE request_id < 10") +
               test_query_int(cat, "SELECT count(*) FROM request_holders WHERE request_id < 10"),
           0, "the purged requests' items and holders are gone");
    is_int(test_query_int(cat, "SELECT count(*) FROM request_items"), 9,
           "the kept requests' items stay");
    is_int(test_query_int(cat, "SELECT count(*) FROM cache_pins WHERE request_id = 10"), 1,
           "the pinned request's pin stays");
    is_int(ids_left(cat, "pushes"), 10 * 10 + 11 * 11 + 12 * 12,
           "kept: the push with a failed file, the one still to archive, the recent one");
    is_int(test_query_int(cat, "SELECT count(*) FROM push_items WHERE push_id < 10"), 0,
           "the purged pushes' files are gone from push_items");
    is_int(test_query_int(cat, "SELECT count(*) FROM objects"), objects,
           "every object stays (the archived files are the archive's)");
    is_int(test_query_int(cat, "SELECT durable_files FROM push_item_totals") +
               test_query_int(cat, "SELECT coalesce(sum(durable_files), 0)"
                                   " FROM push_item_total_changes"),
           test_query_int(cat, "SELECT count(*) FROM push_items WHERE state = 'DURABLE'"),
           "the kept push totals follow (durable files of the kept pushes)");

    ok(catalog_history_purge(cat, CUTOFF, 100, false, &done, &err) == 0 && done.requests == 0 &&
           done.pushes == 0,
       "a second purge finds nothing");
    int later = catalog_history_purge(cat, RECENT + 1, 100, false, &done, &err);
    ok(later == 0 && done.requests == 2 && done.request_items == 5 && done.pushes == 1 &&
           done.push_files == 2,
       "a later cutoff takes the recent ones and the one released lately: %llu (%llu),"
       " %llu (%llu)", (unsigned long long)done.requests, (unsigned long long)done.request_items,
       (unsigned long long)done.pushes, (unsigned long long)done.push_files);
    catalog_close(cat);
    test_db_remove(path);
}

int main(void)
{
    return test_run_engines(run);
}
