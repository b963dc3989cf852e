/* A reader of Prometheus text exposition (what GET /metrics serves): one
 * callback per sample line with its name, labels and value. Comments and
 * malformed lines are skipped. Pure: no I/O. */
#ifndef STAGEIN_UI_PROM_H
#define STAGEIN_UI_PROM_H

#include <stddef.h>

#define PROM_NAME_MAX 128
#define PROM_LABELS_MAX 8
#define PROM_LABEL_MAX 128

typedef struct {
    char name[PROM_NAME_MAX];
    size_t nlabels;
    struct {
        char name[PROM_LABEL_MAX];
        char value[PROM_LABEL_MAX];
    } label[PROM_LABELS_MAX];
    double value;
} prom_sample_t;

typedef void (*prom_sample_fn)(const prom_sample_t *sample, void *arg);

/* Returns the number of samples handed to fn. */
size_t prom_parse(const char *text, prom_sample_fn fn, void *arg);
/* The label's value, "" when the sample has no such label. */
const char *prom_label(const prom_sample_t *sample, const char *name);

#endif
