/* Job script context (prolog and epilog), as root on the node. Neither may
 * fail for an ordinary error: a failing prolog or epilog of a required
 * plugin drains the node. Problems are logged and recorded in the job's
 * record instead; user_init fails the step with the reason.
 *
 * The prolog names the job (an array's task) to stageind, so the job holds
 * the request; waits for the data, across stageind restarts, showing the
 * progress in the job's comment (squeue/scontrol show it); and gives up at
 * once when stageind released the request (the job was cancelled). A
 * request whose pins expired while the job waited in the queue is staged
 * again. The epilog pushes --stage-out (a failure goes to the job's stderr
 * and comment) and lets go of the request; if stageind cannot be reached,
 * stageind's job reconciliation releases it when it sees the job ended. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "spank/agent.h"
#include "spank/jobrec.h"
#include "spank/plugin.h"
#include "spank/run.h"
#include "stagein/api.h"
#include "stagein/progress.h"
#include "common/clock.h"

#define POLL_S 1.0
#define LOG_EVERY_S 10.0
#define RETRY_MAX_S 8.0     /* longest pause between tries while stageind is away */
#define RELEASE_TRIES 3

static void record(const plugin_t *p, const char *job, const char *key, const char *value)
{
    si_error_t err;
    if (jobrec_set(p->conf.run_dir, job, key, value, &err) < 0)
        slurm_error("%s: job %s: %s", PLUGIN_NAME, job, err.text);
}

/* ---- stageind (stagein/api.h; a reply's status 0: it could not be reached) ------- */

static int fetch_status(client_t *c, const char *request, progress_status_t *s, bool *reached,
                        si_error_t *err)
{
    client_reply_t r;
    int rc = api_stage_status(c, request, &r, err);
    *reached = r.status != 0;
    if (rc == 0)
        rc = progress_status_from_json(r.json, s, err);
    client_reply_free(&r);
    return rc;
}

typedef enum { BIND_OK, BIND_UNREACHABLE, BIND_ENDED, BIND_ERROR } bind_t;

/* The job (an array's task) that started with the request made at
 * submission: from now on it holds the request. */
static bind_t bind_job(client_t *c, const char *job, const char *array, const char *request,
                       si_error_t *err)
{
    char body[160];
    if (array)
        snprintf(body, sizeof(body), "{\"job\": \"%s\", \"array\": \"%s\"}", job, array);
    else
        snprintf(body, sizeof(body), "{\"job\": \"%s\"}", job);
    client_reply_t r;
    int rc = api_stage_bind(c, request, body, &r, err);
    long status = r.status;
    client_reply_free(&r);
    if (rc == 0)
        return BIND_OK;
    return status == 0 ? BIND_UNREACHABLE : status == 409 ? BIND_ENDED : BIND_ERROR;
}

/* The job's --stage-in, asked again as root for the user (its pins expired
 * while the job waited in the queue). */
static int restage(spank_t sp, const plugin_t *p, client_t *c, const char *job, uid_t uid,
                   gid_t gid, char *request, size_t size, si_error_t *err)
{
    struct spank_option opt = {"stage-in", "DATASET[,...]|@MANIFEST", "", 1, 0, NULL};
    char *value = NULL;
    if (spank_option_getopt(sp, &opt, &value) != ESPANK_SUCCESS || !value)
        return si_errprintf(err, "the job's --stage-in is not known here");
    char *manifest = NULL, *text = NULL;
    json_t *body = plugin_request_body(p, value, &manifest, false, err);
    int rc = -1;
    if (!body)
        goto out;
    json_object_set_new(body, "job", json_string(job));
    json_object_set_new(body, "uid", json_integer(uid));
    json_object_set_new(body, "gid", json_integer(gid));
    if (!(text = json_dumps(body, JSON_COMPACT))) {
        si_errprintf(err, "out of memory");
        goto out;
    }
    client_reply_t r;
    if (api_stage_submit(c, text, &r, err) == 0) {
        const char *id = json_string_value(json_object_get(r.json, "requestId"));
        if (id && strlen(id) < size) {
            snprintf(request, size, "%s", id);
            rc = 0;
        } else {
            si_errprintf(err, "stageind's answer names no request id");
        }
    }
    client_reply_free(&r);
out:
    free(text);
    free(manifest);
    json_decref(body);
    return rc;
}

