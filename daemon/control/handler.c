#include "config.h"
#include "daemon/control/control.h"
#include "daemon/control/internal.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "catalog/db.h"
#include "catalog/requests.h"
#include "common/groups.h"
#include "common/text.h"
#include "daemon/control/identity.h"

/* ---- caller identity and error replies, shared by every handler ---------- */

unsigned control_status_for_errno(int errnum)
{
    switch (errnum) {
    case EINVAL: return 400;
    case EACCES:
    case EPERM: return 403;
    case ENOENT: return 404;
    case EBUSY: return 409;
    case EFBIG:
    case EDQUOT: return 507;
    default: return 500;
    }
}

/* Resolves the caller or answers 401/503; true when the handler may go on.
 * Called without the catalog lock: MUNGE decoding and token signatures
 * proceed in parallel with other callers' catalog work. */
bool control_authenticate(control_t *c, http_request_t *req, identity_t *who)
{
    char sock[PATH_MAX];
    pthread_mutex_lock(&c->settings);
    snprintf(sock, sizeof(sock), "%s", c->munge_socket ? c->munge_socket : "");
    identity_opts_t io = {.munge_socket = c->munge_socket ? sock : NULL,
                          .peercred = c->peercred, .tokens = c->gate};
    pthread_mutex_unlock(&c->settings);
    return identity_authenticate(&io, req, who);
}

bool control_catalog_unreachable(control_t *c, http_request_t *req)
{
    db_t *db = catalog_driver(c->cat);
    if (db_available(db))
        return false;
    db_health_state_t hs;
    db_health_get(db_health_of(db), &hs);
    char since[40] = "";
    if (!hs.up) {
        struct tm tm;
        gmtime_r(&hs.down_since, &tm);
        strftime(since, sizeof(since), " since %Y-%m-%dT%H:%M:%SZ", &tm);
    }
    http_add_header(req, "Retry-After", "5");
    http_respond_error(req, 503, "the catalog is unreachable%s (%s); nothing was changed: "
                       "retry later", since, hs.error[0] ? hs.error : "connection lost");
    return true;
}

void control_respond_failure(control_t *c, http_request_t *req, int errnum, const si_error_t *err)
{
    if (!control_catalog_unreachable(c, req))
        http_respond_error(req, control_status_for_errno(errnum), "%s", err->text);
}

/* A bearer token stages only under its storage.stage scopes; a dataset
 * (whose objects may be anywhere) needs storage.stage:/. Answers 403 and
 * returns false when the scope falls short. */

/* ---- JSON body fields ---------------------------------------------------------- */

int control_int_field(json_t *root, const char *name, int64_t min, int64_t max, int64_t *out,
                      si_error_t *err)
{
    json_t *v = json_object_get(root, name);
    if (!v)
        return 0;
    if (!json_is_integer(v))
        return si_errprintf(err, "field '%s' must be an integer", name);
    json_int_t n = json_integer_value(v);
    if (n < min || n > max)
        return si_errprintf(err, "field '%s' must be between %lld and %lld, not %lld", name,
                            (long long)min, (long long)max, (long long)n);
    *out = n;
    return 0;
}

bool control_listed(const char *const *names, const char *name)
{
    for (size_t i = 0; names[i]; i++)
        if (strcmp(names[i], name) == 0)
            return true;
    return false;
}
