#ifndef STAGEIN_CATALOG_SCHEMA_H
#define STAGEIN_CATALOG_SCHEMA_H

#include <stddef.h>

/* One upgrade step: applied in its own transaction, which also sets
 * PRAGMA user_version = version. */
typedef struct {
    int version;
    const char *sql;
} catalog_schema_step_t;

/* The steps in ascending version order. */
const catalog_schema_step_t *catalog_schema_steps(size_t *count);

#endif
