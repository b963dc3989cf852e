/* Job script context (prolog and epilog), as root on the node. Neither may
 * fail for an ordinary error: a failing prolog or epilog of a required
 * plugin drains the node. Problems are logged and recorded in the job's
 * record instead; user_init fails the step with the reason. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "spank/agent.h"
#include "spank/jobrec.h"
#include "spank/plugin.h"
#include "spank/run.h"
#include "stagein/progress.h"

#define POLL_S 1.0
#define LOG_EVERY_S 10.0

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void record(const plugin_t *p, const char *job, const char *key, const char *value)
{
    si_error_t err;
    if (jobrec_set(p->conf.run_dir, job, key, value, &err) < 0)
        slurm_error("%s: job %s: %s", PLUGIN_NAME, job, err.text);
}

static int fetch_status(client_t *c, const char *request, progress_status_t *s, si_error_t *err)
{
    char path[128];
    snprintf(path, sizeof(path), "/api/v1/stage/%s", request);
    client_request_t rq = {.method = "GET", .path = path};
    client_reply_t r = {0};
    int rc = client_send(c, &rq, &r, err);
    if (rc == 0)
        rc = progress_status_from_json(r.json, s, err);
    client_reply_free(&r);
    return rc;
}

/* The request was made at submission, before the job had an id: tell
 * stageind which job it is (shown in its queue and views). Only logged when
 * it fails: the staging goes on either way. */
static void bind_job(client_t *c, const char *job, const char *request)
{
    char path[128], body[96];
    snprintf(path, sizeof(path), "/api/v1/stage/%s/job", request);
    snprintf(body, sizeof(body), "{\"job\": \"%s\"}", job);
    client_request_t rq = {.method = "POST", .path = path, .json_body = body};
    client_reply_t r = {0};
    si_error_t err;
    if (client_send(c, &rq, &r, &err) < 0)
        slurm_error("%s: job %s: binding request %s to it: %s", PLUGIN_NAME, job, request,
                    err.text);
    client_reply_free(&r);
}

/* Waits up to the configured limit; the outcome goes to the record as
 * staging=COMPLETED|FAILED|CANCELLED|RELEASED|TIMEOUT|ERROR. */
static const char *wait_staging(const plugin_t *p, client_t *c, const char *job,
                                const char *request)
{
    progress_rate_t rate;
    progress_rate_init(&rate);
    double start = now_s(), logged = -LOG_EVERY_S;
    char line[256];
    si_error_t err;
    for (;;) {
        progress_status_t s;
        if (fetch_status(c, request, &s, &err) < 0) {
            slurm_error("%s: job %s: request %s: %s", PLUGIN_NAME, job, request, err.text);
            record(p, job, "staging_error", err.text);
            return "ERROR";
        }
        double t = now_s();
        progress_rate_add(&rate, t - start, s.bytes_done);
        bool final = progress_state_final(s.state);
        if (final || t - logged >= LOG_EVERY_S) {
            slurm_info("%s: job %s: %s", PLUGIN_NAME, job,
                       progress_line(&s, progress_rate(&rate), line, sizeof(line)));
            logged = t;
        }
        if (final)
            return strcmp(s.state, "COMPLETED") == 0   ? "COMPLETED"
                   : strcmp(s.state, "FAILED") == 0    ? "FAILED"
                   : strcmp(s.state, "CANCELLED") == 0 ? "CANCELLED"
                                                       : "RELEASED";
        if (t - start >= (double)p->conf.wait_s) {
            slurm_info("%s: job %s: request %s not staged within %lld s", PLUGIN_NAME, job,
                       request, (long long)p->conf.wait_s);
            return "TIMEOUT";
        }
        usleep((useconds_t)(POLL_S * 1e6));
    }
}

static int job_gpu(spank_t sp, const plugin_t *p)
{
    struct spank_option opt = {"stage-gpu", "N", "", 2, 0, NULL};
    char *value = NULL;
    int gpu = p->conf.gpu;
    si_error_t err;
    if (spank_option_getopt(sp, &opt, &value) == ESPANK_SUCCESS &&
        spank_gpu_parse(value, &gpu, &err) < 0)
        gpu = p->conf.gpu;
    return gpu;
}

/* The node agent for the job. */
static void start_node_agent(spank_t sp, const plugin_t *p, const char *job, const char *request,
                             uid_t uid, gid_t gid)
{
    agent_job_t a = {.conf = &p->conf, .job = job, .request = request, .uid = uid, .gid = gid,
                     .gpu = job_gpu(sp, p)};
    si_error_t why;
    int rc = agent_start(&a, &why);
    if (rc == 1)
        slurm_info("%s: job %s: node agent started", PLUGIN_NAME, job);
    else if (rc == 0)
        slurm_info("%s: job %s: %s", PLUGIN_NAME, job, why.text);
    else {
        slurm_error("%s: job %s: node agent: %s", PLUGIN_NAME, job, why.text);
        record(p, job, "agent_note", why.text);
    }
}

