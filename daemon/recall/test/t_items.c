/* The recall service's catalog work (items.c) on both engines: an object
 * with its readable copies, a request's state and notes, items moved on in
 * one transaction (started, completed from the cache, queued again when not
 * cached). */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>

#include "common/tap.h"
#include "daemon/cache/test/cachetest.h"
#include "daemon/recall/internal.h"

#define OBJ 1000

static ct_t t;

static long long item_count(int64_t request, const char *state)
{
    char sql[200];
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM request_items WHERE request_id = %" PRId64 " AND state = '%s'",
             request, state);
    return ct_query_int(&t, sql);
}

static void test_load_item(recall_service_t *rs, int64_t id, const char *sum)
{
    char sql[600];
    snprintf(sql, sizeof(sql),
             "INSERT INTO volumes(label, state) VALUES ('V1', 'online'), ('V2', 'full'),"
             " ('BAD', 'failed');"
             "INSERT INTO tape_copies(object_id, copy, volume_id, file_seq, position, length)"
             " SELECT %" PRId64 ", 2, id, NULL, 0, %d FROM volumes WHERE label = 'V2';"
             "INSERT INTO tape_copies(object_id, copy, volume_id, file_seq, position, length)"
             " SELECT %" PRId64 ", 1, id, 7, 4096, %d FROM volumes WHERE label = 'V1';"
             "INSERT INTO tape_copies(object_id, copy, volume_id, file_seq, position, length)"
             " SELECT %" PRId64 ", 3, id, 1, 0, %d FROM volumes WHERE label = 'BAD'",
             id, OBJ, id, OBJ, id, OBJ);
    ok(test_exec(t.cat, sql) == 0, "three copies recorded, one on a failed volume");

    archive_item_t item;
    si_error_t err;
    ok(recall_load_item(rs, id, &item, &err) == 0, "object loaded");
    ok(item.object_id == id && item.size == OBJ && strcmp(item.checksum, sum) == 0,
       "its size and checksum");
    ok(strcmp(item.bucket, "bkt") == 0 && strcmp(item.key, "obj-1") == 0 &&
           item.key == item.bucket + 4,
       "its bucket and key, in one allocation: %s/%s", item.bucket, item.key);
    is_int(item.ncopies, 2, "the failed volume's copy is left out");
    ok(item.copies[0].copy == 1 && strcmp(item.copies[0].volume, "V1") == 0 &&
           item.copies[0].file_seq == 7 && item.copies[0].position == 4096 &&
           item.copies[0].length == OBJ,
       "copy 1 first: V1, file 7 at 4096");
    ok(item.copies[1].copy == 2 && strcmp(item.copies[1].volume, "V2") == 0 &&
           item.copies[1].file_seq == -1,
       "copy 2: V2, no file number (-1)");
    free((char *)item.bucket);
    ok(recall_load_item(rs, 999999, &item, &err) < 0 && strstr(err.text, "not in the catalog") &&
           !item.bucket,
       "an unknown object: %s", err.text);

    /* several at once, a few hundred per statement: the same items as one
     * by one (an object asked many times gets its rows each time), a
     * second object its own, an unknown one marked */
    char sum2[SI_CHECKSUM_TEXT_MAX];
    int64_t id2 = ct_object(&t, 9002, 100, sum2);
    snprintf(sql, sizeof(sql),
             "INSERT INTO tape_copies(object_id, copy, volume_id, file_seq, position, length)"
             " SELECT %" PRId64 ", 1, id, 9, 8192, 100 FROM volumes WHERE label = 'V1'", id2);
    ok(id2 > 0 && test_exec(t.cat, sql) == 0, "a second object, one copy");
    enum { N = 600 };
    int64_t ids[N];
    archive_item_t *items = calloc(N, sizeof(*items));
    for (int i = 0; i < N; i++)
        ids[i] = i == 300 ? 999999 : i % 7 == 0 ? id2 : id;
    recall_load_items(rs, ids, N, items);
    int same = 0;
    for (int i = 0; i < N; i++)
        same += i == 300 ? !items[i].bucket
                : i % 7 == 0 ? items[i].bucket && items[i].object_id == id2 &&
                                   items[i].size == 100 && items[i].ncopies == 1 &&
                                   items[i].copies[0].file_seq == 9 &&
                                   strcmp(items[i].key, "obj-9002") == 0
                             : items[i].bucket && items[i].object_id == id &&
                                   items[i].size == OBJ && items[i].ncopies == 2 &&
                                   strcmp(items[i].copies[1].volume, "V2") == 0 &&
                                   strcmp(items[i].key, "obj-1") == 0;
    is_int(same, N, "%d objects loaded in batches as one by one, the unknown one not", N);
    ok(!db_in_transaction(catalog_driver(rs->cat)), "no transaction left open");
    for (int i = 0; i < N; i++)
        free((char *)items[i].bucket);
    free(items);
}

static void test_notes(recall_service_t *rs, int64_t request)
{
    char sql[200];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM requests WHERE id = %" PRId64
             " AND error = 'waiting for a drive'", request);
    ok(recall_request_active(rs, request), "a submitted request is active");
    ok(!recall_request_active(rs, 424242), "an unknown request is not");
    recall_note(rs, request, "waiting for a drive");
    is_int(ct_query_int(&t, sql), 1, "the note is the request's error");
    recall_note(rs, request, "waiting for a drive"); /* the same: no statement */
    is_int(rs->nnotes, 1, "one note remembered");
    recall_note(rs, request, "");
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM requests WHERE id = %" PRId64
             " AND error IS NULL", request);
    is_int(ct_query_int(&t, sql), 1, "cleared");
    is_int(rs->nnotes, 0, "and forgotten");
}

