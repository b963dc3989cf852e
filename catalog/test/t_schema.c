#include "config.h"

#include <string.h>
#include <sys/stat.h>

#include "catalog/catalog.h"
#include "catalog/test/testutil.h"
#include "common/tap.h"

/* The engine's spelling of "set the schema version" for the tests. */
static int set_version(catalog_t *cat, int version)
{
    char sql[128];
    if (test_engine_is_pg())
        snprintf(sql, sizeof(sql), "UPDATE stagein_schema SET version = %d", version);
    else
        snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", version);
    return test_exec(cat, sql);
}

static void refusals_pg(const char *path)
{
    si_error_t err;
    /* A database that does not exist: the message names the setting. */
    char wrong[700];
    snprintf(wrong, sizeof(wrong), "postgresql://stagein@/no_such_db?host=%s/pg", test_engine.dir);
    catalog_t *cat = catalog_open(wrong, CATALOG_CREATE, &err);
    ok(cat == NULL && strstr(err.text, "catalog.url") && strstr(err.text, "no_such_db"),
       "wrong URL refused: %s", err.text);
    /* A wrong password (from the password file): refused by the server. */
    char bad_pw[400];
    snprintf(bad_pw, sizeof(bad_pw), "%s/bad-password", test_engine.dir);
    FILE *f = fopen(bad_pw, "w");
    fputs("not-the-password\n", f);
    fclose(f);
    chmod(bad_pw, 0600);
    char *saved = getenv("PGPASSFILE") ? strdup(getenv("PGPASSFILE")) : NULL;
    unsetenv("PGPASSFILE");
    catalog_open_opts_t o = {.target = path, .password_file = bad_pw};
    cat = catalog_open_opts(&o, &err);
    ok(cat == NULL && strstr(err.text, "catalog.url") && strstr(err.text, "password authentication"),
       "wrong password refused: %s", err.text);
    /* The right password from a 0600 file; a file others can read is refused. */
    o.password_file = test_engine.password_file;
    cat = catalog_open_opts(&o, &err);
    ok(cat != NULL, "password from catalog.password_file accepted");
    catalog_close(cat);
    chmod(bad_pw, 0644);
    o.password_file = bad_pw;
    cat = catalog_open_opts(&o, &err);
    ok(cat == NULL && strstr(err.text, "chmod 600"), "readable password file refused: %s", err.text);
    /* No password anywhere: refused. */
    o.password_file = NULL;
    cat = catalog_open_opts(&o, &err);
    ok(cat == NULL && strstr(err.text, "password"), "no password refused: %s", err.text);
    if (saved)
        setenv("PGPASSFILE", saved, 1);
    free(saved);
    /* A password inside the URL is refused before connecting. */
    char with_pw[700];
    snprintf(with_pw, sizeof(with_pw), "postgresql://stagein:secret@/x?host=%s/pg", test_engine.dir);
    cat = catalog_open(with_pw, 0, &err);
    ok(cat == NULL && strstr(err.text, "holds a password") && !strstr(err.text, "cannot connect"),
       "password in the URL refused: %s", err.text);
}

/* The cache's kept usage (1.15) against a scan of its rows: objects and
 * bytes as "objects/bytes" for one is_str each. */
static void usage_matches_rows(catalog_t *cat, const char *how)
{
    long long kept_objects = test_query_int(cat, "SELECT " CATALOG_CACHE_USAGE_COLUMNS
                                                 CATALOG_CACHE_USAGE_FROM);
    long long kept_bytes = test_query_int(cat, "SELECT u.bytes + d.bytes" CATALOG_CACHE_USAGE_FROM);
    long long rows = test_query_int(cat, "SELECT count(*) FROM cache");
    long long bytes = test_query_int(cat, "SELECT coalesce(sum(size), 0) FROM cache");
    ok(kept_objects == rows && kept_bytes == bytes,
       "%s: the kept usage (%lld objects, %lld bytes) is the rows' (%lld, %lld)", how,
       kept_objects, kept_bytes, rows, bytes);
    if (catalog_schema_version(cat) < 1017)
        return;
    long long kept_pinned = test_query_int(cat, "SELECT " CATALOG_CACHE_PINNED_COLUMNS
                                                CATALOG_CACHE_USAGE_FROM);
    long long kept_pinned_bytes = test_query_int(cat, "SELECT u.pinned_bytes + d.pinned_bytes"
                                                      CATALOG_CACHE_USAGE_FROM);
    long long pinned = test_query_int(cat, "SELECT count(*) FROM cache WHERE pins > 0");
    long long pinned_bytes =
        test_query_int(cat, "SELECT coalesce(sum(size), 0) FROM cache WHERE pins > 0");
    ok(kept_pinned == pinned && kept_pinned_bytes == pinned_bytes,
       "%s: the kept pinned (%lld objects, %lld bytes) are the rows' (%lld, %lld)", how,
       kept_pinned, kept_pinned_bytes, pinned, pinned_bytes);
}

/* The usage follows inserts, deletions (direct and cascading from objects)
 * and size changes, in the changing transaction: a rolled-back change
 * leaves it as it was. */
