#include "config.h"
#include "daemon/jobs/slurm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/array.h"
#include "common/clock.h"
#include "common/strbuf.h"

/* squeue's --Format, one field each, wide enough for any value; none of
 * them is text a user chooses, so splitting on blanks is safe. */
const char *const slurm_squeue_args[] = {
    "-h", "-a", "-t", "all", "-O",
    "JobID:32,ArrayJobID:32,ArrayTaskID:32,UserID:16,State:24,SubmitTime:24,AllocSID:16",
    NULL,
};

/* COMPLETING too: the job's tasks are over (a job cancelled in its prolog
 * shows COMPLETING until the prolog returns), only epilogs are left. */
static const char *const final_states[] = {
    "COMPLETED", "COMPLETING", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
    "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "REVOKED", "STAGE_OUT", NULL,
};

bool slurm_state_final(const char *state)
{
    for (size_t i = 0; final_states[i]; i++)
        if (strcmp(state, final_states[i]) == 0)
            return true;
    return false;
}

static int copy_field(char *dst, size_t size, const char *v)
{
    if (strlen(v) >= size)
        return -1;
    strcpy(dst, v);
    return 0;
}

static int parse_line(char *line, slurm_job_t *j)
{
    char *f[7], *save = NULL;
    size_t n = 0;
    for (char *t = strtok_r(line, " \t", &save); t && n < 7; t = strtok_r(NULL, " \t", &save))
        f[n++] = t;
    if (n != 7 || strtok_r(NULL, " \t", &save))
        return -1;
    memset(j, 0, sizeof(*j));
    /* an array's pending record is "1_[0-3]" in some versions: the job id ends at '_' */
    f[0][strcspn(f[0], "_")] = '\0';
    if (copy_field(j->id, sizeof(j->id), f[0]) < 0 || !*j->id ||
        strspn(j->id, "0123456789") != strlen(j->id))
        return -1;
    bool array = strcmp(f[2], "N/A") != 0;
    if (array && (copy_field(j->array_id, sizeof(j->array_id), f[1]) < 0 ||
                  strspn(j->array_id, "0123456789") != strlen(j->array_id)))
        return -1;
    char *end;
    errno = 0;
    unsigned long uid = strtoul(f[3], &end, 10);
    if (errno || *end || end == f[3])
        return -1;
    j->uid = (uid_t)uid;
    if (copy_field(j->state, sizeof(j->state), f[4]) < 0)
        return -1;
    struct tm tm = {0};
    char *rest = strptime(f[5], "%Y-%m-%dT%H:%M:%S", &tm);
    if (!rest || *rest) {
        j->submitted = 0; /* "N/A" or "Unknown": never matches a submission */
    } else {
        tm.tm_isdst = -1;
        j->submitted = mktime(&tm);
    }
    j->sid = strtol(f[6], &end, 10);
    if (*end || end == f[6])
        j->sid = -1;
    return 0;
}

int slurm_jobs_parse(const char *text, slurm_job_t **jobs, size_t *n, si_error_t *err)
{
    slurm_job_t *list = NULL;
    size_t count = 0, cap = 0, lineno = 0;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        lineno++;
        char line[512];
        if (len >= sizeof(line)) {
            free(list);
            return si_errprintf(err, "squeue line %zu is longer than %zu bytes", lineno,
                                sizeof(line) - 1);
        }
        memcpy(line, p, len);
        line[len] = '\0';
        p += len + (nl ? 1 : 0);
        if (strspn(line, " \t\r") == len)
            continue;
        if (si_array_grow((void **)&list, &cap, count + 1, sizeof(*list)) < 0) {
            free(list);
            return si_errprintf(err, "out of memory");
        }
        char copy[512];
        memcpy(copy, line, len + 1);
        if (parse_line(copy, &list[count]) < 0) {
            free(list);
            return si_errprintf(err, "squeue line %zu is not 'JOBID ARRAYJOBID ARRAYTASKID UID "
                                     "STATE SUBMITTIME SID': %.120s", lineno, line);
        }
        count++;
    }
    *jobs = list;
    *n = count;
    return 0;
}

/* Reads the child's stdout until EOF or the deadline; false on timeout. */
static bool read_all(int fd, si_strbuf_t *out, double deadline)
{
    char buf[8192];
    for (;;) {
        double left = deadline - si_mono_now();
        if (left <= 0)
            return false;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int rc = poll(&p, 1, (int)(left * 1000) + 1);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            return rc == 0 ? false : true;
        ssize_t got = read(fd, buf, sizeof(buf));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return true;
        si_strbuf_append(out, buf, (size_t)got);
    }
}

int slurm_jobs_query(const char *squeue, double timeout_s, slurm_job_t **jobs, size_t *n,
                     si_error_t *err)
{
    int out[2];
    if (pipe2(out, O_CLOEXEC) < 0)
        return si_errprintf(err, "pipe: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, out[1], 2);
    const char *argv[16];
    size_t a = 0;
    argv[a++] = squeue;
    for (size_t i = 0; slurm_squeue_args[i]; i++)
        argv[a++] = slurm_squeue_args[i];
    argv[a] = NULL;
    extern char **environ;
    pid_t pid;
    int rc = posix_spawn(&pid, squeue, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    if (rc != 0) {
        close(out[0]);
        return si_errprintf(err, "cannot run %s: %s", squeue, strerror(rc));
    }
    si_strbuf_t text;
    si_strbuf_init(&text, 256u << 20); /* a site with a million jobs in memory */
    bool finished = read_all(out[0], &text, si_mono_now() + timeout_s);
    close(out[0]);
    if (!finished)
        kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    const char *body = si_strbuf_str(&text);
    if (!finished)
        rc = si_errprintf(err, "%s did not answer within %.0f s", squeue, timeout_s);
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        rc = si_errprintf(err, "%s failed (status %d): %.200s", squeue,
                          WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
                          body);
    else if (text.failed)
        rc = si_errprintf(err, "%s printed more than 256 MiB", squeue);
    else
        rc = slurm_jobs_parse(body, jobs, n, err);
    si_strbuf_free(&text);
    return rc;
}
