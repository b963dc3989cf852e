#include "config.h"
#include "daemon/ui/ui.h"

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "catalog/catalog.h"
#include "catalog/requests.h"
#include "common/clock.h"
#include "daemon/cache/cache.h"
#include "common/groups.h"
#include "common/prom.h"
#include "common/text.h"
#include "daemon/control/identity.h"
#include "daemon/ui/assets.h"
#include "daemon/ui/history.h"
#include "daemon/ui/session.h"

#define COOKIE_NAME "stagein_ui"
#define SESSIONS_MAX 4096
#define HISTORY_SAVE_EVERY_S 60.0
#define QUEUE_ETA_ROWS 50          /* ETAs looked up per status answer */
#define REQUESTS_SHOWN 100

const si_conf_key_t ui_conf_keys[] = {
    {"ui", SI_CONF_GROUP, 0, 0, NULL},
    {"ui.enabled", SI_CONF_BOOL, 0, 0, NULL},
    {"ui.admin_group", SI_CONF_STRING, 0, 0, NULL},
    {"ui.sample_interval", SI_CONF_FLOAT, 0.1, 3600.0, NULL},
    {"ui.history_hours", SI_CONF_FLOAT, 0.01, 720.0, NULL},
    {"ui.token_lifetime", SI_CONF_FLOAT, 1.0, 3600.0, NULL},
    {"ui.session_lifetime", SI_CONF_FLOAT, 60.0, 30 * 86400.0, NULL},
    {"ui.url", SI_CONF_STRING, 0, 0, NULL},
    {"ui.sessions_per_user", SI_CONF_INT, 1, 1000, NULL},
    SI_CONF_KEYS_END,
};

/* 100000 samples of 64 series: about 50 MB in memory and a few on disk */
#define HISTORY_SAMPLES_MAX 100000

