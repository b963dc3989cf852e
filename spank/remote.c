/* Remote context (slurmstepd), before the tasks start, as the job's user:
 * the step fails with the reason when its data is not there; otherwise the
 * tasks learn where the data and the agent are.
 *
 * What the prolog found (the job's record on this node) decides: a step of
 * a job whose data arrived needs no word from stageind, so steps still
 * start while stageind restarts. Without a record (no prolog ran here yet)
 * stageind is asked.
 *
 * The failure is decided in user_init but delivered by task_init: a failing
 * user_init of the batch step counts as a launch failure and drains the node
 * (seen on Slurm 22.05), while a failing task_init only ends the task with
 * exit status 1, so the job FAILS and the node stays up. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <slurm/slurm.h>

#include "spank/jobrec.h"
#include "spank/plugin.h"
#include "stagein/api.h"
#include "stagein/progress.h"

static int fetch_status(const plugin_t *p, const char *request, progress_status_t *s,
                        si_error_t *err)
{
    client_t *c = plugin_client(p, err);
    if (!c)
        return -1;
    client_reply_t r;
    int rc = api_stage_status(c, request, &r, err);
    if (rc == 0)
        rc = progress_status_from_json(r.json, s, err);
    client_reply_free(&r);
    client_free(c);
    return rc;
}

static int export(spank_t sp, const char *name, const char *value)
{
    spank_err_t rc = spank_setenv(sp, name, value, 1);
    if (rc != ESPANK_SUCCESS) {
        slurm_error("%s: cannot set %s: %s", PLUGIN_NAME, name, spank_strerror(rc));
        return -1;
    }
    return 0;
}

/* The reason the step must fail, kept for task_init in the same process. */
static int fail_step(plugin_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail_step(plugin_t *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->step_failure, sizeof(p->step_failure), fmt, ap);
    va_end(ap);
    return 0;
}

int remote_task_init(spank_t sp, plugin_t *p)
{
    uint32_t task = 0;
    /* The task's stderr is the job's: the note appears once, from task 0. */
    if (p->step_note[0] && spank_get_item(sp, S_TASK_GLOBAL_ID, &task) == ESPANK_SUCCESS &&
        task == 0)
        fprintf(stderr, "%s: %s\n", PLUGIN_NAME, p->step_note);
    if (!p->step_failure[0])
        return 0;
    slurm_error("%s: %s", PLUGIN_NAME, p->step_failure);
    return -1;
}

static int export_job_env(spank_t sp, plugin_t *p, const char *job, const char *request);

int remote_exit(spank_t sp, plugin_t *p)
{
    uint32_t step = 0;
    if (!p->opts.stage_out || spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS ||
        step != SLURM_BATCH_SCRIPT)
        return 0;
    char job[32];
    uid_t uid;
    gid_t gid;
    si_error_t err;
    if (plugin_job_ids(sp, job, &uid, &gid, &err) < 0) {
        slurm_error("%s: --stage-out: %s", PLUGIN_NAME, err.text);
        return 0;
    }
    stage_out_push(p, p->opts.stage_out, job, uid, gid);
    /* the epilog must not push it again */
    if (jobrec_set(p->conf.run_dir, job, "stage_out", "done", &err) < 0)
        slurm_error("%s: job %s: %s", PLUGIN_NAME, job, err.text);
    return 0;
}

int remote_user_init(spank_t sp, plugin_t *p)
{
    char request[128];
    if (spank_getenv(sp, PLUGIN_REQUEST_JOB_VAR, request, sizeof(request)) != ESPANK_SUCCESS ||
        !*request)
        return 0;
    char job[32], note[JOBREC_VALUE_MAX], line[256];
    uid_t uid;
    gid_t gid;
    si_error_t err;
    if (plugin_job_ids(sp, job, &uid, &gid, &err) < 0) {
        return fail_step(p, "stage request %s: %s", request, err.text);
    }
    char staging[JOBREC_VALUE_MAX] = "", why[JOBREC_VALUE_MAX] = "";
    jobrec_get(p->conf.run_dir, job, "staging", staging, sizeof(staging), &err);
    jobrec_get(p->conf.run_dir, job, "staging_error", why, sizeof(why), &err);
    if (jobrec_get(p->conf.run_dir, job, "request", note, sizeof(note), &err) == 1 &&
        strcmp(note, request) != 0)
        snprintf(request, sizeof(request), "%s", note); /* the prolog staged it again */
    if (strcmp(staging, "COMPLETED") == 0)
        return export_job_env(sp, p, job, request);
    if (staging[0] && strcmp(staging, "TIMEOUT") != 0)
        return fail_step(p, "stage request %s %s%s%s", request, staging, why[0] ? ": " : "",
                         why[0] ? why : "");
    progress_status_t s;
    if (fetch_status(p, request, &s, &err) < 0) {
        return fail_step(p, "stage request %s: cannot get its state from stageind: %s", request,
                         err.text);
    }
    if (strcmp(s.state, "COMPLETED") != 0) {
        bool final = progress_state_final(s.state);
        if (final) {
            return fail_step(p, "stage request %s %s: %lld of %lld files failed (stagein "
                             "status %s lists them)", request, s.state,
                             (long long)s.files_failed, (long long)s.files_total, request);
        }
        progress_line(&s, -1, line, sizeof(line));
        if (p->conf.on_timeout == SPANK_ON_TIMEOUT_FAIL) {
            return fail_step(p, "stage request %s was not staged within the prolog's limit "
                             "of %lld s: %s", request, (long long)p->conf.wait_s, line);
        }
        slurm_info("%s: the job starts before its data (on_timeout=continue): %s", PLUGIN_NAME,
                   line);
    }
    return export_job_env(sp, p, job, request);
}

/* The tasks learn the request, the endpoint and the agent. */
static int export_job_env(spank_t sp, plugin_t *p, const char *job, const char *request)
{
    char note[JOBREC_VALUE_MAX];
    si_error_t err;
    if (export(sp, "STAGEIN_REQUEST", request) < 0 ||
        export(sp, "STAGEIN_ENDPOINT", p->conf.endpoint) < 0)
        return fail_step(p, "stage request %s: cannot set the tasks' environment", request);
    if (jobrec_get(p->conf.run_dir, job, "agent_socket", note, sizeof(note), &err) == 1) {
        if (export(sp, "STAGEIN_AGENT_SOCKET", note) < 0)
            return fail_step(p, "stage request %s: cannot set the tasks' environment", request);
    } else if (jobrec_get(p->conf.run_dir, job, "agent_note", note, sizeof(note), &err) == 1) {
        snprintf(p->step_note, sizeof(p->step_note), "%s", note);
    }
    return 0;
}
