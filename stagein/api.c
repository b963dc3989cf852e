/* The control API's routes (api.h). */
#define _GNU_SOURCE
#include "config.h"
#include "stagein/api.h"

#include <stdlib.h>
#include <string.h>

static int call(client_t *c, const char *method, const char *path, const char *body,
                client_reply_t *r, si_error_t *err)
{
    client_request_t rq = {.method = method, .path = path, .json_body = body};
    return client_send(c, &rq, r, err);
}

/* method to prefix + the id escaped + suffix. */
static int send_id(client_t *c, const char *method, const char *prefix, const char *id,
                   const char *suffix, const char *body, client_reply_t *r, si_error_t *err)
{
    char *e = client_escape(id ? id : ""), *path = NULL;
    int rc;
    if (!e || asprintf(&path, "%s%s%s", prefix, e, suffix) < 0) {
        memset(r, 0, sizeof(*r));
        path = NULL;
        rc = si_errprintf(err, "out of memory");
    } else {
        rc = call(c, method, path, body, r, err);
    }
    free(e);
    free(path);
    return rc;
}

int api_stage_submit(client_t *c, const char *body, client_reply_t *r, si_error_t *err)
{
    return call(c, "POST", "/api/v1/stage", body, r, err);
}

int api_stage_status(client_t *c, const char *id, client_reply_t *r, si_error_t *err)
{
    return send_id(c, "GET", "/api/v1/stage/", id, "", NULL, r, err);
}

int api_stage_cancel(client_t *c, const char *id, const char *body, client_reply_t *r,
                     si_error_t *err)
{
    return send_id(c, "POST", "/api/v1/stage/", id, "/cancel", body, r, err);
}

int api_stage_bind(client_t *c, const char *id, const char *body, client_reply_t *r,
                   si_error_t *err)
{
    return send_id(c, "POST", "/api/v1/stage/", id, "/job", body, r, err);
}

int api_release(client_t *c, const char *id, const char *body, client_reply_t *r,
                si_error_t *err)
{
    return send_id(c, "POST", "/api/v1/release/", id, "", body, r, err);
}

int api_queue(client_t *c, client_reply_t *r, si_error_t *err)
{
    return call(c, "GET", "/api/v1/queue", NULL, r, err);
}

int api_requests_all(client_t *c, client_reply_t *r, si_error_t *err)
{
    return call(c, "GET", "/api/v1/requests?all=1", NULL, r, err);
}

int api_push_file(client_t *c, const api_push_file_t *f, client_reply_t *r, si_error_t *err)
{
    const char *push = f->push ? f->push : "";
    char *ds = client_escape(f->dataset), *key = client_escape(f->key), *push_e = client_escape(push);
    char *mode = f->mode ? client_escape(f->mode) : NULL;
    char *path = NULL, *sum = NULL, *mtime = NULL;
    int rc = -1;
    memset(r, 0, sizeof(*r));
    if (!ds || !key || !push_e || (f->mode && !mode) ||
        asprintf(&path, "/api/v1/push?dataset=%s&key=%s%s%s%s%s", ds, key, *push ? "&push=" : "",
                 push_e, mode ? "&mode=" : "", mode ? mode : "") < 0 ||
        (f->checksum ? asprintf(&sum, "X-Stagein-Checksum: %s", f->checksum)
                     : asprintf(&sum, "X-Stagein-Size: %lld", (long long)f->size)) < 0 ||
        asprintf(&mtime, "X-Stagein-Mtime: %lld", (long long)f->mtime) < 0) {
        si_errprintf(err, "out of memory");
        goto done;
    }
    const char *headers[] = {sum, mtime, NULL};
    client_request_t rq = {.method = "POST", .path = path, .upload = f->body,
                           .upload_size = f->size, .headers = headers,
                           .upload_sum_trailer =
                               !f->checksum && f->sent_checksum ? "X-Stagein-Checksum" : NULL,
                           .upload_sum = f->checksum ? NULL : f->sent_checksum};
    rc = client_send(c, &rq, r, err);
done:
    free(ds);
    free(key);
    free(push_e);
    free(mode);
    free(path);
    free(sum);
    free(mtime);
    return rc;
}

int api_push_status(client_t *c, const char *id, client_reply_t *r, si_error_t *err)
{
    return send_id(c, "GET", "/api/v1/push/", id, "", NULL, r, err);
}

int api_token(client_t *c, const char *body, client_reply_t *r, si_error_t *err)
{
    return call(c, "POST", "/api/v1/token", body, r, err);
}

int api_credentials(client_t *c, client_reply_t *r, si_error_t *err)
{
    return call(c, "POST", "/api/v1/credentials", "{}", r, err);
}

int api_ui_login(client_t *c, client_reply_t *r, si_error_t *err)
{
    return call(c, "POST", "/api/v1/ui/login", "{}", r, err);
}

int api_metrics(client_t *c, client_reply_t *r, si_error_t *err)
{
    client_request_t rq = {.method = "GET", .path = "/metrics", .anonymous = true};
    return client_send(c, &rq, r, err);
}