/* ---- the prolog ---------------------------------------------------------------- */

typedef struct {
    spank_t sp;
    plugin_t *p;
    client_t *c;
    char job[32];
    const char *array;         /* SLURM_ARRAY_JOB_ID, or NULL */
    uid_t uid;
    gid_t gid;
    char request[64];
    bool bound;
    char why[512];             /* the reason of an outcome other than COMPLETED */
} prolog_t;

/* Binds the job once stageind answers; a request that ended before the job
 * started (pins expired in the queue) is staged again. 0 bound or to be
 * retried (stageind away), -1 failed (why says it). */
static int ensure_bound(prolog_t *pr)
{
    if (pr->bound)
        return 0;
    si_error_t err;
    switch (bind_job(pr->c, pr->job, pr->array, pr->request, &err)) {
    case BIND_OK:
        pr->bound = true;
        return 0;
    case BIND_UNREACHABLE:
        return 0;
    case BIND_ENDED: {
        char old[64], ended[256];
        snprintf(old, sizeof(old), "%s", pr->request);
        snprintf(ended, sizeof(ended), "%s", err.text);
        if (restage(pr->sp, pr->p, pr->c, pr->job, pr->uid, pr->gid, pr->request,
                    sizeof(pr->request), &err) < 0) {
            snprintf(pr->why, sizeof(pr->why), "%s, and staging it again failed: %s", ended,
                     err.text);
            return -1;
        }
        slurm_info("%s: job %s: %s; staged again as request %s", PLUGIN_NAME, pr->job, ended,
                   pr->request);
        record(pr->p, pr->job, "request", pr->request);
        pr->bound = bind_job(pr->c, pr->job, pr->array, pr->request, &err) == BIND_OK;
        return 0;
    }
    case BIND_ERROR:
        break;
    }
    snprintf(pr->why, sizeof(pr->why), "binding request %s to the job: %s", pr->request,
             err.text);
    return -1;
}

static const char *final_outcome(prolog_t *pr, const progress_status_t *s)
{
    if (strcmp(s->state, "COMPLETED") == 0)
        return "COMPLETED";
    if (strcmp(s->state, "FAILED") == 0) {
        snprintf(pr->why, sizeof(pr->why), "%lld of %lld files failed (stagein status %s lists "
                 "them)", (long long)s->files_failed, (long long)s->files_total, pr->request);
        return "FAILED";
    }
    snprintf(pr->why, sizeof(pr->why), "%s", s->reason[0] ? s->reason : "by its owner");
    return strcmp(s->state, "CANCELLED") == 0 ? "CANCELLED" : "RELEASED";
}

/* Waits up to the configured limit; the outcome goes to the record as
 * staging=COMPLETED|FAILED|CANCELLED|RELEASED|TIMEOUT|ERROR. */
