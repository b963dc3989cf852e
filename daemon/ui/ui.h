/* The read-only web status page, served on the control API's HTTP server:
 *   POST /api/v1/ui/login        (MUNGE) -> {"url", "token", "expiresIn"}: a
 *                                one-time login link for the caller
 *   GET  /ui/login?token=T       trades the token for a session cookie
 *   GET  /ui, /ui/index.html, /ui/app.js, /ui/app.css   the page (its own
 *                                files, built into stageind)
 *   GET  /ui/api/status          drives, queue, requests, cache (JSON)
 *   GET  /ui/api/request/{id}    one request, like GET /api/v1/stage/{id}
 *   GET  /ui/api/history[?hours=H]  the sampled time series (JSON)
 * A user sees their own requests; root and members of ui.admin_group see
 * everyone's. A sampler thread records the history every ui.sample_interval
 * seconds into a bounded ring saved in the state directory. */
#ifndef STAGEIN_UI_H
#define STAGEIN_UI_H

#include <stdbool.h>
#include <stdint.h>

#include "catalog/catalog.h"
#include "common/conf.h"
#include "common/error.h"
#include "common/log.h"
#include "daemon/control/control.h"
#include "daemon/http/server.h"
#include "daemon/push/push.h"

extern const si_conf_key_t ui_conf_keys[];

typedef struct {
    bool enabled;
    char admin_group[64];          /* "": root only */
    double sample_interval;        /* seconds */
    double history_hours;          /* what the ring holds */
    double token_lifetime;         /* seconds; a login link */
    double session_lifetime;       /* seconds; a browser session */
    unsigned sessions_per_user;    /* login links and sessions one uid holds at once */
    char url[256];                 /* base URL in login links; "": http://bind:port */
} ui_conf_t;

int ui_conf_from(const si_conf_t *conf, ui_conf_t *out, si_error_t *err);

typedef struct {
    const catalog_open_opts_t *catalog; /* the UI opens its own connection */
    const char *state_dir;         /* the history is saved there */
    si_log_t *log;
    const char *munge_socket;      /* NULL: libmunge's default */
    bool peercred;
    const char *bind;              /* the control API's TCP address, for login links */
    uint64_t cache_capacity;       /* bytes */
    double high_watermark, low_watermark;  /* the cache's, fractions of its capacity */
    control_metrics_fn metrics;    /* the engine's Prometheus text (drives, mounts) */
    void *metrics_arg;
    control_eta_fn eta;
    void *eta_arg;
    push_t *push;                  /* stage-out, for its counts; may be NULL */
    struct cache *cache;           /* for its evictions; may be NULL */
} ui_opts_t;

typedef struct ui ui_t;

/* NULL with err; with conf->enabled false, a ui that registers no route
 * and samples nothing. */
ui_t *ui_start(const ui_conf_t *conf, const ui_opts_t *opts, si_error_t *err);
int ui_routes(ui_t *ui, http_server_t *server, si_error_t *err);
/* Applies reloaded settings (admin group, lifetimes, per-user sessions, url,
 * munge socket, peercred); on error the running ones stay. ui.enabled,
 * ui.sample_interval and ui.history_hours change only at restart. */
int ui_reconfigure(ui_t *ui, const ui_conf_t *conf, const char *munge_socket, bool peercred,
                   si_error_t *err);
/* Whether a GET of a login link comes from the user, not from another
 * site's page (login CSRF): Sec-Fetch-Site, else Origin or Referer. */
bool ui_login_navigation_ok(http_request_t *req);
/* Why a queued request waits ("recalling", "behind N earlier requests; all
 * D drives busy", ...): its state and queue position, and the library's
 * drives (how many, failed, busy); buf holds the text where one is made. */
const char *ui_wait_reason(const char *state, int64_t position, size_t drives, size_t failed,
                           size_t busy, char *buf, size_t size);
/* Stops the sampler and saves the history. */
void ui_stop(ui_t *ui);

#endif
