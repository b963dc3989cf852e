#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "catalog/requests.h"
#include "catalog/requests_internal.h"
#include "catalog/test/testutil.h"
#include "common/tap.h"

static catalog_t *cat;
static requests_t *rq;

static int64_t count(const char *sql)
{
    return test_query_int(cat, sql);
}

static int64_t rows(void)
{
    return count("SELECT (SELECT count(*) FROM requests) * 1000000"
                 " + (SELECT count(*) FROM request_items) * 1000"
                 " + (SELECT coalesce(sum(pins), 0) FROM cache)");
}

static int64_t object(const char *bucket, const char *key, uint64_t size, int copy_pos)
{
    catalog_object_t o = {.bucket = bucket, .key = key, .size = size};
    int64_t id = 0;
    si_error_t err;
    if (catalog_object_put(cat, &o, &id, &err) < 0)
        diag("object_put: %s", err.text);
    if (copy_pos >= 0) {
        catalog_copy_t c = {.object_id = id, .copy = 1, .volume = "L00001",
                            .position = (uint64_t)copy_pos, .length = size};
        if (catalog_copy_put(cat, &c, &err) < 0)
            diag("copy_put: %s", err.text);
    }
    return id;
}

static void dataset(const char *name, uid_t uid, gid_t gid, unsigned mode, const char *lines)
{
    catalog_dataset_attrs_t a = {.name = name, .owner_uid = uid, .owner_gid = gid, .mode = mode};
    FILE *in = fmemopen((void *)lines, strlen(lines), "r");
    si_error_t err;
    catalog_import_stats_t stats;
    if (catalog_import_manifest(cat, &a, name, in, &stats, &err) < 0)
        diag("import_manifest %s: %s", name, err.text);
    fclose(in);
}

/* A request by datasets/files as uid:gid; returns 0/-1 with errno kept. */
static int stage(uid_t uid, gid_t gid, const char *ds, const char *file, requests_created_t *out,
                 si_error_t *err)
{
    const char *dsv[1] = {ds}, *fv[1] = {file};
    requests_spec_t spec = {.uid = uid, .gid = gid, .pin_lifetime = 3600, .job_id = "42",
                            .datasets = dsv, .ndatasets = ds ? 1 : 0, .files = fv,
                            .nfiles = file ? 1 : 0};
    return requests_create(rq, &spec, out, err);
}

/* The other instance: its own connection completes one item in its own
 * transaction (waits for the first's lock, or SQLite's). */
typedef struct {
    const char *path;
    int64_t request, object;
    int rc;
} other_t;

static void *other_completes(void *arg)
{
    other_t *o = arg;
    si_error_t err;
    catalog_t *c2 = catalog_open(o->path, 0, &err);
    requests_t *r2 = c2 ? requests_open(c2, &err) : NULL;
    requests_item_outcome_t it = {.request_id = o->request, .object_id = o->object,
                                  .pinned = true};
    o->rc = r2 && catalog_begin(c2, &err) == 0 && requests_items_completed_in(r2, &it, 1, &err) == 0 &&
                    catalog_commit(c2, &err) == 0 && it.outcome == REQUESTS_ITEM_DONE
                ? 0
                : -1;
    if (o->rc < 0)
        diag("the other instance: %s", err.text);
    requests_close(r2);
    catalog_close(c2);
    return NULL;
}

/* Two instances complete a request's last two items at once, each in its
 * own transaction, the first still open while the second runs: the later
 * one sees the earlier one's item, and the request ends COMPLETED, not
 * STARTED with every item done (read committed on PostgreSQL let each see
 * the other's as pending; tests/0020 caught it). */
static void last_items_at_once(const char *path, int64_t x, int64_t y)
{
    si_error_t err;
    requests_created_t c;
    ok(stage(2000, 300, "public", NULL, &c, &err) == 0, "a request of two files");
    requests_item_started(rq, c.id, x, &err);
    requests_item_started(rq, c.id, y, &err);
    requests_item_outcome_t it = {.request_id = c.id, .object_id = x, .pinned = true};
    ok(catalog_begin(cat, &err) == 0 && requests_items_completed_in(rq, &it, 1, &err) == 0,
       "this instance completes one, its transaction still open");
    other_t o = {.path = path, .request = c.id, .object = y};
    pthread_t t;
    pthread_create(&t, NULL, other_completes, &o);
    usleep(300000); /* the other is in its transaction by now, or waiting to begin */
    ok(catalog_commit(cat, &err) == 0, "this instance commits");
    pthread_join(t, NULL);
    ok(o.rc == 0, "the other instance completes the other");
    char sql[160];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM requests WHERE id = %lld AND state = 'COMPLETED'",
             (long long)c.id);
    is_int(count(sql), 1, "the request is COMPLETED");
}

static int cb_count;
static int64_t cb_first_request;
static int count_pending(int64_t request, int64_t obj, int prio, int64_t deadline, void *arg)
{
    (void)obj, (void)prio, (void)deadline, (void)arg;
    if (cb_count++ == 0)
        cb_first_request = request;
    return 0;
}


/* The engine's plan of sql, its lines joined by newlines (malloc'd). */
static char *plan_of(const char *sql)
{
    db_t *db = catalog_driver(cat);
    bool pg = db_engine(db) == DB_POSTGRES;
    size_t len = strlen(sql) + 32;
    char *explain = malloc(len);
    snprintf(explain, len, "%s%s", pg ? "EXPLAIN " : "EXPLAIN QUERY PLAN ", sql);
    si_error_t err;
    db_stmt_t *s = db_prepare(db, explain, &err);
    free(explain);
    char *text = NULL;
    size_t tlen = 0;
    FILE *out = open_memstream(&text, &tlen);
    if (!s)
        fprintf(out, "(not planned: %s)", err.text);
    while (s && db_step(s) == DB_ROW)
        fprintf(out, "%s\n", db_column_text(s, pg ? 0 : 3)); /* SQLite: id, parent, notused, detail */
    db_finalize(s);
    fclose(out);
    return text;
}

/* SQLite plan lines scanning table (alias) whole, other than through the
 * index `except`. */
