/* The driver's connection and statement, shared by its engines and its
 * health (db_health.c) only. */
#ifndef STAGEIN_CATALOG_DB_IMPL_H
#define STAGEIN_CATALOG_DB_IMPL_H

#include "catalog/db.h"

#ifdef HAVE_LIBPQ
#include <libpq-fe.h>
#endif

#define DB_CACHE_SLOTS 256 /* statements kept per connection (power of two) */
#define DB_ERRMSG_MAX 1024

struct db {
    db_engine_t engine;
    char *target;
    bool readonly;
    bool in_transaction;
    bool unsynced;               /* the transaction's commit is not synced (db_begin_unsynced) */
    sqlite3 *sqlite;
    long busy_waited_us;        /* the current wait for the write lock, so far */
    db_health_t *health;        /* shared, or own_health */
    db_health_t *own_health;
    uint64_t *generation;       /* SQLite: the shared change generation (db_generation.c) */
    bool generation_exact;      /* in WAL mode: every commit bumps it */
    bool generation_unseen;     /* db_generation_unseen: this connection's commits do not */
#ifdef HAVE_LIBPQ
    PGconn *pg;
    int64_t pg_changes;
    bool pg_copy_failed;        /* db_pg_copy_send could not send all rows */
    unsigned pg_next_name;
    bool pg_lost;               /* gone: reconnect before the next statement */
    bool pg_lost_in_transaction; /* its transaction is gone: fail until rollback */
    unsigned pg_generation;     /* reconnects so far: older statements prepare again */
    long pg_backoff_ms;         /* the wait before the next attempt after this one */
    struct timespec pg_next_try; /* no attempt before this (CLOCK_MONOTONIC) */
#endif
    db_errclass_t errclass;
    char errmsg[DB_ERRMSG_MAX];
    struct {
        const char *key;
        db_stmt_t *stmt;
    } cache[DB_CACHE_SLOTS];
};

struct db_stmt {
    db_t *db;
    bool cached;
    bool ends_transaction; /* db_prepare_readonly's transaction */
    sqlite3_stmt *sqlite;
#ifdef HAVE_LIBPQ
    char *pg_sql;        /* translated once */
    char name[24];       /* server-side prepared statement, "" until prepared */
    int nparams;
    char **param_names;  /* :name per parameter (or NULL) */
    Oid *types;          /* the bound values' types */
    Oid *prepared_types; /* the types it was prepared with */
    const char **values; /* NULL = SQL NULL */
    int *is_copy;        /* values[i] points into numbers[i] or a copy */
    char (*numbers)[32];
    char **copies;
    PGresult *result;
    PGresult *description; /* the columns, asked before the first step */
    unsigned generation;   /* the connection's pg_generation when prepared */
    int row, nrows;
    bool executed;
#endif
};

/* Maps the catalog's change generation; a read-write connection bumps it
 * after each commit. 0 (also when there is none to map: in memory, or a
 * read-only connection before any writer made it), -1 when a read-write
 * connection cannot map it (its commits would go uncounted). */
int db_generation_open(db_t *db, si_error_t *err);
void db_generation_close(db_t *db);

#ifdef HAVE_LIBPQ
db_t *db_pg_open(db_t *db, const char *url, int flags, const char *password_file,
                 si_error_t *err);
void db_pg_close(db_t *db);
db_stmt_t *db_pg_prepare(db_t *db, const char *sql, si_error_t *err);
/* Prepares on the server now (db_prepare_readonly: errors at once). */
int db_pg_prepare_now(db_stmt_t *s, si_error_t *err);
void db_pg_finalize(db_stmt_t *s);
void db_pg_reset(db_stmt_t *s);
void db_pg_clear_bindings(db_stmt_t *s);
int db_pg_bind_index(db_stmt_t *s, const char *name);
void db_pg_bind(db_stmt_t *s, int i, Oid type, const char *text, int len);
void db_pg_bind_number(db_stmt_t *s, int i, Oid type, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int db_pg_step(db_stmt_t *s);
int db_pg_column_count(db_stmt_t *s);
const char *db_pg_column_name(db_stmt_t *s, int i);
db_type_t db_pg_column_type(db_stmt_t *s, int i);
const char *db_pg_column_text(db_stmt_t *s, int i);
int db_pg_column_bytes(db_stmt_t *s, int i);
int64_t db_pg_last_insert_id(db_t *db);
int db_pg_exec(db_t *db, const char *sql, si_error_t *err);
int db_pg_copy_send(db_t *db, const char *sql, const char *data, size_t len, si_error_t *err);
int db_pg_copy_wait(db_t *db, si_error_t *err);
/* The transaction ended (rollback or failed commit): a lost one is
 * forgotten, so the connection may reconnect. */
void db_pg_transaction_ended(db_t *db);
#endif

/* The connection reports what it saw to its health. */
void db_health_lost(db_health_t *h, const char *why);
void db_health_reconnect_failed(db_health_t *h, const char *why);
void db_health_reconnected(db_health_t *h);

#endif
