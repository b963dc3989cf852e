/* Logging in to the status page: a one-time link for a MUNGE-authenticated
 * user (POST /api/v1/ui/login), traded for a session cookie (GET /ui/login). */
#include "config.h"
#include "daemon/ui/internal.h"

#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "daemon/control/identity.h"

void ui_on_new_login(http_request_t *req, void *arg)
{
    ui_t *ui = arg;
    ui_settings_t set = ui_settings_of(ui);
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

void ui_on_login(http_request_t *req, void *arg)
{
    ui_t *ui = arg;
    const char *token = http_request_query(req, "token");
    char sid[UI_SECRET_LEN + 1];
    ui_user_t user;
    si_error_t err;
    if (!token) {
        ui_respond_401_page(req, "The link has no login token.");
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
    ui_settings_t set = ui_settings_of(ui);
    if (ui_sessions_redeem(ui->sessions, token, si_wall_now(), sid, &user, &err) < 0) {
        ui_respond_401_page(req, "That login link is unknown, was already used, or expired.");
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
