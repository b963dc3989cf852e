#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "catalog/catalog.h"
#include "catalog/test/testutil.h"
#include "common/tap.h"

static si_error_t err; /* the last view's error, shown when it fails */

static char *json_of(si_table_t *t)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (t)
        si_table_print(t, f, true);
    else
        fprintf(f, "(error: %s)", err.text);
    fclose(f);
    si_table_free(t);
    return buf;
}

static void has(char *json, const char *want, const char *what)
{
    ok(json && strstr(json, want), "%s", what);
    if (!json || !strstr(json, want))
        diag("got %s\nwant %s", json ? json : "(null)", want);
    free(json);
}

/* The status page's recent pushes: the 20 latest of 25, each with its own
 * files counted (10 each, the first of them durable); the latest are taken
 * before their files are summed (schema 1.16). */
static void recent_pushes(const char *path)
{
    catalog_t *cat = catalog_open(path, 0, &err);
    ok(cat != NULL, "catalog opened for writing: %s", cat ? "" : err.text);
    if (!cat)
        return;
    static const char pushes[] =
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 25)"
        " INSERT INTO pushes(uuid, uid, gid, dataset_id, created, updated)"
        " SELECT 'recent-' || i, 1000, 100, (SELECT min(id) FROM datasets), 5000000000 + i, 0"
        " FROM n;"
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 250)"
        " INSERT INTO objects(bucket, key, size) SELECT 'recent', 'f' || i, 10 FROM n;"
        "INSERT INTO push_items(object_id, push_id, state)"
        " SELECT o.id, p.id, CASE WHEN o.n <= 25 THEN 'DURABLE' ELSE 'RECEIVED' END"
        " FROM (SELECT id, CAST(substr(key, 2) AS INTEGER) AS n FROM objects"
        "  WHERE bucket = 'recent') o"
        " JOIN pushes p ON p.uuid = 'recent-' || ((o.n - 1) % 25 + 1)";
    int rc = db_exec(catalog_driver(cat), pushes, &err);
    ok(rc == 0, "25 pushes of 10 files%s%s", rc == 0 ? "" : ": ", rc == 0 ? "" : err.text);
    si_table_t *rp = catalog_view_recent_pushes(cat, NULL, &err);
    char *text = rp ? si_table_text(rp, true) : NULL;
    ok(rp && si_table_rows(rp) == 20 && text &&
           strstr(text, "[{\"push\":\"recent-25\",\"uid\":1000,\"dataset\":") &&
           strstr(text, "\"files\":10,\"durable\":1,\"failed\":0,\"bytes\":100,") &&
           strstr(text, "\"push\":\"recent-6\"") && !strstr(text, "\"push\":\"recent-5\""),
       "the 20 latest pushes, the latest first, each with its files counted");
    if (!(text && strstr(text, "recent-25")))
        diag("%s", text ? text : err.text);
    free(text);
    si_table_free(rp);
    catalog_close(cat);
}

