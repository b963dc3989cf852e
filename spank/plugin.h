/* The plugin's contexts as the dispatcher (plugin.c) calls them: one
 * dispatcher per SPANK hook switches on spank_context() and calls into one
 * file per context: alloc.c (sbatch/salloc/srun), job_script.c (prolog and
 * epilog, as root on the node), remote.c (slurmstepd, as the user). What the
 * context files share is in shared.h. */
#ifndef SPANK_PLUGIN_H
#define SPANK_PLUGIN_H

#include <slurm/spank.h>

#include "spank/shared.h"

/* alloc.c: validate and submit the stage request; -1 refuses submission.
 * exit: sbatch has submitted the job: name it to stageind (its newest job
 * from this session), so that the job holds the request from now on. */
int alloc_submit(spank_t sp, plugin_t *p);
void alloc_exit(spank_t sp, plugin_t *p);

/* job_script.c: never fail (a failing prolog or epilog drains the node). */
int job_script_prolog(spank_t sp, plugin_t *p);
int job_script_epilog(spank_t sp, plugin_t *p);

/* remote.c: user_init exports the environment or decides that the step
 * fails; task_init then fails it (-1) with the reason in the job's output.
 * exit: the batch step pushes --stage-out while the job still runs (so a
 * failure can reach the job's comment); the epilog does it for jobs
 * without a batch step. */
int remote_user_init(spank_t sp, plugin_t *p);
int remote_task_init(spank_t sp, plugin_t *p);
int remote_exit(spank_t sp, plugin_t *p);

#endif