static void cache_usage_follows(catalog_t *cat, const char *how)
{
    char what[160];
    ok(test_exec(cat, "INSERT INTO objects(id, bucket, key, size) VALUES (901, 'c', 'a', 10),"
                      " (902, 'c', 'b', 20), (903, 'c', 'c', 30);"
                      "INSERT INTO cache(object_id, path, size, last_access) VALUES"
                      " (901, 'x', 10, 1), (902, 'y', 20, 1), (903, 'z', 30, 1)") == 0,
       "%s: three cached objects", how);
    snprintf(what, sizeof(what), "%s, after three inserts", how);
    usage_matches_rows(cat, what);
    test_exec(cat, "DELETE FROM cache WHERE object_id = 901");
    test_exec(cat, "DELETE FROM objects WHERE id = 902"); /* cascades to its cache row */
    test_exec(cat, "UPDATE cache SET size = 33 WHERE object_id = 903");
    snprintf(what, sizeof(what), "%s, after a delete, a cascade and a resize", how);
    usage_matches_rows(cat, what);
    ok(test_exec(cat, "INSERT INTO objects(id, bucket, key, size) VALUES (905, 'c', 'e', 50),"
                      " (906, 'c', 'f', 60);"
                      "INSERT INTO cache(object_id, path, size, last_access) VALUES"
                      " (905, 'v', 50, 1), (906, 'u', 60, 1);"
                      "INSERT INTO requests(id, uuid, uid, gid, pin_lifetime, state, created,"
                      " updated) VALUES (901, 'pins-1', 1000, 100, 60, 'COMPLETED', 1, 1),"
                      " (902, 'pins-2', 1000, 100, 60, 'COMPLETED', 1, 1);"
                      "INSERT INTO cache_pins(object_id, request_id, since) VALUES"
                      " (903, 901, 1), (903, 902, 1), (905, 901, 1), (906, 902, 1)") == 0,
       "%s: two requests pin three objects, one of them twice", how);
    snprintf(what, sizeof(what), "%s, after four pins", how);
    usage_matches_rows(cat, what);
    test_exec(cat, "DELETE FROM cache_pins WHERE request_id = 901;"
                   "UPDATE cache SET size = 66 WHERE object_id = 906");
    snprintf(what, sizeof(what), "%s, after one request's pins went and a pinned resize", how);
    usage_matches_rows(cat, what);
    test_exec(cat, "DELETE FROM objects WHERE id = 906"); /* cascades to its row and pin */
    snprintf(what, sizeof(what), "%s, after a pinned object's deletion", how);
    usage_matches_rows(cat, what);
    test_exec(cat, "DELETE FROM requests WHERE id IN (901, 902); DELETE FROM objects WHERE id = 905");
    snprintf(what, sizeof(what), "%s, after the requests' deletion", how);
    usage_matches_rows(cat, what);
    ok(test_exec(cat, "BEGIN; INSERT INTO objects(id, bucket, key, size) VALUES (904, 'c', 'd', 40);"
                      "INSERT INTO cache(object_id, path, size, last_access) VALUES (904, 'w', 40, 1);"
                      "ROLLBACK") == 0,
       "%s: an insert rolled back", how);
    snprintf(what, sizeof(what), "%s, after a rollback", how);
    usage_matches_rows(cat, what);
    test_exec(cat, "DELETE FROM objects WHERE id = 903");
}

/* The waiting items' kept totals (schema 1.17), with the changes not yet
 * folded, against a count of the items themselves. */
static void item_totals_match(catalog_t *cat, const char *how)
{
    long long kept = test_query_int(
        cat, "SELECT (t.waiting_files + d.files) * 1000000000 + (t.waiting_bytes + d.bytes) * 1000"
             " + t.started_files + d.started FROM request_item_totals t,"
             " (SELECT coalesce(sum(waiting_files), 0) AS files, coalesce(sum(waiting_bytes), 0)"
             "  AS bytes, coalesce(sum(started_files), 0) AS started"
             "  FROM request_item_total_changes) d");
    long long items = test_query_int(
        cat, "SELECT count(*) * 1000000000 + coalesce(sum(o.size), 0) * 1000"
             " + coalesce(sum(CASE WHEN i.state = 'STARTED' THEN 1 ELSE 0 END), 0)"
             " FROM request_items i JOIN objects o ON o.id = i.object_id"
             " WHERE i.state IN ('SUBMITTED', 'STARTED')");
    ok(kept == items && kept >= 0,
       "%s: kept as %lld files waiting, %lld bytes, %lld started; the items: %lld, %lld, %lld", how,
       kept / 1000000000, kept / 1000 % 1000000, kept % 1000, items / 1000000000,
       items / 1000 % 1000000, items % 1000);
}

/* The totals follow items made, started, finished, requeued, moved to
 * another object and deleted, in the changing transaction; folded
 * (PostgreSQL), they stay the same. */
static void item_totals_follow(catalog_t *cat, const char *how)
{
    char what[160];
    ok(test_exec(cat, "INSERT INTO objects(id, bucket, key, size) VALUES (911, 'totals', 'a', 10),"
                      " (912, 'totals', 'b', 200), (913, 'totals', 'c', 3000), (914, 'totals', 'd', 40000);"
                      "INSERT INTO requests(id, uuid, uid, gid, pin_lifetime, state, created,"
                      " updated) VALUES (911, 'totals', 1000, 100, 60, 'STARTED', 1, 1);"
                      "INSERT INTO request_items(request_id, object_id, state) VALUES"
                      " (911, 911, 'SUBMITTED'), (911, 912, 'STARTED'), (911, 913, 'COMPLETED')") == 0,
       "%s: a request of three items (%s)", how, db_errmsg(catalog_driver(cat)));
    snprintf(what, sizeof(what), "%s, after three inserts", how);
    item_totals_match(cat, what);
    test_exec(cat, "UPDATE request_items SET state = 'STARTED' WHERE object_id = 911");
    test_exec(cat, "UPDATE request_items SET state = 'FAILED' WHERE object_id = 912");
    test_exec(cat, "UPDATE request_items SET state = 'SUBMITTED' WHERE object_id = 913");
    snprintf(what, sizeof(what), "%s, after a start, a failure and a requeue", how);
    item_totals_match(cat, what);
    ok(test_exec(cat, "UPDATE request_items SET object_id = 914 WHERE object_id = 913") == 0,
       "%s: an item moved to another object", how);
    snprintf(what, sizeof(what), "%s, after an item moved to another object", how);
    item_totals_match(cat, what);
    ok(test_exec(cat, "BEGIN; UPDATE request_items SET state = 'CANCELLED' WHERE request_id = 911;"
                      "ROLLBACK") == 0,
       "%s: a cancel rolled back", how);
    snprintf(what, sizeof(what), "%s, after a rollback", how);
    item_totals_match(cat, what);
    si_error_t err;
    ok(catalog_fold_totals(cat, &err) == 0 &&
           test_query_int(cat, "SELECT count(*) FROM request_item_total_changes") == 0,
       "%s: the changes folded", how);
    snprintf(what, sizeof(what), "%s, folded", how);
    item_totals_match(cat, what);
    usage_matches_rows(cat, what);
    if (db_engine(catalog_driver(cat)) == DB_POSTGRES) {
        static const char versions[] = "SELECT (SELECT CAST(CAST(xmin AS TEXT) AS BIGINT)"
                                       " FROM request_item_totals) * 1000000000"
                                       " + (SELECT CAST(CAST(xmin AS TEXT) AS BIGINT)"
                                       " FROM cache_usage)";
        long long before = test_query_int(cat, versions);
        ok(catalog_fold_totals(cat, &err) == 0 && test_query_int(cat, versions) == before,
           "%s: a fold with nothing to move writes no row", how);
    }
    test_exec(cat, "DELETE FROM request_items WHERE request_id = 911;"
                   "DELETE FROM requests WHERE id = 911; DELETE FROM objects WHERE id > 910 AND id < 915");
    snprintf(what, sizeof(what), "%s, after the items' deletion", how);
    item_totals_match(cat, what);
}

