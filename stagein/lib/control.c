/* The control API half of libstagein: stage requests through stageind's
 * HTTP API, with the project's client (stagein/client.h). */
#include "config.h"
#include "stagein/lib/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "stagein/api.h"
#include "stagein/client.h"
#include "stagein/progress.h"
#include "common/clock.h"

#define WAIT_POLL_MIN_S 0.2
#define WAIT_POLL_MAX_S 2.0

static client_t *control(stagein_t *h, stagein_err_t *code)
{
    if (h->control)
        return h->control;
    if (!h->endpoint) {
        *code = lib_fail(h, STAGEIN_ERR_CONFIG,
                         "no control endpoint: set $STAGEIN_ENDPOINT or STAGEIN_OPT_ENDPOINT");
        return NULL;
    }
    client_opts_t opts = {.endpoint = h->endpoint, .source = "control endpoint",
                          .munge_socket = h->munge_socket,
                          .timeout_s = CLIENT_DEFAULT_TIMEOUT};
    si_error_t err;
    h->control = client_new(&opts, &err);
    if (!h->control)
        *code = lib_fail_err(h, STAGEIN_ERR_CONFIG, &err);
    return h->control;
}

/* The outcome of one call (stagein/api.h) with control()'s client; the
 * reply's JSON in *json (caller's reference) on success. */
static stagein_err_t outcome(stagein_t *h, int rc, client_reply_t *reply, const si_error_t *err,
                             json_t **json)
{
    stagein_err_t code = STAGEIN_SUCCESS;
    if (rc < 0)
        code = lib_fail_err(h, lib_code_of_http(reply->status), err);
    else if (!reply->json)
        code = lib_fail(h, STAGEIN_ERR_PROTOCOL, "%s: the answer is not JSON", reply->request);
    else if (json)
        *json = json_incref(reply->json);
    client_reply_free(reply);
    return code;
}

static bool valid_id(const char *id)
{
    return id && *id && strlen(id) < STAGEIN_ID_MAX && strspn(id,
        "0123456789abcdefABCDEF-") == strlen(id);
}

static stagein_err_t add_names(stagein_t *h, json_t *body, const char *field,
                               const char *const *names)
{
    if (!names || !names[0])
        return STAGEIN_SUCCESS;
    json_t *a = json_array();
    if (!a || json_object_set_new(body, field, a) < 0)
        return lib_fail(h, STAGEIN_ERR_NOMEM, "out of memory");
    for (const char *const *n = names; *n; n++) {
        if (!**n)
            return lib_fail(h, STAGEIN_ERR_ARGUMENT, "an empty name in %s", field);
        if (json_array_append_new(a, json_string(*n)) < 0)
            return lib_fail(h, STAGEIN_ERR_ARGUMENT, "%s: '%s' is not UTF-8", field, *n);
    }
    return STAGEIN_SUCCESS;
}

stagein_err_t stagein_request(stagein_t *h, const char *const *datasets,
                              const char *const *objects, char id[STAGEIN_ID_MAX])
{
    if (!h)
        return STAGEIN_ERR_ARGUMENT;
    h->error[0] = '\0';
    if (!id)
        return lib_fail(h, STAGEIN_ERR_ARGUMENT, "no buffer for the request id");
    if ((!datasets || !datasets[0]) && (!objects || !objects[0]))
        return lib_fail(h, STAGEIN_ERR_ARGUMENT, "a request names no dataset and no object");
    json_t *body = json_object(), *answer = NULL;
    char *text = NULL;
    stagein_err_t rc;
    if (!body) {
        rc = lib_fail(h, STAGEIN_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = add_names(h, body, "datasets", datasets)) != STAGEIN_SUCCESS ||
        (rc = add_names(h, body, "files", objects)) != STAGEIN_SUCCESS)
        goto done;
    if (!(text = json_dumps(body, JSON_COMPACT))) {
        rc = lib_fail(h, STAGEIN_ERR_NOMEM, "out of memory");
        goto done;
    }
    client_t *c = control(h, &rc);
    client_reply_t reply;
    si_error_t err;
    if (!c || (rc = outcome(h, api_stage_submit(c, text, &reply, &err), &reply, &err,
                            &answer)) != STAGEIN_SUCCESS)
        goto done;
    const char *got = json_string_value(json_object_get(answer, "requestId"));
    if (!valid_id(got)) {
        rc = lib_fail(h, STAGEIN_ERR_PROTOCOL, "stageind's answer names no valid requestId");
        goto done;
    }
    snprintf(id, STAGEIN_ID_MAX, "%s", got);
done:
    free(text);
    json_decref(body);
    json_decref(answer);
    return rc;
}

