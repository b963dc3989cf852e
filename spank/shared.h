/* What the plugin's per-context files share: the site settings, the job's
 * options, and the helpers they call (shared.c: the client to stageind, the
 * stage request body, the job's ids; jobinfo.c; stage_out.c). Nothing here
 * calls back into the dispatcher (plugin.c) or a context file. */
#ifndef SPANK_SHARED_H
#define SPANK_SHARED_H

#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

#include <slurm/spank.h>

#include "common/error.h"
#include "spank/args.h"
#include "stagein/client.h"

#define PLUGIN_NAME "stagein"
/* The request id travels from submission to the node in the job's control
 * environment; Slurm shows it to the prolog and epilog as SPANK_<name>, and
 * in the job's environment as SLURM_SPANK_<name>. */
#define PLUGIN_REQUEST_VAR "STAGEIN_REQUEST"
#define PLUGIN_REQUEST_SCRIPT_VAR "SPANK_STAGEIN_REQUEST"
#define PLUGIN_REQUEST_JOB_VAR "SLURM_SPANK_STAGEIN_REQUEST"
#define PLUGIN_STAGE_OUT_MAX 16

/* The job's options as given on the command line or #SBATCH lines. */
typedef struct {
    char *stage_in;            /* --stage-in value, or NULL */
    char *stage_out;           /* --stage-out value, or NULL */
    bool stage_gpu;
    char *stage_gpu_arg;       /* --stage-gpu=N value, or NULL */
} plugin_opts_t;

typedef struct {
    spank_conf_t conf;
    plugin_opts_t opts;
    char submitted[64];        /* allocator: the request this process submitted */
    time_t submitted_at;
    char step_failure[1024];   /* remote: why task_init fails the step */
    char step_note[1024];      /* remote: what task 0 tells the job (no agent) */
} plugin_t;

/* A client for stageind at the configured endpoint, with the configured
 * MUNGE socket, as the calling process's user. */
client_t *plugin_client(const plugin_t *p, si_error_t *err);

/* argv[0..) for the stagein command with the plugin's --config; returns
 * how many entries it wrote (the caller appends the rest). */
int plugin_stagein_argv(const plugin_t *p, char **argv);

/* The POST /api/v1/stage body for a --stage-in value (*manifest: the
 * manifest's text, to free); with_submission adds this process's
 * "host:sid" (the submission holds the request until the job does). */
json_t *plugin_request_body(const plugin_t *p, const char *stage_in, char **manifest,
                            bool with_submission, si_error_t *err);

/* The job's id, uid and gid in job_script and remote contexts. */
int plugin_job_ids(spank_t sp, char job[32], uid_t *uid, gid_t *gid, si_error_t *err);

/* stage_out.c: pushes each PATH[:DATASET] of value (--stage-out) as the
 * user; failures are told to the user. */
void stage_out_push(const plugin_t *p, const char *value, const char *job, uid_t uid,
                    gid_t gid);

/* jobinfo.c, as root: the job's comment ("stagein: ..."; nothing when
 * scontrol= is empty); a field of `scontrol show job` (last: the last
 * occurrence, for fields printed after those users choose); a message to
 * the job's user (slurmd's log, the comment, a line in the job's stderr
 * written as the user). */
void job_comment(const plugin_t *p, const char *job, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int job_field(const plugin_t *p, const char *job, const char *key, bool last, char *value,
              size_t size);
void tell_user(const plugin_t *p, const char *job, uid_t uid, gid_t gid, const char *msg);

#endif
