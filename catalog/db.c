/* The catalog driver: dispatch to the engine, the SQLite engine, the
 * statement cache and the translation of SQLite's spelling for PostgreSQL. */
#include "config.h"
#include "catalog/db_impl.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/strbuf.h"

#define IS_PG(db) ((db)->engine == DB_POSTGRES)

bool db_target_is_url(const char *target)
{
    return strncmp(target, "postgresql://", 13) == 0 || strncmp(target, "postgres://", 11) == 0;
}

static void sqlite_note_error(db_t *db)
{
    int ext = sqlite3_extended_errcode(db->sqlite);
    switch (ext) {
    case SQLITE_CONSTRAINT_UNIQUE:
    case SQLITE_CONSTRAINT_PRIMARYKEY:
        db->errclass = DB_ERR_UNIQUE;
        break;
    default:
        switch (ext & 0xff) {
        case SQLITE_CONSTRAINT:
            db->errclass = DB_ERR_CONSTRAINT;
            break;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
            db->errclass = DB_ERR_BUSY;
            break;
        case SQLITE_READONLY:
            db->errclass = DB_ERR_READONLY;
            break;
        default:
            db->errclass = DB_ERR_OTHER;
        }
    }
    snprintf(db->errmsg, sizeof(db->errmsg), "%s", sqlite3_errmsg(db->sqlite));
}

/* How long a connection waits for another's write lock, in all. */
#define SQLITE_BUSY_WAIT_US 10000000L

/* Waits for the write lock in short steps (50 us doubling to 1 ms): SQLite's
 * own busy_timeout sleeps 1, 2, 5, 10 ms... and a daemon's connections
 * (cache group commit, push, recall) hold the lock for well under a
 * millisecond each, so most of its sleep was spent with the lock free
 * (measured on a push of 64 KiB files: the committer slept 6 ms a wait). */
static int sqlite_busy_wait(void *arg, int count)
{
    long *waited_us = arg;
    if (count == 0)
        *waited_us = 0;
    if (*waited_us >= SQLITE_BUSY_WAIT_US)
        return 0;
    long step = count < 5 ? 50L << count : 1000L;
    struct timespec ts = {0, step * 1000L};
    nanosleep(&ts, NULL);
    *waited_us += step;
    return 1;
}

