/* Helpers for the catalog unit tests: each test body runs on both engines,
 * SQLite always and PostgreSQL when a private server can be started
 * (tests/pg-lib.sh: initdb + pg_ctl in a temporary directory as nobody,
 * Unix socket there, stopped at exit). */
#ifndef CATALOG_TESTUTIL_H
#define CATALOG_TESTUTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "catalog/db.h"
#include "catalog/test/sqlite_files.h"
#include "common/tap.h"

typedef struct {
    bool pg;             /* the body now runs on PostgreSQL */
    char dir[256];       /* the server's directory */
    char url[600];       /* its postgres database */
    char password_file[300];
    int seq;             /* databases made so far */
    char last[600];      /* the last target made */
} test_engine_t;

static test_engine_t test_engine;

static inline bool test_engine_is_pg(void)
{
    return test_engine.pg;
}

static inline const char *test_engine_name(void)
{
    return test_engine.pg ? "postgresql" : "sqlite";
}

/* Runs SQL on the PostgreSQL server's postgres database. */
static inline int test_pg_admin(const char *sql)
{
    si_error_t err;
    db_t *db = db_open(test_engine.url, 0, test_engine.password_file, &err);
    if (!db) {
        diag("%s", err.text);
        return -1;
    }
    int rc = db_exec(db, sql, &err);
    if (rc < 0)
        diag("%s", err.text);
    db_close(db);
    return rc;
}

/* A fresh catalog target of the current engine: a file path (not created),
 * or a new empty PostgreSQL database's URL. */
static inline char *test_db_path(char *buf, size_t size, const char *tag)
{
    if (!test_engine.pg) {
        snprintf(buf, size, "%s/catalog-%s-%d.db", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
                 tag, (int)getpid());
        return buf;
    }
    char name[128], sql[300];
    snprintf(name, sizeof(name), "t_%s_%d_%d", tag, (int)getpid(), ++test_engine.seq);
    for (char *p = name; *p; p++)
        if (*p == '-')
            *p = '_';
    /* two calls: DROP and CREATE DATABASE cannot share a transaction */
    snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s", name);
    test_pg_admin(sql);
    snprintf(sql, sizeof(sql), "CREATE DATABASE %s", name);
    test_pg_admin(sql);
    snprintf(buf, size, "postgresql://stagein@/%s?host=%s/pg", name, test_engine.dir);
    return buf;
}

/* Removes the catalog (file and WAL files, or the database), so that the
 * same target starts empty again. */
static inline void test_db_remove(const char *path)
{
    if (test_engine.pg) {
        const char *q = strchr(path, '?');
        const char *slash = q;
        while (slash && slash > path && slash[-1] != '/')
            slash--;
        if (!q || !slash || slash == path)
            return;
        slash--;
        char sql[300];
        snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %.*s WITH (FORCE)",
                 (int)(q - slash - 1), slash + 1);
        test_pg_admin(sql);
        snprintf(sql, sizeof(sql), "CREATE DATABASE %.*s", (int)(q - slash - 1), slash + 1);
        test_pg_admin(sql);
        return;
    }
    test_sqlite_files_remove(path);
}

/* One integer from a query, -1 on error. */
static inline long long test_query_int(catalog_t *cat, const char *sql)
{
    return db_query_int64(catalog_driver(cat), sql);
}

/* Runs SQL with no rows; 0, or -1 when the engine refused it. */
static inline int test_exec(catalog_t *cat, const char *sql)
{
    return db_exec(catalog_driver(cat), sql, NULL);
}

/* A FILE* reading the given text. */
static inline FILE *text_file(const char *text)
{
    return fmemopen((void *)text, strlen(text), "r");
}

static inline void test_pg_stop(void)
{
    if (!test_engine.dir[0])
        return;
    char cmd[800];
    snprintf(cmd, sizeof(cmd), "sh '%s/tests/pg-lib.sh' stop '%s'; rm -rf '%s'",
             getenv("top_srcdir"), test_engine.dir, test_engine.dir);
    if (system(cmd) != 0)
        diag("stopping the test PostgreSQL server in %s failed", test_engine.dir);
    test_engine.dir[0] = '\0';
}

/* Starts the private server; false (with why) when it cannot be. */
static inline bool test_pg_start(char *why, size_t size)
{
#ifndef HAVE_LIBPQ
    snprintf(why, size, "stagein built without libpq (apt-get install libpq-dev)");
    return false;
#else
    const char *src = getenv("top_srcdir");
    if (!src) {
        snprintf(why, size, "top_srcdir unset (run through make check)");
        return false;
    }
    snprintf(test_engine.dir, sizeof(test_engine.dir), "/tmp/sipg.XXXXXX");
    if (!mkdtemp(test_engine.dir)) {
        snprintf(why, size, "mkdtemp failed");
        test_engine.dir[0] = '\0';
        return false;
    }
    char cmd[800];
    /* the server is stopped when this process is gone, even when killed */
    snprintf(cmd, sizeof(cmd), "PG_LIB_OWNER=%ld sh '%s/tests/pg-lib.sh' start '%s' 2>'%s/why'",
             (long)getpid(), src, test_engine.dir, test_engine.dir);
    if (system(cmd) != 0) {
        char file[400];
        snprintf(file, sizeof(file), "%s/why", test_engine.dir);
        FILE *f = fopen(file, "r");
        if (!f || !fgets(why, (int)size, f))
            snprintf(why, size, "tests/pg-lib.sh start failed");
        why[strcspn(why, "\n")] = '\0';
        if (f)
            fclose(f);
        test_pg_stop();
        return false;
    }
    snprintf(test_engine.url, sizeof(test_engine.url), "postgresql://stagein@/postgres?host=%s/pg",
             test_engine.dir);
    snprintf(test_engine.password_file, sizeof(test_engine.password_file), "%s/pg-password",
             test_engine.dir);
    /* Catalogs opened without a password file find it as libpq does. */
    char pgpass[400], password[200] = "";
    snprintf(pgpass, sizeof(pgpass), "%s/pgpass", test_engine.dir);
    FILE *in = fopen(test_engine.password_file, "r");
    if (in && fgets(password, sizeof(password), in))
        password[strcspn(password, "\n")] = '\0';
    if (in)
        fclose(in);
    FILE *out = fopen(pgpass, "w");
    if (out) {
        fprintf(out, "*:*:*:stagein:%s\n", password);
        fclose(out);
    }
    chmod(pgpass, 0600); /* libpq ignores a .pgpass others can read */
    setenv("PGPASSFILE", pgpass, 1);
    return true;
#endif
}

/* The test's body on SQLite, then on PostgreSQL (or a skip saying why). */
static inline int test_run_engines(void (*body)(void))
{
    test_engine.pg = false;
    diag("engine: sqlite");
    body();
    char why[300] = "";
    if (test_pg_start(why, sizeof(why))) {
        atexit(test_pg_stop);
        test_engine.pg = true;
        diag("engine: postgresql (%s)", test_engine.dir);
        body();
        test_engine.pg = false;
        test_pg_stop();
    } else {
        skip(1, why);
    }
    return done_testing();
}

#endif
