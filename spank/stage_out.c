/* --stage-out at job end: `stagein push --wait` of each PATH as the job's
 * user, durable before it returns; a failure is told to the user (job
 * stderr, comment) with stagein's reason. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "spank/shared.h"
#include "spank/run.h"

/* `stagein push --wait` as the user: returns once every file is durable. */
static void push_stage_out(const plugin_t *p, const spank_stage_out_t *o, const char *job,
                           uid_t uid, gid_t gid)
{
    char *argv[16];
    int n = plugin_stagein_argv(p, argv);
    argv[n++] = "push";
    argv[n++] = "--endpoint";
    argv[n++] = (char *)p->conf.endpoint;
    argv[n++] = "--dataset";
    argv[n++] = (char *)o->dataset;
    argv[n++] = "--wait";
    argv[n++] = (char *)o->path;
    argv[n] = NULL;
    run_as_t as = {.uid = uid, .gid = gid, .timeout_s = (double)p->conf.push_timeout_s};
    char out[4096], msg[1024];
    si_error_t err;
    int rc = run_command(&as, argv, out, sizeof(out), &err);
    if (rc == 0) {
        slurm_info("%s: job %s: --stage-out %s pushed as dataset %s (durable)", PLUGIN_NAME, job,
                   o->path, o->dataset);
        return;
    }
    /* the last line of stagein push says why */
    char *last = NULL;
    for (char *line = strtok(out, "\n"); rc > 0 && line; line = strtok(NULL, "\n")) {
        slurm_error("%s: job %s: stagein push: %s", PLUGIN_NAME, job, line);
        last = line;
    }
    snprintf(msg, sizeof(msg), "--stage-out %s as dataset %s failed: %s", o->path, o->dataset,
             rc < 0 ? err.text : last ? last : "stagein push failed");
    tell_user(p, job, uid, gid, msg);
}

void stage_out_push(const plugin_t *p, const char *value, const char *job, uid_t uid, gid_t gid)
{
    spank_stage_out_t out[PLUGIN_STAGE_OUT_MAX];
    size_t n = 0;
    si_error_t err;
    if (spank_stage_out_parse(value, job, out, PLUGIN_STAGE_OUT_MAX, &n, &err) < 0) {
        tell_user(p, job, uid, gid, err.text);
        return;
    }
    for (size_t i = 0; i < n; i++)
        push_stage_out(p, &out[i], job, uid, gid);
}