static db_t *sqlite_open(db_t *db, const char *path, int flags, si_error_t *err)
{
    int oflags = db->readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
    if ((flags & DB_OPEN_CREATE) && !db->readonly)
        oflags |= SQLITE_OPEN_CREATE;
    struct stat st;
    if (!(oflags & SQLITE_OPEN_CREATE) && stat(path, &st) != 0) {
        si_errprintf(err, "catalog %s: %s", path, strerror(errno));
        goto error;
    }
    if (sqlite3_open_v2(path, &db->sqlite, oflags | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        si_errprintf(err, "catalog %s: %s", path,
                     db->sqlite ? sqlite3_errmsg(db->sqlite) : "cannot open");
        goto error;
    }
    sqlite3_extended_result_codes(db->sqlite, 1);
    sqlite3_busy_handler(db->sqlite, sqlite_busy_wait, &db->busy_waited_us);
    if (db_exec(db, "PRAGMA foreign_keys = ON", err) < 0)
        goto error;
    if (!db->readonly) {
        /* WAL: readers (admins, the CLI) never block the daemon's writer.
         * synchronous=FULL syncs each commit's WAL frames: callers that
         * acknowledge work (a pushed file, an accepted request) commit
         * before answering, and NORMAL lost such a commit with a power
         * loss before the next checkpoint (one more flush per transaction:
         * 64 KiB pushes 11-21 % slower, BENCHMARKS.md). */
        if (db_exec(db, "PRAGMA journal_mode = WAL", err) < 0 ||
            db_exec(db, "PRAGMA synchronous = FULL", err) < 0 ||
            db_exec(db, "PRAGMA cache_size = -131072", err) < 0 || /* 128 MiB */
            /* statement journals (triggers) in memory, not in temp files */
            db_exec(db, "PRAGMA temp_store = MEMORY", err) < 0)
            goto error;
    }
    if (db_generation_open(db, err) < 0)
        goto error;
    return db;
error:
    db_close(db);
    return NULL;
}

db_t *db_open(const char *target, int flags, const char *password_file, si_error_t *err)
{
    db_t *db = calloc(1, sizeof(*db));
    if (!db || !(db->target = strdup(target))) {
        free(db);
        si_errprintf(err, "out of memory");
        return NULL;
    }
    db->readonly = flags & DB_OPEN_READONLY;
    if (!(db->own_health = db_health_new(NULL, target))) {
        db_close(db);
        si_errprintf(err, "out of memory");
        return NULL;
    }
    db->health = db->own_health;
    if (db_target_is_url(target)) {
        db->engine = DB_POSTGRES;
#ifdef HAVE_LIBPQ
        if (db_pg_open(db, target, flags, password_file, err))
            return db;
        db_close(db);
        return NULL;
#else
        si_errprintf(err, "catalog %s: this stagein was built without the PostgreSQL engine "
                     "(rebuild with libpq: apt-get install libpq-dev)", target);
        db_close(db);
        return NULL;
#endif
    }
    if (password_file) {
        si_errprintf(err, "catalog %s: a password file applies to a postgresql:// catalog.url "
                     "only", target);
        db_close(db);
        return NULL;
    }
    db->engine = DB_SQLITE;
    return sqlite_open(db, target, flags, err);
}

void db_close(db_t *db)
{
    if (!db)
        return;
    for (int i = 0; i < DB_CACHE_SLOTS; i++)
        if (db->cache[i].stmt) {
            db->cache[i].stmt->cached = false;
            db_finalize(db->cache[i].stmt);
        }
    if (db->sqlite)
        sqlite3_close(db->sqlite);
    db_generation_close(db);
#ifdef HAVE_LIBPQ
    db_pg_close(db);
#endif
    db_health_free(db->own_health);
    free(db->target);
    free(db);
}

db_engine_t db_engine(const db_t *db)
{
    return db->engine;
}

const char *db_engine_name(const db_t *db)
{
    return IS_PG(db) ? "postgresql" : "sqlite";
}

const char *db_target(const db_t *db)
{
    return db->target;
}

bool db_readonly(const db_t *db)
{
    return db->readonly;
}

sqlite3 *db_sqlite(db_t *db)
{
    return db->sqlite;
}

/* ---- statements ------------------------------------------------------- */

/* An SQLite statement's wrapper on db, before its statement is prepared. */
static db_stmt_t *stmt_new(db_t *db, si_error_t *err)
{
    db_stmt_t *s = calloc(1, sizeof(*s));
    if (!s) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    s->db = db;
    return s;
}

db_stmt_t *db_prepare(db_t *db, const char *sql, si_error_t *err)
{
#ifdef HAVE_LIBPQ
    if (IS_PG(db))
        return db_pg_prepare(db, sql, err);
#endif
    db_stmt_t *s = stmt_new(db, err);
    if (!s)
        return NULL;
    if (sqlite3_prepare_v2(db->sqlite, sql, -1, &s->sqlite, NULL) != SQLITE_OK) {
        sqlite_note_error(db);
        db_error(db, err, "catalog query");
        free(s);
        return NULL;
    }
    return s;
}

db_stmt_t *db_cached(db_t *db, const char *sql, si_error_t *err)
{
    uintptr_t h = (uintptr_t)sql;
    h ^= h >> 17;
    h *= 0x9e3779b97f4a7c15ULL;
    size_t slot = (h >> 32) & (DB_CACHE_SLOTS - 1);
    for (size_t probe = 0; probe < DB_CACHE_SLOTS; probe++) {
        size_t i = (slot + probe) & (DB_CACHE_SLOTS - 1);
        if (db->cache[i].key == sql) {
            db_stmt_t *s = db->cache[i].stmt;
            db_reset(s);
            db_clear_bindings(s);
            return s;
        }
        if (!db->cache[i].key) {
            db_stmt_t *s = db_prepare(db, sql, err);
            if (!s)
                return NULL;
            s->cached = true;
            db->cache[i].key = sql;
            db->cache[i].stmt = s;
            return s;
        }
    }
    /* Full: a one-off each time would leak; the set of literals is small. */
    si_errprintf(err, "catalog: more than %d cached statements", DB_CACHE_SLOTS);
    return NULL;
}

/* ATTACH (which sqlite3_stmt_readonly lets through), PRAGMA and everything
 * else that is not a plain query is denied. */
static int sql_authorizer(void *unused, int action, const char *a, const char *b,
                          const char *dbname, const char *trigger)
{
    (void)unused, (void)a, (void)b, (void)dbname, (void)trigger;
    switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_FUNCTION:
    case SQLITE_RECURSIVE:
        return SQLITE_OK;
    default:
        return SQLITE_DENY;
    }
}

