/* The catalog's driver: one small interface over its two engines, SQLite (a
 * file, the embedded default) and PostgreSQL (libpq, a server a site runs).
 * Statements are written once in SQLite's spelling (?N, ?, :name markers);
 * the PostgreSQL engine translates each statement once, when it is prepared. */
#ifndef STAGEIN_CATALOG_DB_H
#define STAGEIN_CATALOG_DB_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "common/error.h"
#include "common/log.h"

typedef struct db db_t;
typedef struct db_stmt db_stmt_t;

typedef enum { DB_SQLITE, DB_POSTGRES } db_engine_t;

enum {
    DB_OPEN_CREATE = 1 << 0,   /* SQLite: create the file if missing */
    DB_OPEN_READONLY = 1 << 1, /* nothing may be written through this connection */
};

/* db_step results. */
enum { DB_ERROR = -1, DB_DONE = 0, DB_ROW = 1 };

/* What kind of failure the last failed statement was. */
typedef enum {
    DB_ERR_NONE,
    DB_ERR_UNIQUE,      /* a UNIQUE or PRIMARY KEY constraint */
    DB_ERR_CONSTRAINT,  /* another constraint (CHECK, FOREIGN KEY, NOT NULL) */
    DB_ERR_BUSY,        /* locked, or a serialization failure: retry */
    DB_ERR_READONLY,    /* a write on a read-only connection or transaction */
    DB_ERR_OTHER,
    DB_ERR_UNAVAILABLE, /* the server is unreachable, or the connection went away
                         * (inside a transaction: the server rolled it back) */
} db_errclass_t;

/* A result value's type. */
typedef enum { DB_NULL, DB_INTEGER, DB_FLOAT, DB_TEXT } db_type_t;

/* True for "postgresql://..." and "postgres://..." (the PostgreSQL engine). */
bool db_target_is_url(const char *target);

/* Opens a SQLite file or a PostgreSQL URL. password_file (NULL: none) holds
 * the PostgreSQL password on its first line and must be mode 0600 (or
 * stricter); otherwise libpq's own ~/.pgpass, PGPASSFILE or service files
 * apply. A URL that carries a password itself is refused. */
db_t *db_open(const char *target, int flags, const char *password_file, si_error_t *err);
void db_close(db_t *db);
db_engine_t db_engine(const db_t *db);
const char *db_engine_name(const db_t *db);
/* The path, or the URL (which holds no password), for messages. */
const char *db_target(const db_t *db);
bool db_readonly(const db_t *db);
/* The catalog's change generation: true and *out when the engine keeps one
 * (SQLite in WAL mode), which every commit of every process moves; a result
 * read after a load of *out is exact while it has not moved. False on
 * PostgreSQL (no check cheaper than the query itself). Safe from any thread
 * while db is open: one load from shared memory. */
bool db_generation(const db_t *db, uint64_t *out);
/* While set, this connection's commits leave the generation alone: they
 * change only what no generation reader remembers, which today means the
 * cache table's last_access (an access-time flush; the S3 server's lookups
 * read no access time). Anything else a commit changes must move it. */
void db_generation_unseen(db_t *db, bool unseen);
/* The SQLite connection, NULL on PostgreSQL: only for the daemon's modules
 * that still call SQLite directly. */
sqlite3 *db_sqlite(db_t *db);

/* A one-off statement (db_finalize it), or NULL with the engine's message. */
db_stmt_t *db_prepare(db_t *db, const char *sql, si_error_t *err);
/* A statement prepared once per connection and kept: keyed by the address of
 * sql (a string literal), returned reset with bindings cleared; never
 * finalized by the caller. */
db_stmt_t *db_cached(db_t *db, const char *sql, si_error_t *err);
/* One ad-hoc statement that may only read: SQLite denies anything but
 * queries (ATTACH and PRAGMA included) when preparing it; PostgreSQL runs it
 * in a read-only transaction, ended by db_finalize. */
db_stmt_t *db_prepare_readonly(db_t *db, const char *sql, si_error_t *err);
void db_finalize(db_stmt_t *s);
/* Ready to run again; bindings are kept. NULL: nothing to do (as free). */
void db_reset(db_stmt_t *s);
void db_clear_bindings(db_stmt_t *s);

/* Binds: index from 1; text is used, not copied, until the next step or
 * reset (len -1: up to the NUL). */
