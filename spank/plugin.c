/* The SPANK entry points: options registered in slurm_spank_init, and one
 * dispatcher per hook that switches on spank_context(). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "spank/plugin.h"

SPANK_PLUGIN(stagein, 1);

/* SPANK option callbacks receive no context pointer, so the plugin keeps its
 * state in the one instance Slurm loads per process. */
static plugin_t plugin_state;

static int set_option(char **slot, const char *optarg)
{
    free(*slot);
    *slot = optarg ? strdup(optarg) : NULL;
    return optarg && !*slot ? -1 : 0;
}

/* The callbacks only check syntax (so sbatch refuses a bad value with the
 * reason) and keep the value; what the values mean is decided per context. */
static int on_stage_in(int val, const char *optarg, int remote)
{
    (void)val;
    if (!remote) {
        spank_stage_in_t s;
        si_error_t err;
        if (spank_stage_in_parse(optarg, &s, &err) < 0) {
            slurm_error("%s: %s", PLUGIN_NAME, err.text);
            return -1;
        }
        spank_stage_in_free(&s);
    }
    return set_option(&plugin_state.opts.stage_in, optarg);
}

static int on_stage_out(int val, const char *optarg, int remote)
{
    (void)val;
    if (!remote) {
        spank_stage_out_t out[PLUGIN_STAGE_OUT_MAX];
        size_t n;
        si_error_t err;
        if (spank_stage_out_parse(optarg, NULL, out, PLUGIN_STAGE_OUT_MAX, &n, &err) < 0) {
            slurm_error("%s: %s", PLUGIN_NAME, err.text);
            return -1;
        }
    }
    return set_option(&plugin_state.opts.stage_out, optarg);
}

static int on_stage_gpu(int val, const char *optarg, int remote)
{
    (void)val;
    int gpu;
    si_error_t err;
    if (!remote && spank_gpu_parse(optarg, &gpu, &err) < 0) {
        slurm_error("%s: %s", PLUGIN_NAME, err.text);
        return -1;
    }
    plugin_state.opts.stage_gpu = true;
    return set_option(&plugin_state.opts.stage_gpu_arg, optarg);
}

static struct spank_option plugin_options[] = {
    {"stage-in", "DATASET[,...]|@MANIFEST",
     "stage these datasets (or the objects of a manifest file) from tape before the job starts",
     1, 0, on_stage_in},
    {"stage-out", "PATH[:DATASET][,...]",
     "at job end, archive the files under PATH as DATASET (default job-<jobid>)", 1, 0,
     on_stage_out},
    {"stage-gpu", "N", "land the staged data in the memory of GPU N (default 0)", 2, 0,
     on_stage_gpu},
    SPANK_OPTIONS_TABLE_END,
};

/* Every hook receives the plugstack.conf arguments; slurm_spank_init is not
 * called in every context (not in the prolog and epilog), so each hook
 * parses them. */
static int load_conf(int ac, char **av)
{
    si_error_t err;
    if (spank_conf_parse(ac, av, &plugin_state.conf, &err) < 0) {
        slurm_error("%s: %s", PLUGIN_NAME, err.text);
        return -1;
    }
    return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    if (load_conf(ac, av) < 0)
        return -1;
    for (struct spank_option *o = plugin_options; o->name; o++) {
        spank_err_t rc = spank_option_register(sp, o);
        if (rc != ESPANK_SUCCESS) {
            slurm_error("%s: cannot register --%s: %s", PLUGIN_NAME, o->name,
                        spank_strerror(rc));
            return -1;
        }
    }
    return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    if (load_conf(ac, av) < 0)
        return -1;
    switch (spank_context()) {
    case S_CTX_ALLOCATOR:
    case S_CTX_LOCAL:
        return alloc_submit(sp, &plugin_state);
    default:
        return 0;
    }
}

int slurm_spank_job_prolog(spank_t sp, int ac, char **av)
{
    if (load_conf(ac, av) < 0)
        return 0;
    return spank_context() == S_CTX_JOB_SCRIPT ? job_script_prolog(sp, &plugin_state) : 0;
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
    if (load_conf(ac, av) < 0)
        return -1;
    return spank_context() == S_CTX_REMOTE ? remote_user_init(sp, &plugin_state) : 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    return spank_context() == S_CTX_REMOTE ? remote_task_init(sp, &plugin_state) : 0;
}

int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
    if (load_conf(ac, av) < 0)
        return 0;
    return spank_context() == S_CTX_JOB_SCRIPT ? job_script_epilog(sp, &plugin_state) : 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    if (spank_context() == S_CTX_REMOTE && load_conf(ac, av) == 0)
        remote_exit(sp, &plugin_state);
    if (spank_context() == S_CTX_ALLOCATOR && plugin_state.submitted[0] && load_conf(ac, av) == 0)
        alloc_exit(sp, &plugin_state);
    free(plugin_state.opts.stage_in);
    free(plugin_state.opts.stage_out);
    free(plugin_state.opts.stage_gpu_arg);
    memset(&plugin_state.opts, 0, sizeof(plugin_state.opts));
    return 0;
}
