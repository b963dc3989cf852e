#include "config.h"
#include "common/table.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "common/text.h"

/* A cell keeps the type it was set with; the column kind only chooses how
 * numbers are shown in the human table. */
typedef enum { CELL_NULL, CELL_STR, CELL_INT, CELL_REAL } cell_type_t;

typedef struct {
    cell_type_t type;
    char *text;
    int64_t i;
    double r;
} cell_t;

struct si_table {
    si_column_t *columns;   /* names copied */
    size_t ncolumns;
    cell_t *cells;
    size_t nrows;
    size_t cap_rows;
    size_t next_col;
};

si_table_t *si_table_new(const si_column_t *columns, size_t ncolumns)
{
    si_table_t *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->columns = calloc(ncolumns ? ncolumns : 1, sizeof(*t->columns));
    if (!t->columns) {
        free(t);
        return NULL;
    }
    t->ncolumns = ncolumns;
    for (size_t k = 0; k < ncolumns; k++) {
        t->columns[k].kind = columns[k].kind;
        t->columns[k].name = strdup(columns[k].name);
        if (!t->columns[k].name) {
            si_table_free(t);
            return NULL;
        }
    }
    t->next_col = ncolumns;
    return t;
}

void si_table_free(si_table_t *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->nrows * t->ncolumns; i++)
        free(t->cells[i].text);
    for (size_t k = 0; k < t->ncolumns; k++)
        free((char *)t->columns[k].name);
    free(t->columns);
    free(t->cells);
    free(t);
}

int si_table_row(si_table_t *t)
{
    /* a row of ncolumns cells is the array's element */
    if (si_array_grow((void **)&t->cells, &t->cap_rows, t->nrows + 1,
                      t->ncolumns * sizeof(*t->cells)) < 0)
        return -1;
    memset(&t->cells[t->nrows * t->ncolumns], 0, t->ncolumns * sizeof(cell_t));
    t->nrows++;
    t->next_col = 0;
    return 0;
}

static cell_t *next_cell(si_table_t *t)
{
    if (t->nrows == 0 || t->next_col >= t->ncolumns)
        return NULL;
    return &t->cells[(t->nrows - 1) * t->ncolumns + t->next_col++];
}

int si_table_str(si_table_t *t, const char *s)
{
    cell_t *c = next_cell(t);
    if (!c)
        return -1;
    if (!s)
        return 0; /* stays CELL_NULL */
    c->text = strdup(s);
    if (!c->text)
        return -1;
    c->type = CELL_STR;
    return 0;
}

int si_table_int(si_table_t *t, int64_t v)
{
    cell_t *c = next_cell(t);
    if (!c)
        return -1;
    c->type = CELL_INT;
    c->i = v;
    c->r = (double)v;
    return 0;
}

int si_table_real(si_table_t *t, double v)
{
    cell_t *c = next_cell(t);
    if (!c)
        return -1;
    c->type = CELL_REAL;
    c->r = v;
    c->i = (int64_t)v;
    return 0;
}

int si_table_null(si_table_t *t)
{
    cell_t *c = next_cell(t);
    return c ? 0 : -1;
}

size_t si_table_rows(const si_table_t *t)
{
    return t->nrows;
}

static void render(const si_column_t *col, const cell_t *c, char *buf, size_t size)
{
    if (c->type == CELL_NULL) {
        snprintf(buf, size, "-");
        return;
    }
    if (c->type == CELL_STR) {
        snprintf(buf, size, "%s", c->text);
        return;
    }
    switch (col->kind) {
    case SI_COL_STR:
    case SI_COL_INT:
        if (c->type == CELL_INT)
            snprintf(buf, size, "%lld", (long long)c->i);
        else
            snprintf(buf, size, "%g", c->r);
        break;
    case SI_COL_BYTES:
        si_format_bytes((uint64_t)c->i, buf, size);
        break;
    case SI_COL_REAL:
        snprintf(buf, size, "%.2f", c->r);
        break;
    case SI_COL_PERCENT:
        snprintf(buf, size, "%.1f%%", c->r);
        break;
    case SI_COL_SECONDS:
        si_format_duration(c->r, buf, size);
        break;
    }
}

static int print_json(const si_table_t *t, FILE *out)
{
    json_t *rows = json_array();
    if (!rows)
        return -1;
    for (size_t r = 0; r < t->nrows; r++) {
        json_t *obj = json_object();
        for (size_t k = 0; k < t->ncolumns; k++) {
            const cell_t *c = &t->cells[r * t->ncolumns + k];
            json_t *v;
            if (c->type == CELL_STR)
                v = json_string(c->text);
            else if (c->type == CELL_INT)
                v = json_integer(c->i);
            else if (c->type == CELL_REAL)
                v = json_real(c->r);
            else
                v = json_null();
            json_object_set_new(obj, t->columns[k].name, v ? v : json_null());
        }
        json_array_append_new(rows, obj);
    }
    int rc = json_dumpf(rows, out, JSON_COMPACT | JSON_ENSURE_ASCII) == 0 ? 0 : -1;
    json_decref(rows);
    if (rc == 0 && fputc('\n', out) == EOF)
        rc = -1;
    return rc;
}

int si_table_print(const si_table_t *t, FILE *out, bool json)
{
    if (json)
        return print_json(t, out);
    size_t *width = calloc(t->ncolumns, sizeof(*width));
    if (!width)
        return -1;
    char buf[1200];
    for (size_t k = 0; k < t->ncolumns; k++)
        width[k] = strlen(t->columns[k].name);
    for (size_t r = 0; r < t->nrows; r++)
        for (size_t k = 0; k < t->ncolumns; k++) {
            render(&t->columns[k], &t->cells[r * t->ncolumns + k], buf, sizeof(buf));
            size_t len = strlen(buf);
            if (len > width[k])
                width[k] = len;
        }
    for (size_t k = 0; k < t->ncolumns; k++) {
        bool left = t->columns[k].kind == SI_COL_STR;
        if (left && k + 1 == t->ncolumns)
            fputs(t->columns[k].name, out);
        else
            fprintf(out, left ? "%-*s" : "%*s", (int)width[k], t->columns[k].name);
        fputs(k + 1 < t->ncolumns ? "  " : "\n", out);
    }
    for (size_t r = 0; r < t->nrows; r++)
        for (size_t k = 0; k < t->ncolumns; k++) {
            bool left = t->columns[k].kind == SI_COL_STR;
            render(&t->columns[k], &t->cells[r * t->ncolumns + k], buf, sizeof(buf));
            if (left && k + 1 == t->ncolumns)
                fputs(buf, out);
            else
                fprintf(out, left ? "%-*s" : "%*s", (int)width[k], buf);
            fputs(k + 1 < t->ncolumns ? "  " : "\n", out);
        }
    free(width);
    return ferror(out) ? -1 : 0;
}

char *si_table_text(const si_table_t *t, bool json)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    int rc = si_table_print(t, f, json);
    if (fclose(f) != 0 || rc < 0) {
        free(text);
        return NULL;
    }
    return text;
}
