/* Tabular output for every admin view: an aligned human table, or the same
 * rows as a JSON array of objects (typed values) with --json. */
#ifndef SI_TABLE_H
#define SI_TABLE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    SI_COL_STR,      /* text */
    SI_COL_INT,      /* integer */
    SI_COL_BYTES,    /* integer; human units in the table */
    SI_COL_REAL,     /* floating point, 2 decimals in the table */
    SI_COL_PERCENT,  /* floating point 0..100, "12.5%" in the table */
    SI_COL_SECONDS,  /* floating point; "1h02m03s" in the table */
} si_col_kind_t;

typedef struct {
    const char *name;   /* JSON member name and table header */
    si_col_kind_t kind;
} si_column_t;

typedef struct si_table si_table_t;

si_table_t *si_table_new(const si_column_t *columns, size_t ncolumns);
/* The number of columns in a static column array, and a table of them. */
#define SI_NCOLS(columns) (sizeof(columns) / sizeof((columns)[0]))
#define SI_TABLE_NEW(columns) si_table_new((columns), SI_NCOLS(columns))
void si_table_free(si_table_t *t);

/* Starts a row; then one cell call per column, in column order. */
int si_table_row(si_table_t *t);
int si_table_str(si_table_t *t, const char *s);   /* NULL prints "-" / null */
int si_table_int(si_table_t *t, int64_t v);
int si_table_real(si_table_t *t, double v);
int si_table_null(si_table_t *t);

size_t si_table_rows(const si_table_t *t);

/* Human: header + aligned rows (numbers right-aligned).
 * JSON: one array of objects, one line. Returns 0, or -1 on write error. */
int si_table_print(const si_table_t *t, FILE *out, bool json);
/* The same text as si_table_print writes, malloc'd; NULL when out of memory. */
char *si_table_text(const si_table_t *t, bool json);

#endif
