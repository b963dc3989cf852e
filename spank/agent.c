#include "config.h"
#include "spank/agent.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spank/jobrec.h"
#include "spank/run.h"

#define AGENT_PROBE_S 10.0
#define AGENT_SOCKET_WAIT_S 30.0
#define AGENT_STOP_GRACE_S 5.0

/* Whether this stagein has the agent command: `stagein agent --help`. */
static int agent_available(const agent_job_t *a, si_error_t *why)
{
    char *argv[] = {(char *)a->conf->stagein, "agent", "--help", NULL};
    run_as_t as = {.uid = a->uid, .gid = a->gid, .timeout_s = AGENT_PROBE_S};
    char out[512];
    int rc = run_command(&as, argv, out, sizeof(out), why);
    if (rc < 0)
        return -1;
    if (rc == 0)
        return 1;
    out[strcspn(out, "\n")] = '\0';
    si_errprintf(why, "agent not available: %s agent exits %d (%s)", a->conf->stagein, rc, out);
    return 0;
}

int agent_start(const agent_job_t *a, si_error_t *why)
{
    const char *run_dir = a->conf->run_dir;
    char dir[2048], sock[2100], log[2100], gpu[16], pid_text[32];
    si_error_t err;
    int avail = agent_available(a, why);
    if (avail <= 0) {
        jobrec_set(run_dir, a->job, "agent_note",
                   avail == 0 ? why->text : "agent not available: cannot probe it", &err);
        return avail;
    }
    snprintf(dir, sizeof(dir), "%s/job-%s.agent", run_dir, a->job);
    snprintf(sock, sizeof(sock), "%s/agent.sock", dir);
    snprintf(log, sizeof(log), "%s/agent.log", dir);
    if ((mkdir(dir, 0700) < 0 && errno != EEXIST) || chown(dir, a->uid, a->gid) < 0)
        return si_errnoprintf(why, errno, "cannot prepare %s: %s", dir, strerror(errno));
    /* the agent reaches stageind where the plugin does, as the job's user
     * (its MUNGE identity also gets it the S3 credentials it reads with) */
    char *argv[16];
    int n = 0;
    argv[n++] = (char *)a->conf->stagein;
    if (a->conf->config[0]) {
        argv[n++] = "--config";
        argv[n++] = (char *)a->conf->config;
    }
    argv[n++] = "agent";
    argv[n++] = "--request";
    argv[n++] = (char *)a->request;
    argv[n++] = "--socket";
    argv[n++] = sock;
    argv[n++] = "--endpoint";
    argv[n++] = (char *)a->conf->endpoint;
    if (a->gpu >= 0) {
        snprintf(gpu, sizeof(gpu), "%d", a->gpu);
        argv[n++] = "--gpu";
        argv[n++] = gpu;
    }
    argv[n] = NULL;
    run_as_t as = {.uid = a->uid, .gid = a->gid};
    pid_t pid;
    if (run_detached(&as, argv, log, &pid, why) < 0)
        return -1;
    snprintf(pid_text, sizeof(pid_text), "%d", (int)pid);
    if (jobrec_set(run_dir, a->job, "agent_pid", pid_text, why) < 0) {
        run_stop(pid, AGENT_STOP_GRACE_S);
        return -1;
    }
    struct stat st;
    for (int i = 0; i < (int)(AGENT_SOCKET_WAIT_S * 10); i++) {
        if (stat(sock, &st) == 0 && S_ISSOCK(st.st_mode))
            return jobrec_set(run_dir, a->job, "agent_socket", sock, why) < 0 ? -1 : 1;
        if (kill(pid, 0) < 0)
            return si_errprintf(why, "the agent exited before it served %s (see %s)", sock, log);
        usleep(100000);
    }
    return si_errprintf(why, "the agent did not serve %s within %.0f s (see %s)", sock,
                        AGENT_SOCKET_WAIT_S, log);
}

void agent_stop(const spank_conf_t *conf, const char *job)
{
    char text[64];
    si_error_t err;
    if (jobrec_get(conf->run_dir, job, "agent_pid", text, sizeof(text), &err) != 1)
        return;
    run_stop((pid_t)atoi(text), AGENT_STOP_GRACE_S);
}