int job_script_prolog(spank_t sp, plugin_t *p)
{
    const char *request = getenv(PLUGIN_REQUEST_SCRIPT_VAR);
    if (!request || !*request)
        return 0;
    char job[32];
    uid_t uid;
    gid_t gid;
    si_error_t err;
    if (plugin_job_ids(sp, job, &uid, &gid, &err) < 0) {
        slurm_error("%s: request %s: %s", PLUGIN_NAME, request, err.text);
        return 0;
    }
    record(p, job, "request", request);
    slurm_info("%s: job %s is request %s; waiting up to %lld s", PLUGIN_NAME, job, request,
               (long long)p->conf.wait_s);
    client_t *c = plugin_client(p, &err);
    if (!c) {
        slurm_error("%s: job %s: %s", PLUGIN_NAME, job, err.text);
        record(p, job, "staging_error", err.text);
        record(p, job, "staging", "ERROR");
        return 0;
    }
    bind_job(c, job, request);
    const char *outcome = wait_staging(p, c, job, request);
    client_free(c);
    record(p, job, "staging", outcome);
    if (strcmp(outcome, "COMPLETED") == 0 ||
        (strcmp(outcome, "TIMEOUT") == 0 && p->conf.on_timeout == SPANK_ON_TIMEOUT_CONTINUE))
        start_node_agent(sp, p, job, request, uid, gid);
    return 0;
}

/* `stagein push --wait` as the user: returns once every file is durable. */
static void push_stage_out(const plugin_t *p, const spank_stage_out_t *o, const char *job,
                           uid_t uid, gid_t gid)
{
    char *argv[16];
    int n = 0;
    argv[n++] = (char *)p->conf.stagein;
    if (p->conf.config[0]) {
        argv[n++] = "--config";
        argv[n++] = (char *)p->conf.config;
    }
    argv[n++] = "push";
    argv[n++] = "--endpoint";
    argv[n++] = (char *)p->conf.endpoint;
    argv[n++] = "--dataset";
    argv[n++] = (char *)o->dataset;
    argv[n++] = "--wait";
    argv[n++] = (char *)o->path;
    argv[n] = NULL;
    run_as_t as = {.uid = uid, .gid = gid, .timeout_s = (double)p->conf.push_timeout_s};
    char out[4096];
    si_error_t err;
    int rc = run_command(&as, argv, out, sizeof(out), &err);
    if (rc == 0) {
        slurm_info("%s: job %s: --stage-out %s pushed as dataset %s (durable)", PLUGIN_NAME, job,
                   o->path, o->dataset);
        return;
    }
    for (char *line = strtok(out, "\n"); rc > 0 && line; line = strtok(NULL, "\n"))
        slurm_error("%s: job %s: stagein push: %s", PLUGIN_NAME, job, line);
    slurm_error("%s: job %s: --stage-out %s as dataset %s failed: %s", PLUGIN_NAME, job,
                o->path, o->dataset, rc < 0 ? err.text : "stagein push failed");
}

static void stage_out(spank_t sp, const plugin_t *p, const char *job, uid_t uid, gid_t gid)
{
    struct spank_option opt = {"stage-out", "PATH[:DATASET][,...]", "", 1, 0, NULL};
    char *value = NULL;
    if (spank_option_getopt(sp, &opt, &value) != ESPANK_SUCCESS || !value)
        return;
    spank_stage_out_t out[PLUGIN_STAGE_OUT_MAX];
    size_t n = 0;
    si_error_t err;
    if (spank_stage_out_parse(value, job, out, PLUGIN_STAGE_OUT_MAX, &n, &err) < 0) {
        slurm_error("%s: job %s: %s", PLUGIN_NAME, job, err.text);
        return;
    }
    for (size_t i = 0; i < n; i++)
        push_stage_out(p, &out[i], job, uid, gid);
}

static void release_request(const plugin_t *p, const char *job, const char *request)
{
    si_error_t err;
    client_t *c = plugin_client(p, &err);
    if (!c) {
        slurm_error("%s: job %s: cannot release request %s: %s", PLUGIN_NAME, job, request,
                    err.text);
        return;
    }
    char path[128];
    snprintf(path, sizeof(path), "/api/v1/release/%s", request);
    client_request_t rq = {.method = "POST", .path = path};
    client_reply_t r = {0};
    if (client_send(c, &rq, &r, &err) == 0)
        slurm_info("%s: job %s: request %s released", PLUGIN_NAME, job, request);
    else if (r.status != 409) /* 409: released already (an earlier epilog) */
        slurm_error("%s: job %s: cannot release request %s: %s", PLUGIN_NAME, job, request,
                    err.text);
    client_reply_free(&r);
    client_free(c);
}

int job_script_epilog(spank_t sp, plugin_t *p)
{
    const char *request = getenv(PLUGIN_REQUEST_SCRIPT_VAR);
    char job[32];
    uid_t uid;
    gid_t gid;
    si_error_t err;
    if (plugin_job_ids(sp, job, &uid, &gid, &err) < 0) {
        slurm_error("%s: epilog: %s", PLUGIN_NAME, err.text);
        return 0;
    }
    stage_out(sp, p, job, uid, gid);
    agent_stop(&p->conf, job);
    if (request && *request)
        release_request(p, job, request);
    if (jobrec_remove(p->conf.run_dir, job, &err) < 0)
        slurm_error("%s: job %s: %s", PLUGIN_NAME, job, err.text);
    return 0;
}