/* The pushed files' kept totals (schema 1.18), with the changes not yet
 * folded, against a count of the files themselves. */
static void push_totals_match(catalog_t *cat, const char *how)
{
    long long kept = test_query_int(
        cat, "SELECT (t.received_files + d.rf) * 100000000000 + (t.received_bytes + d.rb) * 1000000"
             " + (t.archiving_files + d.af) * 10000 + (t.durable_files + d.df) * 100"
             " + t.failed_files + d.ff FROM push_item_totals t,"
             " (SELECT coalesce(sum(received_files), 0) AS rf, coalesce(sum(received_bytes), 0)"
             "  AS rb, coalesce(sum(archiving_files), 0) AS af, coalesce(sum(durable_files), 0)"
             "  AS df, coalesce(sum(failed_files), 0) AS ff FROM push_item_total_changes) d");
    long long files = test_query_int(
        cat, "SELECT coalesce(sum(CASE WHEN i.state = 'RECEIVED' THEN 1 ELSE 0 END), 0)"
             " * 100000000000 + coalesce(sum(CASE WHEN i.state = 'RECEIVED' THEN o.size"
             " ELSE 0 END), 0) * 1000000"
             " + coalesce(sum(CASE WHEN i.state = 'ARCHIVING' THEN 1 ELSE 0 END), 0) * 10000"
             " + coalesce(sum(CASE WHEN i.state = 'DURABLE' THEN 1 ELSE 0 END), 0) * 100"
             " + coalesce(sum(CASE WHEN i.state = 'FAILED' THEN 1 ELSE 0 END), 0)"
             " FROM push_items i JOIN objects o ON o.id = i.object_id");
    ok(kept == files && kept >= 0,
       "%s: kept as %lld received (%lld bytes), %lld archiving, %lld durable, %lld failed;"
       " the files: %lld (%lld), %lld, %lld, %lld", how, kept / 100000000000,
       kept / 1000000 % 100000, kept / 10000 % 100, kept / 100 % 100, kept % 100,
       files / 100000000000, files / 1000000 % 100000, files / 10000 % 100, files / 100 % 100,
       files % 100);
}

/* The totals follow files received, archived, failed, discarded, moved to
 * another object and deleted; folded (PostgreSQL), they stay the same. */
static void push_totals_follow(catalog_t *cat, const char *how)
{
    char what[160];
    ok(test_exec(cat, "INSERT INTO datasets(id, name, owner_uid, owner_gid, created)"
                      " VALUES (921, 'push-totals', 1000, 100, 1);"
                      "INSERT INTO objects(id, bucket, key, size) VALUES (921, 'pt', 'a', 10),"
                      " (922, 'pt', 'b', 200), (923, 'pt', 'c', 3000), (924, 'pt', 'd', 40000),"
                      " (925, 'pt', 'e', 5);"
                      "INSERT INTO pushes(id, uuid, uid, gid, dataset_id, created, updated)"
                      " VALUES (921, 'push-totals', 1000, 100, 921, 1, 1);"
                      "INSERT INTO push_items(object_id, push_id, state) VALUES"
                      " (921, 921, 'RECEIVING'), (922, 921, 'RECEIVED'), (923, 921, 'RECEIVED'),"
                      " (925, 921, 'DURABLE')") == 0,
       "%s: a push of four files (%s)", how, db_errmsg(catalog_driver(cat)));
    snprintf(what, sizeof(what), "%s, after four inserts", how);
    push_totals_match(cat, what);
    test_exec(cat, "UPDATE push_items SET state = 'RECEIVED' WHERE object_id = 921");
    test_exec(cat, "UPDATE push_items SET state = 'ARCHIVING' WHERE object_id = 922");
    test_exec(cat, "UPDATE push_items SET state = 'FAILED' WHERE object_id = 923");
    snprintf(what, sizeof(what), "%s, after a receipt, an archiving and a failure", how);
    push_totals_match(cat, what);
    test_exec(cat, "UPDATE push_items SET state = 'DURABLE' WHERE object_id = 922");
    test_exec(cat, "UPDATE push_items SET state = 'DISCARDED' WHERE object_id = 923");
    ok(test_exec(cat, "UPDATE push_items SET object_id = 924 WHERE object_id = 921") == 0,
       "%s: a received file moved to another object", how);
    snprintf(what, sizeof(what), "%s, after it became durable, a discard and a move", how);
    push_totals_match(cat, what);
    ok(test_exec(cat, "BEGIN; UPDATE push_items SET state = 'FAILED' WHERE push_id = 921;"
                      "ROLLBACK") == 0,
       "%s: failing the push rolled back", how);
    snprintf(what, sizeof(what), "%s, after a rollback", how);
    push_totals_match(cat, what);
    si_error_t err;
    ok(catalog_fold_totals(cat, &err) == 0 &&
           test_query_int(cat, "SELECT count(*) FROM push_item_total_changes") == 0,
       "%s: the changes folded", how);
    snprintf(what, sizeof(what), "%s, folded", how);
    push_totals_match(cat, what);
    test_exec(cat, "DELETE FROM pushes WHERE id = 921;" /* its files go with it */
                   "DELETE FROM objects WHERE id > 920 AND id < 926;"
                   "DELETE FROM datasets WHERE id = 921");
    snprintf(what, sizeof(what), "%s, after the push's deletion", how);
    push_totals_match(cat, what);
    is_int(test_query_int(cat, "SELECT count(*) FROM push_items WHERE push_id = 921"), 0,
           "%s: its files are gone", how);
}

