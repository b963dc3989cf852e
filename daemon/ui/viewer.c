/* Who is looking at the status page: the session cookie's user, and
 * whether they are an administrator (root or ui.admin_group). */
#include "config.h"
#include "daemon/ui/internal.h"

#include <stdio.h>
#include <string.h>

#include "common/clock.h"

static bool is_admin(ui_t *ui, const ui_user_t *u)
{
    if (u->uid == 0)
        return true;
    ui_settings_t set = ui_settings_of(ui);
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


void ui_respond_401_page(http_request_t *req, const char *why)
{
    char body[1024];
    int len = snprintf(body, sizeof(body), page_401, why);
    http_add_header(req, "Cache-Control", "no-store");
    http_respond(req, 401, "text/html; charset=utf-8", body, (size_t)len);
}

bool ui_viewer_of(ui_t *ui, http_request_t *req, bool page, viewer_t *v)
{
    char sid[UI_SECRET_LEN + 1];
    if (!session_cookie(req, sid) || !ui_sessions_lookup(ui->sessions, sid, si_wall_now(), &v->user)) {
        if (page)
            ui_respond_401_page(req, "This browser has no live stagein session (none yet, or "
                                     "it expired).");
        else
            http_respond_error(req, 401, "no live stagein session: open the link `stagein ui`"
                                         " prints");
        return false;
    }
    v->admin = is_admin(ui, &v->user);
    http_request_note(req, "ui uid=%u", (unsigned)v->user.uid);
    return true;
}