/* GET the request's status, or (release) POST its release; the answer's
 * JSON in *json (NULL: not wanted). */
static stagein_err_t request_call(stagein_t *h, const char *id, bool release, json_t **json)
{
    if (!h)
        return STAGEIN_ERR_ARGUMENT;
    h->error[0] = '\0';
    if (!valid_id(id))
        return lib_fail(h, STAGEIN_ERR_ARGUMENT, "'%s' is not a request id", id ? id : "(null)");
    stagein_err_t code = STAGEIN_SUCCESS;
    client_t *c = control(h, &code);
    if (!c)
        return code;
    client_reply_t reply;
    si_error_t err;
    int rc = release ? api_release(c, id, "{}", &reply, &err)
                     : api_stage_status(c, id, &reply, &err);
    return outcome(h, rc, &reply, &err, json);
}

static stagein_err_t get_status(stagein_t *h, const char *id, json_t **json)
{
    return request_call(h, id, false, json);
}

static stagein_err_t status_of(stagein_t *h, const json_t *j, stagein_status_t *out)
{
    progress_status_t p;
    si_error_t err;
    if (progress_status_from_json(j, &p, &err) < 0)
        return lib_fail(h, STAGEIN_ERR_PROTOCOL, "request status: %s", err.text);
    memset(out, 0, sizeof(*out));
    snprintf(out->id, sizeof(out->id), "%s", p.id);
    snprintf(out->state, sizeof(out->state), "%s", p.state);
    out->files_total = p.files_total;
    out->files_completed = p.files_completed;
    out->files_failed = p.files_failed;
    out->bytes_total = p.bytes_total;
    out->bytes_done = p.bytes_done;
    out->queue_position = p.queue_position;
    return STAGEIN_SUCCESS;
}

stagein_err_t stagein_status(stagein_t *h, const char *id, stagein_status_t *out)
{
    json_t *answer = NULL;
    if (h && !out)
        return lib_fail(h, STAGEIN_ERR_ARGUMENT, "no status to fill");
    stagein_err_t rc = get_status(h, id, &answer);
    if (rc == STAGEIN_SUCCESS)
        rc = status_of(h, answer, out);
    json_decref(answer);
    return rc;
}

stagein_err_t stagein_wait(stagein_t *h, const char *id, double timeout_s,
                           stagein_progress_fn progress, void *arg, stagein_status_t *out)
{
    stagein_status_t st;
    double start = si_mono_now(), pause = WAIT_POLL_MIN_S;
    for (;;) {
        stagein_err_t rc = stagein_status(h, id, &st);
        if (rc != STAGEIN_SUCCESS)
            return rc;
        if (out)
            *out = st;
        if (progress && progress(&st, arg) != 0)
            return lib_fail(h, STAGEIN_ERR_TIMEOUT, "request %s: stopped waiting", id);
        if (strcmp(st.state, "COMPLETED") == 0)
            return STAGEIN_SUCCESS;
        if (progress_state_final(st.state))
            return lib_fail(h, STAGEIN_ERR_FAILED, "request %s is %s (%lld of %lld files failed)",
                            id, st.state, (long long)st.files_failed,
                            (long long)st.files_total);
        if (timeout_s > 0 && si_mono_now() - start + pause > timeout_s)
            return lib_fail(h, STAGEIN_ERR_TIMEOUT, "request %s is still %s after %.0f s", id,
                            st.state, timeout_s);
        usleep((useconds_t)(pause * 1e6));
        pause = fmin(pause * 1.5, WAIT_POLL_MAX_S);
    }
}

