/* Allocator and local context (sbatch, salloc, srun), as the submitting
 * user: the stage request is submitted now, so that tape recall overlaps
 * the queue wait; stageind's answer decides whether the job may be
 * submitted at all (an unknown dataset, or one the user may not read). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "spank/plugin.h"
#include "stagein/stage_args.h"

static json_t *request_body(const plugin_t *p, const spank_stage_in_t *in, char **manifest,
                            si_error_t *err)
{
    stage_opts_t o = {
        .datasets = (const char **)in->datasets,
        .ndatasets = in->ndatasets,
        .has_priority = true,
        .priority = p->conf.priority,
    };
    if (in->manifest_path) {
        if (!(*manifest = stage_read_manifest(in->manifest_path, err)))
            return NULL;
        o.manifest = *manifest;
    }
    return stage_request_body(&o, err);
}

int alloc_submit(spank_t sp, plugin_t *p)
{
    if (!p->opts.stage_in)
        return 0;
    spank_stage_in_t in = {0};
    char *manifest = NULL;
    json_t *body = NULL;
    char *text = NULL;
    client_t *c = NULL;
    client_reply_t r = {0};
    si_error_t err;
    int rc = -1;
    if (spank_stage_in_parse(p->opts.stage_in, &in, &err) < 0 ||
        !(body = request_body(p, &in, &manifest, &err)) || !(c = plugin_client(p, &err)))
        goto done;
    if (!(text = json_dumps(body, JSON_COMPACT))) {
        si_errprintf(&err, "out of memory");
        goto done;
    }
    client_request_t rq = {.method = "POST", .path = "/api/v1/stage", .json_body = text};
    if (client_send(c, &rq, &r, &err) < 0)
        goto done;
    const char *id = json_string_value(json_object_get(r.json, "requestId"));
    if (!id) {
        si_errprintf(&err, "stageind's answer names no request id: %.200s", r.body);
        goto done;
    }
    spank_err_t src = spank_job_control_setenv(sp, PLUGIN_REQUEST_VAR, id, 1);
    if (src != ESPANK_SUCCESS) {
        /* Nothing on the node could find this request: give it back. */
        si_errprintf(&err, "cannot pass request %s to the job: %s", id, spank_strerror(src));
        char path[128];
        snprintf(path, sizeof(path), "/api/v1/release/%s", id);
        client_request_t rel = {.method = "POST", .path = path};
        client_reply_t rr = {0};
        si_error_t ignored;
        client_send(c, &rel, &rr, &ignored);
        client_reply_free(&rr);
        goto done;
    }
    slurm_info("%s: stage request %s: %lld files, %lld bytes", PLUGIN_NAME, id,
               (long long)json_integer_value(json_object_get(r.json, "files")),
               (long long)json_integer_value(json_object_get(r.json, "bytes")));
    rc = 0;
done:
    if (rc < 0)
        slurm_error("%s: --stage-in=%s refused: %s", PLUGIN_NAME, p->opts.stage_in, err.text);
    client_reply_free(&r);
    client_free(c);
    free(text);
    json_decref(body);
    free(manifest);
    spank_stage_in_free(&in);
    return rc;
}