int ui_conf_from(const si_conf_t *conf, ui_conf_t *out, si_error_t *err)
{
    ui_conf_t c = {.enabled = true, .sample_interval = 10.0, .history_hours = 6.0,
                   .token_lifetime = 60.0, .session_lifetime = 8 * 3600.0,
                   .sessions_per_user = 16};
    c.enabled = si_conf_bool(conf, "ui.enabled", c.enabled);
    snprintf(c.admin_group, sizeof(c.admin_group), "%s",
             si_conf_string(conf, "ui.admin_group", ""));
    c.sample_interval = si_conf_float(conf, "ui.sample_interval", c.sample_interval);
    c.history_hours = si_conf_float(conf, "ui.history_hours", c.history_hours);
    c.token_lifetime = si_conf_float(conf, "ui.token_lifetime", c.token_lifetime);
    c.session_lifetime = si_conf_float(conf, "ui.session_lifetime", c.session_lifetime);
    c.sessions_per_user =
        (unsigned)si_conf_int(conf, "ui.sessions_per_user", (int64_t)c.sessions_per_user);
    const char *url = si_conf_string(conf, "ui.url", "");
    if (strlen(url) >= sizeof(c.url))
        return si_errprintf(err, "ui.url: at most %zu characters", sizeof(c.url) - 1);
    if (*url && strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        return si_errprintf(err, "ui.url '%s': expected http://HOST:PORT or https://...", url);
    snprintf(c.url, sizeof(c.url), "%s", url);
    if (c.history_hours * 3600.0 / c.sample_interval > HISTORY_SAMPLES_MAX)
        return si_errprintf(err, "ui.history_hours %.2f at ui.sample_interval %.2f s is more "
                                 "than %d samples: sample less often or keep fewer hours",
                            c.history_hours, c.sample_interval, HISTORY_SAMPLES_MAX);
    *out = c;
    return 0;
}

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

static ui_settings_t settings_of(ui_t *ui)
{
    pthread_mutex_lock(&ui->settings_lock);
    ui_settings_t copy = ui->settings;
    pthread_mutex_unlock(&ui->settings_lock);
    return copy;
}

/* conf's settings (the admin group looked up), or -1 with err. */
static int settings_from(const ui_conf_t *conf, const char *munge_socket, bool peercred,
                         ui_settings_t *out, si_error_t *err)
{
    memset(out, 0, sizeof(*out));
    out->conf = *conf;
    out->peercred = peercred;
    if (munge_socket && strlen(munge_socket) >= sizeof(out->munge_socket))
        return si_errprintf(err, "the munge socket path is too long");
    snprintf(out->munge_socket, sizeof(out->munge_socket), "%s", munge_socket ? munge_socket : "");
    if (conf->admin_group[0]) {
        struct group *g = getgrnam(conf->admin_group);
        if (!g)
            return si_errprintf(err, "ui.admin_group '%s': no such group", conf->admin_group);
        out->admin_group_set = true;
        out->admin_gid = g->gr_gid;
    }
    return 0;
}

int ui_reconfigure(ui_t *ui, const ui_conf_t *conf, const char *munge_socket, bool peercred,
                   si_error_t *err)
{
    if (!ui->enabled)
        return 0;
    ui_settings_t next;
    if (settings_from(conf, munge_socket, peercred, &next, err) < 0) {
        si_errprefix(err, "ui");
        return -1;
    }
    if (conf->enabled != ui->enabled || conf->sample_interval != ui->sample_interval ||
        conf->history_hours != ui->history_hours)
        si_log(ui->log, SI_LOG_WARNING, "ui: reload: ui.enabled, ui.sample_interval and"
                                        " ui.history_hours change only at restart");
    pthread_mutex_lock(&ui->settings_lock);
    ui->settings = next;
    pthread_mutex_unlock(&ui->settings_lock);
    ui_sessions_set_limits(ui->sessions, conf->token_lifetime, conf->session_lifetime,
                           conf->sessions_per_user);
    return 0;
}

/* ---- the engine's figures ------------------------------------------------------ */

typedef struct {
    double bytes_read, mounts, failures, drives_failed;
    double robots, robot_moves;    /* -1: the backend does not say */
    json_t *drives;                /* [{"drive", "state", "volume"}] */
    json_t *drive_bytes;           /* {"drive": bytes read}, where the backend counts */
} engine_figures_t;

static int on_metric(const si_prom_sample_t *m, void *arg, si_error_t *err)
{
    (void)err;
    engine_figures_t *f = arg;
    if (strcmp(m->name, "stagein_tape_bytes_read_total") == 0)
        f->bytes_read = m->value;
    else if (strcmp(m->name, "stagein_mounts_total") == 0)
        f->mounts = m->value;
    else if (strcmp(m->name, "stagein_recall_failures_total") == 0)
        f->failures = m->value;
    else if (strcmp(m->name, "stagein_drives_failed") == 0)
        f->drives_failed = m->value;
    else if (strcmp(m->name, "stagein_robots") == 0)
        f->robots = m->value;
    else if (strcmp(m->name, "stagein_robot_moves_total") == 0)
        f->robot_moves = m->value;
    else if (strcmp(m->name, "stagein_drive_bytes_read_total") == 0 && f->drive_bytes &&
             si_prom_label(m, "drive"))
        json_object_set_new(f->drive_bytes, si_prom_label(m, "drive"), json_real(m->value));
    else if (strcmp(m->name, "stagein_drive_state") == 0 && f->drives)
        json_array_append_new(f->drives,
                              json_pack("{s:s, s:s, s:s}", "drive", si_prom_label(m, "drive"),
                                        "state", si_prom_label(m, "state"), "volume",
                                        si_prom_label(m, "volume")));
    return 0;
}

static void engine_figures(ui_t *ui, engine_figures_t *f, bool with_drives)
{
    memset(f, 0, sizeof(*f));
    f->robots = f->robot_moves = -1;
    f->drives = with_drives ? json_array() : NULL;
    f->drive_bytes = json_object();
    if (!ui->metrics)
        return;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        return;
    ui->metrics(out, ui->metrics_arg);
    fclose(out);
    si_error_t err;
    if (si_prom_each(text, on_metric, f, &err) < 0)
        si_log(ui->log, SI_LOG_WARNING, "ui: reading the engine's metrics: %s", err.text);
    free(text);
}

static bool drive_busy(const char *state)
{
    return strcmp(state, "empty") != 0 && strcmp(state, "idle") != 0 &&
           strcmp(state, "failed") != 0;
}

/* ---- the sampler ---------------------------------------------------------------- */

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
    engine_figures(ui, &f, true);
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
        bool b = drive_busy(json_string_value(json_object_get(d, "state")));
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

static void *sampler_main(void *arg)
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
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        double wake = (double)until.tv_sec + until.tv_nsec / 1e9 + ui->sample_interval;
        until.tv_sec = (time_t)wake;
        until.tv_nsec = (long)((wake - floor(wake)) * 1e9);
        while (!ui->stopping &&
               pthread_cond_timedwait(&ui->stop_cv, &ui->stop_lock, &until) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&ui->stop_lock);
    return NULL;
}