stagein_err_t stagein_release(stagein_t *h, const char *id)
{
    return request_call(h, id, true, NULL);
}

void stagein_objects_free(stagein_object_t *objects, size_t count)
{
    for (size_t i = 0; objects && i < count; i++)
        free(objects[i].path);
    free(objects);
}

stagein_err_t stagein_request_objects(stagein_t *h, const char *id,
                                      stagein_object_t **objects, size_t *count)
{
    if (h && (!objects || !count))
        return lib_fail(h, STAGEIN_ERR_ARGUMENT, "nowhere to put the objects");
    json_t *answer = NULL;
    stagein_object_t *list = NULL;
    size_t n = 0;
    stagein_err_t rc = get_status(h, id, &answer);
    if (rc != STAGEIN_SUCCESS)
        goto error;
    json_t *files = json_object_get(answer, "files");
    if (!json_is_array(files)) {
        rc = lib_fail(h, STAGEIN_ERR_PROTOCOL, "request %s: the status lists no files", id);
        goto error;
    }
    list = calloc(json_array_size(files) + 1, sizeof(*list));
    if (!list) {
        rc = lib_fail(h, STAGEIN_ERR_NOMEM, "out of memory");
        goto error;
    }
    size_t i;
    json_t *f;
    json_array_foreach(files, i, f) {
        const char *path = json_string_value(json_object_get(f, "path"));
        json_t *size = json_object_get(f, "size");
        if (!path || !json_is_integer(size) || json_integer_value(size) < 0) {
            rc = lib_fail(h, STAGEIN_ERR_PROTOCOL, "request %s: file %zu has no path or size",
                          id, i);
            goto error;
        }
        /* the Tape REST API's absolute "/bucket/key"; the library names objects
         * "bucket/key" */
        if (path[0] == '/')
            path++;
        if (!(list[n].path = strdup(path))) {
            rc = lib_fail(h, STAGEIN_ERR_NOMEM, "out of memory");
            goto error;
        }
        list[n++].size = (uint64_t)json_integer_value(size);
    }
    json_decref(answer);
    *objects = list;
    *count = n;
    return STAGEIN_SUCCESS;
error:
    stagein_objects_free(list, n);
    json_decref(answer);
    return rc;
}

stagein_err_t lib_session_credentials(stagein_t *h)
{
    json_t *j = NULL;
    stagein_err_t code = STAGEIN_SUCCESS;
    client_t *c = control(h, &code);
    client_reply_t reply;
    si_error_t err;
    if (!c || (code = outcome(h, api_credentials(c, &reply, &err), &reply, &err, &j)) !=
                  STAGEIN_SUCCESS)
        return code;
    const char *key = json_string_value(json_object_get(j, "accessKeyId"));
    const char *secret = json_string_value(json_object_get(j, "secretAccessKey"));
    const char *url = json_string_value(json_object_get(j, "s3Endpoint"));
    const char *region = json_string_value(json_object_get(j, "region"));
    json_int_t expires = json_integer_value(json_object_get(j, "expires"));
    if (!key || !secret || !url || !region || expires <= 0) {
        json_decref(j);
        return lib_fail(h, STAGEIN_ERR_PROTOCOL, "POST /api/v1/credentials: the answer lacks "
                        "accessKeyId, secretAccessKey, s3Endpoint, region or expires");
    }
    if ((!h->s3_endpoint &&
         (code = stagein_set_option(h, STAGEIN_OPT_S3_ENDPOINT, url)) != STAGEIN_SUCCESS) ||
        (code = stagein_set_option(h, STAGEIN_OPT_S3_REGION, region)) != STAGEIN_SUCCESS ||
        (code = stagein_set_option(h, STAGEIN_OPT_S3_ACCESS_KEY, key)) != STAGEIN_SUCCESS ||
        (code = stagein_set_option(h, STAGEIN_OPT_S3_SECRET, secret)) != STAGEIN_SUCCESS) {
        json_decref(j);
        return code;
    }
    h->session_expires = (int64_t)expires;
    json_decref(j);
    return STAGEIN_SUCCESS;
}