db_stmt_t *db_prepare_readonly(db_t *db, const char *sql, si_error_t *err)
{
    if (!sql[strspn(sql, " \t\r\n;")]) {
        si_errprintf(err, "SQL: empty statement");
        return NULL;
    }
#ifdef HAVE_LIBPQ
    if (IS_PG(db)) {
        /* One statement: the server refuses several in a prepared one. */
        if (db_begin_readonly(db, err) < 0)
            return NULL;
        db_stmt_t *s = db_pg_prepare(db, sql, err);
        if (!s || db_pg_prepare_now(s, err) < 0) {
            if (s)
                db_pg_finalize(s);
            db_rollback(db);
            return NULL;
        }
        s->ends_transaction = true;
        return s;
    }
#endif
    db_stmt_t *s = stmt_new(db, err);
    if (!s)
        return NULL;
    const char *tail = NULL;
    sqlite3_set_authorizer(db->sqlite, sql_authorizer, NULL);
    int rc = sqlite3_prepare_v2(db->sqlite, sql, -1, &s->sqlite, &tail);
    sqlite3_set_authorizer(db->sqlite, NULL, NULL);
    if (rc == SQLITE_AUTH) {
        si_errprintf(err, "SQL: only read-only statements are allowed (SELECT, WITH): %s",
                     sqlite3_errmsg(db->sqlite));
        goto error;
    }
    if (rc != SQLITE_OK) {
        si_errprintf(err, "SQL: %s", sqlite3_errmsg(db->sqlite));
        goto error;
    }
    if (!s->sqlite) {
        si_errprintf(err, "SQL: empty statement");
        goto error;
    }
    if (tail && tail[strspn(tail, " \t\r\n;")] != '\0') {
        si_errprintf(err, "SQL: give one statement (text after the first: '%.40s')", tail);
        goto error;
    }
    if (!sqlite3_stmt_readonly(s->sqlite)) {
        si_errprintf(err, "SQL: only read-only statements are allowed");
        goto error;
    }
    return s;
error:
    sqlite3_finalize(s->sqlite);
    free(s);
    return NULL;
}

void db_finalize(db_stmt_t *s)
{
    if (!s || s->cached)
        return;
#ifdef HAVE_LIBPQ
    if (IS_PG(s->db)) {
        bool end = s->ends_transaction;
        db_t *db = s->db;
        db_pg_finalize(s);
        if (end)
            db_rollback(db);
        return;
    }
#endif
    sqlite3_finalize(s->sqlite);
    free(s);
}

void db_reset(db_stmt_t *s)
{
    if (!s)
        return;
#ifdef HAVE_LIBPQ
    if (IS_PG(s->db)) {
        db_pg_reset(s);
        return;
    }
#endif
    sqlite3_reset(s->sqlite);
}

void db_clear_bindings(db_stmt_t *s)
{
#ifdef HAVE_LIBPQ
    if (IS_PG(s->db)) {
        db_pg_clear_bindings(s);
        return;
    }
#endif
    sqlite3_clear_bindings(s->sqlite);
}

int db_bind_index(db_stmt_t *s, const char *name)
{
#ifdef HAVE_LIBPQ
    if (IS_PG(s->db))
        return db_pg_bind_index(s, name);
#endif
    return sqlite3_bind_parameter_index(s->sqlite, name);
}