/* ---- start and stop ------------------------------------------------------------------ */

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
    if (settings_from(conf, opts->munge_socket, opts->peercred, &ui->settings, err) < 0)
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
    if (pthread_create(&ui->sampler, NULL, sampler_main, ui) != 0) {
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
        pthread_mutex_lock(&ui->stop_lock);
        ui->stopping = true;
        pthread_cond_signal(&ui->stop_cv);
        pthread_mutex_unlock(&ui->stop_lock);
        pthread_join(ui->sampler, NULL);
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

/* ---- who is looking ------------------------------------------------------------------ */

typedef struct {
    ui_user_t user;
    bool admin;
} viewer_t;

static bool is_admin(ui_t *ui, const ui_user_t *u)
{
    if (u->uid == 0)
        return true;
    ui_settings_t set = settings_of(ui);
    if (!set.admin_group_set)
        return false;
    gid_t list[SI_GROUPS_MAX];
    size_t n = 0;
    si_groups_of(ui->groups, u->uid, u->gid, list, &n);
    for (size_t i = 0; i < n; i++)
        if (list[i] == set.admin_gid)
            return true;
    return false;
}

/* The session id in the Cookie header, copied into out. */
static bool session_cookie(http_request_t *req, char out[UI_SECRET_LEN + 1])
{
    const char *h = http_request_header(req, "Cookie");
    const size_t nlen = strlen(COOKIE_NAME);
    for (const char *p = h; p && *p;) {
        while (*p == ' ' || *p == ';')
            p++;
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == nlen + 1 + UI_SECRET_LEN && strncmp(p, COOKIE_NAME "=", nlen + 1) == 0) {
            memcpy(out, p + nlen + 1, UI_SECRET_LEN);
            out[UI_SECRET_LEN] = '\0';
            return true;
        }
        p += len;
    }
    return false;
}

static const char page_401[] =
    "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>stagein: log in"
    "</title></head><body><h1>Not logged in</h1><p>%s</p><p>Run <code>stagein ui</code> on a "
    "cluster node: it prints a one-time link to this page, valid for a minute.</p></body>"
    "</html>\n";

static void respond_401_page(http_request_t *req, const char *why)
{
    char body[1024];
    int len = snprintf(body, sizeof(body), page_401, why);
    http_add_header(req, "Cache-Control", "no-store");
    http_respond(req, 401, "text/html; charset=utf-8", body, (size_t)len);
}

