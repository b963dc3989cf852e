#include "config.h"

#include <string.h>

#include "catalog/catalog.h"
#include "catalog/test/testutil.h"
#include "common/tap.h"

int main(void)
{
    char path[512];
    si_error_t err;
    test_db_path(path, sizeof(path), "schema");
    test_db_remove(path);

    catalog_t *cat = catalog_open(path, 0, &err);
    ok(cat == NULL && strstr(err.text, "No such file"), "missing file without CREATE: %s", err.text);

    cat = catalog_open(path, CATALOG_CREATE, &err);
    ok(cat != NULL, "fresh catalog created");
    is_int(catalog_schema_version(cat), catalog_latest_version(), "fresh catalog at latest version");
    is_int(test_query_int(cat, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'"
                               " AND name IN ('volumes','objects','tape_copies','datasets',"
                               "'dataset_members','requests','request_items','cache','events')"),
           9, "all tables exist");
    is_int(test_query_int(cat, "PRAGMA foreign_keys"), 1, "foreign keys on");
    ok(test_query_int(cat, "SELECT COUNT(*) FROM pragma_journal_mode WHERE journal_mode = 'wal'") == 1,
       "WAL mode");
    ok(catalog_event(cat, "test", "subject", "detail") == 0, "event appended");
    ok(sqlite3_exec(catalog_db(cat), "UPDATE events SET kind = 'x'", NULL, NULL, NULL) != SQLITE_OK,
       "events cannot be updated");
    ok(sqlite3_exec(catalog_db(cat), "DELETE FROM events", NULL, NULL, NULL) != SQLITE_OK,
       "events cannot be deleted");
    ok(sqlite3_exec(catalog_db(cat), "INSERT INTO tape_copies VALUES (999, 1, 999, 0, 0, 0)",
                    NULL, NULL, NULL) != SQLITE_OK, "foreign keys enforced");
    catalog_close(cat);

    /* reopen: nothing to migrate, data kept */
    cat = catalog_open(path, 0, &err);
    is_int(test_query_int(cat, "SELECT COUNT(*) FROM events"), 1, "reopened catalog keeps data");
    catalog_close(cat);
    test_db_remove(path);

    /* upgrade: a 1.0 catalog with data moves to the latest version */
    cat = catalog_open_at_version(path, 1000, &err);
    ok(cat != NULL, "catalog created at 1.0");
    is_int(catalog_schema_version(cat), 1000, "stopped at 1.0");
    ok(test_query_int(cat, "SELECT COUNT(*) FROM pragma_table_info('objects')"
                           " WHERE name = 'storage_class'") == 0, "1.0 has no storage_class");
    sqlite3_exec(catalog_db(cat), "INSERT INTO objects(bucket, key, size) VALUES ('bkt', 'k', 5)",
                 NULL, NULL, NULL);
    catalog_close(cat);
    cat = catalog_open(path, 0, &err);
    ok(cat != NULL, "1.0 catalog opened by current code");
    is_int(catalog_schema_version(cat), catalog_latest_version(), "upgraded to latest");
    is_int(test_query_int(cat, "SELECT COUNT(*) FROM objects WHERE storage_class = 'GLACIER'"), 1,
           "row kept and new column defaulted");
    catalog_close(cat);

    /* a newer major version is refused, read-only too */
    cat = catalog_open(path, 0, &err);
    sqlite3_exec(catalog_db(cat), "PRAGMA user_version = 2000", NULL, NULL, NULL);
    catalog_close(cat);
    cat = catalog_open(path, 0, &err);
    ok(cat == NULL && strstr(err.text, "newer than this stagein supports"),
       "newer major refused: %s", err.text);
    cat = catalog_open(path, CATALOG_READONLY, &err);
    ok(cat == NULL && strstr(err.text, "2.0"), "newer major refused read-only: %s", err.text);

    /* a newer minor of our major opens (it only added) */
    sqlite3 *db;
    sqlite3_open(path, &db);
    sqlite3_exec(db, "PRAGMA user_version = 1999", NULL, NULL, NULL);
    sqlite3_close(db);
    cat = catalog_open(path, 0, &err);
    ok(cat != NULL, "newer minor accepted");
    catalog_close(cat);

    /* read-only opens never write */
    test_db_remove(path);
    cat = catalog_open(path, CATALOG_READONLY | CATALOG_CREATE, &err);
    ok(cat == NULL, "read-only never creates: %s", err.text);
    cat = catalog_open(path, CATALOG_CREATE, &err);
    catalog_close(cat);
    cat = catalog_open(path, CATALOG_READONLY, &err);
    ok(cat != NULL, "read-only open of a real catalog");
    ok(sqlite3_exec(catalog_db(cat), "INSERT INTO volumes(label) VALUES ('X')", NULL, NULL, NULL)
           != SQLITE_OK, "read-only connection refuses writes");
    catalog_close(cat);
    test_db_remove(path);
    return done_testing();
}