static const char *wait_staging(prolog_t *pr)
{
    const plugin_t *p = pr->p;
    progress_rate_t rate;
    progress_rate_init(&rate);
    double start = si_mono_now(), logged = -LOG_EVERY_S, pause = POLL_S;
    bool away = false;
    char line[256];
    si_error_t err;
    for (;;) {
        progress_status_t s;
        bool answered = true;
        if (ensure_bound(pr) < 0)
            return "ERROR";
        int rc = fetch_status(pr->c, pr->request, &s, &answered, &err);
        double t = si_mono_now();
        if (rc < 0 && answered) {
            snprintf(pr->why, sizeof(pr->why), "request %s: %s", pr->request, err.text);
            return "ERROR";
        }
        if (rc < 0) {
            /* stageind restarting: try again, less often, within the limit */
            if (!away)
                slurm_info("%s: job %s: stageind unreachable (%s); retrying for up to %lld s",
                           PLUGIN_NAME, pr->job, err.text,
                           (long long)(p->conf.wait_s - (int64_t)(t - start)));
            away = true;
            pause = pause * 2 > RETRY_MAX_S ? RETRY_MAX_S : pause * 2;
        } else {
            if (away)
                slurm_info("%s: job %s: stageind answers again", PLUGIN_NAME, pr->job);
            away = false;
            pause = POLL_S;
            progress_rate_add(&rate, t - start, s.bytes_done);
            bool final = progress_state_final(s.state);
            if (final || t - logged >= LOG_EVERY_S) {
                progress_line(&s, progress_rate(&rate), line, sizeof(line));
                slurm_info("%s: job %s: %s", PLUGIN_NAME, pr->job, line);
                if (!final)
                    job_comment(p, pr->job, "staging %s", line);
                logged = t;
            }
            if (final)
                return final_outcome(pr, &s);
        }
        if (t - start >= (double)p->conf.wait_s) {
            slurm_info("%s: job %s: request %s not staged within %lld s", PLUGIN_NAME, pr->job,
                       pr->request, (long long)p->conf.wait_s);
            snprintf(pr->why, sizeof(pr->why), "not staged within the prolog's limit of %lld s%s",
                     (long long)p->conf.wait_s, away ? " (stageind unreachable)" : "");
            return "TIMEOUT";
        }
        usleep((useconds_t)(pause * 1e6));
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
static void start_node_agent(const prolog_t *pr)
{
    agent_job_t a = {.conf = &pr->p->conf, .job = pr->job, .request = pr->request,
                     .uid = pr->uid, .gid = pr->gid, .gpu = job_gpu(pr->sp, pr->p)};
    si_error_t why;
    int rc = agent_start(&a, &why);
    if (rc == 1)
        slurm_info("%s: job %s: node agent started", PLUGIN_NAME, pr->job);
    else if (rc == 0)
        slurm_info("%s: job %s: %s", PLUGIN_NAME, pr->job, why.text);
    else {
        slurm_error("%s: job %s: node agent: %s", PLUGIN_NAME, pr->job, why.text);
        record(pr->p, pr->job, "agent_note", why.text);
    }
}

int job_script_prolog(spank_t sp, plugin_t *p)
{
    const char *request = getenv(PLUGIN_REQUEST_SCRIPT_VAR);
    if (!request || !*request)
        return 0;
    prolog_t pr = {.sp = sp, .p = p};
    si_error_t err;
    if (plugin_job_ids(sp, pr.job, &pr.uid, &pr.gid, &err) < 0) {
        slurm_error("%s: request %s: %s", PLUGIN_NAME, request, err.text);
        return 0;
    }
    /* an array's task holds the array's request: the prolog's environment
     * does not say which array, scontrol does */
    char array[32];
    const char *env_array = getenv("SLURM_ARRAY_JOB_ID");
    if (env_array && *env_array && strlen(env_array) < sizeof(array))
        snprintf(array, sizeof(array), "%s", env_array);
    else if (job_field(p, pr.job, "ArrayJobId", false, array, sizeof(array)) < 0)
        array[0] = '\0';
    pr.array = array[0] ? array : NULL;
    snprintf(pr.request, sizeof(pr.request), "%s", request);
    record(p, pr.job, "request", pr.request);
    slurm_info("%s: job %s%s%s is request %s; waiting up to %lld s", PLUGIN_NAME, pr.job,
               pr.array ? " of array " : "", pr.array ? pr.array : "", pr.request,
               (long long)p->conf.wait_s);
    if (!(pr.c = plugin_client(p, &err))) {
        slurm_error("%s: job %s: %s", PLUGIN_NAME, pr.job, err.text);
        record(p, pr.job, "staging_error", err.text);
        record(p, pr.job, "staging", "ERROR");
        return 0;
    }
    const char *outcome = wait_staging(&pr);
    client_free(pr.c);
    if (pr.why[0])
        record(p, pr.job, "staging_error", pr.why);
    record(p, pr.job, "staging", outcome);
    bool cancelled = strcmp(outcome, "RELEASED") == 0 || strcmp(outcome, "CANCELLED") == 0;
    if (strcmp(outcome, "COMPLETED") == 0)
        job_comment(p, pr.job, "staged (request %s)", pr.request);
    else if (!cancelled)
        job_comment(p, pr.job, "request %s %s: %s", pr.request, outcome, pr.why);
    if (strcmp(outcome, "COMPLETED") == 0 ||
        (strcmp(outcome, "TIMEOUT") == 0 && p->conf.on_timeout == SPANK_ON_TIMEOUT_CONTINUE))
        start_node_agent(&pr);
    else if (cancelled)
        slurm_info("%s: job %s: request %s %s (%s): no agent", PLUGIN_NAME, pr.job, pr.request,
                   outcome, pr.why);
    return 0;
}

/* ---- the epilog --------------------------------------------------------------------- */

/* The job lets go of the request; stageind releases it when nothing else
 * (another task of its array) holds it. */
static void release_request(const plugin_t *p, const char *job, const char *request)
{
    si_error_t err;
    client_t *c = plugin_client(p, &err);
    char body[64];
    snprintf(body, sizeof(body), "{\"job\": \"%s\"}", job);
    for (int i = 0; c && i < RELEASE_TRIES; i++) {
        client_reply_t r;
        int rc = api_release(c, request, body, &r, &err);
        bool released = json_is_true(json_object_get(r.json, "released"));
        long status = r.status;
        client_reply_free(&r);
        if (rc == 0) {
            slurm_info("%s: job %s: request %s %s", PLUGIN_NAME, job, request,
                       released ? "released" : "let go (the job's array still holds it)");
            client_free(c);
            return;
        }
        if (status != 0) {
            /* 404: not held by this job any more (stageind saw it end); 409: released */
            if (status != 404 && status != 409)
                slurm_error("%s: job %s: cannot release request %s: %s", PLUGIN_NAME, job,
                            request, err.text);
            client_free(c);
            return;
        }
        sleep(1);
    }
    client_free(c);
    slurm_error("%s: job %s: cannot release request %s: %s; stageind releases it once it "
                "sees the job ended", PLUGIN_NAME, job, request, err.text);
}

int job_script_epilog(spank_t sp, plugin_t *p)
{
    char job[32], request[JOBREC_VALUE_MAX] = "";
    uid_t uid;
    gid_t gid;
    si_error_t err;
    if (plugin_job_ids(sp, job, &uid, &gid, &err) < 0) {
        slurm_error("%s: epilog: %s", PLUGIN_NAME, err.text);
        return 0;
    }
    /* the request the prolog ended up with (staged again, perhaps) */
    const char *submitted = getenv(PLUGIN_REQUEST_SCRIPT_VAR);
    if (jobrec_get(p->conf.run_dir, job, "request", request, sizeof(request), &err) != 1)
        snprintf(request, sizeof(request), "%s", submitted ? submitted : "");
    /* a batch job's batch step pushed already, while the job ran */
    struct spank_option opt = {"stage-out", "PATH[:DATASET][,...]", "", 1, 0, NULL};
    char *value = NULL, done[16];
    if (jobrec_get(p->conf.run_dir, job, "stage_out", done, sizeof(done), &err) != 1 &&
        spank_option_getopt(sp, &opt, &value) == ESPANK_SUCCESS && value)
        stage_out_push(p, value, job, uid, gid);
    agent_stop(&p->conf, job);
    if (*request)
        release_request(p, job, request);
    if (jobrec_remove(p->conf.run_dir, job, &err) < 0)
        slurm_error("%s: job %s: %s", PLUGIN_NAME, job, err.text);
    return 0;
}