/* PostgreSQL type oids the driver names (pg_type.h is a server header). */
#define PG_INT8 20
#define PG_FLOAT8 701

void db_bind_int64(db_stmt_t *s, int i, int64_t v)
{
#ifdef HAVE_LIBPQ
    if (IS_PG(s->db)) {
        db_pg_bind_number(s, i, PG_INT8, "%lld", (long long)v);
        return;
    }
#endif
    sqlite3_bind_int64(s->sqlite, i, v);
}

void db_bind_double(db_stmt_t *s, int i, double v)
{
#ifdef HAVE_LIBPQ
    if (IS_PG(s->db)) {
        db_pg_bind_number(s, i, PG_FLOAT8, "%.17g", v);
        return;
    }
#endif
    sqlite3_bind_double(s->sqlite, i, v);
}

void db_bind_text(db_stmt_t *s, int i, const char *text, int len)
{
#ifdef HAVE_LIBPQ
    if (IS_PG(s->db)) {
        db_pg_bind(s, i, 0, text, len);
        return;
    }
#endif
    sqlite3_bind_text(s->sqlite, i, text, len, SQLITE_STATIC);
}

void db_bind_text_copy(db_stmt_t *s, int i, const char *text)
{
#ifdef HAVE_LIBPQ
    if (IS_PG(s->db)) {
        db_pg_bind(s, i, 0, text, text ? (int)strlen(text) : 0);
        return;
    }
#endif
    sqlite3_bind_text(s->sqlite, i, text, -1, SQLITE_TRANSIENT);
}

void db_bind_null(db_stmt_t *s, int i)
{
#ifdef HAVE_LIBPQ
    if (IS_PG(s->db)) {
        db_pg_bind(s, i, 0, NULL, 0);
        return;
    }
#endif
    sqlite3_bind_null(s->sqlite, i);
}

/* A list's text (taken: freed here), or NULL when it could not be made. */
static int bind_list(db_stmt_t *s, int i, char *text, size_t len)
{
    if (!text) {
        db_bind_null(s, i);
        return -1;
    }
#ifdef HAVE_LIBPQ
    if (IS_PG(s->db)) {
        db_pg_bind(s, i, 0, text, (int)len);
        free(text);
        return 0;
    }
#endif
    sqlite3_bind_text64(s->sqlite, i, text, len, free, SQLITE_UTF8);
    return 0;
}

int db_bind_int64_list(db_stmt_t *s, int i, const int64_t *v, size_t n)
{
    bool pg = IS_PG(s->db);
    size_t cap = n * 21 + 3, len = 0;
    char *text = malloc(cap);
    if (!text)
        return bind_list(s, i, NULL, 0);
    text[len++] = pg ? '{' : '[';
    for (size_t k = 0; k < n; k++)
        len += (size_t)snprintf(text + len, cap - len, "%s%lld", k ? "," : "", (long long)v[k]);
    text[len++] = pg ? '}' : ']';
    text[len] = '\0';
    return bind_list(s, i, text, len);
}

/* One element of a text list: a JSON string for SQLite, a quoted element
 * of an array literal for PostgreSQL (both escape quotes and backslashes;
 * JSON also control characters). */
static void list_text_element(si_strbuf_t *b, const char *v, bool pg)
{
    if (!v) {
        si_strbuf_puts(b, pg ? "NULL" : "null");
        return;
    }
    si_strbuf_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (*p == '"' || *p == '\\')
            si_strbuf_putc(b, '\\');
        if (!pg && *p < 0x20)
            si_strbuf_printf(b, "\\u%04x", *p);
        else
            si_strbuf_putc(b, (char)*p);
    }
    si_strbuf_putc(b, '"');
}

int db_bind_text_list(db_stmt_t *s, int i, const char *const *v, size_t n)
{
    bool pg = IS_PG(s->db);
    si_strbuf_t b;
    si_strbuf_init(&b, SIZE_MAX);
    si_strbuf_putc(&b, pg ? '{' : '[');
    for (size_t k = 0; k < n; k++) {
        if (k)
            si_strbuf_putc(&b, ',');
        list_text_element(&b, v[k], pg);
    }
    si_strbuf_putc(&b, pg ? '}' : ']');
    size_t len = b.len;
    char *text = b.failed ? NULL : si_strbuf_take(&b);
    si_strbuf_free(&b);
    return bind_list(s, i, text, len);
}

