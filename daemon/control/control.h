/* The control API: the WLCG Tape REST API v1 with stagein's extensions,
 * over the HTTP layer:
 *   GET  /.well-known/wlcg-tape-rest-api  the discovery document (no identity)
 *   POST /api/v1/stage              {"files": [{"path", "diskLifetime",
 *                                    "targetedMetadata": {SITENAME: {...}}}]}, and
 *                                    stagein's "datasets", "manifest", "job",
 *                                    "priority", "deadline", "pin_lifetime",
 *                                    "submission", "uid"/"gid" (root on behalf of a user)
 *   GET  /api/v1/stage/{id}          per-file state, onDisk, bytes, queue position, ETA
 *   POST /api/v1/stage/{id}/cancel   {} or {"paths": [...]}
 *   DELETE /api/v1/stage/{id}        cancel and release
 *   POST /api/v1/stage/{id}/job      {"job": ID, "array": ID}: the job (an array's task)
 *                                    that started with a request made at submission
 *   POST /api/v1/release/{id}        {}, {"paths": [...]} or {"job": ID}: that job no
 *                                    longer holds it
 *   GET  /api/v1/requests[?all=1]    the caller's requests (root: everyone's), active
 *                                    ones, or all=1 also finished and expired ones
 *   POST /api/v1/archiveinfo         {"paths": [...]} -> locality per file
 *   GET  /api/v1/queue               the active requests in queue order
 *   POST /api/v1/token               {"lifetime", "scope"} -> a bearer token stageind signs
 *   GET  /api/v1/token/key           its public key (PEM), for other services
 *   POST /api/v1/credentials         {"lifetime", "uid"/"gid"} -> short-lived S3
 *                                    credentials of the caller and the S3 endpoint
 *   GET  /metrics                    Prometheus text
 * Callers: MUNGE, SO_PEERCRED, or a bearer token (JWT, WLCG scopes). Every
 * 4xx answer is RFC 7807 problem+json and changes nothing. */
#ifndef STAGEIN_CONTROL_H
#define STAGEIN_CONTROL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <jansson.h>

#include "catalog/catalog.h"
#include "catalog/requests.h"
#include "common/table.h"
#include "common/error.h"
#include "common/log.h"
#include "common/aws/s3secrets.h"
#include "daemon/control/token.h"
#include "daemon/http/server.h"

typedef struct control control_t;

typedef struct {
    catalog_t *cat;                /* used under the control's lock */
    si_log_t *log;
    const char *munge_socket;      /* NULL: libmunge's default */
    bool peercred;                 /* trust SO_PEERCRED on the Unix socket */
    int64_t pin_lifetime_default;  /* seconds */
    int64_t pin_lifetime_max;      /* seconds */
    int64_t credentials_lifetime_default; /* seconds; S3 session credentials */
    int64_t credentials_lifetime_max;
    uint64_t cache_capacity;       /* bytes; a larger request is refused (0: no check) */
    uint64_t max_user_pinned_bytes; /* a user's staged bytes, all requests (0: no check) */
    const char *sitename;          /* the Tape REST API's sitename (targetedMetadata key);
                                      NULL: "stagein" */
    token_opts_t tokens;           /* bearer token issuers, mapping, audience, skew */
    token_gate_t *token_gate;      /* where the verifier made of them goes, shared with
                                      the S3 endpoint; NULL: the control's own */
    const char *token_key_path;    /* stageind's own signing key (made if missing), for
                                      POST /api/v1/token; NULL: no tokens of its own */
} control_opts_t;

/* The issuer of the tokens stageind signs itself. */
#define CONTROL_TOKEN_ISSUER "stageind"

/* Told when a job's holder went but its array still holds the request, so
 * the job reconciliation looks at the array now. */
typedef void (*control_holder_fn)(void *arg);

/* Seconds until the request is expected to be staged: 1 with *eta_s, 0
 * when nobody can tell. */
typedef int (*control_eta_fn)(void *arg, int64_t request_id, double *eta_s);

/* stageind's S3 endpoint, for the credentials route. */
typedef struct {
    si_session_keys_t *sessions;   /* borrowed */
    const char *url;               /* "http://host:port" that clients reach it at */
    const char *region;
} control_s3_t;

/* Appends Prometheus text (metrics the engine owns: drive states, mounts,
 * bytes read) to out; called under no lock of the control's. */
typedef void (*control_metrics_fn)(FILE *out, void *arg);

control_t *control_new(const control_opts_t *opts, si_error_t *err);
/* Registers the routes on server (before it starts); the server's counters
 * appear in /metrics. */
int control_routes(control_t *c, http_server_t *server, si_error_t *err);
/* Applies reloaded settings (munge socket, pin lifetimes, peercred, token
 * files, sitename); on error the running ones stay. */
int control_reconfigure(control_t *c, const control_opts_t *opts, si_error_t *err);
void control_set_metrics_hook(control_t *c, control_metrics_fn fn, void *arg);
void control_set_holder_hook(control_t *c, control_holder_fn fn, void *arg);
void control_set_eta_hook(control_t *c, control_eta_fn fn, void *arg);
/* fn(arg) after each stage request made (recall_service_kick: the recall
 * service looks for the new work at once). */
void control_set_stage_hook(control_t *c, void (*fn)(void *arg), void *arg);
/* Turns on POST /api/v1/credentials (404 while no S3 endpoint runs). */
int control_set_s3(control_t *c, const control_s3_t *s3, si_error_t *err);
void control_free(control_t *c);

#define CONTROL_DISCOVERY_PATH "/.well-known/wlcg-tape-rest-api"

/* The Tape REST API's discovery document: sitename and the endpoint
 * http://AUTHORITY/api/v1 (AUTHORITY "host:port"; "localhost" when it is
 * missing or holds other characters than a host's). */
json_t *control_discovery(const char *sitename, const char *authority);

/* ---- parsing, exposed for tests ------------------------------------------ */

typedef struct {
    json_t *root;                  /* owns the strings below */
    const char **datasets;
    size_t ndatasets;
    const char **files;            /* from "files" and the manifest */
    size_t nfiles;
    char *manifest_storage;
    const char *job;
    char job_buf[32];              /* a numeric job id as text */
    int priority;
    int64_t deadline;              /* 0: none */
    int64_t pin_lifetime;          /* 0: the configured default */
    bool on_behalf;
    uid_t uid;
    gid_t gid;
    const char *submission;        /* "host:sid" of a SPANK submission, or NULL */
} control_stage_t;

/* Parses and validates a stage body; errors name the field. Paths may be
 * absolute ("/bucket/key", the Tape REST API's form) or "bucket/key"; the
 * longest diskLifetime is the pin lifetime unless "pin_lifetime" is given;
 * targetedMetadata for sitename may carry job, priority, deadline,
 * pin_lifetime and submission (other sites' is ignored). */
int control_parse_stage(const char *body, size_t len, int64_t pin_lifetime_max,
                        const char *sitename, control_stage_t *out, si_error_t *err);
void control_stage_free(control_stage_t *st);

/* GET /api/v1/stage/{id}'s answer (eta_s < 0: not known); the status page
 * shows the same. */
json_t *control_status_json(const requests_status_t *st, double eta_s);
/* A table as the JSON rows the CLI's --json prints. */
json_t *control_table_json(si_table_t *t);

/* errno of a failed catalog call -> HTTP status. */
unsigned control_status_for_errno(int errnum);

#endif
