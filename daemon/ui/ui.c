/* The status page (ui.h): start, stop and its routes; the handlers are in
 * login.c, page.c and status.c, the sampler in sampler.c. */
#include "config.h"
#include "daemon/ui/internal.h"
#include "common/thread.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define SESSIONS_MAX 4096

ui_t *ui_start(const ui_conf_t *conf, const ui_opts_t *opts, si_error_t *err)
{
    ui_t *ui = calloc(1, sizeof(*ui));
    if (!ui) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&ui->lock, NULL);
    pthread_mutex_init(&ui->settings_lock, NULL);
    pthread_mutex_init(&ui->stop_lock, NULL);
    pthread_cond_init(&ui->stop_cv, NULL);
    ui->enabled = conf->enabled;
    ui->sample_interval = conf->sample_interval;
    ui->history_hours = conf->history_hours;
    if (!ui->enabled)
        return ui;
    ui->log = opts->log;
    if (ui_settings_from(conf, opts->munge_socket, opts->peercred, &ui->settings, err) < 0)
        goto fail;
    snprintf(ui->bind, sizeof(ui->bind), "%s", opts->bind ? opts->bind : "127.0.0.1");
    ui->cache_capacity = opts->cache_capacity;
    ui->high_watermark = opts->high_watermark;
    ui->low_watermark = opts->low_watermark;
    ui->metrics = opts->metrics;
    ui->metrics_arg = opts->metrics_arg;
    ui->eta = opts->eta;
    ui->eta_arg = opts->eta_arg;
    ui->push = opts->push;
    ui->cache = opts->cache;
    char path[4096];
    snprintf(path, sizeof(path), "%s/ui-history.json", opts->state_dir);
    size_t samples = (size_t)ceil(ui->history_hours * 3600.0 / ui->sample_interval);
    if (!(ui->cat = catalog_open_opts(opts->catalog, err)) ||
        !(ui->requests = requests_open(ui->cat, err)) ||
        !(ui->history = ui_history_new(samples ? samples : 1, path, err)) ||
        !(ui->sessions = ui_sessions_new(conf->token_lifetime, conf->session_lifetime,
                                         SESSIONS_MAX, conf->sessions_per_user, err)) ||
        !(ui->groups = si_groups_new(60.0))) {
        if (!ui->groups)
            si_errprintf(err, "out of memory");
        goto fail;
    }
    si_error_t lerr;
    if (ui_history_load(ui->history, &lerr) < 0)
        si_log(ui->log, SI_LOG_WARNING, "ui: starting with an empty history: %s", lerr.text);
    if (pthread_create(&ui->sampler, NULL, ui_sampler_main, ui) != 0) {
        si_errprintf(err, "ui: cannot start the history sampler");
        goto fail;
    }
    ui->sampler_running = true;
    return ui;
fail:
    si_errprefix(err, "ui");
    ui_stop(ui);
    return NULL;
}

void ui_stop(ui_t *ui)
{
    if (!ui)
        return;
    if (ui->sampler_running) {
        si_thread_stop(ui->sampler, &ui->stop_lock, &ui->stop_cv, &ui->stopping);
        si_error_t err;
        if (ui_history_save(ui->history, &err) < 0)
            si_log(ui->log, SI_LOG_WARNING, "ui: saving the history: %s", err.text);
    }
    ui_history_free(ui->history);
    json_decref(ui->last_drive_bytes);
    json_decref(ui->volume_rows);
    json_decref(ui->queue_datasets);
    ui_sessions_free(ui->sessions);
    si_groups_free(ui->groups);
    requests_close(ui->requests);
    catalog_close(ui->cat);
    pthread_mutex_destroy(&ui->settings_lock);
    pthread_cond_destroy(&ui->stop_cv);
    pthread_mutex_destroy(&ui->stop_lock);
    pthread_mutex_destroy(&ui->lock);
    free(ui);
}

int ui_routes(ui_t *ui, http_server_t *server, si_error_t *err)
{
    if (!ui->enabled)
        return 0;
    static const struct {
        const char *method, *pattern;
        http_handler_fn fn;
    } routes[] = {
        {"POST", "/api/v1/ui/login", ui_on_new_login},
        {"GET", "/ui/login", ui_on_login},
        {"GET", "/ui", ui_on_index},
        {"GET", "/ui/{file}", ui_on_asset},
        {"GET", "/ui/api/status", ui_on_status},
        {"GET", "/ui/api/request/{id}", ui_on_request},
        {"GET", "/ui/api/history", ui_on_history},
    };
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
        if (http_server_route(server, routes[i].method, routes[i].pattern, routes[i].fn, ui,
                              err) < 0)
            return -1;
    ui->server = server;
    return 0;
}
