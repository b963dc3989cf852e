/* Allocator and local context (sbatch, salloc, srun), as the submitting
 * user: the stage request is submitted now, so that tape recall overlaps
 * the queue wait; stageind's answer decides whether the job may be
 * submitted at all (an unknown dataset, one the user may not read, more
 * than the cache holds). An srun inside an allocation (salloc, a batch
 * script) is a step of a job that has its request already: it inherits it
 * and never asks again. The request is held by this submission ("host:sid",
 * which stageind matches to the job Slurm creates) until the job's prolog
 * names the job. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "spank/plugin.h"
#include "spank/run.h"
#include "stagein/api.h"

/* srun with SLURM_JOB_ID set runs a step of an existing job. */
static bool inside_allocation(void)
{
    const char *job = getenv("SLURM_JOB_ID");
    return spank_context() == S_CTX_LOCAL && job && *job;
}

int alloc_submit(spank_t sp, plugin_t *p)
{
    if (inside_allocation()) {
        /* the first step of a salloc job runs the job's prolog on the node:
         * it learns the request from this step's control environment */
        const char *inherited = getenv(PLUGIN_REQUEST_JOB_VAR);
        if (inherited && *inherited &&
            spank_job_control_setenv(sp, PLUGIN_REQUEST_VAR, inherited, 1) != ESPANK_SUCCESS)
            slurm_error("%s: cannot pass request %s to the step", PLUGIN_NAME, inherited);
        if (p->opts.stage_in)
            slurm_verbose("%s: a step of job %s: it uses the job's stage request %s",
                          PLUGIN_NAME, getenv("SLURM_JOB_ID"),
                          inherited && *inherited ? inherited : "(none)");
        return 0;
    }
    if (!p->opts.stage_in)
        return 0;
    p->submitted_at = time(NULL);
    char *manifest = NULL;
    json_t *body = NULL;
    char *text = NULL;
    client_t *c = NULL;
    client_reply_t r = {0};
    si_error_t err;
    int rc = -1;
    if (!(body = plugin_request_body(p, p->opts.stage_in, &manifest, true, &err)) ||
        !(c = plugin_client(p, &err)))
        goto done;
    if (!(text = json_dumps(body, JSON_COMPACT))) {
        si_errprintf(&err, "out of memory");
        goto done;
    }
    if (api_stage_submit(c, text, &r, &err) < 0)
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
        client_reply_t rr;
        si_error_t ignored;
        api_release(c, id, NULL, &rr, &ignored);
        client_reply_free(&rr);
        goto done;
    }
    /* srun's steps and salloc's shell take their environment from this
     * process: they find the request the way a batch script does */
    setenv(PLUGIN_REQUEST_JOB_VAR, id, 1);
    snprintf(p->submitted, sizeof(p->submitted), "%s", id);
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
    return rc;
}

/* The job this sbatch submitted: the newest one of the user's from this
 * session, submitted since the request was made. */
static bool submitted_job(const plugin_t *p, uint32_t *job, uint32_t *array)
{
    job_info_msg_t *msg = NULL;
    if (slurm_load_job_user(&msg, (uint32_t)getuid(), SHOW_ALL) != 0 || !msg) {
        return false;
    }

    uint32_t sid = (uint32_t)getsid(0);
    bool found = false;
    for (uint32_t i = 0; i < msg->record_count; i++) {
        const slurm_job_info_t *j = &msg->job_array[i];
        if (j->alloc_sid != sid || j->submit_time < p->submitted_at - 1 ||
            (found && j->job_id < *job))
            continue;
        *job = j->job_id;
        *array = j->array_job_id;
        found = true;
    }
    slurm_free_job_info_msg(msg);
    return found;
}

/* In sbatch's exit libcurl and OpenSSL are gone (their atexit handlers ran
 * first): `stagein bind`, a process of its own, tells stageind. */
void alloc_exit(spank_t sp, plugin_t *p)
{
    (void)sp;
    uint32_t job = 0, array = 0;
    if (!submitted_job(p, &job, &array)) {
        /* stageind finds the job itself (job reconciliation) */
        slurm_verbose("%s: request %s: the submitted job is not known yet", PLUGIN_NAME,
                      p->submitted);
        return;
    }
    char jobs[16], arrays[16], out[512];
    snprintf(jobs, sizeof(jobs), "%u", job);
    snprintf(arrays, sizeof(arrays), "%u", array);
    char *argv[16];
    int n = plugin_stagein_argv(p, argv);
    argv[n++] = "bind";
    argv[n++] = p->submitted;
    argv[n++] = "--job";
    argv[n++] = jobs;
    if (array) {
        argv[n++] = "--array";
        argv[n++] = arrays;
    }
    argv[n++] = "--pending";
    argv[n++] = "--endpoint";
    argv[n++] = (char *)p->conf.endpoint;
    argv[n] = NULL;
    run_as_t as = {.uid = getuid(), .gid = getgid(), .timeout_s = 10};
    si_error_t err;
    int rc = run_command(&as, argv, out, sizeof(out), &err);
    if (rc != 0)
        slurm_verbose("%s: request %s: naming job %u: %s", PLUGIN_NAME, p->submitted, job,
                      rc < 0 ? err.text : out);
}
