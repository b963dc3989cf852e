/* The status page's data (GET /ui/api/status, /ui/api/request/{id},
 * /ui/api/history): what the viewer may see of the queue, the requests, the
 * library and the cache. */
#include "config.h"
#include "daemon/ui/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

#define QUEUE_ETA_ROWS 50          /* ETAs looked up per status answer */
#define REQUESTS_SHOWN 100

static bool row_visible(const viewer_t *v, json_t *row)
{
    json_t *uid = json_object_get(row, "uid");
    return v->admin || (json_is_integer(uid) && (uid_t)json_integer_value(uid) == v->user.uid);
}

/* Keeps the rows the viewer may see; adds the ETA of the first ones. Called
 * with the lock held. */
static json_t *visible_rows(ui_t *ui, const viewer_t *v, json_t *rows, bool with_eta)
{
    json_t *out = json_array();
    size_t i, etas = 0;
    json_t *row;
    json_array_foreach(rows, i, row) {
        if (!row_visible(v, row))
            continue;
        const char *uuid = json_string_value(json_object_get(row, "request"));
        si_error_t err;
        int64_t id;
        double eta;
        /* the request's id only: its files are not loaded for the ETA */
        if (with_eta && ui->eta && uuid && etas++ < QUEUE_ETA_ROWS &&
            requests_id_of(ui->requests, uuid, &id, &err) == 0 &&
            ui->eta(ui->eta_arg, id, &eta) == 1)
            json_object_set_new(row, "eta", json_real(eta));
        json_array_append(out, row);
    }
    return out;
}

/* Each drive's bytes read and its read rate in the last sample, where the
 * backend counts by drive. */
static void annotate_drives(json_t *drives, json_t *drive_bytes, json_t *series)
{
    size_t i;
    json_t *d;
    json_array_foreach(drives, i, d) {
        const char *name = json_string_value(json_object_get(d, "drive"));
        json_t *b = name ? json_object_get(drive_bytes, name) : NULL;
        if (!b)
            continue;
        json_object_set(d, "bytesRead", b);
        char key[UI_HISTORY_NAME_MAX];
        snprintf(key, sizeof(key), "drive_read_bytes_per_s.%s", name);
        json_t *r = json_object_get(series, key);
        json_t *now = json_array_get(r, json_array_size(r) - 1);
        if (now && !json_is_null(now))
            json_object_set(d, "readBytesPerSec", now);
    }
}

/* Why each queued request waits, from its state, its place and the drives. */
const char *ui_wait_reason(const char *state, int64_t position, size_t drives, size_t failed,
                           size_t busy, char *buf, size_t size)
{
    size_t working = drives > failed ? drives - failed : 0;
    if (strcmp(state, "STARTED") == 0)
        return "recalling";
    if (drives > 0 && working == 0)
        return "no working drive (every drive failed)";
    if (position > 1 && busy >= working) {
        snprintf(buf, size, "behind %lld earlier requests; all %zu drives busy",
                 (long long)position - 1, working);
        return buf;
    }
    if (busy >= working && working > 0) {
        snprintf(buf, size, "next; all %zu drives busy", working);
        return buf;
    }
    if (position > 1) {
        snprintf(buf, size, "behind %lld earlier requests", (long long)position - 1);
        return buf;
    }
    return "next; waiting for a mount";
}

static void annotate_waits(json_t *queue, json_t *drives)
{
    size_t i, failed = 0, busy = 0;
    json_t *d;
    json_array_foreach(drives, i, d) {
        const char *st = json_string_value(json_object_get(d, "state"));
        failed += st && strcmp(st, "failed") == 0;
        busy += st && ui_drive_busy(st);
    }
    json_array_foreach(queue, i, d) {
        char buf[96];
        const char *state = json_string_value(json_object_get(d, "state"));
        json_int_t pos = json_integer_value(json_object_get(d, "position"));
        json_object_set_new(d, "waitReason",
                            json_string(ui_wait_reason(state ? state : "", pos,
                                                       json_array_size(drives), failed, busy,
                                                       buf, sizeof(buf))));
    }
}

