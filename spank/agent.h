/* The node agent (`stagein agent`, issue 6) for a job: started by the
 * prolog as the job's user, stopped by the epilog. Where the installed
 * stagein has no agent command, the job runs without one and its record
 * says "agent not available" with the reason. */
#ifndef SPANK_AGENT_H
#define SPANK_AGENT_H

#include <sys/types.h>

#include "common/error.h"
#include "spank/args.h"

typedef struct {
    const spank_conf_t *conf;
    const char *job;
    const char *request;
    uid_t uid;
    gid_t gid;
    int gpu;                   /* -1: host memory */
} agent_job_t;

/* Starts the agent and records agent_pid and agent_socket in the job's
 * record; 1 started, 0 not available (the reason recorded as agent_note
 * and in why), -1 it failed to start (why says how). */
int agent_start(const agent_job_t *a, si_error_t *why);

/* Stops the job's agent, if the record names one. */
void agent_stop(const spank_conf_t *conf, const char *job);

#endif
