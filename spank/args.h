/* What the plugin is told: its plugstack.conf arguments (site settings) and
 * the job's --stage-in, --stage-out and --stage-gpu values. Pure parsing,
 * no Slurm calls, so that every rule has a unit test. */
#ifndef SPANK_ARGS_H
#define SPANK_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define SPANK_PATH_MAX 1024
#define SPANK_DATASET_MAX 128   /* as stageind accepts a dataset name */

typedef enum {
    SPANK_ON_TIMEOUT_FAIL,      /* fail the job step (default) */
    SPANK_ON_TIMEOUT_CONTINUE,  /* run the job; the data keeps arriving */
} spank_on_timeout_t;

/* plugstack.conf: `required stagein.so key=value ...` */
typedef struct {
    char endpoint[SPANK_PATH_MAX + 8]; /* "unix:PATH" or URL, several: "E1,E2,..." */
    char munge_socket[SPANK_PATH_MAX]; /* "" = libmunge's default */
    char stagein[SPANK_PATH_MAX];      /* the stagein command (push, agent) */
    char config[SPANK_PATH_MAX];       /* stagein.conf for that command; "" = its default */
    char run_dir[SPANK_PATH_MAX];      /* per-job records of the prolog, root-owned */
    int64_t wait_s;                    /* how long the prolog waits for staging */
    spank_on_timeout_t on_timeout;
    int gpu;                           /* -1: host memory unless --stage-gpu */
    int priority;                      /* of every stage request, -1000..1000 */
    int64_t push_timeout_s;            /* epilog: longest wait for a durable push */
    char scontrol[SPANK_PATH_MAX];     /* shows staging in the job's comment; "": no */
} spank_conf_t;

/* Defaults, then each "key=value" argument; err names the argument. */
int spank_conf_parse(int argc, char *const argv[], spank_conf_t *conf, si_error_t *err);

/* --stage-in=DATASET[,DATASET...] or --stage-in=@/path/manifest */
typedef struct {
    char **datasets;
    size_t ndatasets;
    char *manifest_path;        /* set for the @ form */
} spank_stage_in_t;

int spank_stage_in_parse(const char *text, spank_stage_in_t *out, si_error_t *err);
void spank_stage_in_free(spank_stage_in_t *s);

/* --stage-out=PATH[:DATASET] (several separated by ','): DATASET defaults to
 * "job-<jobid>", filled in by spank_stage_out_parse when job is given. */
typedef struct {
    char path[SPANK_PATH_MAX];
    char dataset[SPANK_DATASET_MAX + 1];  /* "" until the job id is known */
} spank_stage_out_t;

/* Parses into out[0..max), *n the count. job: the job id, or NULL (the
 * default dataset name is then left empty). */
int spank_stage_out_parse(const char *text, const char *job, spank_stage_out_t *out, size_t max,
                          size_t *n, si_error_t *err);

/* --stage-gpu[=N]: NULL (no value) means GPU 0. */
int spank_gpu_parse(const char *text, int *gpu, si_error_t *err);

#endif
