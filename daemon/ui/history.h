/* The status page's time-series history: a bounded ring of samples (a time
 * and one value per named series), kept in memory and saved as JSON in the
 * state directory so that plots survive a restart. Thread safe. */
#ifndef STAGEIN_UI_HISTORY_H
#define STAGEIN_UI_HISTORY_H

#include <stddef.h>

#include <jansson.h>

#include "common/error.h"

#define UI_HISTORY_SERIES_MAX 64
#define UI_HISTORY_NAME_MAX 64

typedef struct ui_history ui_history_t;

/* capacity: samples kept (older ones drop out); path: the JSON file it is
 * saved to and loaded from, or NULL for memory only. */
ui_history_t *ui_history_new(size_t capacity, const char *path, si_error_t *err);
void ui_history_free(ui_history_t *h);

/* Loads the saved samples (a missing file is no error: an empty history).
 * A malformed file is an error naming it and leaves the history empty. */
int ui_history_load(ui_history_t *h, si_error_t *err);
/* Writes the samples to path atomically (a temporary file, fsync, rename). */
int ui_history_save(ui_history_t *h, si_error_t *err);

/* Appends one sample at time t (seconds since the epoch) with n named
 * values; a series not named in it has no value (null) there. A name longer
 * than UI_HISTORY_NAME_MAX - 1 or beyond UI_HISTORY_SERIES_MAX distinct
 * names is an error, and a time before the last sample's too. */
int ui_history_record(ui_history_t *h, double t, const char *const *names,
                      const double *values, size_t n, si_error_t *err);

size_t ui_history_count(ui_history_t *h);

/* {"t": [times...], "series": {"name": [value|null, ...]}} of the samples
 * at or after since (0: all). */
json_t *ui_history_json(ui_history_t *h, double since);

#endif
