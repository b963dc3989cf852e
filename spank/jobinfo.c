/* What Slurm shows of a job, as root on the node: its comment (squeue,
 * scontrol show job, sacct) and its stderr file, and fields of `scontrol
 * show job`. scontrol runs with the cluster's SLURM_CONF and nothing else
 * of the caller's environment. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spank/shared.h"
#include "spank/run.h"

#define COMMENT_MAX 200
#define SCONTROL_TIMEOUT_S 10.0

/* scontrol's environment: the clean one, and the cluster's SLURM_CONF. */
typedef struct {
    char conf[1100];
    char *env[4];
} slurm_env_t;

static char *const *slurm_env(slurm_env_t *e)
{
    const char *conf = getenv("SLURM_CONF");
    size_t n = 0;
    e->env[n++] = "PATH=/usr/local/bin:/usr/bin:/bin";
    e->env[n++] = "LC_ALL=C";
    if (conf && snprintf(e->conf, sizeof(e->conf), "SLURM_CONF=%s", conf) < (int)sizeof(e->conf))
        e->env[n++] = e->conf;
    e->env[n] = NULL;
    return e->env;
}

/* The job's comment says how its staging goes (or why it failed). */
void job_comment(const plugin_t *p, const char *job, const char *fmt, ...)
{
    if (!p->conf.scontrol[0])
        return;
    char text[COMMENT_MAX], id[48], comment[COMMENT_MAX + 24], out[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    for (char *c = text; *c; c++)
        if (*c == '"' || *c == '\n')
            *c = '\'';
    snprintf(id, sizeof(id), "JobId=%s", job);
    snprintf(comment, sizeof(comment), "Comment=stagein: %s", text);
    char *argv[] = {(char *)p->conf.scontrol, "update", id, comment, NULL};
    slurm_env_t e;
    run_as_t as = {.uid = 0, .gid = 0, .timeout_s = SCONTROL_TIMEOUT_S, .env = slurm_env(&e)};
    si_error_t err;
    int rc = run_command(&as, argv, out, sizeof(out), &err);
    if (rc != 0)
        slurm_error("%s: job %s: cannot set its comment: %s", PLUGIN_NAME, job,
                    rc < 0 ? err.text : out);
}

/* One field of `scontrol -o show job ID`. Fields a user chooses (JobName,
 * Comment, WorkDir) could contain " Key=": take the first occurrence of a
 * key Slurm prints before them (ArrayJobId), the last of one it prints
 * after them (StdErr). */
int job_field(const plugin_t *p, const char *job, const char *key, bool last, char *value,
                     size_t size)
{
    char out[16384], pattern[64];
    char *argv[] = {(char *)p->conf.scontrol, "-o", "show", "job", (char *)job, NULL};
    slurm_env_t e;
    run_as_t as = {.uid = 0, .gid = 0, .timeout_s = SCONTROL_TIMEOUT_S, .env = slurm_env(&e)};
    si_error_t err;
    if (!p->conf.scontrol[0] || run_command(&as, argv, out, sizeof(out), &err) != 0)
        return -1;
    snprintf(pattern, sizeof(pattern), " %s=", key);
    char *at = NULL;
    for (char *s = strstr(out, pattern); s; s = last ? strstr(s + 1, pattern) : NULL)
        at = s + strlen(pattern);
    if (!at)
        return -1;
    size_t len = strcspn(at, " \n");
    if (len == 0 || len >= size)
        return -1;
    memcpy(value, at, len);
    value[len] = '\0';
    return 0;
}

/* Tells the job's user: a line in the job's stderr (written as the user,
 * appended) and the job's comment, beside slurmd's log. */
void tell_user(const plugin_t *p, const char *job, uid_t uid, gid_t gid, const char *msg)
{
    slurm_error("%s: job %s: %s", PLUGIN_NAME, job, msg);
    job_comment(p, job, "%s", msg);
    char path[1024], line[1200], out[256];
    if (job_field(p, job, "StdErr", true, path, sizeof(path)) < 0 || path[0] != '/')
        return;
    snprintf(line, sizeof(line), "%s: %s", PLUGIN_NAME, msg);
    char *argv[] = {"/bin/sh", "-c", "printf '%s\\n' \"$1\" >> \"$2\"", "sh", line, path, NULL};
    run_as_t as = {.uid = uid, .gid = gid, .timeout_s = SCONTROL_TIMEOUT_S};
    si_error_t err;
    if (run_command(&as, argv, out, sizeof(out), &err) != 0)
        slurm_error("%s: job %s: cannot write to its stderr %s: %s", PLUGIN_NAME, job, path, out);
}