/* tape_copies' references (row-level REFERENCES on SQLite, statement-level
 * triggers on PostgreSQL from 1.9) behave alike: run on a fresh and on an
 * upgraded catalog (how: which one). */
static void references(catalog_t *cat, const char *how)
{
    bool pg = test_engine_is_pg();
    db_t *db = catalog_driver(cat);
    ok(test_exec(cat, "INSERT INTO volumes(id, label) VALUES (501, 'R1'), (502, 'R2');"
                      "INSERT INTO objects(id, bucket, key, size) VALUES (601, 'r', 'a', 1),"
                      " (602, 'r', 'b', 1);"
                      "INSERT INTO tape_copies VALUES (601, 1, 501, 0, 0, 1)") == 0,
       "%s: a copy of an existing object on an existing volume", how);
    ok(test_exec(cat, "INSERT INTO tape_copies VALUES (699, 1, 501, 0, 0, 1)") < 0 &&
           db_errclass(db) == DB_ERR_CONSTRAINT &&
           strstr(db_errmsg(db), pg ? "object 699: no such object" : "FOREIGN KEY"),
       "%s: a copy of a missing object refused: %s", how, db_errmsg(db));
    ok(test_exec(cat, "INSERT INTO tape_copies VALUES (602, 1, 501, 0, 0, 1),"
                      " (602, 2, 599, 0, 0, 1)") < 0 &&
           db_errclass(db) == DB_ERR_CONSTRAINT &&
           strstr(db_errmsg(db), pg ? "volume 599: no such volume" : "FOREIGN KEY"),
       "%s: a copy on a missing volume refused: %s", how, db_errmsg(db));
    is_int(test_query_int(cat, "SELECT COUNT(*) FROM tape_copies WHERE object_id = 602"), 0,
           "%s: nothing of the refused statement inserted", how);
    ok(test_exec(cat, "UPDATE tape_copies SET volume_id = 598 WHERE object_id = 601") < 0 &&
           db_errclass(db) == DB_ERR_CONSTRAINT,
       "%s: moving a copy to a missing volume refused: %s", how, db_errmsg(db));
    ok(test_exec(cat, "DELETE FROM volumes WHERE id = 501") < 0 &&
           db_errclass(db) == DB_ERR_CONSTRAINT,
       "%s: deleting a referenced volume refused: %s", how, db_errmsg(db));
    ok(test_exec(cat, "UPDATE volumes SET id = 503 WHERE id = 501") < 0 &&
           db_errclass(db) == DB_ERR_CONSTRAINT,
       "%s: changing a referenced volume's id refused: %s", how, db_errmsg(db));
    ok(test_exec(cat, "UPDATE objects SET id = 603 WHERE id = 601") < 0 &&
           db_errclass(db) == DB_ERR_CONSTRAINT,
       "%s: changing a referenced object's id refused: %s", how, db_errmsg(db));
    is_int(test_query_int(cat, "SELECT COUNT(*) FROM volumes WHERE id = 501"), 1,
           "%s: the referenced volume kept", how);
    ok(test_exec(cat, "DELETE FROM volumes WHERE id = 502") == 0,
       "%s: an unreferenced volume deleted", how);
    ok(test_exec(cat, "DELETE FROM objects WHERE id = 601") == 0 &&
           test_query_int(cat, "SELECT COUNT(*) FROM tape_copies WHERE object_id = 601") == 0,
       "%s: deleting an object deletes its copies", how);
    ok(test_exec(cat, "DELETE FROM volumes WHERE id = 501") == 0,
       "%s: a volume no longer referenced deleted", how);
}

/* PostgreSQL from 1.11: copies of objects their own transaction inserted
 * skip the lock, not the check; an older object is still locked against a
 * concurrent delete (another connection's FOR UPDATE NOWAIT fails at once). */