static int by_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int db_step_ids(db_stmt_t *s, int64_t *out, size_t cap, size_t *n)
{
    int rc;
    *n = 0;
    while ((rc = db_step(s)) == DB_ROW)
        if (*n < cap)
            out[(*n)++] = db_column_int64(s, 0);
    db_ids_sort(out, *n);
    return rc == DB_DONE ? DB_DONE : DB_ERROR;
}

void db_ids_sort(int64_t *ids, size_t n)
{
    if (n > 1)
        qsort(ids, n, sizeof(*ids), by_int64);
}

const int64_t *db_ids_find(const int64_t *sorted, size_t n, int64_t id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sorted[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && sorted[lo] == id ? &sorted[lo] : NULL;
}

int db_step(db_stmt_t *s)
{
#ifdef HAVE_LIBPQ
    if (IS_PG(s->db))
        return db_pg_step(s);
#endif
    int rc = sqlite3_step(s->sqlite);
    if (rc == SQLITE_ROW)
        return DB_ROW;
    if (rc == SQLITE_DONE)
        return DB_DONE;
    sqlite_note_error(s->db);
    return DB_ERROR;
}

int db_column_count(db_stmt_t *s)
{
#ifdef HAVE_LIBPQ
    if (IS_PG(s->db))
        return db_pg_column_count(s);
#endif
    return sqlite3_column_count(s->sqlite);
}

const char *db_column_name(db_stmt_t *s, int i)
{
#ifdef HAVE_LIBPQ
    if (IS_PG(s->db))
        return db_pg_column_name(s, i);
#endif
    return sqlite3_column_name(s->sqlite, i);
}

db_type_t db_column_type(db_stmt_t *s, int i)
{
#ifdef HAVE_LIBPQ
    if (IS_PG(s->db))
        return db_pg_column_type(s, i);
#endif
    switch (sqlite3_column_type(s->sqlite, i)) {
    case SQLITE_NULL:
        return DB_NULL;
    case SQLITE_INTEGER:
        return DB_INTEGER;
    case SQLITE_FLOAT:
        return DB_FLOAT;
    default:
        return DB_TEXT;
    }
}

int64_t db_column_int64(db_stmt_t *s, int i)
{
#ifdef HAVE_LIBPQ
    if (IS_PG(s->db)) {
        const char *t = db_pg_column_text(s, i);
        if (!t)
            return 0;
        if (strchr(t, '.') || strchr(t, 'e')) /* numeric or float: as SQLite casts */
            return (int64_t)strtod(t, NULL);
        return strtoll(t, NULL, 10);
    }
#endif
    return sqlite3_column_int64(s->sqlite, i);
}

double db_column_double(db_stmt_t *s, int i)
{
#ifdef HAVE_LIBPQ
    if (IS_PG(s->db)) {
        const char *t = db_pg_column_text(s, i);
        return t ? strtod(t, NULL) : 0.0;
    }
#endif
    return sqlite3_column_double(s->sqlite, i);
}

const char *db_column_text(db_stmt_t *s, int i)
{
#ifdef HAVE_LIBPQ
    if (IS_PG(s->db))
        return db_pg_column_text(s, i);
#endif
    return (const char *)sqlite3_column_text(s->sqlite, i);
}

int db_column_bytes(db_stmt_t *s, int i)
{
#ifdef HAVE_LIBPQ
    if (IS_PG(s->db))
        return db_pg_column_bytes(s, i);
#endif
    return sqlite3_column_bytes(s->sqlite, i);
}

int64_t db_changes(db_t *db)
{
#ifdef HAVE_LIBPQ
    if (IS_PG(db))
        return db->pg_changes;
#endif
    return sqlite3_changes(db->sqlite);
}

int64_t db_last_insert_id(db_t *db)
{
#ifdef HAVE_LIBPQ
    if (IS_PG(db))
        return db_pg_last_insert_id(db);
#endif
    return sqlite3_last_insert_rowid(db->sqlite);
}

int db_exec(db_t *db, const char *sql, si_error_t *err)
{
#ifdef HAVE_LIBPQ
    if (IS_PG(db))
        return db_pg_exec(db, sql, err);
#endif
    char *msg = NULL;
    if (sqlite3_exec(db->sqlite, sql, NULL, NULL, &msg) != SQLITE_OK) {
        sqlite_note_error(db);
        if (msg)
            snprintf(db->errmsg, sizeof(db->errmsg), "%s", msg);
        sqlite3_free(msg);
        return si_errprintf(err, "catalog %s: %s", db->target, db->errmsg);
    }
    return 0;
}

bool db_can_copy(const db_t *db)
{
    return IS_PG(db);
}

int db_copy_in(db_t *db, const char *copy_sql, const char *data, size_t len, si_error_t *err)
{
    return db_copy_send(db, copy_sql, data, len, err) < 0 ? -1 : db_copy_wait(db, err);
}

int db_copy_send(db_t *db, const char *copy_sql, const char *data, size_t len, si_error_t *err)
{
#ifdef HAVE_LIBPQ
    if (IS_PG(db))
        return db_pg_copy_send(db, copy_sql, data, len, err);
#endif
    (void)copy_sql, (void)data, (void)len;
    db->errclass = DB_ERR_OTHER;
    snprintf(db->errmsg, sizeof(db->errmsg), "COPY is PostgreSQL's, not %s's",
             db_engine_name(db));
    return si_errprintf(err, "catalog %s: %s", db->target, db->errmsg);
}

int db_copy_wait(db_t *db, si_error_t *err)
{
#ifdef HAVE_LIBPQ
    if (IS_PG(db))
        return db_pg_copy_wait(db, err);
#endif
    (void)db, (void)err;
    return 0;
}

void db_copy_field(FILE *row, bool first, const char *text)
{
    if (!first)
        fputc('\t', row);
    if (!text) {
        fputs("\\N", row);
        return;
    }
    for (const char *p = text; *p; p++) {
        switch (*p) {
        case '\\': fputs("\\\\", row); break;
        case '\t': fputs("\\t", row); break;
        case '\n': fputs("\\n", row); break;
        case '\r': fputs("\\r", row); break;
        default: fputc(*p, row);
        }
    }
}

const char *db_errmsg(db_t *db)
{
    return db->errmsg;
}

db_errclass_t db_errclass(db_t *db)
{
    return db->errclass;
}

int db_error(db_t *db, si_error_t *err, const char *context)
{
    return si_errprintf(err, "%s: %s", context, db->errmsg);
}

/* ---- transactions ----------------------------------------------------- */

int db_begin(db_t *db, si_error_t *err)
{
    if (db_exec(db, IS_PG(db) ? "BEGIN" : "BEGIN IMMEDIATE", err) < 0)
        return -1;
    db->in_transaction = true;
    return 0;
}

int db_begin_readonly(db_t *db, si_error_t *err)
{
    /* PostgreSQL: the snapshot taken at once, so a later SET TRANSACTION
     * READ WRITE inside it is refused. */
    if (db_exec(db, IS_PG(db) ? "BEGIN READ ONLY; SELECT 1" : "BEGIN", err) < 0)
        return -1;
    db->in_transaction = true;
    return 0;
}

int db_begin_unsynced(db_t *db, si_error_t *err)
{
    if (!IS_PG(db) && db_exec(db, "PRAGMA synchronous = NORMAL", err) < 0)
        return -1;
    db->unsynced = true;
    if (db_begin(db, err) < 0 ||
        (IS_PG(db) && db_exec(db, "SET LOCAL synchronous_commit = off", err) < 0)) {
        db_rollback(db);
        return -1;
    }
    return 0;
}

/* After an unsynced transaction: the connection's commits synced again. */
static void synced_again(db_t *db)
{
    if (!db->unsynced)
        return;
    db->unsynced = false;
    if (!IS_PG(db)) /* no I/O: a setting of the connection */
        sqlite3_exec(db->sqlite, "PRAGMA synchronous = FULL", NULL, NULL, NULL);
}

int db_commit(db_t *db, si_error_t *err)
{
    if (db_exec(db, "COMMIT", err) < 0) {
        db_rollback(db);
        return -1;
    }
    db->in_transaction = false;
    synced_again(db);
    return 0;
}

void db_rollback(db_t *db)
{
    for (int i = 0; i < DB_CACHE_SLOTS; i++)
        if (db->cache[i].stmt)
            db_reset(db->cache[i].stmt);
    if (IS_PG(db)) {
#ifdef HAVE_LIBPQ
        if (db->in_transaction && !db->pg_lost)
            db_exec(db, "ROLLBACK", NULL);
        db_pg_transaction_ended(db);
#endif
    } else if (!sqlite3_get_autocommit(db->sqlite)) {
        sqlite3_exec(db->sqlite, "ROLLBACK", NULL, NULL, NULL);
    }
    db->in_transaction = false;
    synced_again(db);
}

bool db_in_transaction(db_t *db)
{
    return db->in_transaction;
}

/* ---- schema version ---------------------------------------------------- */

int64_t db_query_int64(db_t *db, const char *sql)
{
    db_stmt_t *s = db_prepare(db, sql, NULL);
    int64_t v = -1;
    if (!s)
        return -1;
    if (db_step(s) == DB_ROW)
        v = db_column_int64(s, 0);
    db_finalize(s);
    return v;
}

int db_schema_version(db_t *db)
{
    if (!IS_PG(db))
        return (int)db_query_int64(db, "PRAGMA user_version");
    int exists = (int)db_query_int64(db, "SELECT to_regclass('stagein_schema') IS NOT NULL");
    if (exists <= 0)
        return exists;
    return (int)db_query_int64(db, "SELECT coalesce(max(version), 0) FROM stagein_schema");
}

int db_set_schema_version(db_t *db, int version, si_error_t *err)
{
    char sql[200];
    if (IS_PG(db))
        snprintf(sql, sizeof(sql),
                 "CREATE TABLE IF NOT EXISTS stagein_schema (version INTEGER NOT NULL);"
                 "DELETE FROM stagein_schema; INSERT INTO stagein_schema VALUES (%d)", version);
    else
        snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", version);
    return db_exec(db, sql, err);
}

int db_lock_schema(db_t *db, si_error_t *err)
{
    return IS_PG(db) ? db_exec(db, "SELECT pg_advisory_xact_lock(7384100018)", err) : 0;
}

int db_analyze(db_t *db, const char *tables, si_error_t *err)
{
    if (!IS_PG(db) || !*tables)
        return 0;
    char sql[512];
    if ((size_t)snprintf(sql, sizeof(sql), "ANALYZE %s", tables) >= sizeof(sql))
        return si_errprintf(err, "ANALYZE: table list too long");
    /* A sample of 3,000 rows a table, not 30,000: the plans after a bulk
     * change need row and distinct counts, which it gives as well (the
     * catalog benchmark's plans take as long either way), at a fifth of the
     * cost (100,000 objects and copies: 20 ms against 90-100 ms).
     * Autovacuum samples again as the tables change. */
    if (db_exec(db, "SET LOCAL default_statistics_target = 10", err) < 0)
        return -1;
    return db_exec(db, sql, err);
}

char *db_ddl(db_t *db, const char *ddl)
{
    return IS_PG(db) ? db_translate_ddl_to_pg(ddl) : strdup(ddl);
}

/* ---- the server's reachability ------------------------------------------ */

void db_set_health(db_t *db, db_health_t *h)
{
    db->health = h ? h : db->own_health;
}

db_health_t *db_health_of(db_t *db)
{
    return db->health;
}

bool db_available(db_t *db)
{
#ifdef HAVE_LIBPQ
    if (IS_PG(db)) /* from any thread (a handler's error reply) */
        return !__atomic_load_n(&db->pg_lost, __ATOMIC_RELAXED);
#endif
    (void)db;
    return true;
}
