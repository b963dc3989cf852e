/* The parts of the status page (ui.h) that its files share: the ui
 * context, its settings, the engine's figures and the viewer of a request. */
#ifndef STAGEIN_UI_INTERNAL_H
#define STAGEIN_UI_INTERNAL_H

#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

#include "catalog/requests.h"
#include "common/groups.h"
#include "daemon/cache/cache.h"
#include "daemon/ui/history.h"
#include "daemon/ui/session.h"
#include "daemon/ui/ui.h"

#define COOKIE_NAME "stagein_ui"

/* What a reload (SIGHUP) may change, read by handlers as a copy. */
typedef struct {
    ui_conf_t conf;
    char munge_socket[PATH_MAX];   /* "": libmunge's default */
    bool peercred;
    bool admin_group_set;
    gid_t admin_gid;
} ui_settings_t;

struct ui {
    pthread_mutex_t settings_lock;
    ui_settings_t settings;
    bool enabled;                  /* these three change only at restart */
    double sample_interval, history_hours;
    si_log_t *log;
    char bind[64];
    uint64_t cache_capacity;
    double high_watermark, low_watermark;
    control_metrics_fn metrics;
    void *metrics_arg;
    control_eta_fn eta;
    void *eta_arg;
    push_t *push;
    cache_t *cache;
    http_server_t *server;

    pthread_mutex_t lock;          /* the catalog connection: one thread at a time */
    catalog_t *cat;
    requests_t *requests;
    si_groups_t *groups;
    ui_sessions_t *sessions;
    ui_history_t *history;

    pthread_t sampler;
    bool sampler_running, stopping;
    pthread_mutex_t stop_lock;
    pthread_cond_t stop_cv;
    /* the last sample's counters, for rates */
    double last_t, last_bytes_read, last_mounts, last_completed, last_failures;
    double last_evicted_bytes, last_robot_moves;
    json_t *last_drive_bytes;      /* {"drive": bytes read}: the sampler's own */
    /* the volumes with queued work as of the last sample (under settings_lock):
     * one catalog scan per sample, however many pages poll */
    json_t *volume_rows;
    json_t *queue_datasets;        /* {"request uuid": "names of its files' datasets"} */
    bool have_evictions;           /* the cache's eviction counters, same sample */
    uint64_t evicted_objects, evicted_bytes;
    bool have_last;
};

/* The engine's figures, read from its Prometheus text. */
typedef struct {
    double bytes_read, mounts, failures, drives_failed;
    double robots, robot_moves;    /* -1: the backend does not say */
    json_t *drives;                /* [{"drive", "state", "volume"}] */
    json_t *drive_bytes;           /* {"drive": bytes read}, where the backend counts */
} engine_figures_t;

/* Who asks: a logged-in user, and whether they see everyone's requests. */
typedef struct {
    ui_user_t user;
    bool admin;
} viewer_t;

/* settings.c: what a reload may change */
ui_settings_t ui_settings_of(ui_t *ui);
int ui_settings_from(const ui_conf_t *conf, const char *munge_socket, bool peercred,
                     ui_settings_t *out, si_error_t *err);

/* figures.c: the engine's figures (drives only when with_drives) */
void ui_engine_figures(ui_t *ui, engine_figures_t *f, bool with_drives);
bool ui_drive_busy(const char *state);

/* sampler.c: the history sampler thread */
void *ui_sampler_main(void *arg);

/* viewer.c: who is looking */
void ui_respond_401_page(http_request_t *req, const char *why);
/* The viewer of a page or API request, or false after answering 401. */
bool ui_viewer_of(ui_t *ui, http_request_t *req, bool page, viewer_t *v);

/* The handlers (arg: the ui): login.c, page.c, status.c. */
void ui_on_new_login(http_request_t *req, void *arg);
void ui_on_login(http_request_t *req, void *arg);
void ui_on_index(http_request_t *req, void *arg);
void ui_on_asset(http_request_t *req, void *arg);
void ui_on_status(http_request_t *req, void *arg);
void ui_on_request(http_request_t *req, void *arg);
void ui_on_history(http_request_t *req, void *arg);

#endif