static void own_objects_pg(catalog_t *cat, const char *path, const char *how)
{
    db_t *db = catalog_driver(cat);
    si_error_t err;
    ok(test_exec(cat, "INSERT INTO volumes(id, label) VALUES (511, 'S1'), (512, 'S2');"
                      "INSERT INTO objects(id, bucket, key, size) VALUES (611, 's', 'old', 1)") == 0,
       "%s: two volumes and an older object", how);
    ok(test_exec(cat, "WITH o AS (INSERT INTO objects(id, bucket, key, size)"
                      " VALUES (612, 's', 'a', 1) RETURNING id)"
                      " INSERT INTO tape_copies SELECT id, 1, 511, 0, 0, 1 FROM o") == 0,
       "%s: a copy of an object its statement inserted", how);
    ok(test_exec(cat, "WITH o AS (INSERT INTO objects(id, bucket, key, size)"
                      " VALUES (613, 's', 'b', 1) RETURNING id)"
                      " INSERT INTO tape_copies SELECT id, 1, 511, 0, 0, 1 FROM o"
                      " UNION ALL SELECT 698, 1, 511, 0, 0, 1") < 0 &&
           db_errclass(db) == DB_ERR_CONSTRAINT && strstr(db_errmsg(db), "object 698: no such object"),
       "%s: own objects do not hide a missing one: %s", how, db_errmsg(db));
    ok(test_exec(cat, "WITH o AS (INSERT INTO objects(id, bucket, key, size)"
                      " VALUES (614, 's', 'c', 1) RETURNING id)"
                      " INSERT INTO tape_copies SELECT id, 1, 597, 0, 0, 1 FROM o") < 0 &&
           db_errclass(db) == DB_ERR_CONSTRAINT && strstr(db_errmsg(db), "volume 597: no such volume"),
       "%s: a copy of an own object on a missing volume refused: %s", how, db_errmsg(db));
    /* 1.13's span: ids 620-623 with 622 missing span no more ids than copies */
    ok(test_exec(cat, "WITH o AS (INSERT INTO objects(id, bucket, key, size)"
                      " VALUES (620, 's', 'e', 1), (621, 's', 'f', 1), (623, 's', 'g', 1) RETURNING id)"
                      " INSERT INTO tape_copies SELECT id, 1, 511, 0, 0, 1 FROM o"
                      " UNION ALL SELECT 622, 1, 511, 0, 0, 1") < 0 &&
           db_errclass(db) == DB_ERR_CONSTRAINT && strstr(db_errmsg(db), "object 622: no such object"),
       "%s: a gap in a span of own objects is a missing object: %s", how, db_errmsg(db));
    ok(test_exec(cat, "WITH o AS (INSERT INTO objects(id, bucket, key, size)"
                      " VALUES (624, 's', 'h', 1), (625, 's', 'i', 1) RETURNING id)"
                      " INSERT INTO tape_copies SELECT id, c, 511, 0, 0, 1 FROM o,"
                      " generate_series(1, 2) c") == 0 &&
           test_query_int(cat, "SELECT COUNT(*) FROM tape_copies WHERE object_id IN (624, 625)") == 4,
       "%s: two copies each of a span of own objects", how);
    is_int(test_query_int(cat, "SELECT COUNT(*) FROM objects WHERE id IN (613, 614, 620, 621, 623)"), 0,
           "%s: nothing of the refused statements kept", how);
    /* 610 and 611 span two ids for two copies (1.13's span, with an older
     * object in it) */
    catalog_t *other = catalog_open(path, 0, &err);
    ok(other && test_exec(cat, "BEGIN; INSERT INTO objects(id, bucket, key, size)"
                               " VALUES (610, 's', 'd', 1);"
                               "INSERT INTO tape_copies VALUES (610, 1, 511, 0, 0, 1), (611, 1, 511, 0, 0, 1)")
                    == 0,
       "%s: an open transaction with copies of an own and an older object", how);
    ok(other && test_exec(other, "SELECT 1 FROM objects WHERE id = 611 FOR UPDATE NOWAIT") < 0 &&
           db_errclass(catalog_driver(other)) != DB_ERR_CONSTRAINT,
       "%s: the older object is locked for the writer: %s", how,
       other ? db_errmsg(catalog_driver(other)) : err.text);
    is_int(other ? test_query_int(other, "SELECT COUNT(*) FROM objects WHERE id = 610") : -1, 0,
           "%s: the own object unseen by others until commit", how);
    ok(other && test_exec(other, "SELECT 1 FROM volumes WHERE id = 511 FOR UPDATE NOWAIT") < 0 &&
           db_errclass(catalog_driver(other)) != DB_ERR_CONSTRAINT,
       "%s: the copies' one volume is locked for the writer: %s", how,
       other ? db_errmsg(catalog_driver(other)) : err.text);
    ok(test_exec(cat, "INSERT INTO objects(id, bucket, key, size) VALUES (615, 's', 'j', 1),"
                      " (616, 's', 'k', 1);"
                      "INSERT INTO tape_copies VALUES (615, 1, 511, 0, 0, 1), (616, 1, 512, 0, 0, 1),"
                      " (615, 2, 512, 0, 0, 1)") == 0,
       "%s: copies on two volumes in one statement", how);
    ok(other && test_exec(other, "SELECT 1 FROM volumes WHERE id = 512 FOR UPDATE NOWAIT") < 0 &&
           db_errclass(catalog_driver(other)) != DB_ERR_CONSTRAINT,
       "%s: both volumes locked for the writer: %s", how,
       other ? db_errmsg(catalog_driver(other)) : err.text);
    ok(test_exec(cat, "ROLLBACK") == 0, "%s: rolled back", how);
    ok(other && test_exec(other, "SELECT 1 FROM objects WHERE id = 611 FOR UPDATE NOWAIT") == 0,
       "%s: the lock goes with the transaction", how);
    catalog_close(other);
    ok(test_exec(cat, "DELETE FROM objects WHERE id IN (611, 612, 624, 625);"
                      "DELETE FROM volumes WHERE id IN (511, 512)") == 0,
       "%s: objects, their copies and the volumes deleted", how);
}

/* Events of one kind in one statement: texts that need quoting kept as
 * they are, NULLs kept, in their order, past one statement's few hundred. */
