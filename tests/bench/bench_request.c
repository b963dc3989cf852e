#include "config.h"
#include "tests/bench/bench_request.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "catalog/db.h"
#include "tests/bench/bench_opts.h"

double bench_wait_request(const char *db_path, const char *uuid, double t0, double t0_wall,
                          double limit_s, char final[16])
{
    si_error_t err;
    db_t *db = db_open(db_path, DB_OPEN_READONLY, NULL, &err);
    db_stmt_t *q = db ? db_prepare(db, "SELECT state, updated FROM requests WHERE uuid = ?1", &err)
                      : NULL;
    final[0] = '\0';
    if (!q) {
        fprintf(stderr, "bench: %s\n", err.text);
        db_close(db);
        return limit_s;
    }
    db_bind_text(q, 1, uuid, -1);
    double updated = 0;
    while (bench_mono_s() - t0 < limit_s) {
        if (db_step(q) == DB_ROW) {
            snprintf(final, 16, "%s", db_column_text(q, 0));
            updated = db_column_double(q, 1);
        }
        db_reset(q);
        if (strcmp(final, "COMPLETED") == 0 || strcmp(final, "FAILED") == 0)
            break;
        usleep(20000);
    }
    double took = bench_mono_s() - t0;
    if (updated > t0_wall && updated - t0_wall < took)
        took = updated - t0_wall;
    db_finalize(q);
    db_close(db);
    return took;
}
