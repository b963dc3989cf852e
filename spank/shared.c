/* The helpers the plugin's context files share (shared.h). */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "spank/shared.h"
#include "stagein/stage_args.h"

client_t *plugin_client(const plugin_t *p, si_error_t *err)
{
    client_opts_t o = {
        .endpoint = p->conf.endpoint,
        .source = "the endpoint= argument in plugstack.conf",
        .munge_socket = p->conf.munge_socket,
        .timeout_s = CLIENT_DEFAULT_TIMEOUT,
    };
    return client_new(&o, err);
}

int plugin_stagein_argv(const plugin_t *p, char **argv)
{
    int n = 0;
    argv[n++] = (char *)p->conf.stagein;
    if (p->conf.config[0]) {
        argv[n++] = "--config";
        argv[n++] = (char *)p->conf.config;
    }
    return n;
}

int plugin_job_ids(spank_t sp, char job[32], uid_t *uid, gid_t *gid, si_error_t *err)
{
    uint32_t id;
    spank_err_t rc;
    if ((rc = spank_get_item(sp, S_JOB_ID, &id)) != ESPANK_SUCCESS)
        return si_errprintf(err, "no job id from Slurm: %s", spank_strerror(rc));
    if ((rc = spank_get_item(sp, S_JOB_UID, uid)) != ESPANK_SUCCESS)
        return si_errprintf(err, "no job uid from Slurm: %s", spank_strerror(rc));
    if ((rc = spank_get_item(sp, S_JOB_GID, gid)) != ESPANK_SUCCESS)
        return si_errprintf(err, "no job gid from Slurm: %s", spank_strerror(rc));
    snprintf(job, 32, "%u", id);
    return 0;
}

static json_t *request_body(const plugin_t *p, const spank_stage_in_t *in, char **manifest,
                            bool with_submission, si_error_t *err)
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
    json_t *body = stage_request_body(&o, err);
    if (!body || !with_submission)
        return body;
    char host[64] = "", submission[96];
    gethostname(host, sizeof(host) - 1);
    host[strcspn(host, ":")] = '\0';
    snprintf(submission, sizeof(submission), "%.60s:%ld", host[0] ? host : "unknown",
             (long)getsid(0));
    if (json_object_set_new(body, "submission", json_string(submission)) < 0) {
        json_decref(body);
        si_errprintf(err, "out of memory");
        return NULL;
    }
    return body;
}

json_t *plugin_request_body(const plugin_t *p, const char *stage_in, char **manifest,
                            bool with_submission, si_error_t *err)
{
    spank_stage_in_t in = {0};
    if (spank_stage_in_parse(stage_in, &in, err) < 0)
        return NULL;
    json_t *body = request_body(p, &in, manifest, with_submission, err);
    spank_stage_in_free(&in);
    return body;
}
