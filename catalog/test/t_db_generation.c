/* The catalog's change generation: every commit of every connection moves
 * it, a rollback or a read does not, and a read-only connection sees it. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog/db.h"
#include "catalog/test/testutil.h"
#include "common/tap.h"

static uint64_t generation_of(db_t *db)
{
    uint64_t g = 0;
    if (!db_generation(db, &g))
        return UINT64_MAX;
    return g;
}

int main(void)
{
    char path[256], gen_path[300];
    test_db_path(path, sizeof(path), "generation");
    test_db_remove(path);
    snprintf(gen_path, sizeof(gen_path), "%s-gen", path);
    si_error_t err;

    db_t *reader_early = db_open(path, DB_OPEN_READONLY, NULL, &err);
    ok(!reader_early, "a read-only connection to a missing catalog fails");
    db_t *writer = db_open(path, DB_OPEN_CREATE, NULL, &err);
    ok(writer != NULL, "writer opens: %s", writer ? "" : err.text);
    if (!writer)
        return done_testing();
    ok(access(gen_path, F_OK) == 0, "the generation file is made beside the catalog");
    db_t *other = db_open(path, 0, NULL, &err);
    db_t *reader = db_open(path, DB_OPEN_READONLY, NULL, &err);
    ok(other && reader, "a second writer and a reader open");
    if (!other || !reader)
        return done_testing();

    uint64_t g0 = generation_of(reader);
    ok(g0 != UINT64_MAX, "the reader has a generation (WAL mode)");
    ok(db_exec(writer, "CREATE TABLE t (x INTEGER)", &err) == 0, "a commit");
    uint64_t g1 = generation_of(reader);
    ok(g1 > g0 && g1 == generation_of(writer) && g1 == generation_of(other),
       "it moved, the same for every connection (%llu -> %llu)", (unsigned long long)g0,
       (unsigned long long)g1);
    ok(db_exec(other, "INSERT INTO t VALUES (1)", &err) == 0 && generation_of(reader) > g1,
       "another connection's autocommit moves it");
    uint64_t g2 = generation_of(reader);
    ok(db_exec(reader, "SELECT count(*) FROM t", &err) == 0 && generation_of(reader) == g2,
       "a read does not move it");
    ok(db_exec(writer, "BEGIN; INSERT INTO t VALUES (2); ROLLBACK", &err) == 0 &&
           generation_of(reader) == g2, "a rollback does not move it");
    ok(db_exec(writer, "BEGIN; INSERT INTO t VALUES (3); INSERT INTO t VALUES (4); COMMIT",
               &err) == 0 && generation_of(reader) == g2 + 1,
       "a transaction moves it once, at its commit");
    db_generation_unseen(writer, true);
    ok(db_exec(writer, "UPDATE t SET x = 5 WHERE x = 1", &err) == 0 &&
           generation_of(reader) == g2 + 1, "an unseen commit does not move it");
    db_generation_unseen(writer, false);
    ok(db_exec(writer, "UPDATE t SET x = 6 WHERE x = 5", &err) == 0 &&
           generation_of(reader) == g2 + 2, "the next commit does again");
    db_close(other);
    db_close(writer);
    db_t *again = db_open(path, 0, NULL, &err);
    ok(again && generation_of(again) == g2 + 2, "it persists across connections");
    db_close(again);
    db_close(reader);
    test_db_remove(path);
    ok(access(gen_path, F_OK) != 0, "removed with the catalog's other files");
    return done_testing();
}
