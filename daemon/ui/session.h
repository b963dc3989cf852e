/* Browser sessions of the status page. Browsers cannot do MUNGE, so a
 * MUNGE-authenticated caller (`stagein ui`) gets a one-time login token that
 * lives a minute; the browser trades it at /ui/login for a session id sent
 * back as an HttpOnly cookie, the way notebook servers do. A token works
 * once; sessions expire. Both are random (256 bits) and held in memory only:
 * a restart logs everyone out. Thread safe. */
#ifndef STAGEIN_UI_SESSION_H
#define STAGEIN_UI_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/error.h"

#define UI_SECRET_LEN 64               /* hex characters */

typedef struct ui_sessions ui_sessions_t;

typedef struct {
    uid_t uid;
    gid_t gid;
} ui_user_t;

/* max: tokens plus sessions held at once; beyond it the one that expires
 * first makes room. per_user: what one uid may hold at once (0: max); a
 * user past it loses their own entry that expires first, never another
 * user's, so one user cannot log everyone else out. */
ui_sessions_t *ui_sessions_new(double token_ttl_s, double session_ttl_s, size_t max,
                               size_t per_user, si_error_t *err);
void ui_sessions_free(ui_sessions_t *s);
/* New lifetimes and per-user bound (a reload); live entries keep theirs. */
void ui_sessions_set_limits(ui_sessions_t *s, double token_ttl_s, double session_ttl_s,
                            size_t per_user);
/* Entries (tokens and sessions) uid holds now. */
size_t ui_sessions_count(ui_sessions_t *s, uid_t uid, double now);

/* A fresh one-time token for user, valid until now + token_ttl. */
int ui_sessions_token(ui_sessions_t *s, const ui_user_t *user, double now,
                      char token[UI_SECRET_LEN + 1], si_error_t *err);
/* Trades a token (once) for a session id; -1 with err saying why (unknown
 * or already used, or expired). */
int ui_sessions_redeem(ui_sessions_t *s, const char *token, double now,
                       char session[UI_SECRET_LEN + 1], ui_user_t *user, si_error_t *err);
/* The user of a live session. */
bool ui_sessions_lookup(ui_sessions_t *s, const char *session, double now, ui_user_t *user);

#endif
