#include "config.h"
#include "stagein/drives.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/prom.h"

#define MAX_DRIVES 1024
#define MAX_COLUMNS 32
#define NAME_MAX_LEN 128
#define VALUE_MAX_LEN 256

typedef struct {
    char name[NAME_MAX_LEN];
    bool text;       /* some cell came from a label */
    bool integral;   /* every number is a whole number */
} column_t;

typedef struct {
    bool set;
    double num;
    char text[VALUE_MAX_LEN];
} cell_t;

typedef struct {
    char (*drives)[VALUE_MAX_LEN];
    size_t ndrives;
    column_t columns[MAX_COLUMNS];
    size_t ncolumns;
    cell_t *cells;   /* MAX_COLUMNS per drive */
} sheet_t;

static long find_drive(sheet_t *sh, const char *drive)
{
    for (size_t i = 0; i < sh->ndrives; i++)
        if (strcmp(sh->drives[i], drive) == 0)
            return (long)i;
    if (sh->ndrives == MAX_DRIVES)
        return -1;
    snprintf(sh->drives[sh->ndrives], VALUE_MAX_LEN, "%s", drive);
    return (long)sh->ndrives++;
}

static long find_column(sheet_t *sh, const char *name)
{
    for (size_t i = 0; i < sh->ncolumns; i++)
        if (strcmp(sh->columns[i].name, name) == 0)
            return (long)i;
    if (sh->ncolumns == MAX_COLUMNS)
        return -1;
    column_t *c = &sh->columns[sh->ncolumns];
    snprintf(c->name, sizeof(c->name), "%s", name);
    c->integral = true;
    return (long)sh->ncolumns++;
}

static const char *column_name(const char *metric)
{
    static const char *const prefixes[] = {"stagein_drives_", "stagein_drive_", "stagein_"};
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        size_t len = strlen(prefixes[i]);
        if (strncmp(metric, prefixes[i], len) == 0 && metric[len])
            return metric + len;
    }
    return metric;
}

static int set_cell(sheet_t *sh, long drive, const char *column, const char *text, double num,
                    si_error_t *err)
{
    long col = find_column(sh, column);
    if (col < 0)
        return si_errprintf(err, "more than %d drive metrics", MAX_COLUMNS);
    cell_t *cell = &sh->cells[(size_t)drive * MAX_COLUMNS + (size_t)col];
    column_t *c = &sh->columns[col];
    cell->set = true;
    if (text) {
        c->text = true;
        snprintf(cell->text, sizeof(cell->text), "%s", text);
    } else {
        cell->num = num;
        snprintf(cell->text, sizeof(cell->text), "%.17g", num);
        if (!isfinite(num) || num != floor(num) || fabs(num) > 9e18)
            c->integral = false;
    }
    return 0;
}

static int add_sample(const si_prom_sample_t *s, void *arg, si_error_t *err)
{
    sheet_t *sh = arg;
    const char *drive = NULL;
    size_t others = 0;
    for (size_t i = 0; i < s->nlabels; i++) {
        if (strcmp(s->labels[i].name, "drive") == 0)
            drive = s->labels[i].value;
        else
            others++;
    }
    if (!drive)
        return 0;
    long d = find_drive(sh, drive);
    if (d < 0)
        return si_errprintf(err, "more than %d drives", MAX_DRIVES);
    if (others == 0)
        return set_cell(sh, d, column_name(s->name), NULL, s->value, err);
    if (s->value == 0)
        return 0;
    /* an empty label value ("no volume") leaves the cell unset */
    for (size_t i = 0; i < s->nlabels; i++)
        if (strcmp(s->labels[i].name, "drive") != 0 && s->labels[i].value[0] &&
            set_cell(sh, d, s->labels[i].name, s->labels[i].value, 0, err) < 0)
            return -1;
    return 0;
}

static si_table_t *sheet_table(const sheet_t *sh)
{
    si_column_t cols[MAX_COLUMNS + 1];
    cols[0] = (si_column_t){"drive", SI_COL_STR};
    for (size_t i = 0; i < sh->ncolumns; i++) {
        const column_t *c = &sh->columns[i];
        si_col_kind_t kind = c->text ? SI_COL_STR
                             : !c->integral ? SI_COL_REAL
                             : strstr(c->name, "bytes") ? SI_COL_BYTES
                                                        : SI_COL_INT;
        cols[i + 1] = (si_column_t){c->name, kind};
    }
    si_table_t *t = si_table_new(cols, sh->ncolumns + 1);
    for (size_t d = 0; t && d < sh->ndrives; d++) {
        int rc = si_table_row(t) | si_table_str(t, sh->drives[d]);
        for (size_t i = 0; i < sh->ncolumns; i++) {
            const cell_t *cell = &sh->cells[d * MAX_COLUMNS + i];
            if (!cell->set)
                rc |= si_table_null(t);
            else if (cols[i + 1].kind == SI_COL_STR)
                rc |= si_table_str(t, cell->text);
            else if (cols[i + 1].kind == SI_COL_REAL)
                rc |= si_table_real(t, cell->num);
            else
                rc |= si_table_int(t, (int64_t)cell->num);
        }
        if (rc != 0) {
            si_table_free(t);
            return NULL;
        }
    }
    return t;
}

si_table_t *drives_table(const char *metrics_text, si_error_t *err)
{
    sheet_t sh;
    memset(&sh, 0, sizeof(sh));
    si_table_t *t = NULL;
    sh.drives = calloc(MAX_DRIVES, sizeof(*sh.drives));
    sh.cells = calloc((size_t)MAX_DRIVES * MAX_COLUMNS, sizeof(*sh.cells));
    if (!sh.drives || !sh.cells) {
        si_errprintf(err, "out of memory");
        goto done;
    }
    if (si_prom_each(metrics_text, add_sample, &sh, err) < 0)
        goto done;
    t = sheet_table(&sh);
    if (!t)
        si_errprintf(err, "out of memory");
done:
    free(sh.drives);
    free(sh.cells);
    return t;
}
