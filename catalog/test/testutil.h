/* Helpers for the catalog unit tests. */
#ifndef CATALOG_TESTUTIL_H
#define CATALOG_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog/catalog.h"

static inline char *test_db_path(char *buf, size_t size, const char *tag)
{
    snprintf(buf, size, "%s/catalog-%s-%d.db", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             tag, (int)getpid());
    return buf;
}

static inline void test_db_remove(const char *path)
{
    char side[1100];
    unlink(path);
    snprintf(side, sizeof(side), "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof(side), "%s-shm", path);
    unlink(side);
}

/* One integer from a query, -1 on error. */
static inline long long test_query_int(catalog_t *cat, const char *sql)
{
    sqlite3_stmt *s;
    long long v = -1;
    if (sqlite3_prepare_v2(catalog_db(cat), sql, -1, &s, NULL) != SQLITE_OK)
        return -1;
    if (sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

/* A FILE* reading the given text. */
static inline FILE *text_file(const char *text)
{
    return fmemopen((void *)text, strlen(text), "r");
}

#endif