void ui_on_status(http_request_t *req, void *arg)
{
    ui_t *ui = arg;
    viewer_t v;
    if (!ui_viewer_of(ui, req, false, &v))
        return;
    si_error_t err;
    requests_metrics_t m;
    pthread_mutex_lock(&ui->lock);
    si_table_t *queue = requests_queue(ui->requests, &err);
    si_table_t *list = queue ? requests_list(ui->requests, v.admin ? (uid_t)-1 : v.user.uid,
                                             false, REQUESTS_SHOWN, &err)
                             : NULL;
    int mrc = list ? requests_metrics(ui->requests, &m, &err) : -1;
    json_t *queue_rows = queue ? control_table_json(queue) : NULL;
    json_t *list_rows = list ? control_table_json(list) : NULL;
    json_t *queue_shown = queue_rows ? visible_rows(ui, &v, queue_rows, true) : NULL;
    /* what the library has queued, and the recent pushes (a user's own) */
    char uid_text[16];
    snprintf(uid_text, sizeof(uid_text), "%u", (unsigned)v.user.uid);
    si_error_t verr;
    si_table_t *pushes = mrc == 0 ? catalog_view_recent_pushes(ui->cat, v.admin ? NULL : uid_text,
                                                               &verr)
                                  : NULL;
    pthread_mutex_unlock(&ui->lock);
    si_table_free(queue);
    si_table_free(list);
    pthread_mutex_lock(&ui->settings_lock);
    json_t *volume_rows = ui->volume_rows ? json_deep_copy(ui->volume_rows) : json_array();
    size_t qi;
    json_t *qrow;
    json_array_foreach(queue_shown, qi, qrow) {
        json_t *names = json_object_get(ui->queue_datasets,
                                        json_string_value(json_object_get(qrow, "request")));
        if (names)
            json_object_set_new(qrow, "datasets", json_deep_copy(names));
    }
    bool have_evictions = ui->have_evictions;
    uint64_t evicted_objects = ui->evicted_objects, evicted_bytes = ui->evicted_bytes;
    pthread_mutex_unlock(&ui->settings_lock);
    json_t *push_rows = pushes ? control_table_json(pushes) : json_array();
    si_table_free(pushes);
    if (mrc < 0 || !queue_shown || !list_rows) {
        json_decref(queue_rows);
        json_decref(list_rows);
        json_decref(queue_shown);
        json_decref(volume_rows);
        json_decref(push_rows);
        http_respond_error(req, 500, "%s", mrc < 0 ? err.text : "cannot render the queue");
        return;
    }
    engine_figures_t f;
    ui_engine_figures(ui, &f, true);
    json_t *last = ui_history_json(ui->history, si_wall_now() - 3 * ui->sample_interval);
    json_t *series = json_object_get(last, "series");
    json_t *rates = json_object_get(series, "read_bytes_per_s");
    json_t *read_rate = json_array_get(rates, json_array_size(rates) - 1);
    annotate_drives(f.drives, f.drive_bytes, series);
    annotate_waits(queue_shown, f.drives);
    json_t *status = json_pack(
        "{s:f, s:{s:I, s:b}, s:f, s:{s:o, s:f, s:f, s:O?, s:f}, s:I, s:o, s:o,"
        " s:{s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f}}",
        "now", si_wall_now(), "viewer", "uid", (json_int_t)v.user.uid, "admin", v.admin,
        "sampleInterval", ui->sample_interval,
        "library", "drives", f.drives, "mountsTotal", f.mounts, "bytesReadTotal", f.bytes_read,
        "readBytesPerSec", json_is_null(read_rate) ? NULL : read_rate, "drivesFailed",
        f.drives_failed,
        "queueLength", (json_int_t)json_array_size(queue_rows), "queue", queue_shown,
        "requests", list_rows,
        "cache", "capacity", (json_int_t)ui->cache_capacity, "bytes", (json_int_t)m.cache_bytes,
        "objects", (json_int_t)m.cache_objects, "pinnedBytes", (json_int_t)m.cache_pinned_bytes,
        "pinnedObjects", (json_int_t)m.cache_pinned_objects, "queuedBytes",
        (json_int_t)m.queued_bytes, "highWatermark", ui->high_watermark, "lowWatermark",
        ui->low_watermark);
    json_decref(last);
    json_decref(queue_rows);
    json_decref(f.drive_bytes);
    json_t *lib = json_object_get(status, "library");
    if (f.robots >= 0)
        json_object_set_new(lib, "robots", json_real(f.robots));
    if (f.robot_moves >= 0)
        json_object_set_new(lib, "robotMovesTotal", json_real(f.robot_moves));
    json_object_set_new(lib, "volumes", volume_rows);
    json_object_set_new(status, "recentPushes", push_rows);
    if (have_evictions) { /* as of the last sample: counting pins is the cache's work */
        json_t *c = json_object_get(status, "cache");
        json_object_set_new(c, "evictedObjects", json_integer((json_int_t)evicted_objects));
        json_object_set_new(c, "evictedBytes", json_integer((json_int_t)evicted_bytes));
    }
    push_metrics_t pm;
    if (ui->push && push_metrics(ui->push, &pm, &err) == 0)
        json_object_set_new(status, "pushes",
                            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "waitingFiles",
                                      (json_int_t)pm.received_files, "waitingBytes",
                                      (json_int_t)pm.received_bytes, "archivingFiles",
                                      (json_int_t)pm.archiving_files, "durableFiles",
                                      (json_int_t)pm.durable_files, "failedFiles",
                                      (json_int_t)pm.failed_files, "archiveFilesWritten",
                                      (json_int_t)pm.archive_files_written));
    http_add_header(req, "Cache-Control", "no-store");
    http_respond_json(req, 200, status);
}