static int full_scans(const char *plan, const char *table, const char *except)
{
    int n = 0;
    size_t len = strlen(table);
    for (const char *line = plan; *line;) {
        size_t llen = strcspn(line, "\n");
        bool scan = llen >= 5 + len && strncmp(line, "SCAN ", 5) == 0 &&
                    strncmp(line + 5, table, len) == 0 && (llen == 5 + len || line[5 + len] == ' ');
        if (scan && !(except && memmem(line, llen, except, strlen(except))))
            n++;
        line += llen + (line[llen] == '\n');
    }
    return n;
}

/* The metrics' query reads no table of request items whole: with 30,000
 * items of 300 requests (1 % failed) and the planner's statistics, the
 * failed ones are counted through their own index (schema 1.16) and the
 * queued ones found from their requests. */
static void metrics_plan(void)
{
    static const char fill[] =
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300)"
        " INSERT INTO requests(uuid, uid, gid, pin_lifetime, state, created, updated)"
        " SELECT 'plan-' || i, 1000, 100, 60, CASE WHEN i <= 3 THEN 'STARTED' ELSE 'COMPLETED' END,"
        " 4000000000 + i, 0 FROM n;" /* created after every other request */
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100)"
        " INSERT INTO objects(bucket, key, size) SELECT 'plan', 'k' || i, 1 FROM n;"
        "INSERT INTO request_items(request_id, object_id, state)"
        " SELECT q.id, o.id, CASE WHEN q.state = 'STARTED' THEN 'SUBMITTED'"
        "  WHEN o.id % 100 = 0 THEN 'FAILED' ELSE 'COMPLETED' END"
        " FROM requests q, objects o WHERE q.uuid LIKE 'plan-%' AND o.bucket = 'plan';"
        "ANALYZE";
    int64_t failed_before = count("SELECT count(*) FROM request_items WHERE state = 'FAILED'");
    ok(test_exec(cat, fill) == 0, "30,000 request items added (%s)", test_engine_name());
    is_int(count("SELECT count(*) FROM request_items WHERE state = 'FAILED'") - failed_before,
           297, "... 297 of them failed");
    char *plan = plan_of(requests_metrics_sql);
    bool indexed = test_engine_is_pg()
                       ? !strstr(plan, "Seq Scan on request_items") &&
                             strstr(plan, "request_items_failed")
                       : full_scans(plan, "request_items", "request_items_failed") == 0 &&
                             full_scans(plan, "i", NULL) == 0;
    ok(indexed, "%s counts the failed items by an index, scanning no items' table",
       test_engine_name());
    if (!indexed)
        diag("plan:\n%s", plan);
    free(plan);
    /* the status page's list of the latest requests sums their items
     * only; the list is bound as requests_list binds it (all users, all
     * states, the 50 latest) */
    char *list_sql = strdup(requests_list_sql);
    for (char *q; (q = strstr(list_sql, "?1")) || (q = strstr(list_sql, "?3"));)
        memcpy(q, q[1] == '1' ? "-1" : "50", 2);
    for (char *q; (q = strstr(list_sql, "?2"));)
        memcpy(q, " 0", 2);
    plan = plan_of(list_sql);
    free(list_sql);
    /* PostgreSQL may read all 30,000 items here for a hash join (at
     * 1,000,000 it probes the 50 requests' items): the latest requests
     * taken first is what bounds it */
    indexed = strstr(plan, test_engine_is_pg() ? "using requests_by_created on requests"
                                                : "SCAN requests USING INDEX requests_by_created") &&
              (test_engine_is_pg() || (full_scans(plan, "request_items", NULL) == 0 &&
                                       full_scans(plan, "i", NULL) == 0));
    ok(indexed, "%s lists the latest requests summing their items only", test_engine_name());
    if (!indexed)
        diag("plan:\n%s", plan);
    free(plan);
    si_table_t *latest = requests_list(rq, (uid_t)-1, false, 2, NULL);
    char *text = latest ? si_table_text(latest, true) : NULL;
    ok(text && si_table_rows(latest) == 2 &&
           strstr(text, "[{\"request\":\"plan-300\"") &&
           strstr(text, "\"files\":100,\"files_done\":99,\"files_failed\":1,") &&
           strstr(text, "{\"request\":\"plan-299\""),
       "the list: the latest two requests, each with its 100 items counted");
    if (text && !strstr(text, "plan-300"))
        diag("%s", text);
    free(text);
    si_table_free(latest);

    requests_metrics_t m = {0};
    si_error_t err;
    int rc = requests_metrics(rq, &m, &err);
    ok(rc == 0 && m.failed_files == (uint64_t)failed_before + 297,
       "the metrics count them (%llu failed)", (unsigned long long)m.failed_files);

    /* the waiting files come from kept totals (schema 1.17); on PostgreSQL
     * a read that finds CATALOG_FOLD_AT changes or more folds them */
    ok(test_exec(cat, "UPDATE request_items SET state = 'SUBMITTED' WHERE request_id IN"
                      " (SELECT id FROM requests WHERE uuid IN ('plan-1', 'plan-2', 'plan-3')"
                      "  OR uuid LIKE 'plan-2__');"
                      "UPDATE requests SET state = 'STARTED' WHERE uuid LIKE 'plan-2__'") == 0,
       "10,300 items waiting");
    int64_t changes = count("SELECT count(*) FROM request_item_total_changes");
    rc = requests_metrics(rq, &m, &err);
    int64_t waiting = count("SELECT count(*) FROM request_items WHERE state IN ('SUBMITTED', 'STARTED')");
    ok(rc == 0 && m.queued_files == (uint64_t)waiting &&
           m.queued_bytes == (uint64_t)count("SELECT sum(o.size) FROM request_items i JOIN objects o"
                                             " ON o.id = i.object_id WHERE i.state IN"
                                             " ('SUBMITTED', 'STARTED')"),
       "the metrics' %llu waiting files and %llu bytes are the items' (%lld)",
       (unsigned long long)m.queued_files, (unsigned long long)m.queued_bytes, (long long)waiting);
    if (test_engine_is_pg())
        ok(changes >= CATALOG_FOLD_AT &&
               count("SELECT count(*) FROM request_item_total_changes") == 0 &&
               requests_metrics(rq, &m, &err) == 0 && m.queued_files == (uint64_t)waiting,
           "PostgreSQL: the %lld changes folded by that read, the totals the same", (long long)changes);
}

