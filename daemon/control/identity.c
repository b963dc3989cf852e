#include "config.h"
#include "daemon/control/identity.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/checksum.h"
#include "common/munge_auth.h"

/* http_request_connection_memo gives at most 64 bytes */
_Static_assert(sizeof(identity_memo_t) <= 64, "identity_memo_t outgrew a connection's memo");

/* The longest credential accepted: munge's are a few hundred bytes. */
#define CREDENTIAL_MAX 4096

/* identity_munge_decode, and when the credential expires (its encode
 * time plus its time-to-live, munged's clock) into *expires when not NULL. */
static int munge_decode_until(const char *munge_socket, const char *credential, uid_t *uid,
                              gid_t *gid, time_t *expires, unsigned *status, si_error_t *err)
{
    *status = 401;
    if (!credential || !*credential)
        return si_errprintf(err, "no MUNGE credential in the %s header", IDENTITY_HEADER);
    if (strlen(credential) > CREDENTIAL_MAX)
        return si_errprintf(err, "the %s header is longer than %d bytes", IDENTITY_HEADER,
                            CREDENTIAL_MAX);
    munge_ctx_t ctx = si_munge_context(munge_socket, err);
    if (!ctx) {
        *status = 500;
        return -1;
    }
    uid_t u;
    gid_t g;
    munge_err_t e = munge_decode(credential, ctx, NULL, NULL, &u, &g);
    const char *why = munge_ctx_strerror(ctx);
    int rc = -1;
    switch (e) {
    case EMUNGE_SUCCESS: {
        *uid = u;
        *gid = g;
        rc = 0;
        time_t encoded = 0;
        int ttl = 0;
        if (expires)
            *expires = munge_ctx_get(ctx, MUNGE_OPT_ENCODE_TIME, &encoded) == EMUNGE_SUCCESS &&
                               munge_ctx_get(ctx, MUNGE_OPT_TTL, &ttl) == EMUNGE_SUCCESS &&
                               ttl > 0
                           ? encoded + ttl
                           : 0; /* unknown: not kept for the connection */
        break;
    }
    case EMUNGE_CRED_REPLAYED:
        si_errprintf(err, "the MUNGE credential was already used (replayed);"
                          " send a fresh credential with every request");
        break;
    case EMUNGE_CRED_EXPIRED:
        si_errprintf(err, "the MUNGE credential has expired");
        break;
    case EMUNGE_CRED_REWOUND:
        si_errprintf(err, "the MUNGE credential is from the future (clock skew?)");
        break;
    case EMUNGE_SOCKET:
    case EMUNGE_TIMEOUT:
        *status = 503;
        si_errprintf(err, "cannot check the MUNGE credential: munged is unreachable%s%s: %s",
                     munge_socket ? " at " : "", munge_socket ? munge_socket : "",
                     why ? why : munge_strerror(e));
        break;
    default: /* bad, invalid, unauthorized credentials and the like */
        si_errprintf(err, "invalid MUNGE credential: %s", why ? why : munge_strerror(e));
        break;
    }
    munge_ctx_destroy(ctx);
    return rc;
}

int identity_munge_decode(const char *munge_socket, const char *credential, uid_t *uid,
                          gid_t *gid, unsigned *status, si_error_t *err)
{
    return munge_decode_until(munge_socket, credential, uid, gid, NULL, status, err);
}

/* The memo's key: the first 160 bits of the credential's sha256, in hex. */
static bool memo_key(const char *credential, char key[IDENTITY_MEMO_KEY])
{
    char sum[SI_CHECKSUM_TEXT_MAX];
    si_error_t err;
    si_checksum_t *c = si_checksum_new("sha256", &err);
    if (!c)
        return false;
    si_checksum_update(c, credential, strlen(credential));
    si_checksum_final(c, sum);
    si_checksum_free(c);
    snprintf(key, IDENTITY_MEMO_KEY, "%s", sum + strlen("sha256:"));
    return true;
}

