#include "config.h"
#include "tests/bench/bench_request.h"

#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/bench/bench_opts.h"

double bench_wait_request(const char *db_path, const char *uuid, double t0, double t0_wall,
                          double limit_s, char final[16])
{
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL);
    sqlite3_busy_timeout(db, 1000);
    sqlite3_prepare_v2(db, "SELECT state, updated FROM requests WHERE uuid = ?1", -1, &q, NULL);
    sqlite3_bind_text(q, 1, uuid, -1, SQLITE_STATIC);
    double updated = 0;
    final[0] = '\0';
    while (bench_mono_s() - t0 < limit_s) {
        if (sqlite3_step(q) == SQLITE_ROW) {
            snprintf(final, 16, "%s", sqlite3_column_text(q, 0));
            updated = sqlite3_column_double(q, 1);
        }
        sqlite3_reset(q);
        if (strcmp(final, "COMPLETED") == 0 || strcmp(final, "FAILED") == 0)
            break;
        usleep(20000);
    }
    double took = bench_mono_s() - t0;
    if (updated > t0_wall && updated - t0_wall < took)
        took = updated - t0_wall;
    sqlite3_finalize(q);
    sqlite3_close(db);
    return took;
}