/* The viewer of a page or API request, or false after answering 401. */
static bool viewer_of(ui_t *ui, http_request_t *req, bool page, viewer_t *v)
{
    char sid[UI_SECRET_LEN + 1];
    if (!session_cookie(req, sid) || !ui_sessions_lookup(ui->sessions, sid, si_wall_now(), &v->user)) {
        if (page)
            respond_401_page(req, "This browser has no live stagein session (none yet, or it "
                                  "expired).");
        else
            http_respond_error(req, 401, "no live stagein session: open the link `stagein ui`"
                                         " prints");
        return false;
    }
    v->admin = is_admin(ui, &v->user);
    http_request_note(req, "ui uid=%u", (unsigned)v->user.uid);
    return true;
}

/* ---- login ------------------------------------------------------------------------- */

static void on_new_login(http_request_t *req, void *arg)
{
    ui_t *ui = arg;
    ui_settings_t set = settings_of(ui);
    identity_opts_t io = {.munge_socket = set.munge_socket[0] ? set.munge_socket : NULL,
                          .peercred = set.peercred};
    identity_t who;
    if (!identity_authenticate(&io, req, &who))
        return;
    ui_user_t user = {.uid = who.uid, .gid = who.gid};
    char token[UI_SECRET_LEN + 1];
    si_error_t err;
    if (ui_sessions_token(ui->sessions, &user, si_wall_now(), token, &err) < 0) {
        http_respond_error(req, 500, "%s", err.text);
        return;
    }
    char base[300];
    if (set.conf.url[0])
        snprintf(base, sizeof(base), "%s", set.conf.url);
    else
        snprintf(base, sizeof(base), strchr(ui->bind, ':') ? "http://[%s]:%u" : "http://%s:%u",
                 ui->bind, (unsigned)http_server_port(ui->server));
    size_t blen = strlen(base);
    while (blen > 0 && base[blen - 1] == '/')
        base[--blen] = '\0';
    char url[512];
    snprintf(url, sizeof(url), "%s/ui/login?token=%s", base, token);
    si_log(ui->log, SI_LOG_INFO, "ui: login link for uid %u", (unsigned)who.uid);
    http_add_header(req, "Cache-Control", "no-store");
    http_respond_json(req, 201, json_pack("{s:s, s:s, s:f}", "url", url, "token", token,
                                          "expiresIn", set.conf.token_lifetime));
}

/* Whether a login link was opened by the user (typed, pasted, from a
 * terminal or another application: Sec-Fetch-Site "none") or from this
 * origin, and not followed from another site's page (login CSRF). Browsers
 * that send no Sec-Fetch-Site (and curl) are judged by Origin or Referer
 * when present. */
bool ui_login_navigation_ok(http_request_t *req)
{
    const char *site = http_request_header(req, "Sec-Fetch-Site");
    if (site)
        return strcmp(site, "none") == 0 || strcmp(site, "same-origin") == 0;
    const char *from = http_request_header(req, "Origin");
    if (!from)
        from = http_request_header(req, "Referer");
    const char *host = http_request_header(req, "Host");
    if (!from || strcmp(from, "null") == 0)
        return !from;
    const char *authority = strstr(from, "://");
    if (!authority || !host)
        return false;
    authority += 3;
    size_t len = strcspn(authority, "/");
    return strlen(host) == len && strncmp(authority, host, len) == 0;
}