static void events_many(catalog_t *cat)
{
    const char *subjects[] = {"a \"quoted\" one", "back\\slash", "tab\there", NULL,
                              "caf\xc3\xa9 {x,y}"};
    const char *details[] = {"first", NULL, "line\nbreak", "fourth", "fifth"};
    ok(catalog_events(cat, "test.many", subjects, details, 5) == 0, "five events at once");
    ok(test_query_int(cat, "SELECT count(*) FROM events WHERE kind = 'test.many' AND ("
                           "(subject = 'a \"quoted\" one' AND detail = 'first') OR"
                           " (subject = 'back\\slash' AND detail IS NULL) OR"
                           " (subject = 'tab\there' AND detail = 'line\nbreak') OR"
                           " (subject IS NULL AND detail = 'fourth') OR"
                           " (subject = 'caf\xc3\xa9 {x,y}' AND detail = 'fifth'))") == 5,
       "each as given: quotes, a backslash, a tab, a newline, NULLs, braces and a comma");
    ok(test_query_int(cat, "SELECT count(*) FROM events WHERE kind = 'test.many' AND id >"
                           " (SELECT id FROM events WHERE kind = 'test.many' AND detail = 'first')"
                           " AND id < (SELECT id FROM events WHERE kind = 'test.many'"
                           " AND detail = 'fifth')") == 3,
       "in their order");
    enum { N = 1100 };
    static char text[N][16];
    static const char *many[N];
    for (unsigned k = 0; k < N; k++) {
        snprintf(text[k], sizeof(text[k]), "n%u", k);
        many[k] = text[k];
    }
    ok(catalog_events(cat, "test.many", many, many, N) == 0 &&
           test_query_int(cat, "SELECT count(*) FROM events WHERE kind = 'test.many'"
                               " AND subject = detail AND subject LIKE 'n%'") == N,
       "1,100 at once, past one statement's 256");
    ok(catalog_events(cat, "test.many", NULL, NULL, 0) == 0, "none at once");
}