static void test_items(recall_service_t *rs, int64_t request, const int64_t ids[3],
                       char sums[3][SI_CHECKSUM_TEXT_MAX])
{
    item_list_t l = {0};
    for (int i = 0; i < 2; i++)
        recall_item_list_add(&l, request, ids[i]);
    ok(recall_items_commit(rs, &l, false, NULL, 0) == 0, "two items started in one transaction");
    ok(l.v[0].outcome == REQUESTS_ITEM_DONE && l.v[1].outcome == REQUESTS_ITEM_DONE,
       "both moved on");
    is_int(item_count(request, "STARTED"), 2, "two items STARTED");

    si_error_t err;
    ok(ct_store(rs->cache, ids[0], 1, OBJ, sums[0], OBJ, 0, &err) == 0,
       "the first object cached: %s", err.text);
    size_t done = recall_complete_items(rs, &l, NULL, 0);
    is_int(done, 1, "one completed from the cache");
    is_int(item_count(request, "COMPLETED"), 1, "one item COMPLETED");
    is_int(item_count(request, "SUBMITTED"), 1, "the one not cached is queued again");
    ok(rs->kicked, "and the service told to scan again");
    is_int(l.n, 0, "the list is emptied");

    ok(ct_store(rs->cache, ids[1], 2, OBJ, sums[1], OBJ, 0, &err) == 0, "the second cached");
    recall_item_list_add(&l, request, ids[1]);
    is_int(recall_complete_items(rs, &l, NULL, 0), 1, "then completed");
    char sql[200];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM cache_pins WHERE request_id = %" PRId64,
             request);
    is_int(ct_query_int(&t, sql), 2, "each completed item holds its pin");
    free(l.v);
}

/* The flight table grows with what is in flight: 20,000 flights (a
 * volume's small objects) are each found, and each removed one is gone. */
static void test_flight_table(void)
{
    enum { N = 20000 };
    recall_service_t rs = {0};
    int failures = 0;
    for (int64_t id = 1; id <= N; id++) {
        flight_t *f = calloc(1, sizeof(*f));
        if (!f) {
            failures++;
            continue;
        }
        f->object_id = id * 7;
        failures += recall_flight_insert(&rs, f) < 0;
    }
    ok(failures == 0 && rs.st.in_flight == N, "20,000 flights in the table");
    ok(rs.nbuckets >= N / 2, "the table grew to %zu buckets", rs.nbuckets);
    failures = 0;
    for (int64_t id = 1; id <= N; id++) {
        flight_t *f = recall_flight_get(&rs, id * 7);
        failures += !f || f->object_id != id * 7 || recall_flight_get(&rs, id * 7 + 1) != NULL;
    }
    ok(failures == 0, "each found by its object id, and no other");
    failures = 0;
    for (int64_t id = 2; id <= N; id += 2)
        recall_flight_free(recall_flight_remove(&rs, id * 7));
    for (int64_t id = 1; id <= N; id++)
        failures += (recall_flight_get(&rs, id * 7) != NULL) != (id % 2 == 1);
    ok(failures == 0 && rs.st.in_flight == N / 2, "half removed: gone, the others still found");
    for (int64_t id = 1; id <= N; id += 2)
        recall_flight_free(recall_flight_remove(&rs, id * 7));
    ok(rs.st.in_flight == 0, "all removed");
    free(rs.flights);
}

static void body(void)
{
    si_error_t err;
    if (ct_setup(&t, "t_items") < 0) {
        ok(0, "setting up on %s", test_engine_name());
        return;
    }
    char sums[3][SI_CHECKSUM_TEXT_MAX];
    int64_t ids[3];
    for (unsigned n = 1; n <= 3; n++)
        ids[n - 1] = ct_object(&t, n, OBJ, sums[n - 1]);
    cache_conf_t conf = ct_conf(&t, 1u << 20);
    recall_service_t rs = {.cat = t.cat, .rq = t.req};
    pthread_mutex_init(&rs.mu, NULL);
    rs.cache = cache_open(&conf, t.cat, &err);
    ok(rs.cache != NULL, "cache opened");
    ok(recall_statements_prepare(&rs, &err) == 0, "statements prepared once: %s", err.text);

    test_load_item(&rs, ids[0], sums[0]);
    const char *files[] = {"bkt/obj-1", "bkt/obj-2"};
    requests_spec_t spec = {.pin_lifetime = 3600, .files = files, .nfiles = 2};
    requests_created_t created;
    ok(requests_create(t.req, &spec, &created, &err) == 0, "a request of two objects");
    test_notes(&rs, created.id);
    test_items(&rs, created.id, ids, sums);

    recall_statements_finalize(&rs);
    free(rs.notes);
    cache_close(rs.cache);
    pthread_mutex_destroy(&rs.mu);
    ct_teardown(&t);
}

int main(void)
{
    test_flight_table();
    return test_run_engines(body);
}