void ui_on_request(http_request_t *req, void *arg)
{
    ui_t *ui = arg;
    viewer_t v;
    if (!ui_viewer_of(ui, req, false, &v))
        return;
    requests_status_t *st = NULL;
    si_error_t err;
    pthread_mutex_lock(&ui->lock);
    int rc = requests_get(ui->requests, http_request_param(req, "id"),
                          v.admin ? (uid_t)-1 : v.user.uid, &st, &err);
    int errnum = errno;
    pthread_mutex_unlock(&ui->lock);
    if (rc < 0) {
        http_respond_error(req, control_status_for_errno(errnum), "%s", err.text);
        return;
    }
    double eta = -1;
    bool active = strcmp(st->state, "SUBMITTED") == 0 || strcmp(st->state, "STARTED") == 0;
    if (!active || !ui->eta || ui->eta(ui->eta_arg, st->id, &eta) != 1)
        eta = -1;
    json_t *j = control_status_json(st, eta);
    requests_status_free(st);
    http_add_header(req, "Cache-Control", "no-store");
    http_respond_json(req, 200, j);
}

void ui_on_history(http_request_t *req, void *arg)
{
    ui_t *ui = arg;
    viewer_t v;
    if (!ui_viewer_of(ui, req, false, &v))
        return;
    const char *hours_text = http_request_query(req, "hours");
    double hours = ui->history_hours;
    char *end = NULL;
    if (hours_text) {
        errno = 0;
        hours = strtod(hours_text, &end);
        if (errno || end == hours_text || *end || !(hours > 0) || hours > 720) {
            http_respond_error(req, 400, "hours=%.20s: expected a number of hours, more than 0 "
                                         "and at most 720", hours_text);
            return;
        }
    }
    json_t *j = ui_history_json(ui->history, si_wall_now() - hours * 3600.0);
    json_object_set_new(j, "interval", json_real(ui->sample_interval));
    http_add_header(req, "Cache-Control", "no-store");
    http_respond_json(req, 200, j);
}