static void on_login(http_request_t *req, void *arg)
{
    ui_t *ui = arg;
    const char *token = http_request_query(req, "token");
    char sid[UI_SECRET_LEN + 1];
    ui_user_t user;
    si_error_t err;
    if (!token) {
        respond_401_page(req, "The link has no login token.");
        return;
    }
    if (!ui_login_navigation_ok(req)) {
        /* login CSRF: another site's page must not log this browser in (as
         * whoever handed out the link); the token stays unused */
        static const char page[] =
            "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>stagein:"
            " log in</title></head><body><h1>Open the link yourself</h1><p>This login link was"
            " followed from another site. Paste the link <code>stagein ui</code> printed into"
            " the address bar instead.</p></body></html>\n";
        si_log(ui->log, SI_LOG_WARNING, "ui: a login link followed from another site (%s)"
               " refused", http_request_header(req, "Sec-Fetch-Site"));
        http_add_header(req, "Cache-Control", "no-store");
        http_respond(req, 403, "text/html; charset=utf-8", page, sizeof(page) - 1);
        return;
    }
    ui_settings_t set = settings_of(ui);
    if (ui_sessions_redeem(ui->sessions, token, si_wall_now(), sid, &user, &err) < 0) {
        respond_401_page(req, "That login link is unknown, was already used, or expired.");
        return;
    }
    char cookie[256];
    /* Secure only where the browser reached us over TLS: a ui.url of https */
    snprintf(cookie, sizeof(cookie), COOKIE_NAME "=%s; Path=/ui; HttpOnly; SameSite=Strict;"
             " Max-Age=%.0f%s", sid, set.conf.session_lifetime,
             strncmp(set.conf.url, "https://", 8) == 0 ? "; Secure" : "");
    http_add_header(req, "Set-Cookie", cookie);
    http_add_header(req, "Location", "/ui");
    http_add_header(req, "Cache-Control", "no-store");
    si_log(ui->log, SI_LOG_INFO, "ui: uid %u logged in", (unsigned)user.uid);
    static const char moved[] = "<!DOCTYPE html><a href=\"/ui\">status page</a>\n";
    http_respond(req, 303, "text/html; charset=utf-8", moved, sizeof(moved) - 1);
}

/* ---- the page's files -------------------------------------------------------------- */

static void serve_asset(http_request_t *req, const char *name)
{
    const ui_asset_t *a = ui_asset_find(name);
    if (!a) {
        http_respond_error(req, 404, "no file %.64s in the status page", name);
        return;
    }
    http_add_header(req, "Cache-Control", "no-cache");
    http_add_header(req, "X-Content-Type-Options", "nosniff");
    /* every file is ours: nothing may come from elsewhere */
    http_add_header(req, "Content-Security-Policy",
                    "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'");
    http_respond(req, 200, a->content_type, a->data, a->len);
}

static void on_index(http_request_t *req, void *arg)
{
    viewer_t v;
    if (viewer_of(arg, req, true, &v))
        serve_asset(req, "index.html");
}

static void on_asset(http_request_t *req, void *arg)
{
    viewer_t v;
    if (viewer_of(arg, req, true, &v))
        serve_asset(req, http_request_param(req, "file"));
}

/* ---- data ----------------------------------------------------------------------------- */

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
        busy += st && drive_busy(st);
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

static void on_status(http_request_t *req, void *arg)
{
    ui_t *ui = arg;
    viewer_t v;
    if (!viewer_of(ui, req, false, &v))
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
    engine_figures(ui, &f, true);
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

static void on_request(http_request_t *req, void *arg)
{
    ui_t *ui = arg;
    viewer_t v;
    if (!viewer_of(ui, req, false, &v))
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

static void on_history(http_request_t *req, void *arg)
{
    ui_t *ui = arg;
    viewer_t v;
    if (!viewer_of(ui, req, false, &v))
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

int ui_routes(ui_t *ui, http_server_t *server, si_error_t *err)
{
    if (!ui->enabled)
        return 0;
    static const struct {
        const char *method, *pattern;
        http_handler_fn fn;
    } routes[] = {
        {"POST", "/api/v1/ui/login", on_new_login},
        {"GET", "/ui/login", on_login},
        {"GET", "/ui", on_index},
        {"GET", "/ui/{file}", on_asset},
        {"GET", "/ui/api/status", on_status},
        {"GET", "/ui/api/request/{id}", on_request},
        {"GET", "/ui/api/history", on_history},
    };
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
        if (http_server_route(server, routes[i].method, routes[i].pattern, routes[i].fn, ui,
                              err) < 0)
            return -1;
    ui->server = server;
    return 0;
}
