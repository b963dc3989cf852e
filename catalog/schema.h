#ifndef STAGEIN_CATALOG_SCHEMA_H
#define STAGEIN_CATALOG_SCHEMA_H

#include <stddef.h>

/* One upgrade step: applied in its own transaction, which also records the
 * version. sql is written once in SQLite's spelling (the PostgreSQL engine
 * translates its types; NULL: none); sqlite and postgres (or NULL) follow it
 * where the dialects differ (triggers). */
typedef struct {
    int version;
    const char *sql;
    const char *sqlite;
    const char *postgres;
} catalog_schema_step_t;

/* The steps in ascending version order. */
const catalog_schema_step_t *catalog_schema_steps(size_t *count);

#endif