static void run(void)
{
    si_error_t err;
    char path[700];
    test_db_path(path, sizeof(path), "requests");
    test_db_remove(path);
    cat = catalog_open(path, CATALOG_CREATE, &err);
    ok(cat != NULL, "catalog created (%s)", test_engine_name());
    if (!cat)
        return;
    catalog_volume_t v = {.label = "L00001", .media = "LTO-9", .library = "sim", .state = "online"};
    int64_t vol;
    catalog_volume_ensure(cat, &v, &vol, &err);
    int64_t a1 = object("bk1", "a/1", 100, 0), a2 = object("bk1", "a/2", 200, 1000);
    int64_t b3 = object("bk1", "b/3", 300, 2000), fr = object("bk1", "free", 50, -1);
    (void)a2, (void)b3;
    dataset("public", 1000, 100, 0644, "bk1/a/1\nbk1/a/2\n");
    dataset("private", 1000, 100, 0600, "bk1/b/3\n");
    dataset("grouponly", 1000, 200, 0040, "bk1/a/1\n");
    /* a/1 is in the cache */
    char sql[256];
    snprintf(sql, sizeof(sql),
             "INSERT INTO cache(object_id, path, size, pins, last_access) VALUES (%lld, 'x', 100, 0, 0)",
             (long long)a1);
    test_exec(cat, sql);

    rq = requests_open(cat, &err);
    ok(rq != NULL, "requests opened: %s", rq ? "" : err.text);

    requests_created_t c1, c2, c3, tmp;
    ok(stage(2000, 300, "public", NULL, &c1, &err) == 0, "world-readable dataset staged by another user");
    is_int(c1.files, 2, "two files");
    is_int(c1.bytes, 300, "300 bytes");
    is_int(strlen(c1.uuid), 36, "uuid request id");
    is_int(count("SELECT count(*) FROM events WHERE kind = 'request.submitted'"), 1, "event logged");

    int64_t before = rows();
    ok(stage(2000, 300, "private", NULL, &tmp, &err) == -1 && errno == EACCES,
       "private dataset refused to others (EACCES)");
    ok(strstr(err.text, "'private'") && strstr(err.text, "0600") && strstr(err.text, "other users"),
       "reason names dataset, mode and class: %s", err.text);
    is_int(rows(), before, "nothing recorded for the refused request");
    ok(stage(2000, 300, "nope", NULL, &tmp, &err) == -1 && errno == ENOENT &&
           strstr(err.text, "unknown dataset 'nope'"),
       "unknown dataset: ENOENT, %s", err.text);
    ok(stage(2000, 300, "bad name!", NULL, &tmp, &err) == -1 && errno == EINVAL,
       "invalid dataset name: EINVAL, %s", err.text);
    is_int(rows(), before, "nothing recorded for unknown datasets");

    ok(stage(1000, 100, "private", NULL, &c2, &err) == 0, "owner stages the private dataset");
    ok(stage(0, 0, "private", NULL, &tmp, &err) == 0, "root stages the private dataset");
    ok(stage(2000, 200, "grouponly", NULL, &tmp, &err) == 0, "group member stages group-only");
    ok(stage(1000, 100, "grouponly", NULL, &tmp, &err) == -1 && errno == EACCES &&
           strstr(err.text, "its owner"),
       "the owner class decides, as for files: %s", err.text);

    ok(stage(2000, 300, NULL, "bk1/free", &tmp, &err) == 0 && tmp.files == 1,
       "object in no dataset stageable by anyone");
    before = rows();
    ok(stage(2000, 300, NULL, "bk1/b/3", &tmp, &err) == -1 && errno == EACCES &&
           strstr(err.text, "bk1/b/3"),
       "object only in a private dataset refused: %s", err.text);
    ok(stage(2000, 300, NULL, "bk1/missing", &tmp, &err) == -1 && errno == ENOENT &&
           strstr(err.text, "bk1/missing"),
       "unknown object: %s", err.text);
    ok(stage(2000, 300, NULL, "nobucket", &tmp, &err) == -1 && errno == EINVAL,
       "not bucket/key: %s", err.text);
    ok(stage(2000, 300, NULL, "bk1/../etc", &tmp, &err) == -1 && errno == EINVAL,
       "bad key refused: %s", err.text);
    ok(stage(2000, 300, NULL, "bk1/b/", &tmp, &err) == -1 && errno == EACCES,
       "prefix over a private object refused");
    ok(stage(2000, 300, NULL, "bk1/zz/", &tmp, &err) == -1 && errno == ENOENT,
       "empty prefix: %s", err.text);
    is_int(rows(), before, "refused file requests change nothing");
    ok(stage(2000, 300, NULL, "bk1/a/", &tmp, &err) == 0 && tmp.files == 2,
       "prefix expands to its objects");
    ok(stage(2000, 300, "public", "bk1/a/1", &tmp, &err) == 0 && tmp.files == 2,
       "object named twice is one item");

    /* A pushed file is in no dataset until it is archived: nobody but root may
     * name it directly before then. */
    {
        int64_t pushed = object("bk1", "pushed/ckpt.bin", 10, -1);
        char push_sql[300];
        snprintf(push_sql, sizeof(push_sql),
                 "INSERT INTO pushes(uuid, uid, gid, dataset_id, created, updated)"
                 " VALUES ('p-1', 1000, 100, (SELECT MIN(id) FROM datasets), 1, 1);"
                 "INSERT INTO push_items(object_id, push_id, state) VALUES (%lld, 1, 'RECEIVED')",
                 (long long)pushed);
        if (test_exec(cat, push_sql) < 0)
            diag("push rows: %s", db_errmsg(catalog_driver(cat)));
        int64_t rows_before = rows();
        ok(stage(2000, 300, NULL, "bk1/pushed/ckpt.bin", &tmp, &err) == -1 && errno == EACCES &&
               strstr(err.text, "not yet archived") && rows() == rows_before,
           "a pushed file not yet archived is refused: %s", err.text);
    }

    requests_spec_t bad = {.uid = 1, .gid = 1, .pin_lifetime = 0};
    ok(requests_create(rq, &bad, &tmp, &err) == -1 && errno == EINVAL, "empty spec: %s", err.text);

    /* status and queue position */
    requests_status_t *st = NULL;
    ok(requests_get(rq, c1.uuid, 2000, &st, &err) == 0, "owner reads status");
    if (st) {
        is_str(st->state, "SUBMITTED", "new request is SUBMITTED");
        is_int(st->nitems, 2, "two items");
        is_int(st->bytes_total, 300, "bytes total");
        is_int(st->queue_position, 1, "oldest request is first in the queue");
        is_str(st->items[0].key, "a/1", "items ordered by key");
        is_str(st->job_id, "42", "job id kept");
        requests_status_free(st);
    }
    const char *hi[1] = {"public"};
    requests_spec_t urgent = {.uid = 2000, .gid = 300, .pin_lifetime = 60, .priority = 10,
                              .datasets = hi, .ndatasets = 1, .deadline = 1900000000};
    ok(requests_create(rq, &urgent, &c3, &err) == 0, "high-priority request");
    st = NULL;
    requests_get(rq, c3.uuid, 0, &st, &err);
    ok(st && st->queue_position == 1 && st->deadline == 1900000000, "priority goes first");
    requests_status_free(st);
    st = NULL;
    requests_get(rq, c1.uuid, (uid_t)-1, &st, &err);
    ok(st && st->queue_position == 2, "older request moved to second place");
    requests_status_free(st);
    st = NULL;
    ok(requests_get(rq, c1.uuid, 1000, &st, &err) == -1 && errno == EACCES,
       "another user may not read it: %s", err.text);
    ok(requests_get(rq, "00000000-0000-4000-8000-000000000000", 0, &st, &err) == -1 &&
           errno == ENOENT,
       "unknown request: %s", err.text);
    ok(requests_get(rq, "short", 0, &st, &err) == -1 && errno == ENOENT, "malformed id");

    cb_count = 0;
    requests_pending(rq, count_pending, NULL, &err);
    ok(cb_count > 0 && cb_first_request == c3.id, "pending items start with the urgent request");

    /* item transitions */
    ok(requests_item_started(rq, c1.id, a1, &err) == 0, "item started");
    st = NULL;
    requests_get(rq, c1.uuid, 0, &st, &err);
    ok(st && strcmp(st->state, "STARTED") == 0, "request follows to STARTED");
    requests_status_free(st);
    ok(requests_item_started(rq, c1.id, a1, &err) == -1 && errno == EBUSY,
       "starting twice: %s", err.text);
    ok(requests_item_progress(rq, c1.id, a1, 40, &err) == 0, "progress recorded");
    ok(requests_item_progress(rq, c1.id, a2, 40, &err) == -1 && errno == EBUSY,
       "progress of an item not started refused");
    ok(requests_item_started(rq, c1.id, fr, &err) == -1 && errno == ENOENT,
       "item not in the request: %s", err.text);
    ok(requests_item_completed(rq, c1.id, a1, &err) == 0, "item completed");
    is_int(count("SELECT pins FROM cache"), 1, "completion pins the cached object");
    ok(requests_item_failed(rq, c1.id, a2, "drive 2: medium error", &err) == 0, "item failed");
    st = NULL;
    requests_get(rq, c1.uuid, 0, &st, &err);
    if (st) {
        is_str(st->state, "FAILED", "request FAILED when all done and one failed");
        is_int(st->bytes_done, 100, "bytes done = completed item's size");
        is_int(st->files_completed, 1, "one completed");
        is_int(st->files_failed, 1, "one failed");
        ok(st->items[1].error && strstr(st->items[1].error, "medium error"), "item error kept");
        is_int(st->queue_position, 0, "finished request is not queued");
        requests_status_free(st);
    }

    /* cancel and release */
    before = rows();
    ok(requests_cancel(rq, c1.uuid, 2000, &err) == -1 && errno == EBUSY &&
           strstr(err.text, "already FAILED"),
       "finished request cannot be cancelled: %s", err.text);
    ok(requests_cancel(rq, c2.uuid, 2000, &err) == -1 && errno == EACCES,
       "someone else's request cannot be cancelled: %s", err.text);
    is_int(rows(), before, "refused cancels change nothing");
    ok(requests_cancel(rq, c2.uuid, 1000, &err) == 0, "owner cancels");
    is_int(count("SELECT count(*) FROM request_items i JOIN requests r ON r.id = i.request_id"
                 " WHERE r.state = 'CANCELLED' AND i.state = 'CANCELLED'"),
           1, "its items are CANCELLED");
    ok(requests_cancel(rq, c2.uuid, 0, &err) == -1 && errno == EBUSY, "cancel twice refused");
    ok(requests_release(rq, c1.uuid, 2000, &err) == 0, "owner releases");
    is_int(count("SELECT pins FROM cache"), 0, "release gives the pin back");
    ok(requests_release(rq, c1.uuid, 2000, &err) == -1 && errno == EBUSY,
       "release twice refused: %s", err.text);

    /* restart recovery */
    ok(requests_item_started(rq, c3.id, a1, &err) == 0 &&
           requests_item_progress(rq, c3.id, a1, 70, &err) == 0,
       "an item in flight");
    ok(requests_item_started(rq, c3.id, a2, &err) == 0 &&
           requests_item_completed(rq, c3.id, a2, &err) == 0,
       "another completed");
    requests_recovery_t rec;
    ok(requests_recover(rq, &rec, &err) == 0, "recovered");
    is_int(rec.requeued_items, 1, "the in-flight item is queued again");
    is_int(count("SELECT count(*) FROM request_items WHERE state = 'STARTED'"), 0,
           "no item left STARTED");
    is_int(count("SELECT bytes_done FROM request_items WHERE request_id = (SELECT id FROM"
                 " requests WHERE priority = 10) AND state = 'SUBMITTED'"),
           0, "its progress is reset");
    requests_item_ref_t *refs = NULL;
    size_t nrefs = 0;
    ok(requests_completed_items(rq, &refs, &nrefs, &err) == 0 && nrefs == 1 &&
           refs[0].object_id == a2 && refs[0].request_id == c3.id,
       "completed items listed for verification");
    free(refs);
    ok(requests_item_requeue(rq, c3.id, a2, &err) == 0, "completed item re-queued");

    /* batched transitions, in the caller's transaction */
    requests_item_outcome_t batch[2] = {{.request_id = c3.id, .object_id = a1},
                                        {.request_id = c3.id, .object_id = a2}};
    ok(catalog_begin(cat, &err) == 0 && requests_items_started_in(rq, batch, 2, &err) == 0 &&
           catalog_commit(cat, &err) == 0 && batch[0].outcome == REQUESTS_ITEM_DONE &&
           batch[1].outcome == REQUESTS_ITEM_DONE,
       "two items started in one transaction");
    is_int(count("SELECT count(*) FROM request_items WHERE request_id = (SELECT id FROM"
                 " requests WHERE priority = 10) AND state = 'STARTED'"),
           2, "both STARTED");
    ok(catalog_begin(cat, &err) == 0 && requests_items_started_in(rq, batch, 2, &err) == 0 &&
           catalog_commit(cat, &err) == 0 && batch[0].outcome == REQUESTS_ITEM_BUSY,
       "starting them again: BUSY, nothing changed");
    long long pins = count("SELECT pins FROM cache");
    ok(catalog_begin(cat, &err) == 0 && requests_items_completed_in(rq, batch, 2, &err) == 0 &&
           catalog_commit(cat, &err) == 0,
       "completions in one transaction");
    ok(batch[0].outcome == REQUESTS_ITEM_DONE && batch[1].outcome == REQUESTS_ITEM_NOT_CACHED,
       "the cached object's item COMPLETED, the other one not (its object is not cached)");
    is_int(count("SELECT pins FROM cache"), pins + 1, "the completed item pins its object");
    st = NULL;
    requests_get(rq, c3.uuid, 0, &st, &err);
    ok(st && strcmp(st->state, "STARTED") == 0 && st->files_completed == 1,
       "the request follows: STARTED, one file completed");
    requests_status_free(st);
    /* an item whose pin the cache's commit of the recalled bytes made */
    ok(requests_item_requeue(rq, c3.id, a1, &err) == 0, "the completed item queued again");
    char item_q[160];
    snprintf(item_q, sizeof(item_q), "INSERT INTO cache_pins(object_id, request_id, since)"
                                     " VALUES (%lld, %lld, 0)", (long long)a1, (long long)c3.id);
    test_exec(cat, item_q);
    requests_item_outcome_t pinned = {.request_id = c3.id, .object_id = a1, .pinned = true};
    ok(catalog_begin(cat, &err) == 0 && requests_items_completed_in(rq, &pinned, 1, &err) == 0 &&
           catalog_commit(cat, &err) == 0 && pinned.outcome == REQUESTS_ITEM_DONE,
       "an item pinned already completes");
    is_int(count("SELECT pins FROM cache"), pins + 1, "with its one pin");
    snprintf(item_q, sizeof(item_q), "SELECT state = 'COMPLETED' FROM request_items"
                           " WHERE request_id = %lld AND object_id = %lld",
             (long long)c3.id, (long long)a1);
    is_int(count(item_q), 1, "COMPLETED");

    /* a batch over two requests (one in two runs), more items than one
     * statement takes, an item twice, one cancelled, one not cached */
    ok(test_exec(cat, "INSERT INTO objects(id, bucket, key, size)"
                      " WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n"
                      " WHERE i < 1100) SELECT 900000 + i, 'bulk', 'k' || i, 7 FROM n;"
                      "INSERT INTO requests(id, uuid, uid, gid, pin_lifetime, state, created,"
                      " updated) VALUES (900001, 'bulk-1', 0, 0, 60, 'STARTED', 1, 1),"
                      " (900002, 'bulk-2', 0, 0, 60, 'STARTED', 1, 1);"
                      "INSERT INTO request_items(request_id, object_id, state)"
                      " SELECT 900001, id, 'SUBMITTED' FROM objects WHERE bucket = 'bulk';"
                      "INSERT INTO request_items(request_id, object_id, state)"
                      " SELECT 900002, id, 'SUBMITTED' FROM objects WHERE bucket = 'bulk'"
                      " AND id <= 900010") == 0,
       "two requests of 1,100 and 10 items");
    enum { BULK = 1100 + 10 + 1 };
    requests_item_outcome_t *bulk = calloc(BULK, sizeof(*bulk));
    size_t nb = 0;
    for (int i = 1; i <= 5; i++)
        bulk[nb++] = (requests_item_outcome_t){.request_id = 900002, .object_id = 900000 + i};
    for (int i = 1; i <= 1100; i++) {
        bulk[nb++] = (requests_item_outcome_t){.request_id = 900001, .object_id = 900000 + i};
        if (i == 3) /* asked twice */
            bulk[nb++] = (requests_item_outcome_t){.request_id = 900001, .object_id = 900003};
    }
    for (int i = 6; i <= 9; i++)
        bulk[nb++] = (requests_item_outcome_t){.request_id = 900002, .object_id = 900000 + i};
    ok(catalog_begin(cat, &err) == 0 && requests_items_started_in(rq, bulk, nb, &err) == 0 &&
           catalog_commit(cat, &err) == 0,
       "%zu items of two requests started in one transaction", nb);
    int done = 0, busy = 0;
    for (size_t i = 0; i < nb; i++) {
        done += bulk[i].outcome == REQUESTS_ITEM_DONE;
        busy += bulk[i].outcome == REQUESTS_ITEM_BUSY;
    }
    ok(done == 1100 + 9 && busy == 1 && bulk[8].outcome == REQUESTS_ITEM_BUSY,
       "each started once: the second ask of one object is BUSY (%d done, %d busy)", done, busy);
    is_int(count("SELECT count(*) FROM request_items WHERE request_id IN (900001, 900002)"
                 " AND state = 'STARTED'"),
           1109, "1,109 items STARTED; the tenth of the small request is not asked");
    ok(test_exec(cat, "UPDATE request_items SET state = 'CANCELLED'"
                      " WHERE request_id = 900001 AND object_id = 900005;"
                      "INSERT INTO cache(object_id, path, size, last_access)"
                      " SELECT id, 'p' || id, 7, 0 FROM objects WHERE bucket = 'bulk'"
                      " AND id <> 900007") == 0,
       "one item cancelled; all objects cached but one");
    ok(catalog_begin(cat, &err) == 0 && requests_items_completed_in(rq, bulk, nb, &err) == 0 &&
           catalog_commit(cat, &err) == 0,
       "and completed in one transaction");
    int not_cached = 0;
    done = busy = 0;
    for (size_t i = 0; i < nb; i++) {
        done += bulk[i].outcome == REQUESTS_ITEM_DONE;
        busy += bulk[i].outcome == REQUESTS_ITEM_BUSY;
        not_cached += bulk[i].outcome == REQUESTS_ITEM_NOT_CACHED;
    }
    ok(done == 1100 + 9 - 3 && busy == 2 && not_cached == 2,
       "all done but the cancelled one and the twice-asked (BUSY) and the uncached object's"
       " two items (%d done, %d busy, %d not cached)", done, busy, not_cached);
    is_int(count("SELECT count(*) FROM request_items WHERE request_id = 900001"
                 " AND state = 'COMPLETED' AND bytes_done = 7"),
           1098, "1,098 COMPLETED with their bytes");
    is_int(count("SELECT count(*) FROM cache_pins WHERE request_id IN (900001, 900002)"), 1106,
           "each completed item pins its object once");
    is_int(count("SELECT sum(pins) FROM cache WHERE object_id > 900000"), 1106,
           "the cache rows count them");
    free(bulk);
    ok(test_exec(cat, "DELETE FROM requests WHERE id IN (900001, 900002);"
                      "DELETE FROM cache WHERE object_id > 900000;"
                      "DELETE FROM objects WHERE bucket = 'bulk'") == 0,
       "the two requests and their objects gone again");

    /* locality */
    requests_caller_t root = {.uid = 0, .gid = 0};
    requests_locality_t loc;
    uint64_t size = 0;
    ok(requests_locality(rq, &root, "bk1", "a/1", &loc, &size, &err) == 0 &&
           loc == REQUESTS_LOCALITY_DISK_AND_TAPE && size == 100,
       "cached object with a tape copy: DISK_AND_TAPE");
    ok(requests_locality(rq, &root, "bk1", "a/2", &loc, NULL, &err) == 0 && loc == REQUESTS_LOCALITY_TAPE,
       "tape only");
    ok(requests_locality(rq, &root, "bk1", "free", &loc, NULL, &err) == 0 && loc == REQUESTS_LOCALITY_NONE,
       "no copy, not cached: NONE");
    ok(requests_locality(rq, &root, "bk1", "zzz", &loc, NULL, &err) == -1 && errno == ENOENT,
       "unknown object: %s", err.text);
    is_str(requests_locality_name(REQUESTS_LOCALITY_DISK_AND_TAPE), "DISK_AND_TAPE", "name");
    requests_caller_t other = {.uid = 2000, .gid = 300}, owner = {.uid = 1000, .gid = 100};
    ok(requests_locality(rq, &other, "bk1", "b/3", &loc, NULL, &err) == -1 && errno == EACCES,
       "a private object's locality is refused to others: %s", err.text);
    ok(requests_locality(rq, &owner, "bk1", "b/3", &loc, NULL, &err) == 0,
       "... and told to its owner");
    ok(requests_locality(rq, &other, "bk1", "a/2", &loc, NULL, &err) == 0,
       "a public dataset's object is told to anyone");

    /* metrics and queue */
    requests_metrics_t m;
    ok(requests_metrics(rq, &m, &err) == 0, "metrics read");
    is_int(m.by_state[0] + m.by_state[1] + m.by_state[2] + m.by_state[3] + m.by_state[4] +
               m.by_state[5],
           count("SELECT count(*) FROM requests"), "every request counted by state");
    is_int(m.by_state[4], 1, "one CANCELLED");
    is_int(m.by_state[5], 1, "one RELEASED");
    is_int(m.queued_files,
           count("SELECT count(*) FROM request_items i JOIN requests r ON r.id = i.request_id"
                 " WHERE i.state IN ('SUBMITTED','STARTED') AND r.state IN ('SUBMITTED','STARTED')"),
           "queued files");
    is_int(m.cache_objects, 1, "cache objects");
    is_int(m.cache_bytes, 100, "cache bytes");
    is_int(m.failed_files, 1, "failed files");
    si_table_t *q = requests_queue(rq, &err);
    ok(q && (int64_t)si_table_rows(q) ==
                count("SELECT count(*) FROM requests WHERE state IN ('SUBMITTED','STARTED')"),
       "queue lists the active requests");
    si_table_free(q);

    /* manifests */
    char **lines = NULL, *storage = NULL;
    size_t n = 0;
    const char *mf = "# staged by job 7\n\nbk1/a/1\n  bk1/a/ \r\nbk1/free\n";
    ok(requests_manifest_lines(mf, strlen(mf), &lines, &n, &storage, &err) == 0 && n == 3,
       "manifest: comments and blanks skipped");
    ok(n == 3 && strcmp(lines[1], "bk1/a/") == 0, "whitespace trimmed");
    free(lines);
    free(storage);
    mf = "bk1/a/1\nno-slash\n";
    ok(requests_manifest_lines(mf, strlen(mf), &lines, &n, &storage, &err) == -1 &&
           strstr(err.text, "line 2"),
       "manifest error names the line: %s", err.text);
    ok(requests_manifest_lines("# x\n", 4, &lines, &n, &storage, &err) == -1,
       "manifest with no files refused");

    /* supplementary groups grant a dataset's group class */
    {
        const char *dsv[1] = {"grouponly"};
        gid_t member_of[2] = {150, 200};
        requests_spec_t g = {.uid = 3000, .gid = 300, .pin_lifetime = 60, .datasets = dsv,
                             .ndatasets = 1};
        ok(requests_create(rq, &g, &tmp, &err) == -1 && errno == EACCES,
           "group-only dataset refused to a non-member: %s", err.text);
        g.groups = member_of;
        g.ngroups = 2;
        ok(requests_create(rq, &g, &tmp, &err) == 0,
           "... and staged by a member through a supplementary group: %s", err.text);
    }

    /* a request the cache could never hold at once is refused */
    {
        const char *dsv[1] = {"public"};
        requests_spec_t big = {.uid = 2000, .gid = 300, .pin_lifetime = 60, .datasets = dsv,
                               .ndatasets = 1, .max_bytes = 299};
        before = rows();
        ok(requests_create(rq, &big, &tmp, &err) == -1 && errno == EFBIG &&
               strstr(err.text, "300 bytes") && strstr(err.text, "299 bytes"),
           "more bytes than the cache: refused with both sizes: %s", err.text);
        is_int(rows(), before, "... and nothing recorded");
        big.max_bytes = 300;
        ok(requests_create(rq, &big, &tmp, &err) == 0, "exactly the cache's size is accepted");
    }

    /* one user's staged and waiting bytes are bounded; each object counts once */
    {
        const char *dsv[1] = {"public"};
        requests_spec_t u = {.uid = 2101, .gid = 300, .pin_lifetime = 60, .datasets = dsv,
                             .ndatasets = 1, .max_user_bytes = 299};
        before = rows();
        ok(requests_create(rq, &u, &tmp, &err) == -1 && errno == EDQUOT &&
               strstr(err.text, "stageind.max_user_pinned_bytes"),
           "a user's request past the per-user bound: refused naming it: %s", err.text);
        is_int(rows(), before, "... and nothing recorded");
        u.max_user_bytes = 300;
        ok(requests_create(rq, &u, &tmp, &err) == 0, "at the bound: accepted");
        ok(requests_create(rq, &u, &tmp, &err) == 0,
           "the same objects again: counted once, accepted: %s", err.text);
        u.uid = 0;
        u.max_user_bytes = 1;
        ok(requests_create(rq, &u, &tmp, &err) == 0, "root is not bound");
    }

    /* holders: a submission, resolved to an array, held by its tasks */
    {
        const char *dsv[1] = {"public"};
        requests_spec_t sub = {.uid = 2000, .gid = 300, .pin_lifetime = 60, .datasets = dsv,
                               .ndatasets = 1, .submission = "node1:4242"};
        requests_created_t h;
        ok(requests_create(rq, &sub, &h, &err) == 0, "request held by its submission");
        requests_holder_t *hl = NULL;
        size_t nh = 0, mine = 0;
        ok(requests_holders(rq, &hl, &nh, &err) == 0, "holders listed");
        for (size_t i = 0; i < nh; i++)
            if (hl[i].request_id == h.id) {
                mine++;
                ok(hl[i].kind == REQUESTS_HOLDER_SUBMISSION &&
                       strcmp(hl[i].holder, "node1:4242") == 0 && hl[i].uid == 2000 &&
                       !hl[i].running,
                   "the submission holds it");
            }
        is_int(mine, 1, "one holder");
        free(hl);
        ok(requests_resolve_submission(rq, h.id, "node1:4242", REQUESTS_HOLDER_JOB, "49",
                                       &err) == 0,
           "the reconciliation guessed job 49 from the session");
        ok(requests_bind_job(rq, h.uuid, 2000, "50", "50", false, &err) == 0,
           "sbatch names its own job (array 50, not started): the guess gives way: %s", err.text);
        requests_status_t *g = NULL;
        ok(requests_get(rq, h.uuid, 0, &g, &err) == 0 && g->job_id && strcmp(g->job_id, "50") == 0,
           "the request is array 50's");
        requests_status_free(g);
        ok(requests_bind_job(rq, h.uuid, 0, "51", "50", true, &err) == 0, "task 51 binds");
        ok(requests_bind_job(rq, h.uuid, 0, "52", "50", true, &err) == 0, "task 52 binds");
        ok(requests_bind_job(rq, h.uuid, 0, "52", "50", true, &err) == 0, "binding again is harmless");
        ok(requests_bind_job(rq, h.uuid, 0, "60", NULL, true, &err) == -1 && errno == EBUSY,
           "another job may not take it: %s", err.text);
        ok(requests_bind_job(rq, h.uuid, 2001, "51", "50", true, &err) == -1 && errno == EACCES,
           "another user may not bind it");
        bool released = true, array_left = false;
        ok(requests_unhold(rq, h.uuid, 0, REQUESTS_HOLDER_JOB, "51", "job 51 ended", &released,
                           &array_left, &err) == 0 && !released && array_left,
           "first task ends: still held by the array");
        ok(requests_unhold(rq, h.uuid, 0, REQUESTS_HOLDER_JOB, "51", "again", NULL, NULL,
                           &err) == -1 && errno == ENOENT,
           "a holder goes once: %s", err.text);
        ok(requests_unhold(rq, h.uuid, 0, REQUESTS_HOLDER_JOB, "52", "job 52 ended", &released,
                           NULL, &err) == 0 && !released,
           "second task ends: the array still holds it");
        ok(requests_unhold(rq, h.uuid, 0, REQUESTS_HOLDER_JOB, "50", "job 50 ended", &released,
                           NULL, &err) == 0 && !released,
           "the array's own job id ends: the array still holds it");
        ok(requests_unhold(rq, h.uuid, (uid_t)-1, REQUESTS_HOLDER_ARRAY, "50",
                           "array 50 ended", &released, &array_left, &err) == 0 && released &&
               !array_left,
           "the array ended: released");
        requests_status_t *hs = NULL;
        ok(requests_get(rq, h.uuid, 0, &hs, &err) == 0 && strcmp(hs->state, "RELEASED") == 0 &&
               hs->end_reason && strcmp(hs->end_reason, "array 50 ended") == 0 &&
               hs->finished > 0 && !hs->expired,
           "RELEASED, with the reason");
        requests_status_free(hs);
        ok(requests_bind_job(rq, h.uuid, 0, "53", "50", true, &err) == -1 && errno == EBUSY &&
               strstr(err.text, "array 50 ended"),
           "a released request cannot be bound: %s", err.text);
    }

    /* pins expire after the lifetime, unless a running job holds them */
    {
        const char *dsv[1] = {"public"};
        requests_spec_t e = {.uid = 2000, .gid = 300, .pin_lifetime = 10, .datasets = dsv,
                             .ndatasets = 1};
        requests_created_t x, y;
        ok(requests_create(rq, &e, &x, &err) == 0 && requests_create(rq, &e, &y, &err) == 0,
           "two requests with a 10 s pin lifetime");
        int64_t pins_before = count("SELECT pins FROM cache");
        requests_item_started(rq, x.id, a1, &err);
        requests_item_completed(rq, x.id, a1, &err);
        requests_item_started(rq, x.id, a2, &err);
        requests_item_completed(rq, x.id, a2, &err);
        requests_item_started(rq, y.id, a1, &err);
        requests_item_completed(rq, y.id, a1, &err);
        requests_item_failed(rq, y.id, a2, "medium error", &err);
        is_int(count("SELECT pins FROM cache"), pins_before + 2, "both pin the cached object");
        ok(requests_bind_job(rq, y.uuid, 0, "70", NULL, true, &err) == 0, "job 70 runs with y");
        size_t expired = 99;
        /* x's end to the millisecond: a whole second's truncation, a second
         * boundary crossed since the first section's request (a lifetime
         * of 3600 s) ended, let that one expire too */
        char ended[160];
        snprintf(ended, sizeof(ended),
                 "SELECT CAST(finished * 1000 AS BIGINT) FROM requests WHERE uuid = '%s'", x.uuid);
        double t0 = (double)count(ended) / 1000.0;
        ok(requests_expire(rq, t0 + 5, NULL, NULL, &expired, &err) == 0 && expired == 0,
           "nothing expires before its lifetime");
        ok(requests_expire(rq, t0 + 11, NULL, NULL, &expired, &err) == 0 && expired == 1,
           "one expires after it (the running job's does not)");
        requests_status_t *xs = NULL;
        ok(requests_get(rq, x.uuid, 0, &xs, &err) == 0 && strcmp(xs->state, "RELEASED") == 0 &&
               xs->expired && strstr(xs->end_reason, "pin lifetime of 10 s"),
           "expired: RELEASED, marked expired, with the reason");
        requests_status_free(xs);
        is_int(count("SELECT pins FROM cache"), pins_before + 1, "its pin is given back");
        is_int(count("SELECT count(*) FROM events WHERE kind = 'request.expired'"), 1,
               "request.expired logged");
        si_table_t *all = requests_list(rq, 2000, false, 0, &err);
        si_table_t *active = requests_list(rq, 2000, true, 0, &err);
        ok(all && active && si_table_rows(all) > si_table_rows(active),
           "the list of all requests includes finished ones%s%s", all ? "" : ": ",
           all ? "" : err.text);
        is_int(count("SELECT count(*) FROM requests WHERE uid = 2000"),
               all ? (int64_t)si_table_rows(all) : -1, "every request of the user listed");
        si_table_free(all);
        si_table_free(active);
        ok(requests_unhold(rq, y.uuid, 0, REQUESTS_HOLDER_JOB, "70", "job 70 ended", NULL, NULL,
                           &err) == 0,
           "the job ends");
        ok(requests_get(rq, y.uuid, 0, &xs, &err) == 0 && strcmp(xs->state, "RELEASED") == 0,
           "... and its request is released");
        requests_status_free(xs);
        is_int(count("SELECT pins FROM cache"), pins_before, "every pin given back");
    }

    /* part of a request (the Tape REST API's paths): per-item cancel and release */
    {
        requests_created_t p;
        requests_status_t *ps = NULL;
        int64_t pins_before = count("SELECT pins FROM cache");
        ok(stage(2000, 300, "public", NULL, &p, &err) == 0, "a two-file request");
        ok(requests_end_items(rq, p.uuid, 1000, false, &a2, 1, &err) == -1 && errno == EACCES,
           "another user cannot cancel its files: %s", err.text);
        ok(requests_end_items(rq, p.uuid, 2000, false, &a2, 1, &err) == 0, "one file cancelled");
        ok(requests_get(rq, p.uuid, 0, &ps, &err) == 0 && strcmp(ps->state, "SUBMITTED") == 0 &&
               strcmp(ps->items[1].state, "CANCELLED") == 0 && ps->items[1].finished > 0 &&
               strcmp(ps->items[0].state, "SUBMITTED") == 0,
           "that file CANCELLED (with its finish time), the other still waits");
        requests_status_free(ps);
        ok(requests_item_started(rq, p.id, a2, &err) == -1, "a cancelled file is not recalled");
        requests_item_started(rq, p.id, a1, &err);
        ok(requests_item_completed(rq, p.id, a1, &err) == 0 &&
               requests_get(rq, p.uuid, 0, &ps, &err) == 0 &&
               strcmp(ps->state, "COMPLETED") == 0 && ps->items[0].pinned &&
               ps->items[0].started > 0 && ps->items[0].finished >= ps->items[0].started,
           "the other completes: the request COMPLETED, the file pinned, with its times");
        requests_status_free(ps);
        is_int(count("SELECT pins FROM cache"), pins_before + 1, "its pin taken");
        ok(requests_end_items(rq, p.uuid, 2000, true, &a1, 1, &err) == 0 &&
               requests_get(rq, p.uuid, 0, &ps, &err) == 0 &&
               strcmp(ps->state, "RELEASED") == 0 && !ps->items[0].pinned,
           "releasing its last pinned file releases the request");
        requests_status_free(ps);
        is_int(count("SELECT pins FROM cache"), pins_before, "the pin given back");
        ok(requests_end_items(rq, p.uuid, 2000, true, &a1, 1, &err) == -1 && errno == EBUSY,
           "released twice: %s", err.text);
        ok(stage(2000, 300, "public", NULL, &p, &err) == 0, "another two-file request");
        requests_item_started(rq, p.id, a1, &err);
        requests_item_completed(rq, p.id, a1, &err);
        ok(requests_end_items(rq, p.uuid, 2000, true, &a1, 1, &err) == 0 &&
               requests_get(rq, p.uuid, 0, &ps, &err) == 0 &&
               strcmp(ps->state, "STARTED") == 0 && !ps->items[0].pinned,
           "a completed file released: its pin goes, the request waits for the other");
        requests_status_free(ps);
        is_int(count("SELECT pins FROM cache"), pins_before, "... its pin given back");
        is_int(count("SELECT count(*) FROM events WHERE kind = 'request.items_released'"), 2,
               "request.items_released logged");
    }

    last_items_at_once(path, a1, a2);
    metrics_plan();
    requests_close(rq);
    catalog_close(cat);
    test_db_remove(path);
}

int main(void)
{
    return test_run_engines(run);
}