int db_bind_index(db_stmt_t *s, const char *name); /* ":name", 0 if absent */
void db_bind_int64(db_stmt_t *s, int i, int64_t v);
void db_bind_double(db_stmt_t *s, int i, double v);
void db_bind_text(db_stmt_t *s, int i, const char *text, int len);
/* Text copied at once, for values that do not outlive the call. */
void db_bind_text_copy(db_stmt_t *s, int i, const char *text);
void db_bind_null(db_stmt_t *s, int i);
/* A list of integers as one parameter, copied, for set-based statements
 * ("x IN (SELECT value FROM json_each(?N))": one statement for a batch of
 * rows, not one per row). SQLite gets a JSON array, PostgreSQL a bigint[]
 * (db_translate_to_pg spells json_each(?N) as unnest). 0, or -1 when out of
 * memory (nothing bound: the statement then sees NULL, so no rows). */
int db_bind_int64_list(db_stmt_t *s, int i, const int64_t *v, size_t n);
/* A list of texts (NULL elements allowed) as one parameter, copied:
 * SQLite gets a JSON array, PostgreSQL a text[] literal, which a
 * statement spells in its own dialect (json_each(?N) / CAST(?N AS text[])).
 * 0, or -1 when out of memory (then NULL is bound). */
int db_bind_text_list(db_stmt_t *s, int i, const char *const *v, size_t n);
/* Steps s to its end, keeping its first column's integers (at most cap) in
 * out, sorted: the ids a set-based statement returned. DB_DONE or
 * DB_ERROR; s is not reset. */
int db_step_ids(db_stmt_t *s, int64_t *out, size_t cap, size_t *n);
/* Sorts a list of ids ascending (as db_step_ids leaves them). */
void db_ids_sort(int64_t *ids, size_t n);
/* The first of id's slots in a sorted list (db_step_ids), or NULL. */
const int64_t *db_ids_find(const int64_t *sorted, size_t n, int64_t id);
static inline void db_bind_int(db_stmt_t *s, int i, int v)
{
    db_bind_int64(s, i, v);
}

/* DB_ROW (a row to read), DB_DONE, or DB_ERROR (db_errmsg, db_errclass). */
int db_step(db_stmt_t *s);

int db_column_count(db_stmt_t *s);
const char *db_column_name(db_stmt_t *s, int i);
db_type_t db_column_type(db_stmt_t *s, int i);
int64_t db_column_int64(db_stmt_t *s, int i);
double db_column_double(db_stmt_t *s, int i);
/* NULL for SQL NULL; valid until the next step or reset. */
const char *db_column_text(db_stmt_t *s, int i);
int db_column_bytes(db_stmt_t *s, int i);
static inline int db_column_int(db_stmt_t *s, int i)
{
    return (int)db_column_int64(s, i);
}

/* Rows changed by the last INSERT, UPDATE or DELETE. */
int64_t db_changes(db_t *db);
/* The id given to the row the last INSERT made (an INTEGER PRIMARY KEY id
 * column: SQLite's rowid, PostgreSQL's identity sequence). */
int64_t db_last_insert_id(db_t *db);

/* The first column of the first row of a query; -1 on error or no row. */
int64_t db_query_int64(db_t *db, const char *sql);
/* Runs SQL (several statements allowed) with no result rows. */
int db_exec(db_t *db, const char *sql, si_error_t *err);
const char *db_errmsg(db_t *db);
db_errclass_t db_errclass(db_t *db);
/* Sets err to "context: engine message"; returns -1. */
int db_error(db_t *db, si_error_t *err, const char *context);

/* Transactions. db_begin takes the write lock at once on SQLite (so waiting
 * happens there, not halfway through a batch); db_begin_readonly is a
 * read-only transaction on both engines. */
int db_begin(db_t *db, si_error_t *err);
int db_begin_readonly(db_t *db, si_error_t *err);
/* A write transaction whose commit answers for nothing by itself: it
 * returns before the engine's log reaches the disk (SQLite: synchronous
 * NORMAL for it, FULL again after; PostgreSQL: synchronous_commit off).
 * Both logs are written in order, so the next synced commit, on any
 * connection, makes these rows durable with its own: for rows that only
 * a later commit acknowledges (an upload's RECEIVING rows). */
int db_begin_unsynced(db_t *db, si_error_t *err);
int db_commit(db_t *db, si_error_t *err);
void db_rollback(db_t *db);
bool db_in_transaction(db_t *db);

/* Bulk loading: PostgreSQL's COPY ... FROM STDIN (one round trip for any
 * number of rows, and the server's multi-row insert). db_can_copy: whether
 * the engine has it (SQLite: no, its statements cost no round trip).
 * copy_sql is the COPY statement, data its rows in COPY's text format: a
 * line a row, fields split by tabs, each written by db_copy_field. -1 with
 * the engine's message (db_errclass: DB_ERR_UNIQUE for a duplicate key). */