static void run(void)
{
    char path[700];
    si_error_t err;
    bool pg = test_engine_is_pg();
    test_db_path(path, sizeof(path), "schema");
    test_db_remove(path);

    catalog_t *cat;
    if (!pg) {
        cat = catalog_open(path, 0, &err);
        ok(cat == NULL && strstr(err.text, "No such file"), "missing file without CREATE: %s",
           err.text);
    } else {
        refusals_pg(path);
    }

    cat = catalog_open(path, CATALOG_CREATE, &err);
    ok(cat != NULL, "fresh catalog created (%s)%s%s", test_engine_name(), cat ? "" : ": ",
       cat ? "" : err.text);
    is_int(catalog_schema_version(cat), catalog_latest_version(), "fresh catalog at latest version");
    is_int(test_query_int(cat, pg ? "SELECT COUNT(*) FROM information_schema.tables WHERE"
                                    " table_schema = 'public' AND table_name IN"
                                    " ('volumes','objects','tape_copies','datasets',"
                                    "'dataset_members','requests','request_items','cache','events')"
                                  : "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'"
                                    " AND name IN ('volumes','objects','tape_copies','datasets',"
                                    "'dataset_members','requests','request_items','cache','events')"),
           9, "all tables exist");
    if (!pg) {
        is_int(test_query_int(cat, "PRAGMA foreign_keys"), 1, "foreign keys on");
        ok(test_query_int(cat, "SELECT COUNT(*) FROM pragma_journal_mode WHERE journal_mode = 'wal'")
               == 1, "WAL mode");
        /* 2: FULL, each commit's WAL frames synced: what is acknowledged
         * after a commit survives a power loss, as on PostgreSQL */
        is_int(test_query_int(cat, "PRAGMA synchronous"), 2, "commits synced (synchronous FULL)");
    }
    /* an unsynced transaction: its commit not synced, the connection's
     * next ones synced again, after a commit and after a rollback */
    const char *unsynced_q = pg ? "SELECT (current_setting('synchronous_commit') = 'off')::int"
                                : "SELECT (synchronous = 1) FROM pragma_synchronous";
    ok(catalog_begin_unsynced(cat, &err) == 0 && test_query_int(cat, unsynced_q) == 1 &&
           catalog_event(cat, "test", "unsynced", "kept") == 0 && catalog_commit(cat, &err) == 0,
       "an unsynced transaction: not synced inside, committed");
    is_int(test_query_int(cat, unsynced_q), 0, "... the next transactions synced again");
    ok(catalog_begin_unsynced(cat, &err) == 0 &&
           catalog_event(cat, "test", "unsynced", "rolled back") == 0,
       "another, rolled back");
    catalog_rollback(cat);
    is_int(test_query_int(cat, unsynced_q), 0, "... synced again after the rollback");
    is_int(test_query_int(cat, "SELECT count(*) FROM events WHERE subject = 'unsynced'"), 1,
           "the committed one's row kept, the rolled-back one's gone");
    ok(catalog_event(cat, "test", "subject", "detail") == 0, "event appended");
    events_many(cat);
    ok(test_exec(cat, "UPDATE events SET kind = 'x'") < 0, "events cannot be updated");
    ok(test_exec(cat, "DELETE FROM events") < 0, "events cannot be deleted");
    ok(test_exec(cat, "INSERT INTO tape_copies VALUES (999, 1, 999, 0, 0, 0)") < 0,
       "foreign keys enforced");
    references(cat, "fresh");
    cache_usage_follows(cat, "fresh");
    item_totals_follow(cat, "fresh");
    push_totals_follow(cat, "fresh");
    if (pg)
        own_objects_pg(cat, path, "fresh");
    catalog_close(cat);

    /* reopen: nothing to migrate, data kept */
    cat = catalog_open(path, 0, &err);
    is_int(test_query_int(cat, "SELECT COUNT(*) FROM events WHERE subject <> 'unsynced'"
                               " AND kind <> 'test.many'"), 1,
           "reopened catalog keeps data");
    catalog_close(cat);
    test_db_remove(path);

    /* upgrade: a 1.0 catalog with data moves to the latest version */
    cat = catalog_open_at_version(path, 1000, &err);
    ok(cat != NULL, "catalog created at 1.0");
    is_int(catalog_schema_version(cat), 1000, "stopped at 1.0");
    ok(test_query_int(cat, pg ? "SELECT COUNT(*) FROM information_schema.columns WHERE"
                                " table_name = 'objects' AND column_name = 'storage_class'"
                              : "SELECT COUNT(*) FROM pragma_table_info('objects')"
                                " WHERE name = 'storage_class'") == 0,
       "1.0 has no storage_class");
    test_exec(cat, "INSERT INTO objects(bucket, key, size) VALUES ('bkt', 'k', 5)");
    catalog_close(cat);
    cat = catalog_open(path, 0, &err);
    ok(cat != NULL, "1.0 catalog opened by current code");
    is_int(catalog_schema_version(cat), catalog_latest_version(), "upgraded to latest");
    is_int(test_query_int(cat, "SELECT COUNT(*) FROM objects WHERE storage_class = 'GLACIER'"), 1,
           "row kept and new column defaulted");
    ok(catalog_object_put(cat, &(catalog_object_t){.bucket = "bkt", .key = "k2", .size = 1},
                          &(int64_t){0}, &err) == 1, "ids continue after the upgraded rows");
    catalog_close(cat);
    test_db_remove(path);

    /* upgrade from 1.8 (row-level REFERENCES on both engines) with copies */
    cat = catalog_open_at_version(path, CATALOG_INSTANCES_VERSION, &err);
    ok(cat && test_exec(cat, "INSERT INTO volumes(id, label) VALUES (701, 'U1');"
                             "INSERT INTO objects(id, bucket, key, size) VALUES (801, 'u', 'a', 1);"
                             "INSERT INTO tape_copies VALUES (801, 1, 701, 0, 0, 1)") == 0,
       "catalog at 1.8 with a tape copy");
    catalog_close(cat);
    cat = catalog_open(path, 0, &err);
    is_int(catalog_schema_version(cat), catalog_latest_version(), "1.8 upgraded to latest");
    is_int(test_query_int(cat, "SELECT COUNT(*) FROM tape_copies WHERE volume_id = 701"), 1,
           "the copy kept by the upgrade");
    if (pg)
        is_int(test_query_int(cat, "SELECT COUNT(*) FROM pg_constraint WHERE contype = 'f'"
                                   " AND conrelid = 'tape_copies'::regclass"), 0,
               "upgraded: tape_copies' row-level foreign keys replaced");
    references(cat, "upgraded");
    ok(test_exec(cat, "DELETE FROM volumes WHERE id = 701") < 0, "upgraded: the old copy's volume kept");
    catalog_close(cat);

    /* upgrade from 1.10 (1.9's references check, locking every object) */
    test_db_remove(path);
    cat = catalog_open_at_version(path, 1010, &err);
    ok(cat && test_exec(cat, "INSERT INTO volumes(id, label) VALUES (711, 'V1');"
                             "INSERT INTO objects(id, bucket, key, size) VALUES (811, 'v', 'a', 1);"
                             "INSERT INTO tape_copies VALUES (811, 1, 711, 0, 0, 1)") == 0,
       "catalog at 1.10 with a tape copy");
    catalog_close(cat);
    cat = catalog_open(path, 0, &err);
    is_int(catalog_schema_version(cat), catalog_latest_version(), "1.10 upgraded to latest");
    is_int(test_query_int(cat, "SELECT COUNT(*) FROM tape_copies WHERE volume_id = 711"), 1,
           "1.10: the copy kept by the upgrade");
    references(cat, "from 1.10");
    if (pg)
        own_objects_pg(cat, path, "from 1.10");
    cache_usage_follows(cat, "from 1.10");
    is_int(test_query_int(cat, pg ? "SELECT COUNT(*) FROM pg_indexes WHERE indexname ="
                                    " 'request_items_by_state'"
                                  : "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index'"
                                    " AND name = 'request_items_by_state'"),
           1, "1.12: request items indexed by request and state");
    catalog_close(cat);

    /* upgrade from 1.14: the usage is filled from the cache's rows */
    test_db_remove(path);
    cat = catalog_open_at_version(path, 1014, &err);
    ok(cat && test_exec(cat, "INSERT INTO objects(id, bucket, key, size) VALUES (821, 'w', 'a', 7),"
                             " (822, 'w', 'b', 9);"
                             "INSERT INTO cache(object_id, path, size, last_access) VALUES"
                             " (821, 'p', 7, 1), (822, 'q', 9, 1)") == 0,
       "catalog at 1.14 with two cached objects");
    catalog_close(cat);
    cat = catalog_open(path, 0, &err);
    is_int(catalog_schema_version(cat), catalog_latest_version(), "1.14 upgraded to latest");
    is_int(test_query_int(cat, "SELECT " CATALOG_CACHE_USAGE_COLUMNS CATALOG_CACHE_USAGE_FROM), 2,
           "1.14: the usage counts the 2 cached objects");
    is_int(test_query_int(cat, "SELECT u.bytes + d.bytes" CATALOG_CACHE_USAGE_FROM), 16,
           "1.14: and their 16 bytes");
    cache_usage_follows(cat, "from 1.14");
    catalog_close(cat);

    /* upgrade from 1.16: the waiting items' totals are filled from them */
    test_db_remove(path);
    cat = catalog_open_at_version(path, 1016, &err);
    ok(cat && test_exec(cat, "INSERT INTO objects(id, bucket, key, size) VALUES (831, 'w', 'a', 7),"
                             " (832, 'w', 'b', 9), (833, 'w', 'c', 11);"
                             "INSERT INTO requests(id, uuid, uid, gid, pin_lifetime, state,"
                             " created, updated) VALUES (831, 'up', 1000, 100, 60, 'STARTED', 1, 1);"
                             "INSERT INTO request_items(request_id, object_id, state) VALUES"
                             " (831, 831, 'SUBMITTED'), (831, 832, 'SUBMITTED'),"
                             " (831, 833, 'STARTED');"
                             "INSERT INTO cache(object_id, path, size, last_access) VALUES"
                             " (831, 'p', 7, 1), (832, 'q', 9, 1);"
                             "INSERT INTO cache_pins(object_id, request_id, since) VALUES"
                             " (832, 831, 1)") == 0,
       "catalog at 1.16 with two files waiting and one started, two cached, one pinned");
    catalog_close(cat);
    cat = catalog_open(path, 0, &err);
    is_int(catalog_schema_version(cat), catalog_latest_version(), "1.16 upgraded to latest");
    is_int(test_query_int(cat, "SELECT waiting_files * 1000000 + waiting_bytes * 1000"
                               " + started_files FROM request_item_totals"),
           3027001, "1.16: 3 files of 27 bytes waiting, one of them started");
    is_int(test_query_int(cat, "SELECT pinned_objects * 1000 + pinned_bytes FROM cache_usage"),
           1009, "1.16: 1 object of 9 bytes pinned");
    usage_matches_rows(cat, "1.16 upgraded");
    item_totals_follow(cat, "from 1.16");
    catalog_close(cat);

    /* upgrade from 1.17: the pushed files' totals are filled from them */
    test_db_remove(path);
    cat = catalog_open_at_version(path, 1017, &err);
    ok(cat && test_exec(cat, "INSERT INTO datasets(id, name, owner_uid, owner_gid, created)"
                             " VALUES (841, 'up-push', 1000, 100, 1);"
                             "INSERT INTO objects(id, bucket, key, size) VALUES (841, 'u', 'a', 7),"
                             " (842, 'u', 'b', 9), (843, 'u', 'c', 11), (844, 'u', 'd', 13),"
                             " (845, 'u', 'e', 15);"
                             "INSERT INTO pushes(id, uuid, uid, gid, dataset_id, created, updated)"
                             " VALUES (841, 'up-push', 1000, 100, 841, 1, 1);"
                             "INSERT INTO push_items(object_id, push_id, state) VALUES"
                             " (841, 841, 'RECEIVED'), (842, 841, 'RECEIVED'),"
                             " (843, 841, 'DURABLE'), (844, 841, 'FAILED'),"
                             " (845, 841, 'RECEIVING')") == 0,
       "catalog at 1.17 with two files received, one durable, one failed, one receiving");
    catalog_close(cat);
    cat = catalog_open(path, 0, &err);
    is_int(catalog_schema_version(cat), catalog_latest_version(), "1.17 upgraded to latest");
    is_int(test_query_int(cat, "SELECT received_files * 1000000 + received_bytes * 1000"
                               " + archiving_files * 100 + durable_files * 10 + failed_files"
                               " FROM push_item_totals"),
           2016011, "1.17: 2 files of 16 bytes received, one durable, one failed");
    push_totals_follow(cat, "from 1.17");
    catalog_close(cat);

    /* the site: recorded by the first opener that names one, another refused */
    catalog_open_opts_t so = {.target = path, .site = "site-a"};
    cat = catalog_open_opts(&so, &err);
    ok(cat != NULL, "site recorded");
    catalog_close(cat);
    cat = catalog_open_opts(&so, &err);
    ok(cat != NULL, "same site opens again");
    catalog_close(cat);
    so.site = "site-b";
    cat = catalog_open_opts(&so, &err);
    ok(cat == NULL && strstr(err.text, "belongs to site 'site-a'") && strstr(err.text, "catalog.site"),
       "another site's catalog refused: %s", err.text);
    so.flags = CATALOG_READONLY;
    cat = catalog_open_opts(&so, &err);
    ok(cat == NULL && strstr(err.text, "site-a"), "refused read-only too: %s", err.text);

    /* a newer major version is refused, read-only too */
    cat = catalog_open(path, 0, &err);
    set_version(cat, 2000);
    catalog_close(cat);
    cat = catalog_open(path, 0, &err);
    ok(cat == NULL && strstr(err.text, "newer than this stagein supports"),
       "newer major refused: %s", err.text);
    cat = catalog_open(path, CATALOG_READONLY, &err);
    ok(cat == NULL && strstr(err.text, "2.0"), "newer major refused read-only: %s", err.text);

    /* a newer minor of our major opens (it only added) */
    db_t *raw = db_open(path, 0, NULL, &err);
    ok(raw && db_set_schema_version(raw, 1999, &err) == 0, "schema version set to 1.999");
    db_close(raw);
    cat = catalog_open(path, 0, &err);
    ok(cat != NULL, "newer minor accepted");
    catalog_close(cat);

    /* read-only opens never write */
    test_db_remove(path);
    if (!pg) {
        cat = catalog_open(path, CATALOG_READONLY | CATALOG_CREATE, &err);
        ok(cat == NULL, "read-only never creates: %s", err.text);
    } else {
        cat = catalog_open(path, CATALOG_READONLY, &err);
        ok(cat == NULL && strstr(err.text, "empty (no schema)"),
           "read-only never creates the schema: %s", err.text);
    }
    cat = catalog_open(path, CATALOG_CREATE, &err);
    catalog_close(cat);
    cat = catalog_open(path, CATALOG_READONLY, &err);
    ok(cat != NULL, "read-only open of a real catalog");
    ok(test_exec(cat, "INSERT INTO volumes(label) VALUES ('X')") < 0,
       "read-only connection refuses writes");
    ok(db_errclass(catalog_driver(cat)) == DB_ERR_READONLY, "refused as read-only: %s",
       db_errmsg(catalog_driver(cat)));
    catalog_close(cat);
    test_db_remove(path);
}

int main(void)
{
    return test_run_engines(run);
}
