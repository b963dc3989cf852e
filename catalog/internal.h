/* Shared by the catalog's own modules only. */
#ifndef STAGEIN_CATALOG_INTERNAL_H
#define STAGEIN_CATALOG_INTERNAL_H

#include "catalog/catalog.h"
#include "catalog/db.h"

/* Hot statements, prepared once per connection (bind -> step -> reset). */
typedef enum {
    STMT_OBJECT_INSERT,
    STMT_OBJECT_FIND,
    STMT_COPY_INSERT,
    STMT_COPY_FIND,
    STMT_VOLUME_FIND,
    STMT_VOLUME_INSERT,
    STMT_EVENT_INSERT,
    STMT_EVENTS_INSERT,
    STMT_MEMBER_OF_ANY,
    STMT_DATASETS_STALE,
    STMT_OBJECT_META_KEEP,
    STMT_COUNT
} catalog_stmt_id_t;

struct catalog {
    db_t *db;
    char *path; /* the SQLite path or the PostgreSQL URL, for messages */
    bool readonly;
};

/* The prepared statement, reset and with bindings cleared; NULL on error. */
db_stmt_t *catalog_stmt(catalog_t *cat, catalog_stmt_id_t id, si_error_t *err);

/* Runs SQL with no result rows. */
int catalog_exec(catalog_t *cat, const char *sql, si_error_t *err);

/* Prepares a one-off statement, or fails with the engine's message. */
db_stmt_t *catalog_prepare(catalog_t *cat, const char *sql, si_error_t *err);

/* A table from any statement: one column per result column, values typed. */
si_table_t *catalog_table_from_stmt(catalog_t *cat, db_stmt_t *stmt,
                                    const si_column_t *columns, size_t ncolumns,
                                    si_error_t *err);

/* The checks catalog_object_put and catalog_copy_put make before writing. */
int catalog_object_check(const catalog_object_t *o, si_error_t *err);
int catalog_copy_check(const catalog_copy_t *c, si_error_t *err);

/* catalog_copy_put with the volume already resolved (c->volume unused).
 * maybe_member false: the caller knows the object is in no dataset yet (it
 * was created in this transaction), so no dataset totals can go stale. */
int catalog_copy_put_on(catalog_t *cat, const catalog_copy_t *c, int64_t volume_id,
                        bool maybe_member, si_error_t *err);

#endif
