#include "config.h"
#include "daemon/ui/history.h"

#include "common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ui_history {
    pthread_mutex_t lock;
    char *path;
    size_t capacity;
    size_t count, head;            /* head: the oldest sample's slot */
    size_t nseries;
    char names[UI_HISTORY_SERIES_MAX][UI_HISTORY_NAME_MAX];
    double *times;                 /* [capacity] */
    double *values;                /* [capacity][UI_HISTORY_SERIES_MAX]; NAN: no value */
};

ui_history_t *ui_history_new(size_t capacity, const char *path, si_error_t *err)
{
    if (capacity == 0) {
        si_errprintf(err, "a history keeps at least one sample");
        return NULL;
    }
    ui_history_t *h = calloc(1, sizeof(*h));
    if (h) {
        h->capacity = capacity;
        h->times = calloc(capacity, sizeof(*h->times));
        h->values = calloc(capacity * UI_HISTORY_SERIES_MAX, sizeof(*h->values));
        h->path = path ? strdup(path) : NULL;
    }
    if (!h || !h->times || !h->values || (path && !h->path)) {
        ui_history_free(h);
        si_errprintf(err, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&h->lock, NULL);
    return h;
}

void ui_history_free(ui_history_t *h)
{
    if (!h)
        return;
    if (h->times)
        pthread_mutex_destroy(&h->lock);
    free(h->path);
    free(h->times);
    free(h->values);
    free(h);
}

static int series_index(ui_history_t *h, const char *name, si_error_t *err)
{
    for (size_t i = 0; i < h->nseries; i++)
        if (strcmp(h->names[i], name) == 0)
            return (int)i;
    if (strlen(name) >= UI_HISTORY_NAME_MAX || !*name)
        return si_errprintf(err, "series name '%.80s': 1 to %d characters", name,
                            UI_HISTORY_NAME_MAX - 1);
    if (h->nseries == UI_HISTORY_SERIES_MAX)
        return si_errprintf(err, "series '%s': the history holds at most %d series", name,
                            UI_HISTORY_SERIES_MAX);
    /* earlier samples had no value for a new series */
    for (size_t s = 0; s < h->capacity; s++)
        h->values[s * UI_HISTORY_SERIES_MAX + h->nseries] = NAN;
    snprintf(h->names[h->nseries], UI_HISTORY_NAME_MAX, "%s", name);
    return (int)h->nseries++;
}

static int record_locked(ui_history_t *h, double t, const char *const *names,
                         const double *values, size_t n, si_error_t *err)
{
    if (!isfinite(t))
        return si_errprintf(err, "sample time must be a finite number");
    if (h->count > 0 && t < h->times[(h->head + h->count - 1) % h->capacity])
        return si_errprintf(err, "sample at %.3f is older than the last one (%.3f)", t,
                            h->times[(h->head + h->count - 1) % h->capacity]);
    int index[UI_HISTORY_SERIES_MAX * 2];
    if (n > sizeof(index) / sizeof(index[0]))
        return si_errprintf(err, "a sample holds at most %d values", UI_HISTORY_SERIES_MAX);
    for (size_t i = 0; i < n; i++)
        if ((index[i] = series_index(h, names[i], err)) < 0)
            return -1;
    size_t slot;
    if (h->count < h->capacity) {
        slot = (h->head + h->count++) % h->capacity;
    } else {
        slot = h->head;
        h->head = (h->head + 1) % h->capacity;
    }
    h->times[slot] = t;
    double *row = &h->values[slot * UI_HISTORY_SERIES_MAX];
    for (size_t i = 0; i < UI_HISTORY_SERIES_MAX; i++)
        row[i] = NAN;
    for (size_t i = 0; i < n; i++)
        row[index[i]] = values[i];
    return 0;
}

int ui_history_record(ui_history_t *h, double t, const char *const *names,
                      const double *values, size_t n, si_error_t *err)
{
    pthread_mutex_lock(&h->lock);
    int rc = record_locked(h, t, names, values, n, err);
    pthread_mutex_unlock(&h->lock);
    return rc;
}

size_t ui_history_count(ui_history_t *h)
{
    pthread_mutex_lock(&h->lock);
    size_t n = h->count;
    pthread_mutex_unlock(&h->lock);
    return n;
}

static json_t *json_locked(ui_history_t *h, double since)
{
    json_t *times = json_array(), *series = json_object();
    json_t *cols[UI_HISTORY_SERIES_MAX];
    for (size_t i = 0; i < h->nseries; i++) {
        cols[i] = json_array();
        json_object_set_new(series, h->names[i], cols[i]);
    }
    for (size_t k = 0; k < h->count; k++) {
        size_t slot = (h->head + k) % h->capacity;
        if (h->times[slot] < since)
            continue;
        json_array_append_new(times, json_real(h->times[slot]));
        const double *row = &h->values[slot * UI_HISTORY_SERIES_MAX];
        for (size_t i = 0; i < h->nseries; i++)
            json_array_append_new(cols[i], isfinite(row[i]) ? json_real(row[i]) : json_null());
    }
    return json_pack("{s:o, s:o}", "t", times, "series", series);
}

json_t *ui_history_json(ui_history_t *h, double since)
{
    pthread_mutex_lock(&h->lock);
    json_t *j = json_locked(h, since);
    pthread_mutex_unlock(&h->lock);
    return j;
}

int ui_history_load(ui_history_t *h, si_error_t *err)
{
    if (!h->path)
        return 0;
    json_error_t jerr;
    json_t *root = json_load_file(h->path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        if (access(h->path, F_OK) < 0 && errno == ENOENT)
            return 0;
        return si_errprintf(err, "%s: line %d: %s", h->path, jerr.line, jerr.text);
    }
    json_t *times = json_object_get(root, "t"), *series = json_object_get(root, "series");
    int rc = 0;
    if (!json_is_array(times) || !json_is_object(series)) {
        rc = si_errprintf(err, "%s: expected {\"t\": [...], \"series\": {...}}", h->path);
        goto out;
    }
    size_t n = json_array_size(times), nseries = json_object_size(series);
    if (nseries > UI_HISTORY_SERIES_MAX) {
        rc = si_errprintf(err, "%s: %zu series, at most %d", h->path, nseries,
                          UI_HISTORY_SERIES_MAX);
        goto out;
    }
    const char *names[UI_HISTORY_SERIES_MAX];
    json_t *cols[UI_HISTORY_SERIES_MAX];
    size_t k = 0;
    const char *name;
    json_t *col;
    json_object_foreach(series, name, col) {
        if (!json_is_array(col) || json_array_size(col) != n) {
            rc = si_errprintf(err, "%s: series '%.64s' must be an array of %zu values", h->path,
                              name, n);
            goto out;
        }
        names[k] = name;
        cols[k++] = col;
    }
    pthread_mutex_lock(&h->lock);
    h->count = h->head = h->nseries = 0;
    /* the newest samples when the file holds more than capacity */
    for (size_t i = n > h->capacity ? n - h->capacity : 0; i < n && rc == 0; i++) {
        double values[UI_HISTORY_SERIES_MAX];
        const char *present[UI_HISTORY_SERIES_MAX];
        size_t m = 0;
        json_t *t = json_array_get(times, i);
        for (size_t s = 0; s < k; s++) {
            json_t *v = json_array_get(cols[s], i);
            if (json_is_number(v)) {
                present[m] = names[s];
                values[m++] = json_number_value(v);
            } else if (!json_is_null(v)) {
                rc = si_errprintf(err, "%s: series '%.64s' value %zu is not a number or null",
                                  h->path, names[s], i);
            }
        }
        if (rc == 0 && !json_is_number(t))
            rc = si_errprintf(err, "%s: time %zu is not a number", h->path, i);
        if (rc == 0 && record_locked(h, json_number_value(t), present, values, m, err) < 0)
            rc = si_errprefix(err, "%s", h->path);
    }
    /* series with no value in any kept sample still keep their name */
    for (size_t s = 0; rc == 0 && s < k; s++)
        if (series_index(h, names[s], err) < 0)
            rc = -1;
    if (rc < 0)
        h->count = h->head = h->nseries = 0;
    pthread_mutex_unlock(&h->lock);
out:
    json_decref(root);
    return rc;
}

int ui_history_save(ui_history_t *h, si_error_t *err)
{
    if (!h->path)
        return 0;
    json_t *j = ui_history_json(h, 0);
    char *text = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10));
    json_decref(j);
    if (!text)
        return si_errprintf(err, "out of memory");
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", h->path);
    int rc = 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    size_t len = strlen(text);
    if (fd < 0) {
        rc = si_errprintf(err, "%s: %s", tmp, strerror(errno));
        goto out;
    }
    if (si_write_all(fd, text, len) < 0)
        rc = si_errprintf(err, "%s: %s", tmp, strerror(errno));
    if (rc == 0 && fsync(fd) < 0)
        rc = si_errprintf(err, "%s: fsync: %s", tmp, strerror(errno));
    close(fd);
    if (rc == 0 && rename(tmp, h->path) < 0)
        rc = si_errprintf(err, "rename %s: %s", h->path, strerror(errno));
    if (rc < 0)
        unlink(tmp);
out:
    free(text);
    return rc;
}