bool identity_memo_recall(const identity_memo_t *m, const char *credential, time_t now,
                          identity_t *who)
{
    char key[IDENTITY_MEMO_KEY];
    if (!m->key[0] || now >= m->expires || !memo_key(credential, key) ||
        strcmp(key, m->key) != 0)
        return false;
    who->uid = m->uid;
    who->gid = m->gid;
    who->method = "munge";
    who->scope[0] = '\0';
    return true;
}

void identity_memo_keep(identity_memo_t *m, const char *credential, const identity_t *who,
                        time_t expires)
{
    m->key[0] = '\0';
    if (expires <= 0 || !memo_key(credential, m->key))
        return;
    m->uid = who->uid;
    m->gid = who->gid;
    m->expires = expires;
}

/* identity_resolve, with the credential's expiry (0: none or unknown). */
static int resolve(const identity_opts_t *opts, const char *credential, const http_peer_t *peer,
                   identity_t *who, time_t *expires, unsigned *status, si_error_t *err)
{
    *expires = 0;
    if (credential) {
        if (munge_decode_until(opts->munge_socket, credential, &who->uid, &who->gid, expires,
                               status, err) < 0)
            return -1;
        who->method = "munge";
        who->scope[0] = '\0';
        return 0;
    }
    if (peer && peer->is_unix && peer->have_cred && opts->peercred) {
        who->uid = peer->uid;
        who->gid = peer->gid;
        who->method = "peercred";
        who->scope[0] = '\0';
        return 0;
    }
    *status = 401;
    if (peer && peer->is_unix)
        return si_errprintf(err, "no MUNGE credential in the %s header%s", IDENTITY_HEADER,
                            opts->peercred ? " and no peer credentials on the socket"
                                           : " (peer credentials are not accepted here)");
    return si_errprintf(err, "no MUNGE credential in the %s header (required over TCP)",
                        IDENTITY_HEADER);
}

int identity_resolve(const identity_opts_t *opts, const char *credential,
                     const http_peer_t *peer, identity_t *who, unsigned *status,
                     si_error_t *err)
{
    time_t expires;
    return resolve(opts, credential, peer, who, &expires, status, err);
}

bool identity_allows(const identity_t *who, const char *op, const char *path)
{
    return strcmp(who->method, "bearer") != 0 || token_scope_allows(who->scope, op, path);
}

static int resolve_bearer(const identity_opts_t *opts, const char *token, identity_t *who,
                          unsigned *status, si_error_t *err)
{
    token_claims_t claims;
    if (token_gate_verify(opts->tokens, token, time(NULL), &claims, status, err) < 0)
        return -1;
    who->uid = claims.uid;
    who->gid = claims.gid;
    who->method = "bearer";
    snprintf(who->scope, sizeof(who->scope), "%s", claims.scope);
    return 0;
}

bool identity_authenticate(const identity_opts_t *opts, http_request_t *req, identity_t *who)
{
    unsigned status;
    si_error_t err;
    const char *munge = http_request_header(req, IDENTITY_HEADER);
    const char *bearer = munge ? NULL : token_bearer_of(http_request_header(req, "Authorization"));
    /* the connection's memo: a credential decoded once on it is taken
     * again, on it alone, until it expires (identity.h) */
    identity_memo_t *memo = munge ? http_request_connection_memo(req, sizeof(*memo)) : NULL;
    time_t expires = 0;
    int rc = 0;
    if (bearer)
        rc = resolve_bearer(opts, bearer, who, &status, &err);
    else if (!memo || !identity_memo_recall(memo, munge, time(NULL), who)) {
        rc = resolve(opts, munge, http_request_peer(req), who, &expires, &status, &err);
        if (rc == 0 && memo)
            identity_memo_keep(memo, munge, who, expires);
    }
    if (rc < 0) {
        if (status == 401 && bearer)
            http_add_header(req, "WWW-Authenticate", "Bearer error=\"invalid_token\"");
        else if (status == 401)
            http_add_header(req, "WWW-Authenticate", "MUNGE");
        http_respond_error(req, status, "%s", err.text);
        return false;
    }
    http_request_note(req, "uid=%u(%s)", (unsigned)who->uid, who->method);
    return true;
}
