/* Who is calling: a MUNGE credential in the X-Stagein-Munge header, decoded
 * by the local munged; on the Unix socket, without a credential, the peer's
 * SO_PEERCRED. A credential decodes once: munged refuses replays.
 *
 * Once per connection: a credential decoded on a keep-alive connection is
 * remembered there (its digest, uid, gid and expiry: the connection's memo,
 * http_request_connection_memo), and the same credential sent again on the
 * same connection is taken without asking munged, until the credential's
 * own expiry (encode time + TTL). Why this is safe: the identity always
 * comes from the very credential the request carries (a different one is
 * decoded, and may name another uid: no request inherits a connection's
 * identity); a connection is one peer's end to end, so what is re-sent on
 * it is no replay by a third party; on any other connection, or after the
 * connection closes, the same credential goes to munged again, which
 * refuses it as replayed; and it is never taken past its expiry. The CLI
 * (stagein/client.c) re-sends its credential on the connection it was
 * first sent on, which saves a munged round trip on each side per request
 * (tests/bench/push_checkpoint). */
#ifndef STAGEIN_CONTROL_IDENTITY_H
#define STAGEIN_CONTROL_IDENTITY_H

#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

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

/* The memo kept on a connection for its MUNGE credential (see above). */
#define IDENTITY_MEMO_KEY 41
typedef struct {
    char key[IDENTITY_MEMO_KEY];   /* 160 bits of the credential's sha256, hex; "": none */
    uid_t uid;
    gid_t gid;
    time_t expires;                 /* the credential's encode time + TTL */
} identity_memo_t;

/* True with *who filled when credential is the one m keeps and now is
 * before its expiry. */
bool identity_memo_recall(const identity_memo_t *m, const char *credential, time_t now,
                          identity_t *who);
/* m keeps credential, decoded as who, until expires (0: not kept). */
void identity_memo_keep(identity_memo_t *m, const char *credential, const identity_t *who,
                        time_t expires);

/* Decodes one credential; same results as identity_resolve. */
int identity_munge_decode(const char *munge_socket, const char *credential, uid_t *uid,
                          gid_t *gid, unsigned *status, si_error_t *err);

#endif