static void run(void)
{
    char path[512];
    catalog_import_stats_t st;
    test_db_path(path, sizeof(path), "views");
    test_db_remove(path);
    catalog_t *cat = catalog_open(path, CATALOG_CREATE, &err);

    const char *csv =
        "dsb,x/1,100,V1,5000,1,\n"
        "dsb,x/2,200,V1,1000,1,\n"
        "dsb,x/3,300,V2,50,1,\n"
        "dsb,x/3,300,V3,70,2,\n"
        "dsb,y/1,400,V3,10,1,\n";
    FILE *f = text_file(csv);
    catalog_positions_opts_t o = {.format = CATALOG_FORMAT_CSV};
    ok(catalog_import_positions(cat, "v.csv", f, &o, &st, &err) == 0, "positions imported");
    fclose(f);
    catalog_dataset_attrs_t a = {.name = "dsx", .owner_uid = 1001, .owner_gid = 100, .mode = 0640,
                                 .description = "the x files"};
    f = text_file("dsb/x/\n");
    ok(catalog_import_manifest(cat, &a, "m", f, &st, &err) == 0, "dataset defined");
    fclose(f);
    a.name = "dsy";
    a.description = NULL;
    f = text_file("dsb/y/1\n");
    catalog_import_manifest(cat, &a, "m", f, &st, &err);
    fclose(f);
    test_exec(cat, "INSERT INTO cache(object_id, path, size, pins, last_access, verified)"
                 " SELECT id, 'p/' || id, size, 1, 1700000000, 1 FROM objects WHERE key = 'x/3';"
                 "INSERT INTO requests(uuid, uid, gid, job_id, priority, pin_lifetime, state, created, updated)"
                 " VALUES ('r-1', 1001, 100, '42', 5, 3600, 'STARTED', 1700000000, 1700000000);"
                 "INSERT INTO request_items(request_id, object_id, state, bytes_done)"
                 " SELECT 1, id, CASE WHEN key = 'x/3' THEN 'COMPLETED' ELSE 'SUBMITTED' END,"
                 " CASE WHEN key = 'x/3' THEN 300 ELSE 0 END FROM objects WHERE key LIKE 'x/%';");

    has(json_of(catalog_view_datasets(cat, &err)),
        "{\"dataset\":\"dsx\",\"owner_uid\":1001,\"owner_gid\":100,\"mode\":\"0640\",\"objects\":3,"
        "\"bytes\":600,\"volumes\":3,\"cached_pct\":50.0,\"description\":\"the x files\"}",
        "datasets: objects, bytes, volumes spanned, % cached");
    has(json_of(catalog_view_dataset_volumes(cat, "dsx", &err)),
        "{\"volume\":\"V1\",\"state\":\"online\",\"copy\":1,\"objects\":2,\"bytes\":300,"
        "\"first_position\":1000,\"last_position\":5000}", "where: per volume");
    ok(catalog_view_dataset_volumes(cat, "nope", &err) == NULL && strstr(err.text, "no dataset 'nope'"),
       "where: unknown dataset: %s", err.text);
    has(json_of(catalog_view_volume_datasets(cat, "V3", &err)),
        "[{\"dataset\":\"dsx\",\"objects\":1,\"bytes\":300,\"first_position\":70,\"last_position\":70},"
        "{\"dataset\":\"dsy\",\"objects\":1,\"bytes\":400,\"first_position\":10,\"last_position\":10}]",
        "volume: datasets touching V3");
    ok(catalog_view_volume_datasets(cat, "V9", &err) == NULL, "volume: unknown label: %s", err.text);
    has(json_of(catalog_view_volumes(cat, &err)),
        "{\"volume\":\"V3\",\"media\":\"LTO-9\",\"library\":\"sim\",\"state\":\"online\","
        "\"capacity\":18000000000000,\"used\":370,\"copies\":2,\"catalogued_bytes\":700}",
        "volumes: used up to the end of the last copy");
    has(json_of(catalog_view_object(cat, "dsb/x/3", &err)),
        "{\"bucket\":\"dsb\",\"key\":\"x/3\",\"size\":300,\"checksum\":null,\"copy\":2,\"volume\":\"V3\","
        "\"file_seq\":null,\"position\":70,\"cached\":\"verified\",\"pins\":1}", "object: second copy, cached");
    ok(catalog_view_object(cat, "dsb/none", &err) == NULL && strstr(err.text, "no object dsb/none"),
       "object: unknown: %s", err.text);
    ok(catalog_view_object(cat, "nokey", &err) == NULL, "object: not bucket/key: %s", err.text);
    catalog_request_filter_t rf = {.user = "1001"};
    has(json_of(catalog_view_requests(cat, &rf, &err)),
        "\"request\":\"r-1\",\"uid\":1001,\"job\":\"42\",\"state\":\"STARTED\",\"priority\":5,"
        "\"files\":3,\"completed\":1,\"failed\":0,\"bytes\":600,\"bytes_done\":300", "requests by user");
    rf = (catalog_request_filter_t){.state = "COMPLETED"};
    has(json_of(catalog_view_requests(cat, &rf, &err)), "[]", "requests by state: none");
    rf = (catalog_request_filter_t){.job = "42"};
    has(json_of(catalog_view_requests(cat, &rf, &err)), "\"request\":\"r-1\"", "requests by job");
    has(json_of(catalog_view_cache(cat, &err)),
        "{\"objects\":1,\"bytes\":300,\"pinned_objects\":1,\"pinned_bytes\":300,\"verified_objects\":1",
        "cache usage");

    /* Kept totals follow a new copy of a member on another volume. */
    f = text_file("dsb,x/1,100,V4,8,2,\n");
    ok(catalog_import_positions(cat, "more.csv", f, &o, &st, &err) == 0, "second copy added on V4");
    fclose(f);
    has(json_of(catalog_view_datasets(cat, &err)), "\"dataset\":\"dsx\",\"owner_uid\":1001,"
        "\"owner_gid\":100,\"mode\":\"0640\",\"objects\":3,\"bytes\":600,\"volumes\":4",
        "datasets: volumes spanned updated after the import");
    test_exec(cat, "UPDATE datasets SET stat_volumes = 99 WHERE name = 'dsy';"
                 "DELETE FROM tape_copies WHERE volume_id = (SELECT id FROM volumes WHERE label = 'V4')");
    has(json_of(catalog_view_datasets(cat, &err)), "\"dataset\":\"dsx\",\"owner_uid\":1001,"
        "\"owner_gid\":100,\"mode\":\"0640\",\"objects\":3,\"bytes\":600,\"volumes\":3",
        "datasets: stale totals computed on the fly after a delete");
    has(json_of(catalog_view_datasets(cat, &err)), "\"dataset\":\"dsy\",\"owner_uid\":1001,"
        "\"owner_gid\":100,\"mode\":\"0640\",\"objects\":1,\"bytes\":400,\"volumes\":99",
        "datasets: kept totals are what is shown (so they must be maintained)");
    test_exec(cat, "UPDATE datasets SET stat_volumes = NULL WHERE name = 'dsy'");

    /* The plan: copy 1 unless its volume is unreadable, then by position. */
    has(json_of(catalog_view_plan(cat, "dsx", true, &err)),
        "[{\"volume\":\"V1\",\"reads\":2,\"bytes\":300,\"first_position\":1000,\"last_position\":5000},"
        "{\"volume\":\"V2\",\"reads\":1,\"bytes\":300,\"first_position\":50,\"last_position\":50}]",
        "plan summary uses copy 1");
    has(json_of(catalog_view_plan(cat, "dsx", false, &err)),
        "[{\"volume\":\"V1\",\"order\":1,\"position\":1000,\"length\":200,\"copy\":1,\"file_seq\":null,"
        "\"bucket\":\"dsb\",\"key\":\"x/2\"},{\"volume\":\"V1\",\"order\":2,\"position\":5000",
        "plan reads ordered by position");
    ok(catalog_volume_set_state(cat, "V2", "disabled", &err) == 0, "V2 disabled");
    catalog_plan_t *plan = NULL;
    ok(catalog_plan_dataset(cat, "dsx", &plan, &err) == 0, "plan built");
    if (plan) {
        is_int(plan->nvolumes, 2, "two volumes");
        is_str(plan->volumes[1].label, "V3", "second copy's volume chosen");
        is_int(plan->reads[2].copy, 2, "copy 2 read");
        is_int(plan->reads[0].position, 1000, "first read is the lowest position");
        is_int(plan->missing, 0, "nothing missing");
        catalog_plan_free(plan);
    }
    catalog_volume_set_state(cat, "V3", "failed", &err);
    ok(catalog_plan_dataset(cat, "dsx", &plan, &err) == 0 && plan->missing == 1,
       "no readable copy: counted missing");
    catalog_plan_free(plan);
    ok(catalog_volume_set_state(cat, "V1", "melted", &err) < 0, "bad volume state refused");
    ok(catalog_view_sql(cat, "SELECT 1", &err) == NULL && strstr(err.text, "read-only"),
       "sql needs a read-only catalog");
    catalog_close(cat);

    cat = catalog_open(path, CATALOG_READONLY, &err);
    has(json_of(catalog_view_sql(cat, "SELECT key, size FROM objects ORDER BY key LIMIT 1", &err)),
        "[{\"key\":\"x/1\",\"size\":100}]", "sql: typed columns");
    ok(catalog_view_sql(cat, "DELETE FROM objects", &err) == NULL && strstr(err.text, "read-only"),
       "sql: writes refused: %s", err.text);
    ok(catalog_view_sql(cat, "SELECT 1; DELETE FROM objects", &err) == NULL &&
       strstr(err.text, "one statement"), "sql: one statement only: %s", err.text);
    ok(catalog_view_sql(cat, "SELEKT", &err) == NULL && strstr(err.text, "syntax error"),
       "sql: syntax error reported: %s", err.text);
    if (test_engine_is_pg()) {
        si_table_t *t = catalog_view_sql(cat, "SELECT tablename FROM pg_tables LIMIT 1", &err);
        ok(t != NULL, "sql: the schema can be read");
        si_table_free(t);
        ok(catalog_view_sql(cat, "SET TRANSACTION READ WRITE", &err) == NULL,
           "sql: the read-only transaction cannot be lifted: %s", err.text);
        ok(catalog_view_sql(cat, "WITH d AS (DELETE FROM objects RETURNING 1) SELECT * FROM d",
                            &err) == NULL && strstr(err.text, "read-only"),
           "sql: a write inside a query refused: %s", err.text);
    } else {
        /* an existing database file, so only the policy can refuse it */
        char other[600];
        snprintf(other, sizeof(other), "%s-other.db", path);
        catalog_close(catalog_open(other, CATALOG_CREATE, &err));
        char attach[700];
        snprintf(attach, sizeof(attach), "ATTACH DATABASE '%s' AS x", other);
        ok(catalog_view_sql(cat, attach, &err) == NULL && strstr(err.text, "only read-only"),
           "sql: ATTACH refused: %s", err.text);
        ok(catalog_view_sql(cat, "PRAGMA user_version", &err) == NULL, "sql: PRAGMA refused: %s",
           err.text);
        si_table_t *t = catalog_view_sql(cat, "SELECT name FROM sqlite_master LIMIT 1", &err);
        ok(t != NULL, "sql: the schema can be read");
        si_table_free(t);
        test_db_remove(other);
    }
    /* the status page's views prepare on both engines (group_concat and
     * SUM of a comparison are SQLite's spelling) */
    si_table_t *qd = catalog_view_queue_datasets(cat, &err);
    ok(qd != NULL, "queue datasets view: %s", qd ? "ok" : err.text);
    si_table_free(qd);
    si_table_t *rp = catalog_view_recent_pushes(cat, NULL, &err);
    ok(rp != NULL, "recent pushes view: %s", rp ? "ok" : err.text);
    si_table_free(rp);
    is_int(test_query_int(cat, "SELECT COUNT(*) FROM objects"), 4, "catalog unchanged");

    catalog_close(cat);
    recent_pushes(path);
    test_db_remove(path);
}

int main(void)
{
    return test_run_engines(run);
}
