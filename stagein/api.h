/* The control API's routes, written once: one typed call per route of
 * stageind's HTTP API (doc/control-api.md) that the CLI, the SPANK plugin
 * and libstagein use; each builds the path (ids and names escaped) and
 * sends it with client_send(). Every call returns as client_send() does: 0
 * when stageind answered 2xx, -1 with err otherwise; the reply is filled as
 * far as the call got, to free with client_reply_free() either way. */
#ifndef STAGEIN_API_H
#define STAGEIN_API_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/error.h"
#include "stagein/client.h"

/* ---- stage requests ---------------------------------------------------------- */

/* POST /api/v1/stage: body is the request's JSON (stage_request_body()). */
int api_stage_submit(client_t *c, const char *body, client_reply_t *r, si_error_t *err);
/* GET /api/v1/stage/{id}: the request's status and files. */
int api_stage_status(client_t *c, const char *id, client_reply_t *r, si_error_t *err);
/* POST /api/v1/stage/{id}/cancel: body NULL (none) or JSON. */
int api_stage_cancel(client_t *c, const char *id, const char *body, client_reply_t *r,
                     si_error_t *err);
/* POST /api/v1/stage/{id}/job: body names the job (and array) that holds it. */
int api_stage_bind(client_t *c, const char *id, const char *body, client_reply_t *r,
                   si_error_t *err);
/* POST /api/v1/release/{id}: body NULL (no body), "{}", or names the job
 * that lets go. */
int api_release(client_t *c, const char *id, const char *body, client_reply_t *r,
                si_error_t *err);
/* The calls above that POST to a request: the same shape. */
typedef int (*api_post_fn)(client_t *c, const char *id, const char *body, client_reply_t *r,
                           si_error_t *err);

/* GET /api/v1/queue. */
int api_queue(client_t *c, client_reply_t *r, si_error_t *err);
/* GET /api/v1/requests?all=1: every request, finished and expired ones too. */
int api_requests_all(client_t *c, client_reply_t *r, si_error_t *err);

/* ---- push ------------------------------------------------------------------------ */

/* One file of a push: POST /api/v1/push?dataset=&key=[&push=][&mode=]
 * with the file as the body. */
typedef struct {
    const char *dataset, *key;
    const char *push;          /* the push to add the file to; NULL or "": a new one */
    const char *mode;          /* NULL: stageind's default */
    FILE *body;                /* upload_size bytes, streamed */
    int64_t size;
    const char *checksum;      /* "sha256:HEX": X-Stagein-Checksum */
    int64_t mtime;             /* X-Stagein-Mtime */
    /* checksum NULL: the body hashed as it is sent, the hash sent after it
     * (the X-Stagein-Checksum trailer, the size in X-Stagein-Size) and
     * written here (SI_CHECKSUM_TEXT_MAX bytes); one read of the file */
    char *sent_checksum;
} api_push_file_t;

int api_push_file(client_t *c, const api_push_file_t *f, client_reply_t *r, si_error_t *err);
/* GET /api/v1/push/{id}. */
int api_push_status(client_t *c, const char *id, client_reply_t *r, si_error_t *err);

/* ---- credentials, the status page, metrics ------------------------------------ */

/* POST /api/v1/token: body (JSON) may name the lifetime and scope. */
int api_token(client_t *c, const char *body, client_reply_t *r, si_error_t *err);
/* POST /api/v1/credentials: short-lived S3 session credentials. */
int api_credentials(client_t *c, client_reply_t *r, si_error_t *err);
/* POST /api/v1/ui/login: a one-time link to the status page. */
int api_ui_login(client_t *c, client_reply_t *r, si_error_t *err);
/* GET /metrics, without a credential. */
int api_metrics(client_t *c, client_reply_t *r, si_error_t *err);

#endif
