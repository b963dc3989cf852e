/* The status page's settings: the ui group of stagein.conf, and what a
 * reload (SIGHUP) may change, read by the handlers as a copy. */
#include "config.h"
#include "daemon/ui/internal.h"

#include <grp.h>
#include <stdio.h>
#include <string.h>

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

ui_settings_t ui_settings_of(ui_t *ui)
{
    pthread_mutex_lock(&ui->settings_lock);
    ui_settings_t copy = ui->settings;
    pthread_mutex_unlock(&ui->settings_lock);
    return copy;
}

/* conf's settings (the admin group looked up), or -1 with err. */
int ui_settings_from(const ui_conf_t *conf, const char *munge_socket, bool peercred,
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
    if (ui_settings_from(conf, munge_socket, peercred, &next, err) < 0) {
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
