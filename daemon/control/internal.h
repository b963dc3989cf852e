/* The control context and its handlers, shared by the control API's own files
 * only: control.c (lifecycle, the route table) calls the handlers in stage.c
 * and admin.c, which call the helpers in handler.c; never back up. */
#ifndef STAGEIN_CONTROL_INTERNAL_H
#define STAGEIN_CONTROL_INTERNAL_H

#include <pthread.h>
#include <time.h>

#include <openssl/evp.h>

#include "common/groups.h"
#include "daemon/control/control.h"
#include "daemon/control/identity.h"
#include "daemon/http/server.h"

#define PRIORITY_MIN -1000
#define PRIORITY_MAX 1000
#define ARCHIVEINFO_MAX 10000

struct control {
    pthread_mutex_t lock;          /* the catalog connection is used by one thread at a time */
    catalog_t *cat;
    requests_t *requests;
    si_log_t *log;
    char *munge_socket;
    bool peercred;
    int64_t pin_default, pin_max;
    http_server_t *server;
    control_metrics_fn metrics_hook;
    void (*stage_hook)(void *arg);
    void *stage_hook_arg;
    void *metrics_arg;
    time_t started;
    int64_t cred_default, cred_max;
    si_session_keys_t *sessions;   /* NULL: no S3 endpoint */
    char *s3_url, *s3_region;
    uint64_t cache_capacity;
    uint64_t max_user_pinned_bytes;
    si_groups_t *groups;           /* the callers' supplementary groups, cached */
    control_holder_fn holder_hook;
    void *holder_arg;
    control_eta_fn eta_hook;
    void *eta_arg;
    /* the settings callers are identified by, under their own lock (held
     * briefly) so that identification happens outside the catalog's lock */
    pthread_mutex_t settings;
    token_gate_t *gate;            /* bearer token issuers and mapping */
    bool own_gate;                 /* made here (no control_opts_t.token_gate) */
    char *sitename;
    EVP_PKEY *token_key;           /* stageind's own; NULL: it signs no tokens */
    char *token_pub;               /* its public half, PEM */
};

#define TOKEN_DEFAULT_SCOPE "storage.stage:/ storage.read:/"

#define GROUPS_TTL_S 60.0
#define SUBMISSION_MAX 95

/* handler.c */
/* Resolves the caller or answers 401/503; true when the handler may go on.
 * Called without the catalog lock: MUNGE decoding and token signatures
 * proceed in parallel with other callers' catalog work. */
bool control_authenticate(control_t *c, http_request_t *req, identity_t *who);
/* Answers a failed handler: errnum's status (control_status_for_errno), or
 * 503 with Retry-After while the catalog is unreachable (nothing was done:
 * the client retries). */
void control_respond_failure(control_t *c, http_request_t *req, int errnum, const si_error_t *err);
/* 503 naming since when the catalog is unreachable, and true, if it is. */
bool control_catalog_unreachable(control_t *c, http_request_t *req);
/* Reads the integer field name of root into *out when present (0: absent, left
 * as is); -1 when it is not an integer in [min, max]. */
int control_int_field(json_t *root, const char *name, int64_t min, int64_t max, int64_t *out,
                      si_error_t *err);
/* Whether name is one of the NULL-terminated names. */
bool control_listed(const char *const *names, const char *name);

/* stage.c */
void control_on_stage(http_request_t *req, void *arg);
void control_on_status(http_request_t *req, void *arg);
void control_on_bind_job(http_request_t *req, void *arg);
void control_on_cancel(http_request_t *req, void *arg);
void control_on_release(http_request_t *req, void *arg);
void control_on_delete(http_request_t *req, void *arg);
void control_on_archiveinfo(http_request_t *req, void *arg);

/* admin.c */
void control_on_discovery(http_request_t *req, void *arg);
void control_on_requests(http_request_t *req, void *arg);
void control_on_queue(http_request_t *req, void *arg);
void control_on_metrics(http_request_t *req, void *arg);
void control_on_credentials(http_request_t *req, void *arg);
void control_on_token(http_request_t *req, void *arg);
void control_on_token_key(http_request_t *req, void *arg);

#endif