bool db_can_copy(const db_t *db);
int db_copy_in(db_t *db, const char *copy_sql, const char *data, size_t len, si_error_t *err);
/* db_copy_in in two halves, so that the caller works while the server
 * inserts: db_copy_send sends the rows and returns; db_copy_wait takes the
 * outcome (-1 as db_copy_in's). Between the two the connection takes no
 * other statement. */
int db_copy_send(db_t *db, const char *copy_sql, const char *data, size_t len, si_error_t *err);
int db_copy_wait(db_t *db, si_error_t *err);
/* Appends one field (NULL: SQL NULL) to a row of COPY text, escaped; first:
 * the row's first field (no tab before it). End a row with '\n'. */
void db_copy_field(FILE *row, bool first, const char *text);

/* The catalog's schema version (SQLite: PRAGMA user_version; PostgreSQL: the
 * table stagein_schema), 0 for none, -1 on error. */
int db_schema_version(db_t *db);
int db_set_schema_version(db_t *db, int version, si_error_t *err);
/* Inside a transaction: waits until no other connection upgrades the schema
 * (SQLite's write lock does it already; PostgreSQL: an advisory lock). */
int db_lock_schema(db_t *db, si_error_t *err);
/* Inside a transaction, after a bulk change: refreshes the planner's
 * statistics of `tables` (a comma-separated list of the tables it changed)
 * where the engine needs them to choose indexes (PostgreSQL's ANALYZE, on a
 * sample of 3,000 rows a table); nothing on SQLite. */
int db_analyze(db_t *db, const char *tables, si_error_t *err);
/* The schema's DDL (SQLite's spelling) for this engine; malloc'd. */
char *db_ddl(db_t *db, const char *ddl);

/* Engine-specific SQL: the statement for this connection's engine. */
static inline const char *db_sql(const db_t *db, const char *sqlite_sql, const char *pg_sql)
{
    return db_engine(db) == DB_POSTGRES ? pg_sql : sqlite_sql;
}

/* PostgreSQL's spelling of a SQLite statement (markers $N, INSERT OR IGNORE
 * as ON CONFLICT DO NOTHING, temp. as pg_temp.); *nparams the parameter
 * count; names[] (if not NULL, nparams entries, each malloc'd or NULL) the
 * :name of each. malloc'd; NULL if out of memory. Exposed for the tests. */
char *db_translate_to_pg(const char *sql, int *nparams, char ***names);
/* PostgreSQL's spelling of the schema's DDL: INTEGER as BIGINT, REAL as
 * DOUBLE PRECISION, TEXT in byte order (COLLATE "C"), "id INTEGER PRIMARY
 * KEY" as an identity column, no WITHOUT ROWID. malloc'd. */
char *db_translate_ddl_to_pg(const char *ddl);

/* ---- the server's reachability (PostgreSQL) -----------------------------
 * A connection that finds its server gone fails the statement at hand with
 * DB_ERR_UNAVAILABLE (a transaction it was in is lost whole: every statement
 * fails until db_rollback; PostgreSQL rolled it back), then reconnects before
 * its next statement, trying at once and then at most every 0.1 s doubling
 * to 5 s, each attempt given up after 3 s without an answer, so that
 * callers get an answer instead of waiting for the server; after a
 * reconnect its statements (db_cached ones too) are prepared again on first
 * use. errno is EAGAIN after such a failure (callers that answer by errno
 * say 503: retry). A db_health_t shared by a process's connections records an outage
 * once for all of them. SQLite connections are always up. */
typedef struct db_health db_health_t;

typedef struct {
    bool up;                /* false from a failed reconnect to a successful one */
    time_t down_since;      /* when the current outage began (0: up) */
    time_t last_outage_end; /* when the last one ended (0: none yet) */
    uint64_t outages;       /* outages seen */
    uint64_t lost;          /* connections found gone */
    uint64_t reconnects;    /* successful reconnects */
    char error[256];        /* libpq's word on the last failure */
} db_health_state_t;

/* log (NULL: none) gets one line when an outage begins and one when it
 * ends, whichever connection saw it; target names the catalog in them. */
db_health_t *db_health_new(si_log_t *log, const char *target);
void db_health_free(db_health_t *h);
void db_health_get(db_health_t *h, db_health_state_t *out);
/* The connection reports to h (which outlives it) instead of its own. */
void db_set_health(db_t *db, db_health_t *h);
db_health_t *db_health_of(db_t *db);
/* False while this connection's server is known unreachable (it has not
 * reconnected since); a statement run now may reconnect it. */
bool db_available(db_t *db);

#endif
