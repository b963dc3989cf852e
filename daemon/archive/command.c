/* A site's command on a batch of paths; see command.h. */
#include "config.h"

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

#include "daemon/archive/command.h"
#include "common/clock.h"

extern char **environ;

#define KILL_GRACE_S 5.0
#define POLL_MS 100

/* Keeps the last bytes of the output in res->output. */
static void keep_output(archive_command_result_t *res, size_t *len, const char *data, size_t n)
{
    size_t cap = sizeof(res->output) - 1;
    if (n >= cap) {
        memcpy(res->output, data + n - cap, cap);
        *len = cap;
    } else {
        if (*len + n > cap) {
            size_t drop = *len + n - cap;
            memmove(res->output, res->output + drop, *len - drop);
            *len -= drop;
        }
        memcpy(res->output + *len, data, n);
        *len += n;
    }
    res->output[*len] = '\0';
}

static int spawn(const char *command, const char *const *paths, size_t n, int out_fd,
                 pid_t *pid, si_error_t *err)
{
    size_t len = strlen(command) + sizeof(" \"$@\"");
    char *script = malloc(len);
    char **argv = calloc(n + 5, sizeof(*argv));
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    int rc = -1;
    if (!script || !argv) {
        si_errprintf(err, "out of memory");
        goto out;
    }
    snprintf(script, len, "%s \"$@\"", command);
    argv[0] = (char *)"/bin/sh";
    argv[1] = (char *)"-c";
    argv[2] = script;
    argv[3] = (char *)"stagein";
    for (size_t i = 0; i < n; i++)
        argv[4 + i] = (char *)paths[i];
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
    posix_spawnattr_init(&attr);
    /* its own group (a timeout ends every process it started), default
     * signal dispositions and no blocked signals, whatever the daemon's */
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    int e = posix_spawn(pid, "/bin/sh", &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (e != 0)
        si_errnoprintf(err, e, "cannot start /bin/sh for '%s': %s", command, strerror(e));
    else
        rc = 0;
out:
    free(script);
    free(argv);
    return rc;
}

int archive_command_run(const char *command, const char *const *paths, size_t n,
                        double timeout_s, const atomic_bool *stop,
                        archive_command_result_t *res, si_error_t *err)
{
    memset(res, 0, sizeof(*res));
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) < 0)
        return si_errnoprintf(err, errno, "pipe: %s", strerror(errno));
    pid_t pid;
    if (spawn(command, paths, n, pipefd[1], &pid, err) < 0) {
        close(pipefd[0]);
        close(pipefd[1]);
        return -1;
    }
    close(pipefd[1]);
    double started = si_mono_now(), killed_at = 0;
    size_t outlen = 0;
    int status = 0;
    bool open_pipe = true, exited = false;
    while (!exited) {
        struct pollfd p = {pipefd[0], POLLIN, 0};
        int ready = open_pipe ? poll(&p, 1, POLL_MS) : (usleep(POLL_MS * 1000), 0);
        if (ready > 0) {
            char buf[4096];
            ssize_t got = read(pipefd[0], buf, sizeof(buf));
            if (got > 0)
                keep_output(res, &outlen, buf, (size_t)got);
            else if (got == 0 || (errno != EINTR && errno != EAGAIN))
                open_pipe = false; /* EOF: the command and its children closed it */
        }
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            exited = true;
            break;
        }
        double now = si_mono_now();
        bool stopping = stop && atomic_load(stop);
        if (!killed_at && (now - started >= timeout_s || stopping)) {
            res->timed_out = true;
            killed_at = now;
            kill(-pid, SIGTERM);
        } else if (killed_at && now - killed_at >= KILL_GRACE_S) {
            kill(-pid, SIGKILL);
        }
    }
    /* what is left in the pipe, without waiting for children that kept it */
    fcntl(pipefd[0], F_SETFL, O_NONBLOCK);
    char buf[4096];
    ssize_t got;
    while (open_pipe && (got = read(pipefd[0], buf, sizeof(buf))) > 0)
        keep_output(res, &outlen, buf, (size_t)got);
    close(pipefd[0]);
    if (res->timed_out)
        kill(-pid, SIGKILL); /* whatever of the group outlived its shell */
    res->seconds = si_mono_now() - started;
    if (WIFEXITED(status)) {
        res->status = WEXITSTATUS(status);
    } else {
        res->status = -1;
        res->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    }
    return 0;
}

void archive_command_describe(const archive_command_result_t *res, double timeout_s, char *out,
                              size_t size)
{
    /* the last non-empty line of its output says most */
    const char *end = res->output + strlen(res->output);
    while (end > res->output && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
        end--;
    const char *line = end;
    while (line > res->output && line[-1] != '\n')
        line--;
    int len = (int)(end - line);
    if (len > 300)
        len = 300;
    if (res->timed_out)
        snprintf(out, size, "timed out after %g s and was killed%s%.*s", timeout_s,
                 len ? ": " : "", len, line);
    else if (res->status >= 0)
        snprintf(out, size, "exited with status %d%s%.*s", res->status, len ? ": " : "", len,
                 line);
    else
        snprintf(out, size, "was killed by signal %d%s%.*s", res->signal, len ? ": " : "", len,
                 line);
}
