/* Who is calling: a MUNGE credential in the X-Stagein-Munge header, decoded
 * by the local munged; on the Unix socket, without a credential, the peer's
 * SO_PEERCRED. The client side encodes a fresh credential per request (a
 * credential decodes once: munged refuses replays). */
#ifndef STAGEIN_CONTROL_IDENTITY_H
#define STAGEIN_CONTROL_IDENTITY_H

#include <stdbool.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/munge_auth.h"
#include "daemon/control/token.h"
#include "daemon/http/server.h"

#define IDENTITY_HEADER SI_MUNGE_HEADER

typedef struct {
    uid_t uid;
    gid_t gid;
    const char *method;   /* "munge", "peercred" or "bearer" */
    /* a bearer token's scope (WLCG storage.stage:/path ...); others are unlimited */
    char scope[TOKEN_SCOPE_MAX];
} identity_t;

typedef struct {
    const char *munge_socket;  /* NULL: libmunge's default socket */
    bool peercred;             /* accept SO_PEERCRED on the Unix socket */
    token_gate_t *tokens;      /* NULL: no "Authorization: Bearer" */
} identity_opts_t;

/* 0 with *who filled, or -1 with *status (401: no or bad credential; 503:
 * munged unreachable) and the reason in err. */
int identity_resolve(const identity_opts_t *opts, const char *credential,
                     const http_peer_t *peer, identity_t *who, unsigned *status,
                     si_error_t *err);

/* Whether the caller may do op ("storage.stage", "storage.read") on the
 * absolute path "/bucket/key": always for MUNGE and peer credentials, by
 * the token's scope for a bearer token. */
bool identity_allows(const identity_t *who, const char *op, const char *path);

/* identity_resolve for an HTTP request (a bearer token in Authorization
 * when no MUNGE credential is given): on failure answers it (401 with
 * WWW-Authenticate: MUNGE or Bearer, 403 for an unmapped token, or 503) and returns false; on success notes the
 * caller in the access log and returns true. */
bool identity_authenticate(const identity_opts_t *opts, http_request_t *req, identity_t *who);

/* Decodes one credential; same results as identity_resolve. */
int identity_munge_decode(const char *munge_socket, const char *credential, uid_t *uid,
                          gid_t *gid, unsigned *status, si_error_t *err);

#endif
