/* The status page's history sampler: a thread that records the queue, the
 * cache and the engine's figures every ui.sample_interval seconds. */
#include "config.h"
#include "daemon/ui/internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"

#define HISTORY_SAVE_EVERY_S 60.0

static double rate(double now, double last, double dt)
{
    /* a counter that went down restarted (stageind did) */
    return dt > 0 ? (now >= last ? now - last : now) / dt : 0;
}

static void sample(ui_t *ui)
{
    requests_metrics_t m;
    si_error_t err;
    pthread_mutex_lock(&ui->lock);
    int rc = requests_metrics(ui->requests, &m, &err);
    si_error_t verr;
    si_table_t *volumes = rc == 0 ? catalog_view_volume_queue(ui->cat, &verr) : NULL;
    si_table_t *datasets = volumes ? catalog_view_queue_datasets(ui->cat, &verr) : NULL;
    pthread_mutex_unlock(&ui->lock);
    if (rc < 0) {
        si_log(ui->log, SI_LOG_WARNING, "ui: history sample: %s", err.text);
        return;
    }
    json_t *volume_rows = volumes ? control_table_json(volumes) : NULL;
    json_t *dataset_rows = datasets ? control_table_json(datasets) : NULL;
    si_table_free(volumes);
    si_table_free(datasets);
    if (!volume_rows || !dataset_rows)
        si_log(ui->log, SI_LOG_WARNING, "ui: the queued volumes and datasets: %s", verr.text);
    json_t *by_request = json_object();
    size_t di;
    json_t *drow;
    json_array_foreach(dataset_rows, di, drow) {
        const char *uuid = json_string_value(json_object_get(drow, "request"));
        if (uuid)
            json_object_set(by_request, uuid, json_object_get(drow, "datasets"));
    }
    json_decref(dataset_rows);
    pthread_mutex_lock(&ui->settings_lock);
    json_decref(ui->volume_rows);
    ui->volume_rows = volume_rows;
    json_decref(ui->queue_datasets);
    ui->queue_datasets = by_request;
    pthread_mutex_unlock(&ui->settings_lock);
    engine_figures_t f;
    ui_engine_figures(ui, &f, true);
    double t = si_wall_now(), completed = 0;
    for (int i = 0; i < REQUESTS_NSTATES; i++)
        if (strcmp(requests_state_names[i], "COMPLETED") == 0)
            completed = (double)m.by_state[i];
    const char *names[UI_HISTORY_SERIES_MAX];
    double values[UI_HISTORY_SERIES_MAX];
    char drive_names[UI_HISTORY_SERIES_MAX][UI_HISTORY_NAME_MAX];
    size_t n = 0;
#define PUT(name, v) (names[n] = (name), values[n++] = (v))
    PUT("queue_files", (double)m.queued_files);
    PUT("queue_bytes", (double)m.queued_bytes);
    PUT("recalling_files", (double)m.started_files);
    PUT("cache_bytes", (double)m.cache_bytes);
    PUT("cache_pinned_bytes", (double)m.cache_pinned_bytes);
    double busy = 0;
    size_t i;
    json_t *d;
    json_array_foreach(f.drives, i, d) {
        bool b = ui_drive_busy(json_string_value(json_object_get(d, "state")));
        busy += b;
        if (n + 8 < UI_HISTORY_SERIES_MAX) {
            snprintf(drive_names[i % UI_HISTORY_SERIES_MAX], UI_HISTORY_NAME_MAX, "drive_busy.%s",
                     json_string_value(json_object_get(d, "drive")));
            PUT(drive_names[i % UI_HISTORY_SERIES_MAX], b);
        }
    }
    PUT("drives_busy", busy);
    cache_usage_t cu = {0};
    bool have_cache = ui->cache && cache_usage(ui->cache, &cu, &err) == 0;
    pthread_mutex_lock(&ui->settings_lock);
    ui->have_evictions = have_cache;
    ui->evicted_objects = cu.evicted_objects;
    ui->evicted_bytes = cu.evicted_bytes;
    pthread_mutex_unlock(&ui->settings_lock);
    char rate_names[UI_HISTORY_SERIES_MAX][UI_HISTORY_NAME_MAX];
    if (ui->have_last) {
        double dt = t - ui->last_t;
        PUT("read_bytes_per_s", rate(f.bytes_read, ui->last_bytes_read, dt));
        PUT("mounts_per_min", 60 * rate(f.mounts, ui->last_mounts, dt));
        PUT("completed_per_min", 60 * rate(completed, ui->last_completed, dt));
        PUT("recall_failures_per_min", 60 * rate(f.failures, ui->last_failures, dt));
        if (have_cache)
            PUT("evicted_bytes_per_min",
                60 * rate((double)cu.evicted_bytes, ui->last_evicted_bytes, dt));
        if (f.robot_moves >= 0)
            PUT("robot_moves_per_min", 60 * rate(f.robot_moves, ui->last_robot_moves, dt));
        /* each drive's read rate, where the backend counts by drive */
        const char *drive;
        json_t *v;
        size_t k = 0;
        json_object_foreach(f.drive_bytes, drive, v) {
            json_t *was = json_object_get(ui->last_drive_bytes, drive);
            if (!was || n + 4 >= UI_HISTORY_SERIES_MAX || k >= UI_HISTORY_SERIES_MAX)
                continue;
            snprintf(rate_names[k], UI_HISTORY_NAME_MAX, "drive_read_bytes_per_s.%s", drive);
            PUT(rate_names[k], rate(json_number_value(v), json_number_value(was), dt));
            k++;
        }
    }
#undef PUT
    json_decref(f.drives);
    json_decref(ui->last_drive_bytes);
    ui->last_drive_bytes = f.drive_bytes;
    ui->last_evicted_bytes = (double)cu.evicted_bytes;
    ui->last_robot_moves = f.robot_moves;
    ui->have_last = true;
    ui->last_t = t;
    ui->last_bytes_read = f.bytes_read;
    ui->last_mounts = f.mounts;
    ui->last_completed = completed;
    ui->last_failures = f.failures;
    if (ui_history_record(ui->history, t, names, values, n, &err) < 0)
        si_log(ui->log, SI_LOG_WARNING, "ui: history: %s", err.text);
}

void *ui_sampler_main(void *arg)
{
    ui_t *ui = arg;
    double last_save = si_wall_now();
    pthread_mutex_lock(&ui->stop_lock);
    while (!ui->stopping) {
        pthread_mutex_unlock(&ui->stop_lock);
        sample(ui);
        si_error_t err;
        if (si_wall_now() - last_save >= HISTORY_SAVE_EVERY_S) {
            last_save = si_wall_now();
            if (ui_history_save(ui->history, &err) < 0)
                si_log(ui->log, SI_LOG_WARNING, "ui: saving the history: %s", err.text);
        }
        pthread_mutex_lock(&ui->stop_lock);
        struct timespec until = si_wall_deadline(ui->sample_interval);
        while (!ui->stopping &&
               pthread_cond_timedwait(&ui->stop_cv, &ui->stop_lock, &until) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&ui->stop_lock);
    return NULL;
}
