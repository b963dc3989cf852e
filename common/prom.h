/* Reading Prometheus text exposition (what GET /metrics serves): one
 * implementation for the stagein CLI's drive table and stageind's status
 * page. Pure: no I/O. */
#ifndef SI_PROM_H
#define SI_PROM_H

#include <stddef.h>

#include "common/error.h"

#define SI_PROM_LABELS_MAX 8
#define SI_PROM_NAME_MAX 128
#define SI_PROM_VALUE_MAX 256

typedef struct {
    char name[SI_PROM_NAME_MAX];
    char value[SI_PROM_VALUE_MAX];
} si_prom_label_t;

typedef struct {
    char name[SI_PROM_NAME_MAX];
    si_prom_label_t labels[SI_PROM_LABELS_MAX];
    size_t nlabels;
    double value;
} si_prom_sample_t;

/* One sample line: name{label="value",...} value [timestamp]. -1 with *why
 * saying what is wrong. */
int si_prom_parse_sample(const char *line, si_prom_sample_t *s, const char **why);

/* Calls fn for each sample of text (comments and blank lines skipped); a
 * malformed line is an error naming its number, and fn returning -1 (with
 * err set) stops too. Returns the samples handed over, or -1. */
typedef int (*si_prom_fn)(const si_prom_sample_t *s, void *arg, si_error_t *err);
long si_prom_each(const char *text, si_prom_fn fn, void *arg, si_error_t *err);

/* The label's value, "" when the sample has no such label. */
const char *si_prom_label(const si_prom_sample_t *s, const char *name);

#endif
