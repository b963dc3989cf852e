/* Remote context (slurmstepd), before the tasks start, as the job's user:
 * the step fails with the reason when its data is not there; otherwise the
 * tasks learn where the data and the agent are. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "spank/jobrec.h"
#include "spank/plugin.h"
#include "stagein/progress.h"

static int fetch_status(const plugin_t *p, const char *request, progress_status_t *s,
                        si_error_t *err)
{
    client_t *c = plugin_client(p, err);
    if (!c)
        return -1;
    char path[128];
    snprintf(path, sizeof(path), "/api/v1/stage/%s", request);
    client_request_t rq = {.method = "GET", .path = path};
    client_reply_t r = {0};
    int rc = client_send(c, &rq, &r, err);
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
        slurm_error("%s: request %s: %s", PLUGIN_NAME, request, err.text);
        return -1;
    }
    progress_status_t s;
    if (fetch_status(p, request, &s, &err) < 0) {
        slurm_error("%s: stage request %s: cannot get its state from stageind: %s", PLUGIN_NAME,
                    request, err.text);
        return -1;
    }
    if (strcmp(s.state, "COMPLETED") != 0) {
        bool final = progress_state_final(s.state);
        if (final) {
            slurm_error("%s: stage request %s %s: %lld of %lld files failed (stagein status %s "
                        "lists them)", PLUGIN_NAME, request, s.state, (long long)s.files_failed,
                        (long long)s.files_total, request);
            return -1;
        }
        progress_line(&s, -1, line, sizeof(line));
        if (p->conf.on_timeout == SPANK_ON_TIMEOUT_FAIL) {
            slurm_error("%s: stage request %s was not staged within the prolog's limit of "
                        "%lld s: %s", PLUGIN_NAME, request, (long long)p->conf.wait_s, line);
            return -1;
        }
        slurm_info("%s: the job starts before its data (on_timeout=continue): %s", PLUGIN_NAME,
                   line);
    }
    if (export(sp, "STAGEIN_REQUEST", request) < 0 ||
        export(sp, "STAGEIN_ENDPOINT", p->conf.endpoint) < 0)
        return -1;
    if (jobrec_get(p->conf.run_dir, job, "agent_socket", note, sizeof(note), &err) == 1)
        return export(sp, "STAGEIN_AGENT_SOCKET", note);
    if (jobrec_get(p->conf.run_dir, job, "agent_note", note, sizeof(note), &err) == 1)
        slurm_info("%s: %s", PLUGIN_NAME, note);
    return 0;
}
